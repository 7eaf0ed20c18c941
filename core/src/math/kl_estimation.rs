//! Monte Carlo estimates of `KL(pi || pi_ref)` from samples of `pi`: how the per-token
//! estimators k1, k2 and k3 (see [`crate::math::kl`]) behave as the two policies move
//! apart.
//!
//! With `x(a) = log pi(a) - log pi_ref(a)` and `N` draws `a_i ~ pi`, each estimator is
//! the average `(1/N) sum_i k(a_i)`:
//!
//! ```text
//! E_pi[k1] = KL(pi || pi_ref)                         unbiased; single draws are often < 0
//! E_pi[k2] = E_pi[x^2] / 2                            biased (close to KL when x is small)
//! E_pi[k3] = KL(pi || pi_ref) - pi_ref(outside pi)    unbiased when pi covers pi_ref
//! ```
//!
//! (`k3 = e^{-x} - 1 + x`; its expectation is `sum_{pi > 0} pi_ref - 1 + KL`.) The exact
//! expectations and the exact variances `Var_pi[k] / N` are sums over the actions; the
//! sampled replicates show the spread the trainer's KL penalty sees.
//! Source: J. Schulman, "Approximating KL divergence" (2020).
//!
//! ## Draws
//! Replicate `r` draws from `RandomStream::new(seed, r)`: one 24-bit uniform `u` per
//! sample, and the action is the first index whose `f32` running sum of `pi` exceeds
//! `u` (a binary search over the running sums, the same decisions as
//! `RandomStream::categorical`); a `u` beyond the rounded total goes to the last action
//! with `pi > 0`. The WGSL kernel `kl_mc.wgsl` makes the same decisions.

use crate::error::{FieldError, Result, check};
use crate::math::kl::{KlEstimator, kl_point};
use crate::rng::RandomStream;

/// Most actions a request may have.
pub const MAX_ACTIONS: usize = 4096;
/// Largest `|k|` at any action: `k3` grows like `pi_ref / pi`, so a policy that gives an
/// action less than `1e-12` of the reference's probability is refused (its `k3` and the
/// variances would leave `f64`, and the GPU's `f32`).
pub const MAX_VALUE: f64 = 1e12;

/// The three estimators, in the order of every `[f64; 3]` of this module.
pub const ESTIMATORS: [KlEstimator; 3] = [KlEstimator::K1, KlEstimator::K2, KlEstimator::K3];

/// A validated problem: the sampling policy, the reference and each action's values.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// `pi(a)`, the policy the samples come from.
    pub policy: Vec<f64>,
    /// `pi_ref(a)`.
    pub reference: Vec<f64>,
    /// `[k1, k2, k3]` at each action (zeros where `pi(a) = 0`: never drawn).
    pub values: Vec<[f64; 3]>,
    /// Running sums of `pi` in `f32`, in index order (the draw thresholds).
    pub cumulative: Vec<f32>,
    /// The last action with `pi > 0`.
    pub last_possible: usize,
}

impl Problem {
    /// Checks both distributions (fields `policy`, `reference`; at most
    /// [`MAX_ACTIONS`]) and the support: `pi_ref(a) > 0` wherever `pi(a) > 0`, else
    /// the KL is infinite (field `reference[a]`).
    pub fn new(policy: &[f64], reference: &[f64]) -> Result<Self> {
        let policy = check::distribution("policy", policy)?;
        if policy.len() > MAX_ACTIONS {
            return Err(FieldError::new(
                "policy",
                format!("has {} actions; at most {MAX_ACTIONS}", policy.len()),
            ));
        }
        check::same_len("reference", reference.len(), "policy", policy.len())?;
        let reference = check::distribution("reference", reference)?;
        if let Some(a) = (0..policy.len()).find(|&a| policy[a] > 0.0 && reference[a] == 0.0) {
            return Err(FieldError::new(
                format!("reference[{a}]"),
                format!(
                    "is 0 where policy[{a}] = {} > 0, so KL(policy || reference) is infinite",
                    policy[a]
                ),
            ));
        }
        let values = policy
            .iter()
            .zip(&reference)
            .map(|(&p, &r)| {
                if p > 0.0 {
                    ESTIMATORS.map(|e| kl_point(p.ln(), r.ln(), e, false).value)
                } else {
                    [0.0; 3]
                }
            })
            .collect::<Vec<[f64; 3]>>();
        if let Some(a) = values
            .iter()
            .position(|v| v.iter().any(|x| !x.is_finite() || x.abs() > MAX_VALUE))
        {
            return Err(FieldError::new(
                format!("policy[{a}]"),
                format!(
                    "is {} against reference[{a}] = {}: the ratio is so extreme that the KL \
                     estimates there exceed {MAX_VALUE}",
                    policy[a], reference[a]
                ),
            ));
        }
        let mut running = 0.0f32;
        let cumulative = policy
            .iter()
            .map(|&p| {
                running += p as f32;
                running
            })
            .collect();
        let last_possible = policy.iter().rposition(|&p| p > 0.0).unwrap_or(0);
        Ok(Self {
            policy,
            reference,
            values,
            cumulative,
            last_possible,
        })
    }

    /// `KL(pi || pi_ref) = sum_a pi(a) x(a)`, nats.
    pub fn true_kl(&self) -> f64 {
        self.expectations()[0].max(0.0)
    }

    /// `E_pi[k]` for k1, k2, k3, by summing over the actions.
    pub fn expectations(&self) -> [f64; 3] {
        let mut out = [0.0; 3];
        for (p, v) in self.policy.iter().zip(&self.values) {
            for (o, x) in out.iter_mut().zip(v) {
                *o += p * x;
            }
        }
        out
    }

    /// `Var_pi[k]` of one draw, for k1, k2, k3.
    pub fn single_draw_variances(&self) -> [f64; 3] {
        let means = self.expectations();
        let mut out = [0.0; 3];
        for (p, v) in self.policy.iter().zip(&self.values) {
            for i in 0..3 {
                out[i] += p * (v[i] - means[i]).powi(2);
            }
        }
        out
    }

    /// `sum_a pi_ref(a)` over the actions `pi` never takes: the bias of k3.
    pub fn reference_mass_outside_policy(&self) -> f64 {
        self.policy
            .iter()
            .zip(&self.reference)
            .filter(|(p, _)| **p == 0.0)
            .map(|(_, r)| r)
            .sum()
    }

    /// The action a uniform `u` selects (see the module docs).
    #[inline]
    pub fn action(&self, u: f32) -> usize {
        let first_above = self.cumulative.partition_point(|&c| c <= u);
        if first_above < self.cumulative.len() {
            first_above
        } else {
            self.last_possible
        }
    }
}

/// One replicate's estimates `[k1, k2, k3]`, each the mean over `samples` draws.
pub fn sample_replicate(problem: &Problem, samples: usize, stream: &mut RandomStream) -> [f64; 3] {
    let mut sums = [0.0; 3];
    for i in 0..samples {
        if crate::cancel::due(i) {
            break;
        }
        let values = &problem.values[problem.action(stream.uniform_f32())];
        for (s, v) in sums.iter_mut().zip(values) {
            *s += v;
        }
    }
    sums.map(|s| s / samples as f64)
}

/// `replicates` replicates; replicate `r` draws from `RandomStream::new(seed, r)`.
pub fn sample_replicates(
    problem: &Problem,
    samples: usize,
    replicates: usize,
    seed: u64,
) -> Result<Vec<[f64; 3]>> {
    check::count("samples", samples, 1, usize::MAX)?;
    Ok((0..replicates)
        .map(|r| sample_replicate(problem, samples, &mut RandomStream::new(seed, r as u64)))
        .collect())
}

/// The `q`-quantile of sorted values, linear between order statistics (numpy's default).
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    match sorted.len() {
        0 => 0.0,
        n => {
            let position = q.clamp(0.0, 1.0) * (n - 1) as f64;
            let low = position.floor() as usize;
            let high = (low + 1).min(n - 1);
            let t = position - low as f64;
            sorted[low] + t * (sorted[high] - sorted[low])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn two_actions_by_hand() {
        // pi = (0.5, 0.5), pi_ref = (0.25, 0.75): KL = 0.5 ln 2 + 0.5 ln(2/3).
        let problem = Problem::new(&[0.5, 0.5], &[0.25, 0.75]).unwrap();
        let kl = 0.5 * 2f64.ln() + 0.5 * (2.0f64 / 3.0).ln();
        assert!((problem.true_kl() - kl).abs() < 1e-15);
        let e = problem.expectations();
        assert!((e[0] - kl).abs() < 1e-15);
        assert!((e[2] - kl).abs() < 1e-15);
        let x = [2f64.ln(), (2.0f64 / 3.0).ln()];
        assert!((e[1] - 0.25 * (x[0] * x[0] + x[1] * x[1])).abs() < 1e-15);
    }

    #[test]
    fn k3_is_biased_by_the_reference_mass_the_policy_never_reaches() {
        let problem = Problem::new(&[0.5, 0.5, 0.0], &[0.3, 0.3, 0.4]).unwrap();
        let e = problem.expectations();
        assert!((problem.reference_mass_outside_policy() - 0.4).abs() < 1e-15);
        assert!((e[2] - (problem.true_kl() - 0.4)).abs() < 1e-14);
    }

    #[test]
    fn bad_inputs_name_their_field() {
        assert_eq!(
            Problem::new(&[0.5, 0.4], &[0.5, 0.5]).unwrap_err().field,
            "policy"
        );
        assert_eq!(
            Problem::new(&[0.5, 0.5], &[1.0, 0.0]).unwrap_err().field,
            "reference[1]"
        );
        assert_eq!(
            Problem::new(&[0.5, 0.5], &[1.0]).unwrap_err().field,
            "reference"
        );
    }

    #[test]
    fn draws_follow_the_categorical_decisions() {
        let probs = [0.1, 0.0, 0.3, 0.6];
        let problem = Problem::new(&probs, &[0.25; 4]).unwrap();
        let mut a = RandomStream::new(3, 9);
        let mut b = RandomStream::new(3, 9);
        for _ in 0..10_000 {
            assert_eq!(problem.action(a.uniform_f32()), b.categorical(&probs));
        }
    }

    #[test]
    fn quantiles_interpolate_like_numpy() {
        let sorted = [1.0, 2.0, 4.0, 8.0];
        assert_eq!(quantile(&sorted, 0.5), 3.0);
        assert_eq!(quantile(&sorted, 0.0), 1.0);
        assert_eq!(quantile(&sorted, 1.0), 8.0);
        assert!((quantile(&sorted, 0.25) - 1.75).abs() < 1e-15);
    }

    proptest! {
        /// Sample means of the replicates approach the exact expectations, within five
        /// standard errors of the mean over replicates.
        #[test]
        fn replicate_means_approach_the_expectations(
            wp in proptest::collection::vec(0.05f64..1.0, 2..6),
            wr in proptest::collection::vec(0.05f64..1.0, 6),
            seed in 0u64..1000,
        ) {
            let norm = |w: &[f64]| { let s: f64 = w.iter().sum(); w.iter().map(|x| x / s).collect::<Vec<_>>() };
            let policy = norm(&wp);
            let reference = norm(&wr[..policy.len()]);
            let problem = Problem::new(&policy, &reference).unwrap();
            let (samples, replicates) = (8, 2000);
            let estimates = sample_replicates(&problem, samples, replicates, seed).unwrap();
            let exact = problem.expectations();
            let var = problem.single_draw_variances();
            for i in 0..3 {
                let mean = estimates.iter().map(|e| e[i]).sum::<f64>() / replicates as f64;
                let se = (var[i] / (samples * replicates) as f64).sqrt();
                prop_assert!((mean - exact[i]).abs() <= 5.0 * se + 1e-12, "{i}: {mean} vs {}", exact[i]);
            }
        }
    }
}

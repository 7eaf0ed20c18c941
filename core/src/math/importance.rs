//! Importance sampling: estimating an expectation under a target policy `pi` from
//! actions drawn by a behaviour policy `mu`.
//!
//! `E_pi[f] = E_mu[w f]` with weight `w(a) = pi(a)/mu(a)`, valid when `mu(a) > 0`
//! wherever `pi(a) > 0` (the support condition). From `N` draws `a_i ~ mu`:
//! - ordinary IS: `(1/N) sum_i w(a_i) f(a_i)`, unbiased, variance `Var_mu[w f] / N`;
//! - self-normalised IS: `sum_i w_i f_i / sum_i w_i`, biased for finite `N` but bounded
//!   by the range of `f`;
//! - effective sample size (Kong 1992): `(sum w_i)^2 / sum w_i^2`.
//!
//! Over a trajectory the weight is the product of per-step ratios
//! `w(tau) = prod_t pi_t / mu_t`, accumulated as a sum of logarithms so long products do
//! not underflow. Source: Owen, "Monte Carlo theory, methods and examples" (2013), ch. 9.
//!
//! ## Design
//! - A support violation is an error naming `pi[i]`, not a silent bias: the estimator
//!   cannot see actions `mu` never takes.
//! - `mu` and `pi` must each sum to 1 within `1e-4` relative and are divided by their
//!   sums (`check::distribution`); weights and `|f|` are capped at
//!   `1e12` so every reported number stays finite.

use crate::error::{FieldError, Result, check};
use crate::rng::RandomStream;

/// Largest weight and largest |value| accepted, so squares stay far from overflow.
pub const MAX_MAGNITUDE: f64 = 1e12;

/// A validated importance-sampling problem over `K` discrete actions.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// Behaviour policy, `mu[a]`.
    pub mu: Vec<f64>,
    /// Target policy, `pi[a]`.
    pub pi: Vec<f64>,
    /// The function being averaged, `f(a)` (for example the success rate `q_a`).
    pub values: Vec<f64>,
}

impl Problem {
    /// Checks shapes, probabilities and support (fields `mu`, `pi`, `values`).
    pub fn new(mu: Vec<f64>, pi: Vec<f64>, values: Vec<f64>) -> Result<Self> {
        let mu = check::into_distribution("mu", mu)?;
        check::same_len("pi", pi.len(), "mu", mu.len())?;
        let pi = check::into_distribution("pi", pi)?;
        check::same_len("values", values.len(), "mu", mu.len())?;
        for (a, &v) in values.iter().enumerate() {
            check::in_range(&format!("values[{a}]"), v, -MAX_MAGNITUDE, MAX_MAGNITUDE)?;
        }
        if let Some(a) = (0..mu.len()).find(|&a| mu[a] > 0.0 && pi[a] / mu[a] > MAX_MAGNITUDE) {
            return Err(FieldError::new(
                format!("mu[{a}]"),
                format!("is so small against pi[{a}] that the weight exceeds {MAX_MAGNITUDE}"),
            ));
        }
        if let Some(a) = (0..mu.len()).find(|&a| mu[a] == 0.0 && pi[a] > 0.0) {
            return Err(FieldError::new(
                format!("pi[{a}]"),
                format!(
                    "is {} but mu[{a}] is 0: the behaviour policy never takes this action, \
                     so no weight can recover it (support condition)",
                    pi[a]
                ),
            ));
        }
        Ok(Self { mu, pi, values })
    }

    /// The weight `pi(a)/mu(a)` of each action (0 where both are 0).
    pub fn weights(&self) -> Vec<f64> {
        self.mu
            .iter()
            .zip(&self.pi)
            .map(|(&m, &p)| if m > 0.0 { p / m } else { 0.0 })
            .collect()
    }

    /// `E_pi[f] = sum_a pi(a) f(a)`, computed directly under the target policy.
    pub fn exact(&self) -> f64 {
        self.pi.iter().zip(&self.values).map(|(p, f)| p * f).sum()
    }

    /// `E_mu[w f] = sum_a mu(a) w(a) f(a)`: the ordinary estimator's expectation, equal to
    /// [`Self::exact`] under the support condition.
    pub fn ordinary_expectation(&self) -> f64 {
        let w = self.weights();
        (0..self.mu.len())
            .map(|a| self.mu[a] * w[a] * self.values[a])
            .sum()
    }

    /// Exact variance of the ordinary estimator over `samples` draws:
    /// `(E_mu[(w f)^2] - E_mu[w f]^2) / N`.
    pub fn ordinary_variance(&self, samples: usize) -> f64 {
        let w = self.weights();
        let second: f64 = (0..self.mu.len())
            .map(|a| self.mu[a] * (w[a] * self.values[a]).powi(2))
            .sum();
        let mean = self.ordinary_expectation();
        ((second - mean * mean) / samples as f64).max(0.0)
    }
}

/// One replicate's estimates from the same draws.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Replicate {
    /// Ordinary IS: `(1/N) sum w_i f_i`.
    pub ordinary: f64,
    /// Self-normalised IS: `sum w_i f_i / sum w_i`; 0 when every drawn weight is 0.
    pub self_normalized: f64,
    /// `(sum w_i)^2 / sum w_i^2`; 0 when every drawn weight is 0.
    pub ess: f64,
}

/// One replicate of `samples` draws. Draw order: one `categorical(mu)` draw (one uniform)
/// per sample, in sample order.
pub fn sample_replicate(problem: &Problem, samples: usize, stream: &mut RandomStream) -> Replicate {
    let actions = (0..samples)
        .take_while(|&i| !crate::cancel::due(i))
        .map(|_| stream.categorical(&problem.mu));
    estimates_over(problem, actions, samples)
}

/// The estimates of one replicate over actions the caller drew, in order (each an index
/// below `K` that `mu` can take, checked by the caller): the same sums as
/// [`sample_replicate`], with no randomness.
pub fn replicate_from_draws(problem: &Problem, draws: &[usize]) -> Replicate {
    estimates_over(problem, draws.iter().copied(), draws.len())
}

/// Ordinary and self-normalised estimates and the effective sample size over `actions`,
/// the ordinary one dividing by `samples`.
fn estimates_over(
    problem: &Problem,
    actions: impl Iterator<Item = usize>,
    samples: usize,
) -> Replicate {
    let w = problem.weights();
    let (mut sum_w, mut sum_w2, mut sum_wf) = (0.0, 0.0, 0.0);
    for a in actions {
        sum_w += w[a];
        sum_w2 += w[a] * w[a];
        sum_wf += w[a] * problem.values[a];
    }
    let ordinary = if samples == 0 {
        0.0
    } else {
        sum_wf / samples as f64
    };
    let (self_normalized, ess) = if sum_w > 0.0 {
        (sum_wf / sum_w, sum_w * sum_w / sum_w2)
    } else {
        (0.0, 0.0)
    };
    Replicate {
        ordinary,
        self_normalized,
        ess,
    }
}

/// `replicates` replicates; replicate `r` draws from `RandomStream::new(seed, r)`.
pub fn sample_replicates(
    problem: &Problem,
    samples: usize,
    replicates: usize,
    seed: u64,
) -> Result<Vec<Replicate>> {
    check::count("samples", samples, 1, usize::MAX)?;
    Ok((0..replicates)
        .map(|r| sample_replicate(problem, samples, &mut RandomStream::new(seed, r as u64)))
        .collect())
}

/// Effective sample size `(sum w)^2 / sum w^2` of a set of weights (0 if all are 0).
pub fn effective_sample_size(weights: &[f64]) -> Result<f64> {
    check::all_finite("weights", weights)?;
    if let Some(i) = weights.iter().position(|&w| w < 0.0) {
        return Err(FieldError::new(format!("weights[{i}]"), "must be >= 0"));
    }
    let sum: f64 = weights.iter().sum();
    let sum_sq: f64 = weights.iter().map(|w| w * w).sum();
    Ok(if sum_sq > 0.0 {
        sum * sum / sum_sq
    } else {
        0.0
    })
}

/// `log w(tau) = sum_t (log pi_t - log mu_t)` from per-step probabilities of the actions
/// actually taken. Fields `pi` and `mu`; `mu_t` must be positive.
pub fn trajectory_log_ratio(pi: &[f64], mu: &[f64]) -> Result<f64> {
    check::same_len("pi", pi.len(), "mu", mu.len())?;
    check::all_probabilities("pi", pi)?;
    check::all_probabilities("mu", mu)?;
    if let Some(t) = mu.iter().position(|&m| m == 0.0) {
        return Err(FieldError::new(
            format!("mu[{t}]"),
            "must be > 0: the behaviour policy took this action",
        ));
    }
    Ok(pi.iter().zip(mu).map(|(p, m)| p.ln() - m.ln()).sum())
}

/// `w(tau) = exp(log w(tau))`; may overflow to infinity or underflow to 0 for long
/// trajectories, which is why [`trajectory_log_ratio`] exists.
pub fn trajectory_ratio(pi: &[f64], mu: &[f64]) -> Result<f64> {
    trajectory_log_ratio(pi, mu).map(f64::exp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn article() -> Problem {
        Problem::new(vec![0.2, 0.8], vec![0.6, 0.4], vec![0.75, 0.35]).unwrap()
    }

    #[test]
    fn article_weights_are_3_and_half() {
        let w = article().weights();
        assert!((w[0] - 3.0).abs() < 1e-15);
        assert!((w[1] - 0.5).abs() < 1e-15);
    }

    #[test]
    fn article_exact_value_is_0_59_both_ways() {
        let problem = article();
        assert!((problem.exact() - 0.59).abs() < 1e-15);
        assert!((problem.ordinary_expectation() - 0.59).abs() < 1e-15);
    }

    #[test]
    fn support_violation_names_the_target_entry() {
        let err = Problem::new(vec![1.0, 0.0], vec![0.5, 0.5], vec![1.0, 0.0]).unwrap_err();
        assert_eq!(err.field, "pi[1]");
        // pi = 0 where mu = 0 is fine.
        assert!(Problem::new(vec![1.0, 0.0], vec![1.0, 0.0], vec![1.0, 0.0]).is_ok());
    }

    #[test]
    fn distributions_must_sum_to_one() {
        let err = Problem::new(vec![0.2, 0.7], vec![0.6, 0.4], vec![1.0, 0.0]).unwrap_err();
        assert_eq!(err.field, "mu");
        let err = Problem::new(vec![0.2, 0.8], vec![0.6, 0.4], vec![1.0]).unwrap_err();
        assert_eq!(err.field, "values");
    }

    #[test]
    fn monte_carlo_matches_exact_mean_and_variance() {
        let problem = article();
        let (samples, replicates) = (24, 20_000);
        let runs = sample_replicates(&problem, samples, replicates, 5).unwrap();
        let ordinary: Vec<f64> = runs.iter().map(|r| r.ordinary).collect();
        let (mean, variance) = crate::math::bandit::mean_and_sample_variance(&ordinary);
        let theory = problem.ordinary_variance(samples);
        let se = (theory / replicates as f64).sqrt();
        assert!((mean - 0.59).abs() < 5.0 * se, "mean {mean}");
        assert!(
            (variance / theory - 1.0).abs() < 0.05,
            "{variance} vs {theory}"
        );
        // Self-normalised IS is biased at N = 24 (O(1/N)) but consistent.
        let snis_mean = |runs: &[Replicate]| {
            runs.iter().map(|r| r.self_normalized).sum::<f64>() / runs.len() as f64
        };
        let small = snis_mean(&runs);
        let large = snis_mean(&sample_replicates(&problem, 2400, 400, 5).unwrap());
        assert!((small - 0.59).abs() < 0.03, "snis N=24 {small}");
        assert!((large - 0.59).abs() < 0.002, "snis N=2400 {large}");
    }

    #[test]
    fn equal_policies_give_full_effective_sample_size() {
        let problem = Problem::new(vec![0.5, 0.5], vec![0.5, 0.5], vec![1.0, 0.0]).unwrap();
        let run = sample_replicate(&problem, 10, &mut RandomStream::new(1, 0));
        assert!((run.ess - 10.0).abs() < 1e-12);
        assert_eq!(problem.ordinary_variance(10), 0.25 / 10.0);
    }

    #[test]
    fn trajectory_ratio_is_the_product_of_step_ratios() {
        let pi = [0.6, 0.5, 0.9];
        let mu = [0.2, 0.5, 0.3];
        let direct: f64 = pi.iter().zip(&mu).map(|(p, m)| p / m).product();
        assert!((trajectory_ratio(&pi, &mu).unwrap() - direct).abs() < 1e-12);
        assert_eq!(
            trajectory_log_ratio(&pi, &[0.2, 0.0, 0.3])
                .unwrap_err()
                .field,
            "mu[1]"
        );
    }

    #[test]
    fn long_trajectory_log_ratio_stays_finite() {
        let pi = vec![0.01; 2000];
        let mu = vec![0.9; 2000];
        let log_w = trajectory_log_ratio(&pi, &mu).unwrap();
        assert!(log_w.is_finite());
        assert!((log_w - 2000.0 * (0.01f64.ln() - 0.9f64.ln())).abs() < 1e-8);
        assert_eq!(trajectory_ratio(&pi, &mu).unwrap(), 0.0);
    }

    proptest! {
        #[test]
        fn ordinary_expectation_equals_target_value(
            raw_mu in proptest::collection::vec(0.01f64..1.0, 2..6),
            raw_pi in proptest::collection::vec(0.0f64..1.0, 6),
            values in proptest::collection::vec(-5.0f64..5.0, 6),
        ) {
            let k = raw_mu.len();
            let mu_total: f64 = raw_mu.iter().sum();
            let mu: Vec<f64> = raw_mu.iter().map(|m| m / mu_total).collect();
            let pi_total: f64 = raw_pi[..k].iter().sum::<f64>() + 1e-9;
            let mut pi: Vec<f64> = raw_pi[..k].iter().map(|p| p / pi_total).collect();
            let rest: f64 = 1.0 - pi.iter().sum::<f64>();
            pi[0] += rest;
            let problem = Problem::new(mu, pi, values[..k].to_vec()).unwrap();
            prop_assert!((problem.ordinary_expectation() - problem.exact()).abs() < 1e-9);
        }

        #[test]
        fn ess_lies_between_one_and_the_count(weights in proptest::collection::vec(0.01f64..10.0, 1..50)) {
            let ess = effective_sample_size(&weights).unwrap();
            prop_assert!(ess >= 1.0 - 1e-12 && ess <= weights.len() as f64 + 1e-9);
        }
    }
}

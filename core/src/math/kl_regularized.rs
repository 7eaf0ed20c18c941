//! The KL-regularised reward objective and its optimal policy, in closed form.
//!
//! For one prompt with a categorical reference policy `pi_ref` over `K` responses and a
//! reward `r(y)` per response, the objective
//!
//! ```text
//! J(pi) = E_{y~pi}[r(y)] - beta KL(pi || pi_ref)
//! ```
//!
//! is maximised by the Gibbs policy
//!
//! ```text
//! pi*(y) = pi_ref(y) exp(r(y) / beta) / Z(beta),   Z(beta) = sum_y pi_ref(y) exp(r(y) / beta)
//! ```
//!
//! and its value is `J(pi*) = beta log Z(beta)`: for any `pi`,
//! `J(pi) = beta log Z - beta KL(pi || pi*)`, so `pi*` is the unique maximiser
//! (Ziebart 2010; Rafailov et al. 2023, "Direct preference optimization", eq. 4).
//! As `beta` grows the optimum returns to the reference; as `beta -> 0` it puts all its
//! mass on the best response the reference can produce. Responses with
//! `pi_ref(y) = 0` keep probability 0 at every `beta`: the KL term forbids them.
//!
//! Along the frontier (`beta` from small to large) the expected reward and the KL both
//! fall: `d E[r] / d beta = -Var_{pi*}[r] / beta^2 <= 0`.
//!
//! ## Design
//! Computed in log space (`log pi* = log pi_ref + r / beta - log Z`, with a
//! log-sum-exp), so a small `beta` never overflows.

use crate::error::{FieldError, Result, check};
use crate::math::distill::{kl_from_log_probs, log_probs_from_probs};

/// Largest `|r| / beta` accepted, so `exp` stays far inside `f64` after the shift.
pub const MAX_SCALED_REWARD: f64 = 1e6;
/// Largest `|r|` and largest `beta` accepted, so `beta KL` and every sum stay finite.
pub const MAX_MAGNITUDE: f64 = 1e12;

/// A validated problem: the reference policy and one reward per response.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// `log pi_ref(y)` (`-inf` where the reference gives 0).
    pub log_reference: Vec<f64>,
    /// `r(y)`.
    pub rewards: Vec<f64>,
}

/// The optimum at one `beta`.
#[derive(Debug, Clone, PartialEq)]
pub struct Optimum {
    /// `beta`.
    pub beta: f64,
    /// `pi*(y)`.
    pub policy: Vec<f64>,
    /// `E_{pi*}[r]`.
    pub expected_reward: f64,
    /// `KL(pi* || pi_ref)`, nats.
    pub kl: f64,
    /// `log Z(beta)`.
    pub log_partition: f64,
    /// `J(pi*) = E[r] - beta KL = beta log Z`.
    pub objective: f64,
}

impl Problem {
    /// Checks the reference (field `reference`, a distribution) and the rewards (field
    /// `rewards`, one per response, each within `±`[`MAX_MAGNITUDE`]).
    pub fn new(reference: &[f64], rewards: &[f64]) -> Result<Self> {
        let log_reference = log_probs_from_probs("reference", reference)?;
        check::same_len("rewards", rewards.len(), "reference", reference.len())?;
        for (i, &r) in rewards.iter().enumerate() {
            check::in_range(&format!("rewards[{i}]"), r, -MAX_MAGNITUDE, MAX_MAGNITUDE)?;
        }
        Ok(Self {
            log_reference,
            rewards: rewards.to_vec(),
        })
    }

    /// `E_{pi_ref}[r]`.
    pub fn reference_reward(&self) -> f64 {
        self.expectation(&self.log_reference)
    }

    /// The largest reward among responses the reference can produce.
    pub fn best_reachable_reward(&self) -> f64 {
        self.rewards
            .iter()
            .zip(&self.log_reference)
            .filter(|(_, lp)| lp.is_finite())
            .map(|(r, _)| *r)
            .fold(f64::NEG_INFINITY, f64::max)
    }

    fn expectation(&self, log_policy: &[f64]) -> f64 {
        log_policy
            .iter()
            .zip(&self.rewards)
            .filter(|(lp, _)| lp.is_finite())
            .map(|(lp, r)| lp.exp() * r)
            .sum()
    }

    /// `log pi*` and `log Z` at `beta` (field `field` for a bad `beta`): the logits
    /// `log pi_ref + r / beta` once, `log Z` their log-sum-exp over the support, and
    /// `log pi* = logits - log Z` (`-inf` off the support).
    fn log_optimum(&self, beta: f64, field: &str) -> Result<(Vec<f64>, f64)> {
        check::positive(field, beta)?;
        if beta > MAX_MAGNITUDE {
            return Err(FieldError::new(
                field,
                format!("must be at most {MAX_MAGNITUDE}, got {beta}"),
            ));
        }
        let largest = self.rewards.iter().fold(0.0_f64, |m, r| m.max(r.abs()));
        if largest / beta > MAX_SCALED_REWARD {
            return Err(FieldError::new(
                field,
                format!(
                    "is so small against the rewards (largest |r| = {largest}) that r / beta \
                     exceeds {MAX_SCALED_REWARD}"
                ),
            ));
        }
        let logits: Vec<f64> = self
            .log_reference
            .iter()
            .zip(&self.rewards)
            .map(|(lp, r)| lp + r / beta)
            .collect();
        let max = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let log_partition = max + logits.iter().map(|z| (z - max).exp()).sum::<f64>().ln();
        Ok((
            logits.iter().map(|z| z - log_partition).collect(),
            log_partition,
        ))
    }

    /// The optimum at `beta` (field `field`).
    pub fn optimum(&self, beta: f64, field: &str) -> Result<Optimum> {
        let (log_policy, log_partition) = self.log_optimum(beta, field)?;
        let expected_reward = self.expectation(&log_policy);
        let kl = kl_from_log_probs(&log_policy, &self.log_reference, "reference")?;
        Ok(Optimum {
            beta,
            policy: log_policy.iter().map(|lp| lp.exp()).collect(),
            expected_reward,
            kl,
            log_partition,
            objective: expected_reward - beta * kl,
        })
    }

    /// The optimum at `points` values of `beta` spaced evenly in `log beta` from
    /// `beta_min` to `beta_max` (fields `frontier.beta_min`, `frontier.beta_max`; each at
    /// most [`MAX_MAGNITUDE`]).
    pub fn frontier(&self, beta_min: f64, beta_max: f64, points: usize) -> Result<Vec<Optimum>> {
        check::positive("frontier.beta_min", beta_min)?;
        check::positive("frontier.beta_max", beta_max)?;
        if beta_max > MAX_MAGNITUDE {
            return Err(FieldError::new(
                "frontier.beta_max",
                format!("must be at most {MAX_MAGNITUDE}, got {beta_max}"),
            ));
        }
        if beta_max < beta_min {
            return Err(FieldError::new(
                "frontier.beta_max",
                format!("must be >= beta_min ({beta_min}), got {beta_max}"),
            ));
        }
        let (lo, hi) = (beta_min.ln(), beta_max.ln());
        (0..points)
            .map(|i| {
                if crate::cancel::requested() {
                    return Err(crate::cancel::cancelled_error());
                }
                let t = if points > 1 {
                    i as f64 / (points - 1) as f64
                } else {
                    0.0
                };
                self.optimum((lo + t * (hi - lo)).exp(), "frontier.beta_min")
            })
            .collect()
    }
}

/// `J(pi) = E_pi[r] - beta KL(pi || pi_ref)` for any policy `pi` (field `policy`).
pub fn objective(problem: &Problem, policy: &[f64], beta: f64) -> Result<f64> {
    let log_policy = log_probs_from_probs("policy", policy)?;
    check::same_len(
        "policy",
        policy.len(),
        "reference",
        problem.log_reference.len(),
    )?;
    let kl = kl_from_log_probs(&log_policy, &problem.log_reference, "reference")?;
    Ok(problem.expectation(&log_policy) - beta * kl)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn normalise(w: &[f64]) -> Vec<f64> {
        let s: f64 = w.iter().sum();
        w.iter().map(|x| x / s).collect()
    }

    #[test]
    fn two_responses_by_hand() {
        // pi_ref = (1/2, 1/2), r = (1, 0), beta = 1: pi*(0) = e / (e + 1).
        let problem = Problem::new(&[0.5, 0.5], &[1.0, 0.0]).unwrap();
        let opt = problem.optimum(1.0, "beta").unwrap();
        let e = std::f64::consts::E;
        assert!((opt.policy[0] - e / (e + 1.0)).abs() < 1e-15);
        assert!((opt.log_partition - f64::midpoint(e, 1.0).ln()).abs() < 1e-15);
        assert!((opt.objective - opt.log_partition).abs() < 1e-15);
    }

    #[test]
    fn limits_of_beta() {
        let problem = Problem::new(&[0.6, 0.3, 0.1], &[0.2, 0.5, 0.9]).unwrap();
        let large = problem.optimum(1e6, "beta").unwrap();
        assert!((large.policy[0] - 0.6).abs() < 1e-6);
        let small = problem.optimum(1e-3, "beta").unwrap();
        assert!((small.policy[2] - 1.0).abs() < 1e-12);
        assert!((small.expected_reward - problem.best_reachable_reward()).abs() < 1e-9);
    }

    #[test]
    fn a_response_the_reference_never_gives_stays_at_zero() {
        let problem = Problem::new(&[0.5, 0.5, 0.0], &[0.0, 0.1, 100.0]).unwrap();
        let opt = problem.optimum(0.01, "beta").unwrap();
        assert_eq!(opt.policy[2], 0.0);
        assert!((problem.best_reachable_reward() - 0.1).abs() < 1e-15);
    }

    #[test]
    fn bad_inputs_name_their_field() {
        assert_eq!(
            Problem::new(&[0.5, 0.6], &[0.0, 1.0]).unwrap_err().field,
            "reference"
        );
        assert_eq!(
            Problem::new(&[0.5, 0.5], &[0.0]).unwrap_err().field,
            "rewards"
        );
        let problem = Problem::new(&[0.5, 0.5], &[0.0, 1.0]).unwrap();
        assert_eq!(problem.optimum(0.0, "beta").unwrap_err().field, "beta");
        assert_eq!(problem.optimum(1e-9, "beta").unwrap_err().field, "beta");
        assert_eq!(
            problem.frontier(1.0, 0.5, 3).unwrap_err().field,
            "frontier.beta_max"
        );
    }

    proptest! {
        /// The Gibbs policy beats every other policy, and `J(pi) = beta log Z - beta KL(pi || pi*)`.
        #[test]
        fn the_gibbs_policy_is_the_maximiser(
            w in proptest::collection::vec(0.05f64..1.0, 2..7),
            r in proptest::collection::vec(-2.0f64..2.0, 7),
            other in proptest::collection::vec(0.01f64..1.0, 7),
            beta in 0.05f64..5.0,
        ) {
            let k = w.len();
            let reference = normalise(&w);
            let problem = Problem::new(&reference, &r[..k]).unwrap();
            let opt = problem.optimum(beta, "beta").unwrap();
            prop_assert!((opt.objective - beta * opt.log_partition).abs() < 1e-10);
            let pi = normalise(&other[..k]);
            let j = objective(&problem, &pi, beta).unwrap();
            prop_assert!(j <= opt.objective + 1e-12);
            let log_pi: Vec<f64> = pi.iter().map(|p| p.ln()).collect();
            let log_opt: Vec<f64> = opt.policy.iter().map(|p| p.ln()).collect();
            let gap = kl_from_log_probs(&log_pi, &log_opt, "opt").unwrap();
            prop_assert!((j - (opt.objective - beta * gap)).abs() < 1e-9);
        }

        /// Along the frontier, reward and KL both fall as beta grows.
        #[test]
        fn reward_and_kl_fall_with_beta(
            w in proptest::collection::vec(0.05f64..1.0, 2..7),
            r in proptest::collection::vec(-2.0f64..2.0, 7),
        ) {
            let k = w.len();
            let problem = Problem::new(&normalise(&w), &r[..k]).unwrap();
            let frontier = problem.frontier(0.01, 100.0, 25).unwrap();
            for pair in frontier.windows(2) {
                prop_assert!(pair[1].expected_reward <= pair[0].expected_reward + 1e-12);
                prop_assert!(pair[1].kl <= pair[0].kl + 1e-12);
            }
        }
    }
}

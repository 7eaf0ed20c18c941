//! `kl-estimators`: the true `KL(pi || pi_ref)` against Monte Carlo estimates by k1, k2
//! and k3 from `N` samples of `pi`, over `M` seeded replicates (see
//! [`crate::math::kl_estimation`]).

use serde::{Deserialize, Serialize};

use super::renormalised::{Renormalised, renormalised};
use super::{Entry, categorical_work, check_draws, check_work};
use crate::error::{Result, check};
use crate::math::kl_estimation::{self, Problem, quantile};

/// Request of `kl-estimators`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// `pi(a)`, the policy the samples come from (the one being trained), over at most
    /// 4096 actions; sums to 1 (within `1e-4` relative, then renormalised).
    pub policy: Vec<f64>,
    /// `pi_ref(a)` over the same actions; sums to 1 (within `1e-4` relative, then
    /// renormalised); positive wherever `policy` is.
    pub reference: Vec<f64>,
    /// Samples per estimate, `N >= 1`. Default 16.
    #[serde(default = "default_samples")]
    pub samples: usize,
    /// Replicates `M`, 1 to 100 000. Default 1000.
    #[serde(default = "default_replicates")]
    pub replicates: usize,
    /// Seed; replicate `r` uses stream `r`. Default 0.
    #[serde(default)]
    pub seed: u64,
}

fn default_samples() -> usize {
    16
}
fn default_replicates() -> usize {
    1000
}

/// One estimator over the replicates.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Estimator {
    /// `E_pi[k]`, exact (a sum over the actions).
    pub expectation: f64,
    /// Mean of the `M` estimates.
    pub mean: f64,
    /// Sample variance of the estimates, divisor `M - 1` (0 when `M = 1`).
    pub variance: f64,
    /// `mean - KL`: the bias seen in the replicates.
    pub bias: f64,
    /// Exact variance of one estimate, `Var_pi[k] / N`.
    pub variance_theory: f64,
    /// The 5%, 25%, 50%, 75% and 95% quantiles of the estimates.
    pub quantiles: [f64; 5],
}

/// Response of `kl-estimators`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Response {
    /// `KL(pi || pi_ref) = sum_a pi(a) log(pi(a) / pi_ref(a))`, nats.
    pub true_kl: f64,
    /// `log(pi / pi_ref)`.
    pub k1: Estimator,
    /// `log(pi / pi_ref)^2 / 2`.
    pub k2: Estimator,
    /// `pi_ref / pi - 1 - log(pi_ref / pi)`.
    pub k3: Estimator,
    /// Share of replicates whose k1 estimate is below 0 (k2 and k3 never are).
    pub k1_negative_share: f64,
    /// `sum pi_ref` over actions `pi` never takes: k3's bias (0 when `pi` covers `pi_ref`).
    pub reference_mass_outside_policy: f64,
    /// The probability fields divided by their sum before computing
    /// ([`super::renormalised`]); absent when none was.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub renormalised: Vec<Renormalised>,
}

/// A validated request.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The problem.
    pub problem: Problem,
    /// Samples per estimate.
    pub samples: usize,
    /// Replicates.
    pub replicates: usize,
    /// Seed.
    pub seed: u64,
    /// The request's renormalised fields.
    pub renormalised: Vec<Renormalised>,
}

impl Plan {
    /// The draws' work in units of [`super::MAX_WORK`] (as the request's check counts it).
    pub fn work(&self) -> u64 {
        categorical_work(
            (self.samples as u64).saturating_mul(self.replicates as u64),
            self.problem.policy.len(),
        )
    }
}

/// Validates `request`.
pub fn plan(request: &Request) -> Result<Plan> {
    let problem = Problem::new(&request.policy, &request.reference)?;
    check::count("samples", request.samples, 1, usize::MAX)?;
    check::count("replicates", request.replicates, 1, 100_000)?;
    check_draws(
        "samples",
        (request.samples as u64).saturating_mul(request.replicates as u64),
    )?;
    check_work(
        "samples",
        categorical_work(
            (request.samples as u64).saturating_mul(request.replicates as u64),
            request.policy.len(),
        ),
    )?;
    Ok(Plan {
        problem,
        samples: request.samples,
        replicates: request.replicates,
        seed: request.seed,
        renormalised: renormalised(&[
            ("policy", Some(&request.policy)),
            ("reference", Some(&request.reference)),
        ]),
    })
}

/// The response from the replicates' estimates `[k1, k2, k3]`.
pub fn respond(plan: &Plan, estimates: &[[f64; 3]]) -> Response {
    let true_kl = plan.problem.true_kl();
    let expectations = plan.problem.expectations();
    let single = plan.problem.single_draw_variances();
    let summary = |i: usize| {
        let mut values: Vec<f64> = estimates.iter().map(|e| e[i]).collect();
        let (mean, variance) = crate::math::bandit::mean_and_sample_variance(&values);
        values.sort_by(f64::total_cmp);
        Estimator {
            expectation: expectations[i],
            mean,
            variance,
            bias: mean - true_kl,
            variance_theory: single[i] / plan.samples as f64,
            quantiles: [0.05, 0.25, 0.5, 0.75, 0.95].map(|q| quantile(&values, q)),
        }
    };
    let negative = estimates.iter().filter(|e| e[0] < 0.0).count();
    Response {
        true_kl,
        k1: summary(0),
        k2: summary(1),
        k3: summary(2),
        k1_negative_share: negative as f64 / estimates.len().max(1) as f64,
        reference_mass_outside_policy: plan.problem.reference_mass_outside_policy(),
        renormalised: plan.renormalised.clone(),
    }
}

/// The `kl-estimators` entry.
pub struct KlEstimators;

impl Entry for KlEstimators {
    const NAME: &'static str = "kl-estimators";
    const SUMMARY: &'static str = "True KL(pi || pi_ref) against Monte Carlo k1, k2, k3 estimates from N samples over M replicates";
    type Request = Request;
    type Response = Response;

    fn compute(request: &Request) -> Result<Response> {
        let plan = plan(request)?;
        let estimates = kl_estimation::sample_replicates(
            &plan.problem,
            plan.samples,
            plan.replicates,
            plan.seed,
        )?;
        Ok(respond(&plan, &estimates))
    }
}

#[cfg(test)]
mod tests {
    use crate::api::compute;
    use serde_json::json;

    #[test]
    fn equal_policies_give_zero_everywhere() {
        let out = compute(
            "kl-estimators",
            json!({"policy": [0.2, 0.8], "reference": [0.2, 0.8], "samples": 4, "replicates": 10}),
        )
        .unwrap();
        assert_eq!(out["true_kl"], json!(0.0));
        for k in ["k1", "k2", "k3"] {
            assert_eq!(out[k]["mean"], json!(0.0), "{k}");
            assert_eq!(out[k]["variance"], json!(0.0), "{k}");
        }
        assert_eq!(out["k1_negative_share"], json!(0.0));
    }

    #[test]
    fn one_sample_k1_is_often_negative_and_k3_never() {
        let out = compute(
            "kl-estimators",
            json!({"policy": [0.5, 0.5], "reference": [0.25, 0.75], "samples": 1, "replicates": 4000, "seed": 3}),
        )
        .unwrap();
        // k1 < 0 exactly when the second action is drawn: probability 1/2.
        let share = out["k1_negative_share"].as_f64().unwrap();
        assert!((share - 0.5).abs() < 0.05, "{share}");
        assert!(out["k3"]["quantiles"][0].as_f64().unwrap() >= 0.0);
    }

    #[test]
    fn errors_name_the_field() {
        let err = compute(
            "kl-estimators",
            json!({"policy": [0.5, 0.5], "reference": [0.25, 0.75], "replicates": 0}),
        )
        .unwrap_err();
        assert_eq!(err.field, "replicates");
        let err = compute(
            "kl-estimators",
            json!({"policy": [0.5, 0.5], "reference": [0.25, 0.75], "samples": 1_000_000, "replicates": 100_000}),
        )
        .unwrap_err();
        assert_eq!(err.field, "samples");
    }
}

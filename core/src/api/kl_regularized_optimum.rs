//! `kl-regularized-optimum`: the policy that maximises `E[r] - beta KL(pi || pi_ref)`
//! for a categorical reference and per-response rewards, and the reward/KL frontier
//! over `beta` (see [`crate::math::kl_regularized`]).

use serde::{Deserialize, Serialize};

use super::renormalised::{Renormalised, renormalised};
use super::{Entry, check_work, units, work};
use crate::error::{Result, check};
use crate::math::kl_regularized::{Optimum, Problem};

/// Request of `kl-regularized-optimum`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// `pi_ref(y)` over `K` responses; sums to 1 (within `1e-4` relative, then
    /// renormalised).
    pub reference: Vec<f64>,
    /// `r(y)`, one finite reward per response.
    pub rewards: Vec<f64>,
    /// The KL coefficient `beta > 0`.
    pub beta: f64,
    /// The frontier's range of `beta`. Default: 0.01 to 100, 41 points.
    #[serde(default)]
    pub frontier: Frontier,
}

/// The `beta` values of the frontier: `points` values evenly spaced in `log beta`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Frontier {
    /// Smallest `beta`, `> 0`. Default 0.01.
    #[serde(default = "default_beta_min")]
    pub beta_min: f64,
    /// Largest `beta`, `>= beta_min`. Default 100.
    #[serde(default = "default_beta_max")]
    pub beta_max: f64,
    /// Number of points, 0 to 1000 (0: no frontier). Default 41.
    #[serde(default = "default_points")]
    pub points: usize,
}

impl Default for Frontier {
    fn default() -> Self {
        Self {
            beta_min: default_beta_min(),
            beta_max: default_beta_max(),
            points: default_points(),
        }
    }
}

fn default_beta_min() -> f64 {
    0.01
}
fn default_beta_max() -> f64 {
    100.0
}
fn default_points() -> usize {
    41
}

/// One point of the frontier.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FrontierPoint {
    /// `beta`.
    pub beta: f64,
    /// `E_{pi*}[r]` at this `beta`.
    pub expected_reward: f64,
    /// `KL(pi* || pi_ref)` at this `beta`, nats.
    pub kl: f64,
}

/// Response of `kl-regularized-optimum`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Response {
    /// `pi*(y) = pi_ref(y) exp(r(y) / beta) / Z`.
    pub policy: Vec<f64>,
    /// `E_{pi*}[r]`.
    pub expected_reward: f64,
    /// `KL(pi* || pi_ref)`, nats.
    pub kl: f64,
    /// `log Z = log sum_y pi_ref(y) exp(r(y) / beta)`.
    pub log_partition: f64,
    /// The objective at the optimum, `E[r] - beta KL = beta log Z`.
    pub objective: f64,
    /// `E_{pi_ref}[r]`: where the optimum starts as `beta` grows.
    pub reference_reward: f64,
    /// The best reward among responses the reference can give: the limit as `beta -> 0`.
    pub best_reachable_reward: f64,
    /// Reward and KL of the optimum over the frontier's `beta` values.
    pub frontier: Vec<FrontierPoint>,
    /// The probability fields divided by their sum before computing
    /// ([`super::renormalised`]); absent when none was.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub renormalised: Vec<Renormalised>,
}

/// The `kl-regularized-optimum` entry.
pub struct KlRegularizedOptimum;

fn point(optimum: &Optimum) -> FrontierPoint {
    FrontierPoint {
        beta: optimum.beta,
        expected_reward: optimum.expected_reward,
        kl: optimum.kl,
    }
}

impl Entry for KlRegularizedOptimum {
    const NAME: &'static str = "kl-regularized-optimum";
    const SUMMARY: &'static str = "The optimum of E[r] - beta KL(pi || pi_ref) over a categorical policy, and its reward/KL frontier";
    type Request = Request;
    type Response = Response;

    fn compute(request: &Request) -> Result<Response> {
        let problem = Problem::new(&request.reference, &request.rewards)?;
        check::count("frontier.points", request.frontier.points, 0, 1000)?;
        // Each frontier point solves the optimum over every action (a few exps and
        // logs each: two work units, by the calibration in `MAX_WORK`).
        check_work(
            "frontier.points",
            work(&[
                units(request.frontier.points),
                units(request.reference.len()),
                2,
            ]),
        )?;
        let optimum = problem.optimum(request.beta, "beta")?;
        let frontier = problem.frontier(
            request.frontier.beta_min,
            request.frontier.beta_max,
            request.frontier.points,
        )?;
        Ok(Response {
            expected_reward: optimum.expected_reward,
            kl: optimum.kl,
            log_partition: optimum.log_partition,
            objective: optimum.objective,
            reference_reward: problem.reference_reward(),
            best_reachable_reward: problem.best_reachable_reward(),
            frontier: frontier.iter().map(point).collect(),
            policy: optimum.policy,
            renormalised: renormalised(&[("reference", Some(&request.reference))]),
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::api::compute;
    use serde_json::json;

    #[test]
    fn two_responses_at_beta_one() {
        let out = compute(
            "kl-regularized-optimum",
            json!({"reference": [0.5, 0.5], "rewards": [1.0, 0.0], "beta": 1.0,
                   "frontier": {"points": 3, "beta_min": 0.1, "beta_max": 10.0}}),
        )
        .unwrap();
        let e = std::f64::consts::E;
        let p = out["policy"][0].as_f64().unwrap();
        assert!((p - e / (e + 1.0)).abs() < 1e-15);
        assert_eq!(out["frontier"].as_array().unwrap().len(), 3);
        assert!((out["frontier"][1]["beta"].as_f64().unwrap() - 1.0).abs() < 1e-12);
        assert_eq!(out["reference_reward"], json!(0.5));
    }

    #[test]
    fn errors_name_the_field() {
        let err = compute(
            "kl-regularized-optimum",
            json!({"reference": [0.5, 0.5], "rewards": [1.0, 0.0], "beta": -1.0}),
        )
        .unwrap_err();
        assert_eq!(err.field, "beta");
        let err = compute(
            "kl-regularized-optimum",
            json!({"reference": [0.5, 0.5], "rewards": [1.0, 0.0], "beta": 1.0, "frontier": {"points": 5000}}),
        )
        .unwrap_err();
        assert_eq!(err.field, "frontier.points");
    }
}

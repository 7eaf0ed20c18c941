//! `shaping`: potential-based reward shaping on one episode, its telescoping identity,
//! and optionally a naive per-step bonus and the toy solve-vs-repeat comparison (see
//! [`crate::math::shaping`]).

use serde::{Deserialize, Serialize};

use super::Entry;
use crate::error::{FieldError, Result};
use crate::math::shaping::{self, PolicyReturns};

/// Request for `shaping`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// Rewards `r_0 .. r_{T-1}`.
    pub rewards: Vec<f64>,
    /// Potentials `Phi(s_0) .. Phi(s_T)`: `T + 1` entries. Set the last to 0 for a
    /// terminal state to keep the ranking of policies.
    pub potentials: Vec<f64>,
    /// Discount `gamma` in `[0, 1]`. Default 1.
    #[serde(default = "default_gamma")]
    pub gamma: f64,
    /// Optional: which steps earn the naive bonus (`T` booleans, e.g. the test calls).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bonus_mask: Option<Vec<bool>>,
    /// Size of the naive bonus per marked step (and of the toy potential). Default 0.1.
    #[serde(default = "default_bonus")]
    pub bonus: f64,
    /// Optional: turn budget for the toy comparison of a solving policy with one that
    /// only repeats the tests (>= 5). Omit to skip it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compare_horizon: Option<usize>,
}

fn default_gamma() -> f64 {
    1.0
}
fn default_bonus() -> f64 {
    0.1
}

/// Response of `shaping`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Response {
    /// Shaped rewards `r_t + gamma Phi(s_{t+1}) - Phi(s_t)`.
    pub shaped: Vec<f64>,
    /// `sum gamma^t r_t`.
    #[serde(rename = "return")]
    pub return_: f64,
    /// `sum gamma^t r'_t`.
    pub shaped_return: f64,
    /// `gamma^T Phi(s_T) - Phi(s_0)`.
    pub offset: f64,
    /// `shaped_return - (return + offset)`; zero up to rounding.
    pub identity_gap: f64,
    /// Rewards plus the naive bonus (present with `bonus_mask`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub naive_rewards: Option<Vec<f64>>,
    /// Discounted return with the naive bonus (present with `bonus_mask`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub naive_return: Option<f64>,
    /// Toy comparison `[solve, repeat-tests]` (present with `compare_horizon`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comparison: Option<[PolicyReturns; 2]>,
}

/// The `shaping` entry.
pub struct Shaping;

impl Entry for Shaping {
    const NAME: &'static str = "shaping";
    const SUMMARY: &'static str =
        "Potential-based reward shaping, its telescoping identity, and a naive bonus for contrast";
    type Request = Request;
    type Response = Response;

    fn compute(request: &Request) -> Result<Response> {
        let out = shaping::shape(&request.rewards, &request.potentials, request.gamma)?;
        let naive_rewards = request
            .bonus_mask
            .as_deref()
            .map(|mask| shaping::naive_bonus_rewards(&request.rewards, mask, request.bonus))
            .transpose()?;
        let naive_return = naive_rewards
            .as_deref()
            .map(|r| shaping::discounted_return(r, request.gamma));
        let comparison = request
            .compare_horizon
            .map(|h| shaping::compare_solve_and_repeat(h, request.bonus, request.gamma))
            .transpose()
            .map_err(|e| {
                if e.field == "horizon" {
                    FieldError::new("compare_horizon", e.message)
                } else {
                    e
                }
            })?;
        Ok(Response {
            shaped: out.shaped,
            return_: out.return_,
            shaped_return: out.shaped_return,
            offset: out.offset,
            identity_gap: out.identity_gap,
            naive_rewards,
            naive_return,
            comparison,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::compute;
    use serde_json::json;

    #[test]
    fn shaped_return_shifts_by_minus_initial_potential() {
        let out = compute(
            "shaping",
            json!({"rewards": [0, 0, 1], "potentials": [0.2, 0.5, 0.9, 0], "gamma": 1.0}),
        )
        .unwrap();
        assert_eq!(out["return"], json!(1.0));
        assert!((out["shaped_return"].as_f64().unwrap() - 0.8).abs() < 1e-12);
        assert!(out["identity_gap"].as_f64().unwrap().abs() < 1e-12);
        assert!(out.get("naive_return").is_none());
    }

    #[test]
    fn naive_bonus_and_comparison_are_reported_when_asked() {
        let out = compute(
            "shaping",
            json!({"rewards": [0, 0, 0], "potentials": [0, 0, 0, 0], "bonus_mask": [true, true, true], "compare_horizon": 20}),
        )
        .unwrap();
        assert!((out["naive_return"].as_f64().unwrap() - 0.3).abs() < 1e-12);
        assert_eq!(out["comparison"][1]["policy"], json!("repeat-tests"));
    }

    #[test]
    fn too_short_a_toy_horizon_names_compare_horizon() {
        let err = compute(
            "shaping",
            json!({"rewards": [0], "potentials": [0, 0], "compare_horizon": 2}),
        )
        .unwrap_err();
        assert_eq!(err.field, "compare_horizon");
    }

    #[test]
    fn short_potentials_name_the_field() {
        let err = compute("shaping", json!({"rewards": [0, 1], "potentials": [0, 0]})).unwrap_err();
        assert_eq!(err.field, "potentials");
    }
}

//! `gae`: generalised advantage estimation over one trajectory (see
//! [`crate::math::gae`]).

use serde::{Deserialize, Serialize};

use crate::api::Entry;
use crate::error::{FieldError, Result};
use crate::math::gae::{Ending, gae};

/// Request of `gae`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// Reward `r_t` after each step, finite.
    pub rewards: Vec<f64>,
    /// Value estimate `V(h_t)` of each step's state, same length, finite.
    pub values: Vec<f64>,
    /// Discount `gamma` in `[0, 1]`. Default 1.
    #[serde(default = "one")]
    pub gamma: f64,
    /// GAE `lambda` in `[0, 1]`. Default 0.95.
    #[serde(default = "default_lambda")]
    pub lambda: f64,
    /// The trajectory reached a true terminal state (`V_T = 0`). Default: true unless
    /// `truncated` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminated: Option<bool>,
    /// The trajectory was cut off by a limit (`V_T = bootstrap_value`). Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
    /// Value of the state after the last step; required when truncated, rejected when
    /// terminated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_value: Option<f64>,
}

fn one() -> f64 {
    1.0
}

fn default_lambda() -> f64 {
    0.95
}

/// Response of `gae`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// `\hat A_t`.
    pub advantages: Vec<f64>,
    /// `\hat A_t + V_t`.
    pub returns: Vec<f64>,
    /// The `V_T` used after the last step.
    pub final_value: f64,
}

/// The `gae` entry.
pub struct GaeEntry;

fn ending(request: &Request) -> Result<Ending> {
    let truncated = request.truncated.unwrap_or(false);
    let terminated = request.terminated.unwrap_or(!truncated);
    match (terminated, truncated, request.bootstrap_value) {
        (true, true, _) => Err(FieldError::new(
            "truncated",
            "a trajectory is either terminated or truncated, not both",
        )),
        (false, false, _) => Err(FieldError::new(
            "terminated",
            "set terminated or truncated (with bootstrap_value)",
        )),
        (true, false, None) => Ok(Ending::Terminated),
        (true, false, Some(_)) => Err(FieldError::new(
            "bootstrap_value",
            "is only used for truncated trajectories; a terminal state has value 0",
        )),
        (false, true, Some(v)) => Ok(Ending::Truncated { bootstrap_value: v }),
        (false, true, None) => Err(FieldError::new(
            "bootstrap_value",
            "is required when truncated (the value of the state where the trajectory was cut)",
        )),
    }
}

impl Entry for GaeEntry {
    const NAME: &'static str = "gae";
    const SUMMARY: &'static str =
        "Generalised advantage estimation with terminated vs truncated endings";
    type Request = Request;
    type Response = Response;

    fn compute(request: &Request) -> Result<Response> {
        let end = ending(request)?;
        let out = gae(
            &request.rewards,
            &request.values,
            request.gamma,
            request.lambda,
            end,
        )?;
        Ok(Response {
            advantages: out.advantages,
            returns: out.returns,
            final_value: match end {
                Ending::Terminated => 0.0,
                Ending::Truncated { bootstrap_value } => bootstrap_value,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::api::compute;
    use serde_json::json;

    #[test]
    fn truncated_needs_a_bootstrap_value() {
        let err = compute(
            "gae",
            json!({"rewards": [0], "values": [0], "truncated": true}),
        )
        .unwrap_err();
        assert_eq!(err.field, "bootstrap_value");
        let out = compute(
            "gae",
            json!({"rewards": [0], "values": [0.5], "truncated": true, "bootstrap_value": 0.5, "gamma": 1, "lambda": 1}),
        )
        .unwrap();
        assert_eq!(out["advantages"], json!([0.0]));
    }

    #[test]
    fn terminated_by_default() {
        let out = compute("gae", json!({"rewards": [1], "values": [0.25]})).unwrap();
        assert_eq!(out["advantages"], json!([0.75]));
        assert_eq!(out["returns"], json!([1.0]));
    }
}

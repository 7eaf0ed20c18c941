//! `group-advantages`: GRPO / RLOO advantages over ragged groups of rewards (see
//! [`crate::math::advantage`]).

use serde::{Deserialize, Serialize};

use crate::Ragged;
use crate::api::Entry;
use crate::error::Result;
use crate::math::advantage::{
    AdvantageOptions, Baseline, GroupAdvantages, Scale, StdKind, group_advantages,
};

/// Request of `group-advantages`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// Rewards, one list per group (attempts at the same task); every group non-empty,
    /// every reward finite.
    pub rewards: Ragged<f64>,
    /// `group` (default; divide by the group's std), `batch` (by the std of all rewards)
    /// or `none` (no division, no eps).
    #[serde(default)]
    pub scale: Scale,
    /// `population` (default, divide by n, as in the article) or `sample` (n - 1, as
    /// `torch.std` in TRL and verl).
    #[serde(default)]
    pub std: StdKind,
    /// `mean` (default, GRPO) or `leave-one-out` (RLOO; alias `rloo`).
    #[serde(default)]
    pub baseline: Baseline,
    /// Added to the std before dividing, `>= 0`. Default 1e-6 (verl; TRL uses 1e-4).
    #[serde(default = "default_eps")]
    pub eps: f64,
}

fn default_eps() -> f64 {
    1e-6
}

/// Response of `group-advantages`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// `\hat A`, shaped like `rewards`. Exactly 0 in groups whose rewards are all equal
    /// (including groups of one).
    pub advantages: Ragged<f64>,
    /// Mean reward of each group.
    pub group_mean: Vec<f64>,
    /// Std of each group's rewards, of the requested kind (0 for a group of one).
    pub group_std: Vec<f64>,
    /// What each group's centred rewards were divided by (`std + eps`, or 1 for `none`).
    pub divisor: Vec<f64>,
}

/// The `group-advantages` entry.
pub struct GroupAdvantagesEntry;

/// The options a request selects.
pub fn options(request: &Request) -> AdvantageOptions {
    AdvantageOptions {
        baseline: request.baseline,
        scale: request.scale,
        std: request.std,
        eps: request.eps,
    }
}

/// The response from computed advantages.
pub fn respond(out: GroupAdvantages) -> Response {
    Response {
        advantages: out.advantages,
        group_mean: out.group_mean,
        group_std: out.group_std,
        divisor: out.divisor,
    }
}

impl Entry for GroupAdvantagesEntry {
    const NAME: &'static str = "group-advantages";
    const SUMMARY: &'static str =
        "Group-relative advantages: mean or leave-one-out baseline, group/batch/no std scaling";
    type Request = Request;
    type Response = Response;

    fn compute(request: &Request) -> Result<Response> {
        Ok(respond(group_advantages(
            &request.rewards,
            &options(request),
        )?))
    }
}

#[cfg(test)]
mod tests {
    use crate::api::compute;
    use serde_json::json;

    #[test]
    fn article_rewards_through_the_api() {
        let out = compute(
            "group-advantages",
            json!({"rewards": [[1, 0, 0, 1]], "eps": 0.0}),
        )
        .unwrap();
        assert_eq!(out["advantages"], json!([[1.0, -1.0, -1.0, 1.0]]));
    }

    #[test]
    fn unknown_scale_and_empty_group_are_named() {
        let err = compute(
            "group-advantages",
            json!({"rewards": [[1]], "scale": "global"}),
        )
        .unwrap_err();
        assert_eq!(err.field, "scale");
        let err = compute("group-advantages", json!({"rewards": [[1], []]})).unwrap_err();
        assert_eq!(err.field, "rewards[1]");
    }
}

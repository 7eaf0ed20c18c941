//! `group-advantages`: GRPO / RLOO advantages over ragged groups of rewards (see
//! [`crate::math::advantage`]).

use serde::{Deserialize, Serialize};

use crate::Ragged;
use crate::api::Entry;
use crate::error::{FieldError, Result};
use crate::math::advantage::{
    AdvantageOptions, Baseline, GroupAdvantages, Scale, StdKind, group_advantages,
};
use crate::math::convention::{Convention, infer, one_of};

/// Request of `group-advantages`.
///
/// Settings have arlbook's names and TRL's or verl's; a library's name makes the request
/// follow that library's rules and defaults (see [`crate::math::convention`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// Rewards, one list per group (attempts at the same task); every group non-empty,
    /// every reward finite.
    pub rewards: Ragged<f64>,
    /// `arlbook`, `trl` or `verl`. Default: the library whose names the request uses,
    /// else `arlbook`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub convention: Option<Convention>,
    /// `group` (default; divide by the group's std), `batch` (by the std of all rewards)
    /// or `none` (no division, no eps). TRL: `scale_rewards`; verl:
    /// `norm_adv_by_std_in_grpo`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<Scale>,
    /// `population` (divide by n, as in the article; arlbook's default) or `sample`
    /// (n - 1, as `torch.std`; TRL's and verl's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub std: Option<StdKind>,
    /// `mean` (default, GRPO) or `leave-one-out` (RLOO; alias `rloo`). verl:
    /// `adv_estimator`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Baseline>,
    /// Added to the std before dividing, `>= 0`. Default 1e-6 (TRL: 1e-4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eps: Option<f64>,
    /// TRL `scale_rewards`: `group`, `batch` or `none` (or `true` / `false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_rewards: Option<TrlScaleRewards>,
    /// verl `adv_estimator`: `grpo` or `rloo`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adv_estimator: Option<VerlEstimator>,
    /// verl `norm_adv_by_std_in_grpo` (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub norm_adv_by_std_in_grpo: Option<bool>,
}

/// TRL's `scale_rewards`, a name or (older TRL) a boolean.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TrlScaleRewards {
    /// `group`, `batch` or `none`.
    Named(Scale),
    /// `true` (`group`) or `false` (`none`).
    Flag(bool),
}

/// verl's `adv_estimator` values this entry computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VerlEstimator {
    /// `compute_grpo_outcome_advantage`.
    Grpo,
    /// `compute_rloo_outcome_advantage` (no std scaling).
    Rloo,
}

/// Response of `group-advantages`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// `\hat A`, shaped like `rewards`. Exactly 0 in groups whose rewards are all equal
    /// (including groups of one, except under verl's rules).
    pub advantages: Ragged<f64>,
    /// Mean reward of each group.
    pub group_mean: Vec<f64>,
    /// Std of each group's rewards, of the requested kind (0 for a group of one).
    pub group_std: Vec<f64>,
    /// What each group's centred rewards were divided by (`std + eps`, or 1 for `none`).
    pub divisor: Vec<f64>,
    /// The convention that computed this: `arlbook`, `trl` or `verl`.
    pub convention: Convention,
}

/// The `group-advantages` entry.
pub struct GroupAdvantagesEntry;

/// The options a request selects, with TRL's and verl's names resolved.
pub fn options(request: &Request) -> Result<AdvantageOptions> {
    let r = request;
    let trl: Vec<&str> = r
        .scale_rewards
        .map(|_| "scale_rewards")
        .into_iter()
        .collect();
    let verl: Vec<&str> = [
        ("adv_estimator", r.adv_estimator.is_some()),
        (
            "norm_adv_by_std_in_grpo",
            r.norm_adv_by_std_in_grpo.is_some(),
        ),
    ]
    .iter()
    .filter(|(_, p)| *p)
    .map(|(n, _)| *n)
    .collect();
    let convention = infer(r.convention, &trl, &verl)?;
    let baseline = one_of(&[
        ("baseline", r.baseline),
        (
            "adv_estimator",
            r.adv_estimator.map(|e| match e {
                VerlEstimator::Grpo => Baseline::Mean,
                VerlEstimator::Rloo => Baseline::LeaveOneOut,
            }),
        ),
    ])?
    .unwrap_or_default();
    let verl_scale = match (r.adv_estimator, r.norm_adv_by_std_in_grpo) {
        (Some(VerlEstimator::Rloo), Some(_)) => {
            return Err(FieldError::new(
                "norm_adv_by_std_in_grpo",
                "applies to verl's `grpo` estimator; `rloo` never divides by a std",
            ));
        }
        (Some(VerlEstimator::Rloo), None) | (_, Some(false)) => Some(Scale::None),
        (_, Some(true)) => Some(Scale::Group),
        (_, None) => None,
    };
    let scale = one_of(&[
        ("scale", r.scale),
        (
            "scale_rewards",
            r.scale_rewards.map(|s| match s {
                TrlScaleRewards::Named(scale) => scale,
                TrlScaleRewards::Flag(true) => Scale::Group,
                TrlScaleRewards::Flag(false) => Scale::None,
            }),
        ),
        ("norm_adv_by_std_in_grpo", verl_scale),
    ])?
    .unwrap_or_default();
    let (std, eps) = match convention {
        Convention::Arlbook => (StdKind::Population, 1e-6),
        Convention::Trl => (StdKind::Sample, 1e-4),
        Convention::Verl => (StdKind::Sample, 1e-6),
    };
    Ok(AdvantageOptions {
        baseline,
        scale,
        std: r.std.unwrap_or(std),
        eps: r.eps.unwrap_or(eps),
        convention,
    })
}

/// The response from computed advantages.
pub fn respond(out: GroupAdvantages, convention: Convention) -> Response {
    Response {
        advantages: out.advantages,
        group_mean: out.group_mean,
        group_std: out.group_std,
        divisor: out.divisor,
        convention,
    }
}

impl Entry for GroupAdvantagesEntry {
    const NAME: &'static str = "group-advantages";
    const SUMMARY: &'static str =
        "Group-relative advantages: mean or leave-one-out baseline, group/batch/no std scaling";
    type Request = Request;
    type Response = Response;

    fn compute(request: &Request) -> Result<Response> {
        let options = options(request)?;
        Ok(respond(
            group_advantages(&request.rewards, &options)?,
            options.convention,
        ))
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

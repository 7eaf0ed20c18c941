//! `group-advantages`: GRPO / RLOO advantages over ragged groups of rewards (see
//! [`crate::math::advantage`]).

use serde::{Deserialize, Serialize};

use crate::Ragged;
use crate::api::Entry;
use crate::error::check;
use crate::error::{FieldError, Result};
use crate::math::advantage;
use crate::math::advantage::{
    AdvantageOptions, Baseline, GroupAdvantages, Scale, StdKind, group_advantages,
};
use crate::math::convention::{Convention, infer, one_of};
use crate::math::trl_rewards::{self, Aggregation};

/// Request of `group-advantages`.
///
/// Settings have arlbook's names and TRL's or verl's; a library's name makes the request
/// follow that library's rules and defaults (see [`crate::math::convention`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// Rewards, one list per group (attempts at the same task); every group non-empty,
    /// every reward finite. Required unless `rewards_per_func` is given.
    #[serde(default)]
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
    /// TRL: one value per reward function for each completion, `[group][completion][f]`,
    /// `null` where a function did not score it (instead of `rewards`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewards_per_func: Option<Vec<Vec<Vec<Option<f64>>>>>,
    /// TRL `reward_weights`, one per function (default all 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reward_weights: Option<Vec<f64>>,
    /// TRL `multi_objective_aggregation`: `sum_then_normalize` (default) or
    /// `normalize_then_sum`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multi_objective_aggregation: Option<Aggregation>,
    /// TRL RLOO `reward_clip_range` `[low, high]`, applied to each completion's reward.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reward_clip_range: Option<[f64; 2]>,
    /// TRL RLOO: each completion's `sum_t (old_logp - ref_logp)`, shaped like the
    /// rewards; `beta` times it is subtracted from the reward.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence_kl: Option<Ragged<f64>>,
    /// TRL RLOO `beta`, the KL penalty's weight in the reward (with `sequence_kl`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beta: Option<f64>,
    /// TRL RLOO `normalize_advantages`: whiten the advantages over the batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub normalize_advantages: Option<bool>,
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
    let trl: Vec<&str> = [
        ("scale_rewards", r.scale_rewards.is_some()),
        ("rewards_per_func", r.rewards_per_func.is_some()),
        ("reward_weights", r.reward_weights.is_some()),
        (
            "multi_objective_aggregation",
            r.multi_objective_aggregation.is_some(),
        ),
        ("reward_clip_range", r.reward_clip_range.is_some()),
        ("sequence_kl", r.sequence_kl.is_some()),
        ("beta", r.beta.is_some()),
        ("normalize_advantages", r.normalize_advantages.is_some()),
    ]
    .iter()
    .filter(|(_, p)| *p)
    .map(|(n, _)| *n)
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

/// Whether the request goes through TRL's reward pipeline (several reward functions,
/// clipping, the RLOO KL penalty, batch whitening; see [`crate::math::trl_rewards`]).
pub fn uses_trl_pipeline(request: &Request) -> bool {
    let r = request;
    r.rewards_per_func.is_some()
        || r.reward_clip_range.is_some()
        || r.sequence_kl.is_some()
        || r.beta.is_some()
        || r.normalize_advantages.is_some()
}

/// Per-completion rewards from `rewards_per_func` (or `rewards`), checked by name;
/// `Ok(Err(advantages))` when `normalize_then_sum` already gives the advantages.
fn trl_rewards_of(
    request: &Request,
    options: &AdvantageOptions,
) -> Result<std::result::Result<Vec<Vec<f64>>, trl_rewards::TrlAdvantages>> {
    let r = request;
    let Some(values) = &r.rewards_per_func else {
        if r.reward_weights.is_some() || r.multi_objective_aggregation.is_some() {
            let name = if r.reward_weights.is_some() {
                "reward_weights"
            } else {
                "multi_objective_aggregation"
            };
            return Err(FieldError::new(
                name,
                "applies to `rewards_per_func` (several reward functions)",
            ));
        }
        advantage::validate_rewards(&r.rewards, options)?;
        return Ok(Ok(r.rewards.to_rows()));
    };
    if r.rewards.rows() > 0 {
        return Err(FieldError::new(
            "rewards",
            "give either `rewards` or `rewards_per_func`",
        ));
    }
    let functions = values.first().and_then(|g| g.first()).map_or(0, Vec::len);
    let weights = r
        .reward_weights
        .clone()
        .unwrap_or_else(|| vec![1.0; functions]);
    check::all_finite("reward_weights", &weights)?;
    trl_rewards::validate(values, &weights)?;
    Ok(match r.multi_objective_aggregation.unwrap_or_default() {
        Aggregation::SumThenNormalize => Ok(trl_rewards::weighted_sum(values, &weights)),
        Aggregation::NormalizeThenSum => {
            if r.reward_clip_range.is_some() || r.sequence_kl.is_some() {
                return Err(FieldError::new(
                    "multi_objective_aggregation",
                    "`normalize_then_sum` is GRPOTrainer's; reward clipping and the KL \
                     penalty are RLOOTrainer's",
                ));
            }
            Err(trl_rewards::normalize_then_sum(values, &weights))
        }
    })
}

/// TRL's reward pipeline: per-completion rewards, clipped and KL-penalised, then the
/// NaN-aware advantage.
fn trl_pipeline(request: &Request, options: &AdvantageOptions) -> Result<Response> {
    let r = request;
    let mut rewards = match trl_rewards_of(request, options)? {
        Ok(rewards) => rewards,
        Err(advantages) => return Ok(trl_response(advantages, options.convention)),
    };
    if let Some([low, high]) = r.reward_clip_range {
        check::finite("reward_clip_range[0]", low)?;
        check::finite("reward_clip_range[1]", high)?;
        if low > high {
            return Err(FieldError::new(
                "reward_clip_range",
                "the low end is above the high end",
            ));
        }
        for reward in rewards.iter_mut().flatten() {
            if !reward.is_nan() {
                *reward = reward.clamp(low, high);
            }
        }
    }
    match (&r.sequence_kl, r.beta) {
        (Some(kl), Some(beta)) => {
            check::finite("beta", beta)?;
            Ragged::from_rows(&rewards).check_same_shape("rewards", "sequence_kl", kl)?;
            kl.check_finite("sequence_kl")?;
            for (group, kl) in rewards.iter_mut().zip(kl.iter_rows()) {
                for (reward, kl) in group.iter_mut().zip(kl) {
                    *reward -= beta * kl;
                }
            }
        }
        (Some(_), None) => {
            return Err(FieldError::new(
                "beta",
                "is required with `sequence_kl` (the KL penalty's weight)",
            ));
        }
        (None, Some(_)) => {
            return Err(FieldError::new(
                "sequence_kl",
                "is required with `beta` (each completion's summed log-ratio to the reference)",
            ));
        }
        (None, None) => {}
    }
    let leave_one_out = options.baseline == Baseline::LeaveOneOut;
    if leave_one_out && r.scale.is_some_and(|s| s != Scale::None) {
        return Err(FieldError::new(
            "scale",
            "TRL's RLOO does not divide by a std; use `normalize_advantages` to whiten",
        ));
    }
    let advantages = trl_rewards::advantages(
        &rewards,
        options.scale,
        leave_one_out,
        r.normalize_advantages.unwrap_or(false),
    );
    Ok(trl_response(advantages, options.convention))
}

/// A response from TRL's pipeline: the statistics are those of each group's scored
/// rewards after aggregation, clipping and the KL penalty.
fn trl_response(out: trl_rewards::TrlAdvantages, convention: Convention) -> Response {
    Response {
        advantages: Ragged::from_rows(&out.advantages),
        group_mean: out.group_mean,
        group_std: out.group_std,
        divisor: out.divisor,
        convention,
    }
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
        if uses_trl_pipeline(request) {
            return trl_pipeline(request, &options);
        }
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

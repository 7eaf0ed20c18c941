//! TRL's reward pipeline before the advantage: several reward functions per completion
//! (some of which may not score it), their weighted aggregation, reward clipping and the
//! KL penalty of its RLOO trainer, with NaN-aware group statistics.
//!
//! For completion `j` of group `g`, reward functions `f` with weights `w_f` and values
//! `x_jf` (absent where a function did not score it):
//!
//! ```text
//! sum_then_normalize   r_j = nansum_f w_f x_jf            (NaN when no function scored j)
//!                      A_j = (r_j - nanmean_g r) / (s + 1e-4)   s: nanstd of the group,
//!                                                               of the batch, or no division
//! normalize_then_sum   z_jf = (x_jf - nanmean_g x_f) / (nanstd_g x_f + 1e-4)
//!                      r_j = nansum_f w_f z_jf,  A_j = (r_j - nanmean r) / (nanstd r + 1e-4)
//! RLOO (RLOOTrainer)   r_j <- clamp(r_j, lo, hi) - beta * sum_t (old_logp - ref_logp)
//!                      A_j = r_j - (nansum_g r - r_j) / (scored_g - 1)
//!                      optionally A <- (A - nanmean A) / (nanstd A + 1e-4) over the batch
//! ```
//!
//! `nanstd` is the sample std over the values present (NaN below two); an advantage
//! that comes out NaN (an unscored completion, a group with one scored member) is 0.
//! Groups of one get std 0 (TRL's `num_generations == 1` branch). Sources: TRL
//! `GRPOTrainer._generate_and_score_completions` (`multi_objective_aggregation`,
//! `scale_rewards`), `RLOOTrainer._generate_and_score_completions` (`reward_clip_range`,
//! `beta`, `normalize_advantages`), `trl.trainer.utils.nanstd`.

use serde::{Deserialize, Serialize};

use crate::error::{FieldError, Result};
use crate::math::advantage::Scale;

/// TRL's `multi_objective_aggregation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Aggregation {
    /// Weighted sum of the functions, then the usual advantage (TRL's default).
    #[default]
    SumThenNormalize,
    /// Each function normalised within its group, weighted sum, then batch-normalised.
    NormalizeThenSum,
}

/// Advantages and what each group's were computed from.
#[derive(Debug, Clone, PartialEq)]
pub struct TrlAdvantages {
    /// One per completion; 0 where TRL's comes out NaN.
    pub advantages: Vec<Vec<f64>>,
    /// Mean of each group's scored rewards (NaN-free: 0 when none is scored).
    pub group_mean: Vec<f64>,
    /// Sample std of each group's scored rewards (0 below two).
    pub group_std: Vec<f64>,
    /// What each group's centred rewards were divided by (1 for none and for RLOO).
    pub divisor: Vec<f64>,
}

/// NaN as 0, for the reported statistics.
fn or_zero(v: f64) -> f64 {
    if v.is_nan() { 0.0 } else { v }
}

/// The statistics of `rewards` per group, with `divisor` per group.
fn with_stats(advantages: Vec<Vec<f64>>, rewards: &[Vec<f64>], divisor: Vec<f64>) -> TrlAdvantages {
    TrlAdvantages {
        advantages: finish(advantages),
        group_mean: rewards
            .iter()
            .map(|g| or_zero(nanmean(g.iter().copied())))
            .collect(),
        group_std: rewards.iter().map(|g| or_zero(nanstd(g))).collect(),
        divisor,
    }
}

/// TRL's epsilon in every division by a std.
const EPS: f64 = 1e-4;

/// Mean of the values present (NaN when none is).
fn nanmean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values
        .filter(|v| !v.is_nan())
        .fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 { f64::NAN } else { sum / n as f64 }
}

/// TRL's `nanstd`: the sample std of the values present (NaN below two).
fn nanstd(values: &[f64]) -> f64 {
    let mean = nanmean(values.iter().copied());
    let present: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
    let n = present.len() as f64;
    if present.len() < 2 {
        return f64::NAN;
    }
    let variance = present.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
    (variance * n / (n - 1.0)).sqrt()
}

/// Per-completion rewards from several functions, `values[g][j][f]` (`None`: not
/// scored), as TRL's `sum_then_normalize` forms them: the weighted sum of the present
/// values, NaN where none is.
pub fn weighted_sum(values: &[Vec<Vec<Option<f64>>>], weights: &[f64]) -> Vec<Vec<f64>> {
    values
        .iter()
        .map(|group| {
            group
                .iter()
                .map(|scores| {
                    if scores.iter().all(Option::is_none) {
                        return f64::NAN;
                    }
                    scores
                        .iter()
                        .zip(weights)
                        .filter_map(|(x, w)| x.map(|x| x * w))
                        .sum()
                })
                .collect()
        })
        .collect()
}

/// TRL's `normalize_then_sum` advantages.
pub fn normalize_then_sum(values: &[Vec<Vec<Option<f64>>>], weights: &[f64]) -> TrlAdvantages {
    let functions = weights.len();
    let mut rewards: Vec<Vec<f64>> = Vec::with_capacity(values.len());
    for group in values {
        let column = |f: usize| -> Vec<f64> {
            group
                .iter()
                .map(|scores| scores[f].unwrap_or(f64::NAN))
                .collect()
        };
        let stats: Vec<(f64, f64)> = (0..functions)
            .map(|f| {
                let x = column(f);
                let std = if group.len() > 1 { nanstd(&x) } else { 0.0 };
                (nanmean(x.iter().copied()), std)
            })
            .collect();
        rewards.push(
            group
                .iter()
                .map(|scores| {
                    if scores.iter().all(Option::is_none) {
                        return f64::NAN;
                    }
                    let mut sum = 0.0;
                    for (f, x) in scores.iter().enumerate() {
                        let z = x.map_or(f64::NAN, |x| (x - stats[f].0) / (stats[f].1 + EPS));
                        if !z.is_nan() {
                            sum += z * weights[f];
                        }
                    }
                    sum
                })
                .collect(),
        );
    }
    let flat: Vec<f64> = rewards.iter().flatten().copied().collect();
    let std = if flat.len() > 1 { nanstd(&flat) } else { 0.0 };
    let mean = nanmean(flat.iter().copied());
    let advantages = rewards
        .iter()
        .map(|g| g.iter().map(|r| (r - mean) / (std + EPS)).collect())
        .collect();
    let divisor = vec![or_zero(std) + EPS; rewards.len()];
    with_stats(advantages, &rewards, divisor)
}

/// The advantage of `GRPOTrainer` (`sum_then_normalize`) or, with `leave_one_out`,
/// of `RLOOTrainer`, over per-completion rewards that may be NaN (unscored).
pub fn advantages(
    rewards: &[Vec<f64>],
    scale: Scale,
    leave_one_out: bool,
    normalize: bool,
) -> TrlAdvantages {
    let flat: Vec<f64> = rewards.iter().flatten().copied().collect();
    let batch_std = if flat.len() > 1 { nanstd(&flat) } else { 0.0 };
    let divisor = rewards
        .iter()
        .map(|group| match (leave_one_out, scale) {
            (true, _) | (false, Scale::None) => 1.0,
            (false, Scale::Group) if group.len() > 1 => or_zero(nanstd(group)) + EPS,
            (false, Scale::Group) => EPS,
            (false, Scale::Batch) => or_zero(batch_std) + EPS,
        })
        .collect();
    let out: Vec<Vec<f64>> = rewards
        .iter()
        .map(|group| {
            let n = group.len();
            if leave_one_out {
                if n < 2 {
                    return vec![0.0; n];
                }
                let scored = group.iter().filter(|r| !r.is_nan()).count() as f64;
                let sum: f64 = group.iter().filter(|r| !r.is_nan()).sum();
                return group
                    .iter()
                    .map(|r| r - (sum - r) / (scored - 1.0))
                    .collect();
            }
            let mean = nanmean(group.iter().copied());
            let std = match scale {
                Scale::Group | Scale::None => {
                    if n > 1 {
                        nanstd(group)
                    } else {
                        0.0
                    }
                }
                Scale::Batch => batch_std,
            };
            group
                .iter()
                .map(|r| {
                    let centred = r - mean;
                    if scale == Scale::None {
                        centred
                    } else {
                        centred / (std + EPS)
                    }
                })
                .collect()
        })
        .collect();
    let out = if normalize {
        let flat: Vec<f64> = out.iter().flatten().copied().collect();
        let mean = nanmean(flat.iter().copied());
        let std = nanstd(&flat);
        out.iter()
            .map(|g| g.iter().map(|a| (a - mean) / (std + EPS)).collect())
            .collect()
    } else {
        out
    };
    with_stats(out, rewards, divisor)
}

/// NaN advantages (unscored completions, groups without two scored members) become 0.
fn finish(advantages: Vec<Vec<f64>>) -> Vec<Vec<f64>> {
    advantages
        .into_iter()
        .map(|g| {
            g.into_iter()
                .map(|a| if a.is_nan() { 0.0 } else { a })
                .collect()
        })
        .collect()
}

/// Checks the per-function rewards against the weights: every group non-empty, every
/// completion one value (or `null`) per weight, each value finite.
pub fn validate(values: &[Vec<Vec<Option<f64>>>], weights: &[f64]) -> Result<()> {
    if values.is_empty() {
        return Err(FieldError::new(
            "rewards_per_func",
            "must contain at least one group",
        ));
    }
    for (g, group) in values.iter().enumerate() {
        if group.is_empty() {
            return Err(FieldError::new(
                format!("rewards_per_func[{g}]"),
                "a group must contain at least one completion",
            ));
        }
        for (j, scores) in group.iter().enumerate() {
            if scores.len() != weights.len() {
                return Err(FieldError::new(
                    format!("rewards_per_func[{g}][{j}]"),
                    format!(
                        "has {} values for {} reward functions (`reward_weights`)",
                        scores.len(),
                        weights.len()
                    ),
                ));
            }
            if let Some(f) = scores
                .iter()
                .position(|x| x.is_some_and(|x| !x.is_finite()))
            {
                return Err(FieldError::new(
                    format!("rewards_per_func[{g}][{j}][{f}]"),
                    "must be a finite number or null (not scored)",
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nanstd_is_the_sample_std_of_what_is_present() {
        let s = nanstd(&[1.0, f64::NAN, 3.0]);
        assert!((s - 2f64.sqrt()).abs() < 1e-15);
        assert!(nanstd(&[1.0, f64::NAN]).is_nan());
    }

    #[test]
    fn an_unscored_completion_is_left_out_of_the_baseline_and_gets_zero() {
        let values = vec![vec![
            vec![Some(1.0), None],
            vec![None, None],
            vec![Some(0.0), None],
        ]];
        let rewards = weighted_sum(&values, &[1.0, 2.0]);
        assert!(rewards[0][1].is_nan());
        let adv = advantages(&rewards, Scale::Group, false, false).advantages;
        // Mean 0.5 and sample std sqrt(0.5) over the two scored completions.
        let expected = 0.5 / (0.5f64.sqrt() + EPS);
        assert!((adv[0][0] - expected).abs() < 1e-15);
        assert_eq!(adv[0][1], 0.0);
        assert!((adv[0][2] + expected).abs() < 1e-15);
    }

    #[test]
    fn rloo_baseline_averages_the_scored_siblings() {
        let adv = advantages(&[vec![1.0, f64::NAN, 0.0, 0.5]], Scale::None, true, false).advantages;
        // Scored: 1, 0, 0.5; the first's baseline is (0 + 0.5) / 2.
        assert!((adv[0][0] - 0.75).abs() < 1e-15);
        assert_eq!(adv[0][1], 0.0);
    }
}

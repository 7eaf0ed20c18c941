//! Group-relative advantages: each reward compared with the other attempts at the same
//! task, optionally divided by a standard deviation.
//!
//! For group `g` with rewards `R_1..R_G`:
//!
//! ```text
//! baseline  b_i = mean(R)                      (Baseline::Mean, GRPO)
//!           b_i = (sum(R) - R_i) / (G - 1)     (Baseline::LeaveOneOut, RLOO)
//! \hat A_i = (R_i - b_i) / (s + eps)           s: group std, batch std, or none (then no eps)
//! ```
//!
//! The epsilon is added to the standard deviation, outside the square root, as in GRPO
//! (Shao et al. 2024, `DeepSeekMath`, section 4.1.2), TRL and verl. Sources: GRPO as above;
//! RLOO (Ahmadian et al. 2024, arXiv 2402.14740); batch scaling (TRL `scale_rewards =
//! "batch"`, from "PPO Lite", arXiv 2508.08221); no scaling (Dr. GRPO, Liu et al. 2025).
//!
//! ## Framework defaults (checked against their code)
//! - TRL `GRPOTrainer`: mean baseline, **sample** std (`nanstd` applies Bessel's
//!   correction), `eps = 1e-4`, `scale_rewards` `group` (default) / `batch` / `none`;
//!   for `batch` the mean stays per group and the std is over all rewards of the batch.
//!   A singleton group gets std 0, hence advantage 0.
//! - verl `compute_grpo_outcome_advantage`: mean baseline, `torch.std` (**sample**,
//!   unbiased), `eps = 1e-6`, `norm_adv_by_std_in_grpo = false` for no scaling. A
//!   singleton group gets mean 0 and std 1, so its advantage is `R / (1 + eps)`.
//! - verl `compute_rloo_outcome_advantage`: `G/(G-1) (R_i - mean)`, no std; a singleton
//!   keeps its raw reward.
//! - The article's worked example uses the **population** std; it is our default.
//!
//! ## Our conventions
//! - A group whose rewards are all equal, including a group of one, has advantage
//!   exactly 0 for every member, for every option. (For singletons this follows TRL; a
//!   lone attempt has nothing to be compared with.) Equality is detected directly, so
//!   rounding in the mean cannot leave a residue. Under the `verl` convention
//!   ([`crate::math::convention`]) a group of one gets verl's advantage instead.
//! - `sample` std of a group of one is taken as 0.
//! - The leave-one-out baseline may be combined with std scaling; it then divides by the
//!   same std as the mean baseline would.

use serde::{Deserialize, Serialize};

use crate::Ragged;
use crate::error::{FieldError, Result, check};
use crate::math::convention::Convention;

/// What each reward is compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Baseline {
    /// The group mean, own reward included.
    #[default]
    Mean,
    /// The mean of the other members of the group.
    #[serde(alias = "rloo", alias = "leave_one_out")]
    LeaveOneOut,
}

/// Which standard deviation divides the centred rewards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Scale {
    /// The std of the reward's own group.
    #[default]
    Group,
    /// The std of all rewards in the batch.
    Batch,
    /// No division (and no epsilon).
    None,
}

/// Population (divide by `n`) or sample (divide by `n - 1`) standard deviation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum StdKind {
    /// `sqrt(sum (x - mean)^2 / n)`, as in the article.
    #[default]
    Population,
    /// `sqrt(sum (x - mean)^2 / (n - 1))`, as `torch.std` (TRL, verl).
    #[serde(alias = "unbiased")]
    Sample,
}

/// Options for [`group_advantages`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdvantageOptions {
    /// Baseline.
    pub baseline: Baseline,
    /// Scaling.
    pub scale: Scale,
    /// Kind of std.
    pub std: StdKind,
    /// Added to the std before dividing; `>= 0`.
    pub eps: f64,
    /// Whose rule gives a group of one its advantage (see the module docs).
    pub convention: Convention,
}

impl Default for AdvantageOptions {
    fn default() -> Self {
        Self {
            baseline: Baseline::Mean,
            scale: Scale::Group,
            std: StdKind::Population,
            eps: 1e-6,
            convention: Convention::Arlbook,
        }
    }
}

/// Advantages and the per-group statistics behind them.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupAdvantages {
    /// `\hat A`, same shape as the rewards.
    pub advantages: Ragged<f64>,
    /// Mean reward of each group.
    pub group_mean: Vec<f64>,
    /// Std of each group's rewards (of the requested kind).
    pub group_std: Vec<f64>,
    /// The divisor applied to each group: `std + eps` (group or batch std), or 1.
    pub divisor: Vec<f64>,
}

/// Mean and std of `values`, with exact zeros when all values are equal.
fn mean_std(values: &[f64], kind: StdKind) -> (f64, f64) {
    let first = values[0];
    if values.iter().all(|&v| v == first) {
        return (first, 0.0);
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let squares: f64 = values.iter().map(|v| (v - mean) * (v - mean)).sum();
    let denominator = match kind {
        StdKind::Population => n,
        StdKind::Sample => n - 1.0,
    };
    (mean, (squares / denominator).sqrt())
}

/// Checks `eps` and the rewards (at least one group, none empty, all finite, each
/// group's mean and std finite, and the batch's std with `scale = batch`): what
/// [`group_advantages`] checks before computing.
pub fn validate_rewards(rewards: &Ragged<f64>, options: &AdvantageOptions) -> Result<()> {
    check::non_negative("eps", options.eps)?;
    if rewards.rows() == 0 {
        return Err(FieldError::new(
            "rewards",
            "must contain at least one group",
        ));
    }
    for (i, row) in rewards.iter_rows().enumerate() {
        if row.is_empty() {
            return Err(FieldError::new(
                format!("rewards[{i}]"),
                "a group must contain at least one reward",
            ));
        }
    }
    rewards.check_finite("rewards")?;
    let spread_overflows = |field: String| {
        FieldError::new(
            field,
            "the rewards' mean or spread overflows f64; rescale the rewards",
        )
    };
    for (i, row) in rewards.iter_rows().enumerate() {
        let (mean, std) = mean_std(row, options.std);
        if !(mean.is_finite() && std.is_finite()) {
            return Err(spread_overflows(format!("rewards[{i}]")));
        }
    }
    if options.scale == Scale::Batch && !mean_std(rewards.flat(), options.std).1.is_finite() {
        return Err(spread_overflows("rewards".to_owned()));
    }
    Ok(())
}

/// Group-relative advantages for ragged `rewards` (field `rewards`, one row per group).
pub fn group_advantages(
    rewards: &Ragged<f64>,
    options: &AdvantageOptions,
) -> Result<GroupAdvantages> {
    validate_rewards(rewards, options)?;

    let stats: Vec<(f64, f64)> = rewards
        .iter_rows()
        .map(|row| mean_std(row, options.std))
        .collect();
    let batch_std = mean_std(rewards.flat(), options.std).1;

    let mut advantages = Ragged::default();
    let mut divisors = Vec::with_capacity(rewards.rows());
    for (row, &(mean, std)) in rewards.iter_rows().zip(&stats) {
        let divisor = match options.scale {
            Scale::Group => std + options.eps,
            Scale::Batch => batch_std + options.eps,
            Scale::None => 1.0,
        };
        if !divisor.is_finite() {
            return Err(FieldError::new(
                "eps",
                format!("std + eps overflows f64 (eps = {:e})", options.eps),
            ));
        }
        divisors.push(divisor);
        if options.convention == Convention::Verl && row.len() == 1 {
            advantages.push_row(&[verl_singleton(row[0], divisor, options)]);
            continue;
        }
        let all_equal = std == 0.0;
        let g = row.len() as f64;
        let sum: f64 = row.iter().sum();
        let out: Vec<f64> = row
            .iter()
            .map(|&r| {
                if all_equal {
                    return 0.0;
                }
                let centred = match options.baseline {
                    Baseline::Mean => r - mean,
                    Baseline::LeaveOneOut => r - (sum - r) / (g - 1.0),
                };
                centred / divisor
            })
            .collect();
        advantages.push_row(&out);
    }
    advantages.check_finite("rewards").map_err(|e| {
        FieldError::new(
            e.field,
            "the advantage overflows f64 (std + eps is too small); raise eps",
        )
    })?;
    Ok(GroupAdvantages {
        advantages,
        group_mean: stats.iter().map(|s| s.0).collect(),
        group_std: stats.iter().map(|s| s.1).collect(),
        divisor: divisors,
    })
}

/// verl's advantage for a group of one: GRPO takes mean 0 and std 1, so the score over
/// `1 + eps` (the score itself without std scaling); RLOO leaves the score as it is.
fn verl_singleton(score: f64, divisor: f64, options: &AdvantageOptions) -> f64 {
    match (options.baseline, options.scale) {
        (Baseline::LeaveOneOut, _) | (Baseline::Mean, Scale::None) => score,
        (Baseline::Mean, Scale::Group) => score / (1.0 + options.eps),
        (Baseline::Mean, Scale::Batch) => score / divisor,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SQRT3: f64 = 1.732_050_807_568_877_2;

    fn exact(baseline: Baseline, scale: Scale) -> AdvantageOptions {
        AdvantageOptions {
            baseline,
            scale,
            std: StdKind::Population,
            eps: 0.0,
            convention: Convention::Arlbook,
        }
    }

    #[test]
    fn article_two_successes_give_plus_minus_one() {
        let r = Ragged::from_rows(&[vec![1.0, 0.0, 0.0, 1.0]]);
        let a = group_advantages(&r, &exact(Baseline::Mean, Scale::Group)).unwrap();
        assert_eq!(a.advantages.row(0), &[1.0, -1.0, -1.0, 1.0]);
        assert_eq!((a.group_mean[0], a.group_std[0]), (0.5, 0.5));
    }

    #[test]
    fn article_one_success_gives_sqrt3_and_minus_one_over_sqrt3() {
        let r = Ragged::from_rows(&[vec![1.0, 0.0, 0.0, 0.0]]);
        for eps in [0.0, 1e-12] {
            let opts = AdvantageOptions {
                eps,
                ..AdvantageOptions::default()
            };
            let a = group_advantages(&r, &opts).unwrap();
            let want = [SQRT3, -1.0 / SQRT3, -1.0 / SQRT3, -1.0 / SQRT3];
            for (got, want) in a.advantages.row(0).iter().zip(want) {
                assert!((got - want).abs() < 1e-11, "{got} vs {want}");
            }
        }
    }

    #[test]
    fn singleton_and_all_equal_groups_get_exactly_zero() {
        let r = Ragged::from_rows(&[vec![0.7], vec![0.1, 0.1, 0.1], vec![1.0, 0.0]]);
        for std in [StdKind::Population, StdKind::Sample] {
            for baseline in [Baseline::Mean, Baseline::LeaveOneOut] {
                for scale in [Scale::Group, Scale::Batch, Scale::None] {
                    let opts = AdvantageOptions {
                        baseline,
                        scale,
                        std,
                        eps: 0.0,
                        convention: Convention::Arlbook,
                    };
                    let a = group_advantages(&r, &opts).unwrap();
                    assert_eq!(a.advantages.row(0), &[0.0]);
                    assert_eq!(a.advantages.row(1), &[0.0, 0.0, 0.0]);
                }
            }
        }
    }

    #[test]
    fn sample_std_matches_torch_std_and_loo_matches_rloo_scaling() {
        let r = Ragged::from_rows(&[vec![1.0, 0.0, 0.0, 0.0]]);
        let opts = AdvantageOptions {
            std: StdKind::Sample,
            eps: 0.0,
            ..AdvantageOptions::default()
        };
        // Sample std of (1,0,0,0) is 1/2.
        let a = group_advantages(&r, &opts).unwrap();
        assert!((a.group_std[0] - 0.5).abs() < 1e-15);
        assert!((a.advantages.row(0)[0] - 1.5).abs() < 1e-15);
        // RLOO: G/(G-1) * (R - mean) = 4/3 * 0.75 = 1.
        let loo = group_advantages(&r, &exact(Baseline::LeaveOneOut, Scale::None)).unwrap();
        assert_eq!(loo.advantages.row(0)[0], 1.0);
        assert!((loo.advantages.row(0)[1] + 1.0 / 3.0).abs() < 1e-15);
    }

    #[test]
    fn empty_group_is_named() {
        let r = Ragged::from_rows(&[vec![1.0], vec![]]);
        let err = group_advantages(&r, &AdvantageOptions::default()).unwrap_err();
        assert_eq!(err.field, "rewards[1]");
    }

    fn options() -> impl Strategy<Value = AdvantageOptions> {
        (
            prop_oneof![Just(Baseline::Mean), Just(Baseline::LeaveOneOut)],
            prop_oneof![Just(Scale::Group), Just(Scale::Batch), Just(Scale::None)],
            prop_oneof![Just(StdKind::Population), Just(StdKind::Sample)],
            0.0f64..0.1,
        )
            .prop_map(|(baseline, scale, std, eps)| AdvantageOptions {
                baseline,
                scale,
                std,
                eps,
                convention: Convention::Arlbook,
            })
    }

    proptest! {
        #[test]
        fn advantages_sum_to_zero_in_every_group(
            groups in proptest::collection::vec(proptest::collection::vec(0.0f64..1.0, 1..7), 1..5),
            opts in options(),
        ) {
            let a = group_advantages(&Ragged::from_rows(&groups), &opts).unwrap();
            for (row, d) in a.advantages.iter_rows().zip(&a.divisor) {
                let scale = row.iter().map(|x| x.abs()).sum::<f64>().max(1.0);
                prop_assert!(row.iter().sum::<f64>().abs() < 1e-12 * scale * d.max(1.0));
            }
        }

        #[test]
        fn all_equal_rewards_give_zero_advantage(
            value in -5.0f64..5.0, sizes in proptest::collection::vec(1usize..9, 1..4), opts in options(),
        ) {
            let groups: Vec<Vec<f64>> = sizes.iter().map(|&n| vec![value; n]).collect();
            let a = group_advantages(&Ragged::from_rows(&groups), &opts).unwrap();
            prop_assert!(a.advantages.flat().iter().all(|&x| x == 0.0));
        }

        /// Brute force: the leave-one-out baseline from its definition.
        #[test]
        fn leave_one_out_is_the_mean_of_the_others(
            row in proptest::collection::vec(0.0f64..1.0, 2..7),
        ) {
            let a = group_advantages(&Ragged::from_rows(std::slice::from_ref(&row)), &exact(Baseline::LeaveOneOut, Scale::None)).unwrap();
            for (i, &r) in row.iter().enumerate() {
                let others: Vec<f64> = row.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, &v)| v).collect();
                let b = others.iter().sum::<f64>() / others.len() as f64;
                let want = if row.iter().all(|&v| v == row[0]) { 0.0 } else { r - b };
                prop_assert!((a.advantages.row(0)[i] - want).abs() < 1e-12);
            }
        }
    }
}

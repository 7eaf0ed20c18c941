//! Generalised advantage estimation over a padded batch `[B][T]`, with a mask of the
//! positions that are the policy's own tokens, and the masked whitening that follows it
//! in PPO trainers.
//!
//! verl (`compute_gae_advantage_return`) walks back over `t` with `m_t` the mask; a
//! position outside the mask (padding, or a tool's observation inside a multi-turn
//! response) neither moves the recursion nor breaks it:
//!
//! ```text
//! delta_t = r_t + gamma * next - V_t
//! g_t     = delta_t + gamma * lambda * last
//! next    = m_t V_t + (1 - m_t) next,     last = m_t g_t + (1 - m_t) last,     A_t = last
//! ```
//!
//! so a masked position carries the advantage of the next response token after it (0
//! after the last). TRL (`PPOTrainer`) runs the plain recursion over every position
//! (`next = V_{t+1}`, 0 after the row's end), whitens over the mask and then sets the
//! positions outside it to 0. Both return `returns = A + V` before whitening.
//!
//! Masked whitening (verl `masked_whiten`, TRL `masked_whiten`), over every masked
//! position of the batch at once:
//!
//! ```text
//! mean = sum m x / (sum m + c),   var = sum m (x - mean)^2 / (sum m + c) * n / (n - 1),  n = sum m
//! x' = (x - mean) / sqrt(var + 1e-8)      (+ mean again when shift_mean is false)
//! ```
//!
//! with `c = 1e-8` in verl's `masked_mean` and `c = 0` in TRL's. Fewer than two masked
//! positions is refused, as both libraries refuse it (the Bessel factor divides by zero).

use serde::{Deserialize, Serialize};

use crate::error::{FieldError, Result, check};
use crate::math::convention::Convention;

/// How positions outside the mask enter the recursion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MaskRule {
    /// verl: a masked-out position carries `next` and `last` through unchanged.
    Carry,
    /// TRL: every position is a step of the recursion; the mask only selects which
    /// positions are whitened, and the others are set to 0 afterwards.
    Plain,
}

impl MaskRule {
    /// The rule of a convention's GAE (arlbook follows verl's, which also serves
    /// multi-turn responses with observation tokens inside them).
    pub fn of(convention: Convention) -> Self {
        match convention {
            Convention::Trl => Self::Plain,
            Convention::Arlbook | Convention::Verl => Self::Carry,
        }
    }
}

/// Mean and (Bessel-corrected) variance that whitening used.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Whitening {
    /// Masked mean of the advantages before whitening.
    pub mean: f64,
    /// Masked unbiased variance of the advantages before whitening.
    pub var: f64,
}

/// Advantages and returns of a padded batch.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchGae {
    /// `A_bt` (whitened when asked), `[B][T]`.
    pub advantages: Vec<Vec<f64>>,
    /// `A_bt + V_bt` with the advantages before whitening, `[B][T]`.
    pub returns: Vec<Vec<f64>>,
    /// The whitening's statistics, when it ran.
    pub whitening: Option<Whitening>,
}

/// Options of [`gae_batch`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatchGaeOptions {
    /// Discount `gamma` in `[0, 1]`.
    pub gamma: f64,
    /// GAE `lambda` in `[0, 1]`.
    pub lambda: f64,
    /// How masked-out positions enter the recursion.
    pub rule: MaskRule,
    /// Whiten the advantages over the mask.
    pub whiten: bool,
    /// Keep the mean when whitening (`shift_mean = false` adds it back).
    pub shift_mean: bool,
    /// The `c` in the masked mean's denominator (verl 1e-8, TRL 0).
    pub mean_guard: f64,
}

/// GAE over `rewards` and `values` (`[B][T]`, fields of those names) with `mask`
/// (`response_mask`, 0 or 1 at each position).
pub fn gae_batch(
    rewards: &[Vec<f64>],
    values: &[Vec<f64>],
    mask: &[Vec<f64>],
    options: BatchGaeOptions,
) -> Result<BatchGae> {
    check_grid("values", values, rewards)?;
    check_grid("response_mask", mask, rewards)?;
    for (name, grid) in [("rewards", rewards), ("values", values)] {
        for (b, row) in grid.iter().enumerate() {
            check::all_finite(&format!("{name}[{b}]"), row)?;
        }
    }
    for (b, row) in mask.iter().enumerate() {
        if let Some(t) = row.iter().position(|&m| m != 0.0 && m != 1.0) {
            return Err(FieldError::new(
                format!("response_mask[{b}][{t}]"),
                format!("must be 0 or 1, got {}", row[t]),
            ));
        }
    }
    check::in_range("gamma", options.gamma, 0.0, 1.0)?;
    check::in_range("lambda", options.lambda, 0.0, 1.0)?;
    let mut advantages: Vec<Vec<f64>> = rewards
        .iter()
        .zip(values)
        .zip(mask)
        .map(|((r, v), m)| row_advantages(r, v, m, options))
        .collect();
    let returns = advantages
        .iter()
        .zip(values)
        .map(|(a, v)| a.iter().zip(v).map(|(a, v)| a + v).collect())
        .collect();
    let mut whitening = None;
    if options.whiten {
        let stats = masked_whiten(
            &mut advantages,
            mask,
            options.shift_mean,
            options.mean_guard,
        )?;
        whitening = Some(stats);
    }
    if options.rule == MaskRule::Plain {
        for (a, m) in advantages.iter_mut().zip(mask) {
            for (a, &m) in a.iter_mut().zip(m) {
                if m == 0.0 {
                    *a = 0.0;
                }
            }
        }
    }
    for (b, row) in advantages.iter().enumerate() {
        check::all_finite(&format!("rewards[{b}]"), row)?;
    }
    Ok(BatchGae {
        advantages,
        returns,
        whitening,
    })
}

fn check_grid(name: &str, grid: &[Vec<f64>], rewards: &[Vec<f64>]) -> Result<()> {
    check::same_len(name, grid.len(), "rewards", rewards.len())?;
    for (b, (row, r)) in grid.iter().zip(rewards).enumerate() {
        check::same_len(
            &format!("{name}[{b}]"),
            row.len(),
            &format!("rewards[{b}]"),
            r.len(),
        )?;
    }
    Ok(())
}

fn row_advantages(rewards: &[f64], values: &[f64], mask: &[f64], o: BatchGaeOptions) -> Vec<f64> {
    let steps = rewards.len();
    let mut advantages = vec![0.0; steps];
    let (mut next, mut last) = (0.0, 0.0);
    for t in (0..steps).rev() {
        match o.rule {
            MaskRule::Carry => {
                let delta = rewards[t] + o.gamma * next - values[t];
                let g = delta + o.gamma * o.lambda * last;
                let m = mask[t];
                next = m * values[t] + (1.0 - m) * next;
                last = m * g + (1.0 - m) * last;
            }
            MaskRule::Plain => {
                let next_value = values.get(t + 1).copied().unwrap_or(0.0);
                let delta = rewards[t] + o.gamma * next_value - values[t];
                last = delta + o.gamma * o.lambda * last;
            }
        }
        advantages[t] = last;
    }
    advantages
}

/// Whitens `x` in place over the positions where `mask` is 1 (every position of `x` is
/// moved, as the libraries do); returns the mean and variance it used.
pub fn masked_whiten(
    x: &mut [Vec<f64>],
    mask: &[Vec<f64>],
    shift_mean: bool,
    mean_guard: f64,
) -> Result<Whitening> {
    let pairs = || {
        x.iter()
            .zip(mask)
            .flat_map(|(x, m)| x.iter().zip(m).map(|(x, m)| (*x, *m)))
    };
    let count: f64 = pairs().map(|(_, m)| m).sum();
    if count < 2.0 {
        return Err(FieldError::new(
            "response_mask",
            format!(
                "whitening needs at least two masked positions (the unbiased variance divides by n - 1); it has {count}"
            ),
        ));
    }
    let mean = pairs().map(|(x, m)| m * x).sum::<f64>() / (count + mean_guard);
    let centred = pairs()
        .map(|(x, m)| m * (x - mean) * (x - mean))
        .sum::<f64>();
    let var = centred / (count + mean_guard) * count / (count - 1.0);
    let scale = 1.0 / (var + 1e-8).sqrt();
    for row in x.iter_mut() {
        for v in row.iter_mut() {
            *v = (*v - mean) * scale + if shift_mean { 0.0 } else { mean };
        }
    }
    Ok(Whitening { mean, var })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::gae::{Ending, gae};
    use proptest::prelude::*;

    fn options(rule: MaskRule) -> BatchGaeOptions {
        BatchGaeOptions {
            gamma: 0.97,
            lambda: 0.9,
            rule,
            whiten: false,
            shift_mean: true,
            mean_guard: 1e-8,
        }
    }

    #[test]
    fn a_full_mask_is_one_trajectory_per_row() {
        let rewards = vec![vec![0.0, 0.5, 1.0], vec![1.0, -1.0, 0.0]];
        let values = vec![vec![0.2, 0.1, 0.4], vec![0.0, 0.3, -0.2]];
        let mask = vec![vec![1.0; 3]; 2];
        for rule in [MaskRule::Carry, MaskRule::Plain] {
            let out = gae_batch(&rewards, &values, &mask, options(rule)).unwrap();
            for b in 0..2 {
                let one = gae(&rewards[b], &values[b], 0.97, 0.9, Ending::Terminated).unwrap();
                for t in 0..3 {
                    assert!((out.advantages[b][t] - one.advantages[t]).abs() < 1e-15);
                }
            }
        }
    }

    #[test]
    fn carried_positions_are_skipped_by_the_recursion() {
        // An observation token in the middle: the recursion runs over the other two as
        // if it were not there, and the observation carries the next token's advantage.
        let out = gae_batch(
            &[vec![0.0, 7.0, 1.0]],
            &[vec![0.2, 9.0, 0.4]],
            &[vec![1.0, 0.0, 1.0]],
            options(MaskRule::Carry),
        )
        .unwrap();
        let two = gae(&[0.0, 1.0], &[0.2, 0.4], 0.97, 0.9, Ending::Terminated).unwrap();
        assert!((out.advantages[0][0] - two.advantages[0]).abs() < 1e-15);
        assert!((out.advantages[0][2] - two.advantages[1]).abs() < 1e-15);
        assert_eq!(out.advantages[0][1], out.advantages[0][2]);
    }

    #[test]
    fn trl_zeroes_the_padding_after_whitening() {
        let mut o = options(MaskRule::Plain);
        o.whiten = true;
        o.mean_guard = 0.0;
        let out = gae_batch(
            &[vec![1.0, 0.0], vec![0.5, 0.0]],
            &[vec![0.1, 0.2], vec![0.3, 0.0]],
            &[vec![1.0, 1.0], vec![1.0, 0.0]],
            o,
        )
        .unwrap();
        assert_eq!(out.advantages[1][1], 0.0);
    }

    #[test]
    fn one_masked_position_cannot_be_whitened() {
        let mut o = options(MaskRule::Carry);
        o.whiten = true;
        let err = gae_batch(&[vec![1.0, 0.0]], &[vec![0.0; 2]], &[vec![1.0, 0.0]], o).unwrap_err();
        assert_eq!(err.field, "response_mask");
    }

    #[test]
    fn a_mask_of_other_numbers_is_named() {
        let err = gae_batch(
            &[vec![1.0]],
            &[vec![0.0]],
            &[vec![0.5]],
            options(MaskRule::Carry),
        )
        .unwrap_err();
        assert_eq!(err.field, "response_mask[0][0]");
    }

    proptest! {
        #[test]
        fn whitened_advantages_have_zero_mean_and_unit_variance_over_the_mask(
            xs in proptest::collection::vec(-5.0f64..5.0, 3..20),
            seed in 0u64..1000,
        ) {
            let mask: Vec<f64> = xs.iter().enumerate()
                .map(|(i, _)| if i < 2 || (seed >> (i % 60)) & 1 == 1 { 1.0 } else { 0.0 })
                .collect();
            let mut x = vec![xs.clone()];
            let stats = masked_whiten(&mut x, std::slice::from_ref(&mask), true, 0.0).unwrap();
            let n: f64 = mask.iter().sum();
            let mean: f64 = x[0].iter().zip(&mask).map(|(x, m)| x * m).sum::<f64>() / n;
            prop_assert!(mean.abs() < 1e-9);
            if stats.var > 1e-6 {
                let var: f64 = x[0].iter().zip(&mask).map(|(x, m)| m * (x - mean).powi(2)).sum::<f64>()
                    / (n - 1.0);
                prop_assert!((var - stats.var / (stats.var + 1e-8)).abs() < 1e-9);
            }
        }
    }
}

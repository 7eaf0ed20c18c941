//! Loss reductions: how a ragged matrix of per-token losses `l_ik` (sequence `i`, token
//! `k < L_i`) becomes one scalar, written as a token weight map `loss = sum_ik w_ik l_ik`.
//!
//! | reduction | weight `w_ik` | verl `loss_agg_mode` | TRL `loss_type` |
//! |---|---|---|---|
//! | [`Reduction::SeqMeanTokenMean`] | `1 / (N' L_i)` | `seq-mean-token-mean` | `grpo` (also used by `sapo`) |
//! | [`Reduction::TokenMean`] | `1 / T`, `T = sum_i L_i` | `token-mean` | `bnpo`, `dapo` (also used by `cispo`) |
//! | [`Reduction::SeqMeanTokenSum`] | `1 / N'` | `seq-mean-token-sum` | — |
//! | [`Reduction::SeqMeanTokenSumNorm`] | `1 / C` | `seq-mean-token-sum-norm` | — |
//! | [`Reduction::DrGrpo`] | `1 / (N C)` | — | `dr_grpo` |
//!
//! `N` counts all sequences, `N'` only those with at least one token, `C` is the
//! constant (default: the longest row, i.e. the padded width when the batch is padded to
//! its longest sequence).
//!
//! Sources: GRPO's `1/|o_i|` inside the group mean (Shao et al. 2024, `DeepSeekMath`,
//! section 4.1.1, eq. 3); DAPO's token-level loss (Yu et al. 2025, section 3.3, eq. 12);
//! Dr. GRPO's constant denominator (Liu et al. 2025, sections 3.1-3.2). Code paths:
//! verl `core_algos.agg_loss`, TRL `GRPOTrainer._compute_loss`.
//!
//! ## Where the frameworks differ (and what we do)
//! - **Empty sequences.** verl leaves sequences without tokens out of the sequence count
//!   (`N'`); TRL's `grpo` and `dr_grpo` divide by the full batch size `N` (clamping each
//!   row length to at least 1, so an empty row adds 0 but still counts). arlbook's rules
//!   follow verl for the `seq-mean-*` reductions and TRL for `dr_grpo`; under the `trl`
//!   convention ([`row_weights_by`]) every per-sequence mean counts all `N` rows. With
//!   no empty rows the conventions agree exactly.
//! - **Guards.** verl divides each row sum by `L_i + 1e-8`, and does so under the `verl`
//!   convention; arlbook divides by `L_i` exactly (the relative difference is below
//!   `1e-8`). TRL clamps token counts to at least 1; an all-empty batch gives loss 0
//!   here too.
//! - **The constant.** TRL's `dr_grpo` divides by `N * max_completion_length` (default
//!   512); verl's `seq-mean-token-sum-norm` divides by `loss_scale_factor` alone (default:
//!   the padded response width), deliberately without the sequence mean. The two are
//!   therefore different variants here, not aliases.
//! - **Batches.** TRL's `dapo` divides by the token count of the whole accumulated
//!   batch across processes, `bnpo` by the local one; on a single batch both are
//!   `token-mean`.

use serde::{Deserialize, Serialize};

use crate::Ragged;
use crate::error::{FieldError, Result, check};
use crate::math::convention::Convention;

/// How per-token losses are averaged into one number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub enum Reduction {
    /// Mean over tokens within each sequence, then mean over (non-empty) sequences.
    #[serde(rename = "seq-mean-token-mean", alias = "grpo")]
    SeqMeanTokenMean,
    /// Mean over all tokens of the batch.
    #[default]
    #[serde(rename = "token-mean", alias = "bnpo", alias = "dapo")]
    TokenMean,
    /// Sum over tokens within each sequence, then mean over (non-empty) sequences.
    #[serde(rename = "seq-mean-token-sum")]
    SeqMeanTokenSum,
    /// verl: the sum over all tokens divided by the constant `C` (no sequence mean).
    #[serde(rename = "seq-mean-token-sum-norm")]
    SeqMeanTokenSumNorm,
    /// TRL Dr. GRPO: the sum over all tokens divided by `N * C`.
    #[serde(rename = "dr_grpo", alias = "dr-grpo", alias = "constant")]
    DrGrpo,
}

impl Reduction {
    /// Whether the constant `C` enters this reduction.
    pub fn uses_constant(self) -> bool {
        matches!(self, Self::SeqMeanTokenSumNorm | Self::DrGrpo)
    }
}

/// The constant `C` actually used: `constant` if given (must be finite and `> 0`), else
/// the longest row length (at least 1).
pub fn resolve_constant(lengths: &[usize], constant: Option<f64>) -> Result<f64> {
    match constant {
        Some(c) => check::positive("constant", c),
        None => Ok(lengths.iter().copied().max().unwrap_or(0).max(1) as f64),
    }
}

/// The weight `w_i` shared by every token of row `i`, for each row, by arlbook's rules.
///
/// Every reduction gives all tokens of one row the same weight; the policy-loss gradient
/// relies on this (see `policy_loss`).
pub fn row_weights(
    lengths: &[usize],
    reduction: Reduction,
    constant: Option<f64>,
) -> Result<Vec<f64>> {
    row_weights_by(lengths, reduction, constant, Convention::Arlbook)
}

/// verl's guard on a row's length in `seq-mean-token-mean` (`agg_loss`).
const VERL_LENGTH_GUARD: f64 = 1e-8;

/// [`row_weights`] by `convention`'s rules: TRL counts empty rows in the per-sequence
/// means (its `.mean()` runs over the whole batch), verl divides each row by
/// `L_i + 1e-8` (see [`crate::math::convention`]).
pub fn row_weights_by(
    lengths: &[usize],
    reduction: Reduction,
    constant: Option<f64>,
    convention: Convention,
) -> Result<Vec<f64>> {
    let constant = resolve_constant(lengths, constant)?;
    let rows = lengths.len() as f64;
    let non_empty = lengths.iter().filter(|&&l| l > 0).count() as f64;
    let sequences = match convention {
        Convention::Trl => rows,
        Convention::Arlbook | Convention::Verl => non_empty,
    };
    let guard = match convention {
        Convention::Verl => VERL_LENGTH_GUARD,
        Convention::Arlbook | Convention::Trl => 0.0,
    };
    let total: usize = lengths.iter().sum();
    Ok(lengths
        .iter()
        .map(|&len| {
            if len == 0 {
                return 0.0;
            }
            match reduction {
                Reduction::SeqMeanTokenMean => 1.0 / (sequences * (len as f64 + guard)),
                Reduction::TokenMean => 1.0 / total as f64,
                Reduction::SeqMeanTokenSum => 1.0 / sequences,
                Reduction::SeqMeanTokenSumNorm => 1.0 / constant,
                Reduction::DrGrpo => 1.0 / (rows * constant),
            }
        })
        .collect())
}

/// The token weight map `w_ik` with the shape given by `lengths`.
pub fn token_weights(
    lengths: &[usize],
    reduction: Reduction,
    constant: Option<f64>,
) -> Result<Ragged<f64>> {
    let per_row = row_weights(lengths, reduction, constant)?;
    expand_row_weights(lengths, &per_row)
}

/// The token weight map from weights already computed per row: row `i`'s weight
/// repeated on each of its `lengths[i]` tokens.
pub fn expand_row_weights(lengths: &[usize], per_row: &[f64]) -> Result<Ragged<f64>> {
    let values: Vec<f64> = lengths
        .iter()
        .zip(per_row)
        .flat_map(|(&len, &w)| std::iter::repeat_n(w, len))
        .collect();
    Ragged::from_flat(values, lengths)
}

/// A reduced loss and the weights that produced it.
#[derive(Debug, Clone, PartialEq)]
pub struct Reduced {
    /// `sum_ik w_ik l_ik`.
    pub loss: f64,
    /// The weights `w_ik`.
    pub token_weights: Ragged<f64>,
}

/// Reduces `loss_per_token` (field name `field`, all values finite).
pub fn reduce(
    field: &str,
    loss_per_token: &Ragged<f64>,
    reduction: Reduction,
    constant: Option<f64>,
) -> Result<Reduced> {
    loss_per_token.check_finite(field)?;
    let lengths = loss_per_token.lengths();
    let per_row = row_weights(&lengths, reduction, constant)?;
    let loss = weighted_sum(loss_per_token, &per_row);
    if !loss.is_finite() {
        return Err(FieldError::new(field, "the reduced loss overflows f64"));
    }
    Ok(Reduced {
        loss,
        token_weights: token_weights(&lengths, reduction, constant)?,
    })
}

/// `sum_i w_i * sum_k values_ik`: the row sum first, so a row's tokens are added in
/// order before scaling (the same order as the GPU's segmented reduction).
pub fn weighted_sum(values: &Ragged<f64>, row_weights: &[f64]) -> f64 {
    values
        .iter_rows()
        .zip(row_weights)
        .map(|(row, &w)| w * row.iter().sum::<f64>())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SQRT3: f64 = 1.732_050_807_568_877_2;

    /// The article's batch: rewards (1,0,0,0), token counts (2,4,4,6), rho = 1 so each
    /// token's loss is `-A_i`.
    fn article_losses() -> Ragged<f64> {
        let adv = [SQRT3, -1.0 / SQRT3, -1.0 / SQRT3, -1.0 / SQRT3];
        let lens = [2, 4, 4, 6];
        let rows: Vec<Vec<f64>> = adv.iter().zip(lens).map(|(a, l)| vec![-a; l]).collect();
        Ragged::from_rows(&rows)
    }

    #[test]
    fn article_per_sequence_token_mean_gives_loss_zero() {
        let r = reduce("l", &article_losses(), Reduction::SeqMeanTokenMean, None).unwrap();
        assert!(r.loss.abs() < 1e-15);
    }

    #[test]
    fn article_global_token_mean_gives_one_over_two_sqrt3() {
        let r = reduce("l", &article_losses(), Reduction::TokenMean, None).unwrap();
        assert!((r.loss - 1.0 / (2.0 * SQRT3)).abs() < 1e-15);
        assert!((r.loss - 0.2887).abs() < 5e-5);
    }

    /// The third number, 1/(3 sqrt 3), is the constant denominator `N * C` with `C` the
    /// longest length 6: the token sum `-8/sqrt3` over `4 * 6 = 24` (TRL `dr_grpo` with
    /// `max_completion_length = 6`). verl's `seq-mean-token-sum-norm` gives it with
    /// `constant = 24`.
    #[test]
    fn article_constant_denominator_gives_one_over_three_sqrt3() {
        let l = article_losses();
        let r = reduce("l", &l, Reduction::DrGrpo, None).unwrap();
        assert!((r.loss - 1.0 / (3.0 * SQRT3)).abs() < 1e-15);
        assert!((r.loss - 0.1925).abs() < 5e-5);
        let v = reduce("l", &l, Reduction::SeqMeanTokenSumNorm, Some(24.0)).unwrap();
        assert!((v.loss - r.loss).abs() < 1e-15);
        // Per-sequence token sum is none of the three: -(2 sqrt3 - 14/sqrt3)/4 = 2/sqrt3.
        let s = reduce("l", &l, Reduction::SeqMeanTokenSum, None).unwrap();
        assert!((s.loss - 2.0 / SQRT3).abs() < 1e-15);
    }

    #[test]
    fn empty_rows_get_zero_weight_and_do_not_count_as_sequences() {
        let w = token_weights(&[2, 0, 1], Reduction::SeqMeanTokenMean, None).unwrap();
        assert_eq!(w.to_rows(), vec![vec![0.25, 0.25], vec![], vec![0.5]]);
        let d = row_weights(&[2, 0, 1], Reduction::DrGrpo, Some(4.0)).unwrap();
        assert_eq!(d, vec![1.0 / 12.0, 0.0, 1.0 / 12.0]);
        assert_eq!(
            reduce(
                "l",
                &Ragged::from_rows(&[Vec::<f64>::new()]),
                Reduction::TokenMean,
                None
            )
            .unwrap()
            .loss,
            0.0
        );
    }

    #[test]
    fn trl_and_verl_names_parse_as_aliases() {
        let parse = |s: &str| serde_json::from_value::<Reduction>(serde_json::json!(s)).unwrap();
        assert_eq!(parse("grpo"), Reduction::SeqMeanTokenMean);
        assert_eq!(parse("dapo"), Reduction::TokenMean);
        assert_eq!(parse("bnpo"), Reduction::TokenMean);
        assert_eq!(parse("dr_grpo"), Reduction::DrGrpo);
        assert_eq!(
            parse("seq-mean-token-sum-norm"),
            Reduction::SeqMeanTokenSumNorm
        );
        assert!(serde_json::from_value::<Reduction>(serde_json::json!("mean")).is_err());
    }

    #[test]
    fn bad_constant_is_rejected_by_name() {
        let err = row_weights(&[1], Reduction::DrGrpo, Some(0.0)).unwrap_err();
        assert_eq!(err.field, "constant");
    }

    const ALL: [Reduction; 5] = [
        Reduction::SeqMeanTokenMean,
        Reduction::TokenMean,
        Reduction::SeqMeanTokenSum,
        Reduction::SeqMeanTokenSumNorm,
        Reduction::DrGrpo,
    ];

    proptest! {
        /// With every row of length L, all reductions are the plain token mean times a
        /// known scale: 1, 1, L, N L / C, L / C.
        #[test]
        fn reductions_agree_on_equal_lengths_up_to_their_scale(
            n in 1usize..6, len in 1usize..7, c in 0.5f64..20.0,
            seed in proptest::collection::vec(-3.0f64..3.0, 36),
        ) {
            let rows: Vec<Vec<f64>> = (0..n).map(|i| seed[i * 6..i * 6 + len].to_vec()).collect();
            let losses = Ragged::from_rows(&rows);
            let mean = losses.flat().iter().sum::<f64>() / (n * len) as f64;
            let (nf, lf) = (n as f64, len as f64);
            for red in ALL {
                let scale = match red {
                    Reduction::SeqMeanTokenMean | Reduction::TokenMean => 1.0,
                    Reduction::SeqMeanTokenSum => lf,
                    Reduction::SeqMeanTokenSumNorm => nf * lf / c,
                    Reduction::DrGrpo => lf / c,
                };
                let got = reduce("l", &losses, red, Some(c)).unwrap().loss;
                prop_assert!((got - scale * mean).abs() < 1e-12, "{red:?}");
            }
        }

        /// The weight map reproduces the loss and, for the mean reductions, sums to 1.
        #[test]
        fn token_weights_reproduce_the_loss(
            rows in proptest::collection::vec(proptest::collection::vec(-2.0f64..2.0, 0..6), 1..6),
        ) {
            let losses = Ragged::from_rows(&rows);
            prop_assume!(losses.total_len() > 0);
            for red in ALL {
                let r = reduce("l", &losses, red, None).unwrap();
                let direct: f64 = r.token_weights.flat().iter().zip(losses.flat()).map(|(w, l)| w * l).sum();
                prop_assert!((direct - r.loss).abs() < 1e-12);
                if matches!(red, Reduction::SeqMeanTokenMean | Reduction::TokenMean) {
                    let total: f64 = r.token_weights.flat().iter().sum();
                    prop_assert!((total - 1.0).abs() < 1e-12);
                }
            }
        }
    }
}

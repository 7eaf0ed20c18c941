//! The policy loss with one ratio of whole-sequence probabilities per completion and one
//! loss per completion, averaged over every completion: TRL's `RLOOTrainer`.
//!
//! ```text
//! r_i = exp(sum_k (logp_ik - old_logp_ik))            (an empty completion: r_i = 1)
//! l_i = -min(r_i A_i, clip(r_i, 1 - eps_low, 1 + eps_high) A_i)   [dual clip as in ppo]
//! loss = (1 / B) sum_i l_i                             (B counts empty completions too)
//! d loss / d logp_ik = -(1 / B) * d min(...) / d r_i * r_i     (every token of row i)
//! ```
//!
//! Source: TRL `RLOOTrainer._compute_loss` (`logps = (per_token_logps *
//! completion_mask).sum(1)`, `coef_1 = exp(logps - old_logps)`, `per_sequence_loss.mean()`).
//! Its KL penalty is not in the loss: TRL subtracts `beta * sum_k (old - ref)` from the
//! reward (`group-advantages` with `beta` and `sequence_kl`). The ratio of a long
//! completion is the product of all its token ratios, so it leaves the clip band much
//! sooner than a per-token or GSPO ratio; an `exp` that overflows is an error naming the
//! row.
//!
//! In the result, every token of row `i` carries the row's loss `l_i` with weight
//! `1 / (B L_i)`, so the token sums give `(1/B) sum_i l_i` over non-empty rows; an empty
//! completion's `-A_i / B` is in `loss` and `pg_loss` but has no token to carry it. Clip
//! fractions are TRL's: sign-gated, over completions.

use super::{ClipFraction, PolicyLoss, PolicyLossConfig, PolicyLossInput, TokenAdvantages};
use crate::error::{FieldError, Result};
use crate::math::clip::{ClipSide, surrogate_point};

/// The loss for a validated input (see [`super::validate`]); `config.objective` is `ppo`
/// and there is no KL term or multiplier (checked by the caller).
pub fn sequence_sum_loss(
    input: &PolicyLossInput<'_>,
    config: &PolicyLossConfig,
) -> Result<PolicyLoss> {
    let TokenAdvantages::PerSequence(advantages) = input.advantages else {
        return Err(FieldError::new(
            "advantages",
            "a whole-sequence ratio (TRL's RLOO) takes one advantage per completion",
        ));
    };
    let logp = input.logp;
    let rows = logp.rows();
    let batch = rows.max(1) as f64;
    let tokens = logp.total_len();
    let mut token_weights = Vec::with_capacity(tokens);
    let mut per_token = Vec::with_capacity(tokens);
    let mut ratio_per_token = Vec::with_capacity(tokens);
    let mut gradient = Vec::with_capacity(tokens);
    let (mut loss, mut low, mut high, mut dual) = (0.0, 0usize, 0usize, 0usize);
    let mut ppo_kl = 0.0;
    for (i, (row, old)) in logp.iter_rows().zip(input.old_logp.iter_rows()).enumerate() {
        let log_ratio: f64 = row.iter().zip(old).map(|(a, b)| a - b).sum();
        ppo_kl -= log_ratio;
        let ratio = log_ratio.exp();
        if !ratio.is_finite() {
            return Err(FieldError::new(
                format!("logp[{i}]"),
                "exp(sum of logp - old_logp) overflows f64; the policies are too far apart",
            ));
        }
        let point = surrogate_point(ratio, advantages[i], &config.clip);
        match point.side {
            ClipSide::ClippedLow => low += 1,
            ClipSide::ClippedHigh => high += 1,
            ClipSide::DualClipped => dual += 1,
            ClipSide::Unclipped => {}
        }
        let row_loss = -point.objective;
        loss += row_loss / batch;
        let slope = -point.d_objective_d_ratio * ratio / batch;
        let weight = 1.0 / (batch * row.len() as f64);
        for _ in row {
            token_weights.push(weight);
            per_token.push(row_loss);
            ratio_per_token.push(ratio);
            gradient.push(slope);
        }
    }
    if !loss.is_finite() {
        return Err(FieldError::new(
            "logp",
            "the loss overflows f64 for these inputs (ratios too large)",
        ));
    }
    let fraction = |n: usize| n as f64 / batch;
    let valid = tokens.max(1) as f64;
    let zeros = logp.with_values(vec![0.0; tokens])?;
    Ok(PolicyLoss {
        loss,
        pg_loss: loss,
        kl: 0.0,
        token_weights: logp.with_values(token_weights)?,
        kl_token_weights: None,
        kl_per_token: zeros,
        ppo_kl: ppo_kl / valid,
        convention: config.convention,
        pg_loss_per_token: logp.with_values(per_token)?,
        clip_fraction: ClipFraction {
            low: fraction(low),
            high: fraction(high),
            dual: fraction(dual),
            total: fraction(low + high + dual),
        },
        ratio_mean: ratio_per_token.iter().sum::<f64>() / valid,
        ratio_max: ratio_per_token.iter().copied().fold(0.0, f64::max),
        ratio: logp.with_values(ratio_per_token)?,
        gradient: logp.with_values(gradient)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Ragged;
    use crate::math::policy_loss::{RatioLevel, policy_loss};

    fn config() -> PolicyLossConfig {
        PolicyLossConfig {
            ratio_level: RatioLevel::SequenceSum,
            ..PolicyLossConfig::default()
        }
    }

    fn loss_at(logp: &Ragged<f64>, old: &Ragged<f64>, advantages: &[f64]) -> PolicyLoss {
        let input = PolicyLossInput {
            logp,
            old_logp: old,
            ref_logp: None,
            advantages: TokenAdvantages::PerSequence(advantages),
        };
        policy_loss(&input, &config()).unwrap()
    }

    #[test]
    fn an_empty_completion_counts_with_ratio_one() {
        let logp = Ragged::from_rows(&[vec![-1.0, -0.5], vec![]]);
        let old = Ragged::from_rows(&[vec![-1.0, -0.5], vec![]]);
        let out = loss_at(&logp, &old, &[0.4, 1.5]);
        // Both rows at ratio 1: (-0.4 - 1.5) / 2.
        assert!((out.loss + 0.95).abs() < 1e-15);
    }

    #[test]
    fn gradient_is_the_derivative_of_the_loss() {
        let logp = Ragged::from_rows(&[vec![-1.0, -0.7, -0.2], vec![-0.3], vec![-2.0, -0.1]]);
        let old = Ragged::from_rows(&[vec![-1.05, -0.72, -0.2], vec![-0.1], vec![-1.9, -0.15]]);
        let advantages = [0.8, -0.6, 0.3];
        let out = loss_at(&logp, &old, &advantages);
        let flat = logp.flat().to_vec();
        for (j, analytic) in out.gradient.flat().iter().enumerate() {
            let at = |d: f64| {
                let mut moved = flat.clone();
                moved[j] += d;
                loss_at(&logp.with_values(moved).unwrap(), &old, &advantages).loss
            };
            let numeric = (at(1e-7) - at(-1e-7)) / 2e-7;
            assert!(
                (numeric - analytic).abs() < 1e-7,
                "{j}: {numeric} vs {analytic}"
            );
        }
    }

    #[test]
    fn a_kl_term_is_refused_by_name() {
        let logp = Ragged::from_rows(&[vec![-1.0]]);
        let input = PolicyLossInput {
            logp: &logp,
            old_logp: &logp,
            ref_logp: Some(&logp),
            advantages: TokenAdvantages::PerSequence(&[1.0]),
        };
        let cfg = PolicyLossConfig {
            beta: 0.1,
            ..config()
        };
        assert_eq!(policy_loss(&input, &cfg).unwrap_err().field, "beta");
    }
}

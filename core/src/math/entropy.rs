//! The entropy bonus of a policy loss: each token's entropy from its logits, reduced
//! with weights, subtracted from the loss times a coefficient.
//!
//! ```text
//! p = softmax(z),  H = -sum_j p_j log p_j,  dH/dz_j = -p_j (log p_j + H)
//! loss += -coef * sum_ik u_ik H_ik,   d loss / d z_ikj = coef * u_ik * p_j (log p_j + H_ik)
//! ```
//!
//! The weights `u` are the reduction's: verl reduces the entropy by `loss_agg_mode`
//! (`agg_loss(entropy, response_mask, loss_agg_mode)` in `dp_actor`), TRL by the mean
//! over all tokens of the batch whatever its `loss_type` (`GRPOTrainer._compute_loss`,
//! the entropy bonus). Sources: verl `compute_entropy_loss` and `entropy_from_logits`,
//! TRL `entropy_from_logits` and `entropy_coef`.

use crate::Ragged;
use crate::error::{FieldError, Result};

/// The entropy term of a batch.
#[derive(Debug, Clone, PartialEq)]
pub struct EntropyTerm {
    /// `H_ik` in nats, shaped like the token weights.
    pub per_token: Ragged<f64>,
    /// `sum_ik u_ik H_ik`.
    pub reduced: f64,
    /// `d (-coef * reduced) / d z_ikj`, `[row][token][vocabulary]`.
    pub gradient: Vec<Vec<Vec<f64>>>,
}

/// Entropy of `softmax(logits)` and `-p_j (log p_j + H)`, its slope in each logit.
pub fn entropy_and_slope(logits: &[f64]) -> (f64, Vec<f64>) {
    let max = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let shifted: Vec<f64> = logits.iter().map(|z| z - max).collect();
    let log_sum = shifted.iter().map(|s| s.exp()).sum::<f64>().ln();
    let log_p: Vec<f64> = shifted.iter().map(|s| s - log_sum).collect();
    let entropy: f64 = -log_p.iter().map(|l| l.exp() * l).sum::<f64>();
    let slope = log_p.iter().map(|l| -l.exp() * (l + entropy)).collect();
    (entropy, slope)
}

/// The entropy term for `logits` (`[row][token][vocabulary]`, shaped like `weights`),
/// reduced with `weights` and scaled by `coef` in the gradient.
pub fn entropy_term(
    logits: &[Vec<Vec<f64>>],
    weights: &Ragged<f64>,
    coef: f64,
) -> Result<EntropyTerm> {
    if logits.len() != weights.rows() {
        return Err(FieldError::new(
            "logits",
            format!("has {} rows; logp has {}", logits.len(), weights.rows()),
        ));
    }
    let mut per_token = Vec::with_capacity(weights.total_len());
    let mut gradient = Vec::with_capacity(logits.len());
    let mut reduced = 0.0;
    for (i, (row, w)) in logits.iter().zip(weights.iter_rows()).enumerate() {
        if row.len() != w.len() {
            return Err(FieldError::new(
                format!("logits[{i}]"),
                format!("has {} tokens; logp[{i}] has {}", row.len(), w.len()),
            ));
        }
        let mut row_gradient = Vec::with_capacity(row.len());
        for (k, (z, &u)) in row.iter().zip(w).enumerate() {
            if z.is_empty() || z.iter().any(|v| !v.is_finite()) {
                return Err(FieldError::new(
                    format!("logits[{i}][{k}]"),
                    "must be a non-empty list of finite logits",
                ));
            }
            let (h, slope) = entropy_and_slope(z);
            per_token.push(h);
            reduced += u * h;
            row_gradient.push(slope.iter().map(|s| -coef * u * s).collect());
        }
        gradient.push(row_gradient);
    }
    Ok(EntropyTerm {
        per_token: weights.with_values(per_token)?,
        reduced,
        gradient,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_logits_have_log_v_nats_and_no_slope() {
        let (h, slope) = entropy_and_slope(&[0.3; 5]);
        assert!((h - 5f64.ln()).abs() < 1e-15);
        assert!(slope.iter().all(|s| s.abs() < 1e-15));
    }

    #[test]
    fn slope_is_the_derivative_of_the_entropy() {
        let z = [0.5, -1.0, 2.0, 0.1];
        let (_, slope) = entropy_and_slope(&z);
        for j in 0..z.len() {
            let at = |d: f64| {
                let mut moved = z;
                moved[j] += d;
                entropy_and_slope(&moved).0
            };
            let numeric = (at(1e-6) - at(-1e-6)) / 2e-6;
            assert!(
                (numeric - slope[j]).abs() < 1e-8,
                "{j}: {numeric} vs {}",
                slope[j]
            );
        }
    }

    #[test]
    fn shapes_that_do_not_match_the_weights_are_named() {
        let w = Ragged::from_rows(&[vec![0.5, 0.5]]);
        let err = entropy_term(&[vec![vec![0.0, 1.0]]], &w, 0.1).unwrap_err();
        assert_eq!(err.field, "logits[0]");
    }
}

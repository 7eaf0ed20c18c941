//! Importance weights against the sampler: when the engine that sampled a batch (or an
//! older snapshot of the policy) gives its tokens other probabilities than the policy
//! the update starts from, each token's surrogate term is multiplied by
//!
//! ```text
//! rho_ik = exp(old_ik - sampling_ik)                 (token modes)
//! rho_ik = exp(sum_k (old_ik - sampling_ik))         (sequence modes, one per row)
//! truncate: min(max(rho, clip_min), clip_max)        mask: rho, or 0 outside [clip_min, clip_max]
//! ```
//!
//! `old` are the log-probabilities under the policy the update's ratio is taken against
//! (TRL's `old_per_token_logps`, recomputed by the trainer) and `sampling` the sampler's
//! (vLLM's). Source: TRL `GRPOTrainer` (`vllm_importance_sampling_correction`,
//! `vllm_importance_sampling_mode`, `_min`, `_max`; default mode `sequence_mask`, upper
//! bound 3), after "Your efficient RL framework secretly brings you off-policy RL
//! training" (truncated importance sampling). verl passes precomputed weights
//! (`rollout_is_weights`), which the compute API takes as they are.

use serde::{Deserialize, Serialize};

use crate::Ragged;
use crate::error::{FieldError, Result, check};

/// TRL's default upper bound.
pub const DEFAULT_CLIP_MAX: f64 = 3.0;

/// How the ratio is formed and bounded (TRL's `vllm_importance_sampling_mode` values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SamplerCorrectionMode {
    /// Per-token ratio, clamped to the bounds.
    TokenTruncate,
    /// Per-token ratio, 0 outside the bounds.
    TokenMask,
    /// Per-sequence ratio (the row sum of log-ratios), clamped.
    SequenceTruncate,
    /// Per-sequence ratio, 0 outside the bounds (TRL's default).
    SequenceMask,
}

/// A mode and its bounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SamplerCorrection {
    /// How the ratio is formed and bounded.
    pub mode: SamplerCorrectionMode,
    /// Lower bound, if any.
    pub clip_min: Option<f64>,
    /// Upper bound.
    pub clip_max: f64,
}

impl SamplerCorrection {
    /// The ratio after the mode's bounds: clamped (truncate modes) or 0 outside them
    /// (mask modes).
    pub fn bound(&self, ratio: f64) -> f64 {
        let truncate = matches!(
            self.mode,
            SamplerCorrectionMode::TokenTruncate | SamplerCorrectionMode::SequenceTruncate
        );
        if truncate {
            self.clip_min
                .map_or(ratio, |m| ratio.max(m))
                .min(self.clip_max)
        } else if self.clip_min.is_some_and(|m| ratio < m) || ratio > self.clip_max {
            0.0
        } else {
            ratio
        }
    }
}

/// The weights of every token of `old` (shaped like it) against `sampling` (the field
/// named `sampling_name`, same shape).
pub fn sampler_weights(
    old: &Ragged<f64>,
    sampling: &Ragged<f64>,
    sampling_name: &str,
    correction: &SamplerCorrection,
) -> Result<Ragged<f64>> {
    old.check_same_shape("old_logp", sampling_name, sampling)?;
    check::finite("clip_max", correction.clip_max)?;
    if let Some(min) = correction.clip_min {
        check::finite("clip_min", min)?;
        if min > correction.clip_max {
            return Err(FieldError::new("clip_min", "is above clip_max"));
        }
    }
    let sequence = matches!(
        correction.mode,
        SamplerCorrectionMode::SequenceMask | SamplerCorrectionMode::SequenceTruncate
    );
    let mut values = Vec::with_capacity(old.total_len());
    for (o, s) in old.iter_rows().zip(sampling.iter_rows()) {
        let diffs = o.iter().zip(s).map(|(a, b)| a - b);
        if sequence {
            let ratio = correction.bound(diffs.sum::<f64>().exp());
            values.extend(std::iter::repeat_n(ratio, o.len()));
        } else {
            values.extend(diffs.map(|d| correction.bound(d.exp())));
        }
    }
    old.with_values(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_caps_and_masking_zeroes() {
        let old = Ragged::from_rows(&[vec![-0.1, -2.0], vec![-1.0]]);
        let sampling = Ragged::from_rows(&[vec![-0.1, -4.0], vec![-0.5]]);
        let at = |mode| {
            let c = SamplerCorrection {
                mode,
                clip_min: None,
                clip_max: 3.0,
            };
            sampler_weights(&old, &sampling, "sampling_logp", &c)
                .unwrap()
                .flat()
                .to_vec()
        };
        let e2 = 2f64.exp();
        let half = (-0.5f64).exp();
        assert_eq!(
            at(SamplerCorrectionMode::TokenTruncate),
            vec![1.0, 3.0, half]
        );
        assert_eq!(at(SamplerCorrectionMode::TokenMask), vec![1.0, 0.0, half]);
        assert_eq!(
            at(SamplerCorrectionMode::SequenceTruncate),
            vec![3.0, 3.0, half]
        );
        assert!(e2 > 3.0);
        assert_eq!(
            at(SamplerCorrectionMode::SequenceMask),
            vec![0.0, 0.0, half]
        );
    }
}

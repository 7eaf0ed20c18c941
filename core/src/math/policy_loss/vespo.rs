//! VESPO's policy loss: the true sequence importance ratio reshaped by a gamma kernel
//! into a detached coefficient on `A * logp`.
//!
//! ```text
//! S_i   = clamp(sum_k clamp(logp_ik - old_ik, -20, 20) + sum_k clamp(log max(m_ik, 1e-8), -20, 20), -20, 20)
//! w_i   = exp(S_i)                           (m: importance weights against the sampler, if any)
//! phi_i = exp(lam + k log max(w_i, 1e-8) - lam w_i),   (k, lam) = (k_pos, lam_pos) if A_i >= 0 else (k_neg, lam_neg)
//! l_ik  = -sg[phi_i] A_ik logp_ik,   loss = sum_ik w'_ik l_ik + beta sum_ik w'_ik kl_ik
//! ```
//!
//! `phi(1) = 1`, and `phi` peaks at `w = k / lam`, falling to 0 for sequences the
//! current policy finds far likelier or far less likely than the sampler did; its
//! gradient is `-w'_ik phi_i A_ik`. `lam` is floored at 1e-4 and a non-finite `phi`
//! becomes 0, as the reference code does; `A_i` is the row's first advantage. The
//! reduction weights `w'` are the requested reduction's (the reference code passes
//! `loss_agg_mode` through). Defaults (the reference code's): `k_pos = 2`,
//! `lam_pos = 3`, `k_neg = 3`, `lam_neg = 2`.
//!
//! Source: VESPO (arXiv 2602.10693), `compute_policy_loss_vespo` in its verl recipe
//! (`loss_mode = "vespo"`, `policy_loss.vespo.{k_pos, lambda_pos, k_neg, lambda_neg}`).
//! Its `approx_kl` metric, reported here as `ppo_kl`, is the mean over rows of
//! `-sum_k x_ik / max(L_i, 1)`.

use serde::{Deserialize, Serialize};

use super::{ClipFraction, PolicyLoss, PolicyLossConfig, PolicyLossInput, TokenAdvantages};
use crate::Ragged;
use crate::error::{FieldError, Result};
use crate::math::kl::kl_point;
use crate::math::reduction::row_weights_by;

/// The clamp on each log term and on the summed sequence log-ratio.
const LOG_CLAMP: f64 = 20.0;
/// TRL's lower clamp on the log terms, `ln 1e-8` (`get_gamma_weights`).
const TRL_LOWER_LOG_CLAMP: f64 = -18.420_680_743_952_367;

/// One position's term of TRL's summed log importance ratio in `get_gamma_weights`:
/// `clamp(ln rho, ln 1e-8, 20)` (`rho = 0` gives `ln 1e-8`).
pub fn trl_log_ratio_term(ratio: f64) -> f64 {
    ratio.max(1e-8).ln().clamp(TRL_LOWER_LOG_CLAMP, LOG_CLAMP)
}

/// The gamma kernel's shape for each advantage sign.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct VespoKernel {
    /// `k` for `A >= 0`, `>= 0`.
    pub k_pos: f64,
    /// `lam` for `A >= 0`, `>= 0` (floored at 1e-4).
    pub lambda_pos: f64,
    /// `k` for `A < 0`, `>= 0`.
    pub k_neg: f64,
    /// `lam` for `A < 0`, `>= 0` (floored at 1e-4).
    pub lambda_neg: f64,
}

impl Default for VespoKernel {
    fn default() -> Self {
        Self {
            k_pos: 2.0,
            lambda_pos: 3.0,
            k_neg: 3.0,
            lambda_neg: 2.0,
        }
    }
}

impl VespoKernel {
    /// Every parameter finite and `>= 0`, named under `vespo.`.
    pub fn validate(&self) -> Result<()> {
        for (name, value) in [
            ("vespo.k_pos", self.k_pos),
            ("vespo.lambda_pos", self.lambda_pos),
            ("vespo.k_neg", self.k_neg),
            ("vespo.lambda_neg", self.lambda_neg),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(FieldError::new(name, "must be finite and >= 0"));
            }
        }
        Ok(())
    }

    /// `phi(w)` for a row whose advantage is `advantage`.
    pub fn phi(&self, w: f64, advantage: f64) -> f64 {
        let (k, lam) = if advantage >= 0.0 {
            (self.k_pos, self.lambda_pos)
        } else {
            (self.k_neg, self.lambda_neg)
        };
        let lam = lam.max(1e-4);
        let phi = (lam + k * w.max(1e-8).ln() - lam * w).exp();
        if phi.is_finite() { phi } else { 0.0 }
    }

    /// TRL's `phi` from the clamped log-ratio `log_w`: `exp(lam + k log_w - lam e^{log_w})`
    /// (0 where that is not finite), `(k, lam)` by the sign of `advantage`.
    pub fn phi_of_log(&self, log_w: f64, advantage: f64) -> f64 {
        let (k, lam) = if advantage >= 0.0 {
            (self.k_pos, self.lambda_pos)
        } else {
            (self.k_neg, self.lambda_neg)
        };
        let lam = lam.max(1e-4);
        let phi = (lam + k * log_w - lam * log_w.exp()).exp();
        if phi.is_finite() { phi } else { 0.0 }
    }
}

/// How a library's VESPO departs from the reference recipe's ([`vespo_loss_with`]).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct VespoRules<'a> {
    /// TRL's `get_gamma_weights`: the log terms and the summed log-ratio are clamped
    /// below at `ln 1e-8` (the recipe: -20, with `ln max(w, 1e-8)` in the kernel), the
    /// kernel reads that clamped log directly, and each token takes `(k, lam)` from its
    /// own advantage's sign (the recipe: the row's first advantage).
    pub trl: bool,
    /// A log-ratio added to each row's sum before the final clamp: TRL's log importance
    /// ratio summed over the padded positions of a padded batch (`get_gamma_weights`
    /// sums it over every position).
    pub row_log_offsets: Option<&'a [f64]>,
    /// Multipliers of each token's loss term applied after the kernel, shaped like
    /// `logp` (TRL's off-policy mask, which multiplies `per_token_loss`).
    pub loss_scale: Option<&'a Ragged<f64>>,
}

/// The loss for a validated input; `pg_scale` are the importance weights against the
/// sampler, folded into `w` in log space.
pub fn vespo_loss(
    input: &PolicyLossInput<'_>,
    config: &PolicyLossConfig,
    kernel: &VespoKernel,
    pg_scale: Option<&Ragged<f64>>,
) -> Result<PolicyLoss> {
    vespo_loss_with(input, config, kernel, pg_scale, VespoRules::default())
}

/// [`vespo_loss`] under `rules`: with `rules.trl`, TRL's `get_gamma_weights` and
/// `_compute_loss` (`loss_type = "vespo"`):
///
/// ```text
/// S_i   = clamp(sum_k clamp(x_ik, -20, 20) + sum_t clamp(ln rho_it, ln 1e-8, 20), ln 1e-8, 20)
/// phi_ik = exp(lam + k S_i - lam e^{S_i}),  (k, lam) by the sign of A_ik
/// l_ik  = -sg[phi_ik] A_ik logp_ik * mask_i,   kl_ik * exp(x_ik) under use_bias_correction_kl
/// ```
///
/// where `rho` is the vLLM importance ratio (`sampler`), summed over every position of
/// the padded row (`rules.row_log_offsets` carries the padded ones) and not multiplied
/// into the loss.
pub fn vespo_loss_with(
    input: &PolicyLossInput<'_>,
    config: &PolicyLossConfig,
    kernel: &VespoKernel,
    sampler: Option<&Ragged<f64>>,
    rules: VespoRules<'_>,
) -> Result<PolicyLoss> {
    kernel.validate()?;
    let logp = input.logp;
    let lengths: Vec<usize> = logp.iter_rows().map(<[f64]>::len).collect();
    let row_weights = row_weights_by(
        &lengths,
        config.reduction,
        config.constant,
        config.convention,
    )?;
    let tokens = logp.total_len();
    let advantage = |i: usize, k: usize| match input.advantages {
        TokenAdvantages::PerSequence(a) => a[i],
        TokenAdvantages::PerToken(a) => a.row(i)[k],
    };
    let lower = if rules.trl {
        TRL_LOWER_LOG_CLAMP
    } else {
        -LOG_CLAMP
    };
    let mut weights = Vec::with_capacity(tokens);
    let mut per_token = Vec::with_capacity(tokens);
    let mut kl_per_token = Vec::with_capacity(tokens);
    let mut ratio = Vec::with_capacity(tokens);
    let mut gradient = Vec::with_capacity(tokens);
    let (mut pg_loss, mut kl, mut approx_kl) = (0.0, 0.0, 0.0);
    for (i, (row, old)) in logp.iter_rows().zip(input.old_logp.iter_rows()).enumerate() {
        let log_ratio: f64 = row
            .iter()
            .zip(old)
            .map(|(a, b)| (a - b).clamp(-LOG_CLAMP, LOG_CLAMP))
            .sum();
        approx_kl -= log_ratio / row.len().max(1) as f64;
        let log_sampler: f64 = sampler.map_or(0.0, |m| {
            m.row(i)
                .iter()
                .map(|&w| w.max(1e-8).ln().clamp(lower, LOG_CLAMP))
                .sum()
        });
        let offset = rules.row_log_offsets.map_or(0.0, |o| o[i]);
        let log_w = (log_ratio + log_sampler + offset).clamp(lower, LOG_CLAMP);
        let w = log_w.exp();
        let reference = input.ref_logp.map(|r| r.row(i));
        for (k, &lp) in row.iter().enumerate() {
            let u = row_weights[i];
            let a = advantage(i, k);
            let phi = if rules.trl {
                kernel.phi_of_log(log_w, a)
            } else {
                kernel.phi(w, advantage(i, 0))
            };
            let scale = rules.loss_scale.map_or(1.0, |m| m.row(i)[k]);
            let term = -phi * a * lp * scale;
            let (kl_value, kl_slope) = match reference {
                Some(r) if config.beta > 0.0 => {
                    let point = kl_point(lp, r[k], config.kl_estimator, config.kl_clamp);
                    if config.kl_bias_correction {
                        // TRL multiplies the token's KL by its ratio exp(x), the slope
                        // going through the ratio too.
                        let q = (lp - old[k]).exp();
                        (point.value * q, (point.d_value_d_logp + point.value) * q)
                    } else {
                        (point.value, point.d_value_d_logp)
                    }
                }
                _ => (0.0, 0.0),
            };
            pg_loss += u * term;
            kl += u * kl_value;
            weights.push(u);
            per_token.push(term);
            kl_per_token.push(kl_value);
            ratio.push(w);
            gradient.push(u * (-phi * a * scale + config.beta * kl_slope));
        }
    }
    let loss = pg_loss + config.beta * kl;
    let finite = loss.is_finite() && gradient.iter().all(|g| g.is_finite());
    if !finite {
        return Err(FieldError::new(
            "logp",
            "the loss overflows f64 for these inputs",
        ));
    }
    let valid = tokens.max(1) as f64;
    Ok(PolicyLoss {
        loss,
        pg_loss,
        kl,
        token_weights: logp.with_values(weights)?,
        kl_token_weights: None,
        kl_per_token: logp.with_values(kl_per_token)?,
        ppo_kl: approx_kl / logp.rows().max(1) as f64,
        convention: config.convention,
        pg_loss_per_token: logp.with_values(per_token)?,
        clip_fraction: ClipFraction::default(),
        ratio_mean: ratio.iter().sum::<f64>() / valid,
        ratio_max: ratio.iter().copied().fold(0.0, f64::max),
        ratio: logp.with_values(ratio)?,
        gradient: logp.with_values(gradient)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phi_is_one_at_one_and_peaks_at_k_over_lambda() {
        let kernel = VespoKernel::default();
        assert!((kernel.phi(1.0, 0.5) - 1.0).abs() < 1e-15);
        assert!((kernel.phi(1.0, -0.5) - 1.0).abs() < 1e-15);
        let peak = kernel.k_pos / kernel.lambda_pos;
        for w in [0.3, 0.5, 0.9, 1.2] {
            assert!(kernel.phi(w, 1.0) <= kernel.phi(peak, 1.0) + 1e-15);
        }
    }

    #[test]
    fn negative_shape_parameters_are_named() {
        let kernel = VespoKernel {
            lambda_neg: -1.0,
            ..VespoKernel::default()
        };
        assert_eq!(kernel.validate().unwrap_err().field, "vespo.lambda_neg");
    }
}

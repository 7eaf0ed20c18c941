//! What a convention ([`crate::math::convention`]) changes around the token pass, and
//! the per-token multipliers of the surrogate term.
//!
//! Before the pass, [`plan`] picks the row weights of the surrogate and of the KL term
//! (verl reduces GSPO's and SAPO's surrogate by `seq-mean-token-mean` whatever
//! `loss_agg_mode` says, while its KL term keeps `loss_agg_mode`), the log-ratio clamp
//! (verl: `[-20, 20]` per token, `<= 10` for GSPO's sequence log-ratio) and the
//! advantages times the multipliers `m_ik >= 0` (importance weights against the sampler,
//! off-policy masks). Scaling the advantage scales every objective's loss and gradient
//! by `m_ik`, the sign and so the clip side staying the same, which is how TRL
//! (`per_token_loss * importance_sampling_ratio`) and verl (`pg_losses *
//! rollout_is_weights`) apply them.
//!
//! After the pass, [`finish`] reweights the KL term (and multiplies it by the importance
//! ratio under TRL's `use_bias_correction_kl`, the slope going through the ratio too), removes the slope of clamped
//! log-ratios (`torch.clamp` passes no gradient outside its bounds; CISPO's gradient does
//! not go through the ratio, so it keeps it), gives TRL's exact sequence-level gradient
//! when advantages are per token (the mean of the row's token slopes, where verl uses
//! GSPO's token form), and counts clip fractions and `ppo_kl` the way the library does.

use super::{ClipFraction, Objective, PolicyLoss, PolicyLossConfig, PolicyLossInput, RatioLevel};
use super::{TokenAdvantages, row_weights_by};
use crate::Ragged;
use crate::error::{FieldError, Result};
use crate::math::convention::Convention;
use crate::math::kl::kl_point;
use crate::math::reduction::{Reduction, expand_row_weights};

/// verl's clamp on a token's log-ratio (`compute_policy_loss_vanilla`, `_sapo`, `_cispo`).
pub const VERL_TOKEN_LOG_RATIO_LIMIT: f64 = 20.0;
/// verl's upper clamp on GSPO's sequence log-ratio (`compute_policy_loss_gspo`).
pub const VERL_SEQUENCE_LOG_RATIO_LIMIT: f64 = 10.0;
/// verl's guard in `masked_mean`.
const VERL_MEAN_GUARD: f64 = 1e-8;

/// The decisions taken before the token pass.
pub struct Plan {
    /// Row weights of the surrogate term (and of the KL term inside the pass).
    pub pg_weights: Vec<f64>,
    /// Row weights of the KL term where they differ from `pg_weights`.
    pub kl_weights: Option<Vec<f64>>,
    /// The clamp on each token's log-ratio (infinite for none).
    pub token_log_ratio_limit: f64,
    /// The upper clamp on a sequence log-ratio (infinite for none).
    pub sequence_log_ratio_limit: f64,
    /// The advantages times the multipliers, per token, when there are multipliers.
    pub scaled_advantages: Option<Ragged<f64>>,
}

impl Plan {
    /// The input the token pass reads: the scaled advantages when there are any.
    pub fn pass_input<'a>(&'a self, input: &PolicyLossInput<'a>) -> PolicyLossInput<'a> {
        match &self.scaled_advantages {
            Some(scaled) => PolicyLossInput {
                advantages: TokenAdvantages::PerToken(scaled),
                ..*input
            },
            None => *input,
        }
    }

    /// Whether any token's ratio is clamped, so that the pass's numbers need [`finish`]'s
    /// slope correction (the GPU leaves such batches to the CPU).
    pub fn clamps_any(&self, input: &PolicyLossInput<'_>, config: &PolicyLossConfig) -> bool {
        match config.ratio_level {
            RatioLevel::Token => {
                self.token_log_ratio_limit.is_finite() && {
                    let limit = self.token_log_ratio_limit;
                    let pairs = input.logp.flat().iter().zip(input.old_logp.flat());
                    pairs.into_iter().any(|(a, b)| (a - b).abs() > limit)
                }
            }
            RatioLevel::Sequence => {
                self.sequence_log_ratio_limit.is_finite()
                    && mean_log_ratios(input)
                        .iter()
                        .any(|&x| x > self.sequence_log_ratio_limit)
            }
            RatioLevel::SequenceSum => false,
        }
    }
}

/// The reduction verl applies to the surrogate term.
fn verl_pg_reduction(config: &PolicyLossConfig) -> Reduction {
    let forced = config.objective == Objective::Sapo
        || (config.objective == Objective::Ppo && config.ratio_level == RatioLevel::Sequence);
    if forced {
        Reduction::SeqMeanTokenMean
    } else {
        config.reduction
    }
}

/// The row weights, clamps and scaled advantages for `input` under `config`;
/// `pg_scale` holds the multipliers (shaped like `logp`, finite, `>= 0`, checked by the
/// caller, which knows their field name).
pub fn plan(
    input: &PolicyLossInput<'_>,
    config: &PolicyLossConfig,
    pg_scale: Option<&Ragged<f64>>,
) -> Result<Plan> {
    let lengths = input.logp.lengths();
    let convention = config.convention;
    let kl_weights = row_weights_by(&lengths, config.reduction, config.constant, convention)?;
    let (pg_weights, kl_weights) = match convention {
        Convention::Verl if verl_pg_reduction(config) != config.reduction => {
            let pg = row_weights_by(
                &lengths,
                verl_pg_reduction(config),
                config.constant,
                convention,
            )?;
            (pg, Some(kl_weights))
        }
        _ => (kl_weights, None),
    };
    let verl = convention == Convention::Verl;
    let scaled_advantages = match pg_scale {
        None => None,
        Some(scale) => {
            input
                .logp
                .check_same_shape("logp", "importance weights", scale)?;
            let mut values = Vec::with_capacity(scale.total_len());
            for (i, row) in scale.iter_rows().enumerate() {
                for (k, &m) in row.iter().enumerate() {
                    let advantage = match input.advantages {
                        TokenAdvantages::PerSequence(a) => a[i],
                        TokenAdvantages::PerToken(a) => a.row(i)[k],
                    };
                    values.push(advantage * m);
                }
            }
            Some(input.logp.with_values(values)?)
        }
    };
    Ok(Plan {
        pg_weights,
        kl_weights,
        token_log_ratio_limit: if verl && config.ratio_level == RatioLevel::Token {
            VERL_TOKEN_LOG_RATIO_LIMIT
        } else {
            f64::INFINITY
        },
        sequence_log_ratio_limit: if verl && config.ratio_level == RatioLevel::Sequence {
            VERL_SEQUENCE_LOG_RATIO_LIMIT
        } else {
            f64::INFINITY
        },
        scaled_advantages,
    })
}

/// Each row's mean log-ratio `mean_k (logp - old_logp)` (0 for an empty row).
pub fn mean_log_ratios(input: &PolicyLossInput<'_>) -> Vec<f64> {
    input
        .logp
        .iter_rows()
        .zip(input.old_logp.iter_rows())
        .map(|(row, old)| {
            if row.is_empty() {
                return 0.0;
            }
            row.iter().zip(old).map(|(a, b)| a - b).sum::<f64>() / row.len() as f64
        })
        .collect()
}

/// The advantage of token `k` of row `i`.
fn advantage_at(advantages: TokenAdvantages<'_>, i: usize, k: usize) -> f64 {
    match advantages {
        TokenAdvantages::PerSequence(a) => a[i],
        TokenAdvantages::PerToken(a) => a.row(i)[k],
    }
}

/// Applies the convention's corrections to the pass's result `out`, computed with
/// `plan` from the original `input` (unscaled advantages).
pub fn finish(
    plan: &Plan,
    input: &PolicyLossInput<'_>,
    config: &PolicyLossConfig,
    out: &mut PolicyLoss,
) -> Result<()> {
    let convention = config.convention;
    let beta = if input.ref_logp.is_some() {
        config.beta
    } else {
        0.0
    };
    let trl_sequence_per_token = convention == Convention::Trl
        && config.ratio_level == RatioLevel::Sequence
        && matches!(input.advantages, TokenAdvantages::PerToken(_));
    let clamps = plan.clamps_any(input, config)
        && matches!(config.objective, Objective::Ppo | Objective::Sapo);
    let bias_correction = config.kl_bias_correction && beta > 0.0;
    if plan.kl_weights.is_some() || clamps || trl_sequence_per_token || bias_correction {
        regrade(
            plan,
            input,
            config,
            beta,
            clamps,
            trl_sequence_per_token,
            out,
        )?;
    }
    if convention != Convention::Arlbook {
        out.clip_fraction = library_clip_fraction(input, config, out);
    }
    out.ppo_kl = ppo_kl(plan, input, config);
    out.convention = convention;
    Ok(())
}

/// Rebuilds the gradient as surrogate part plus KL part with their own weights, and the
/// KL total with the KL weights.
fn regrade(
    plan: &Plan,
    input: &PolicyLossInput<'_>,
    config: &PolicyLossConfig,
    beta: f64,
    clamps: bool,
    trl_sequence_per_token: bool,
    out: &mut PolicyLoss,
) -> Result<()> {
    let kl_weights = plan.kl_weights.as_deref().unwrap_or(&plan.pg_weights);
    let sequence_log_ratios = mean_log_ratios(input);
    let mut gradient = Vec::with_capacity(out.gradient.total_len());
    let mut kl_values = Vec::new();
    for (i, row) in out.gradient.iter_rows().enumerate() {
        let slope_of_kl = |k: usize| -> f64 {
            input.ref_logp.map_or(0.0, |r| {
                kl_point(
                    input.logp.row(i)[k],
                    r.row(i)[k],
                    config.kl_estimator,
                    config.kl_clamp,
                )
                .d_value_d_logp
            })
        };
        let mut surrogate: Vec<f64> = row
            .iter()
            .enumerate()
            .map(|(k, &g)| g - beta * plan.pg_weights[i] * slope_of_kl(k))
            .collect();
        if clamps {
            let row_clamped = sequence_log_ratios[i] > plan.sequence_log_ratio_limit;
            for (k, g) in surrogate.iter_mut().enumerate() {
                let x = input.logp.row(i)[k] - input.old_logp.row(i)[k];
                if row_clamped || x.abs() > plan.token_log_ratio_limit {
                    *g = 0.0;
                }
            }
        }
        if trl_sequence_per_token && !surrogate.is_empty() {
            let mean = surrogate.iter().sum::<f64>() / surrogate.len() as f64;
            surrogate.fill(mean);
        }
        let kl_row = out.kl_per_token.row(i);
        let ratio_row = out.ratio.row(i);
        // TRL's `use_bias_correction_kl`: kl_ik * c_ik with c the importance weight, the
        // slope going through c too (dc/dlogp = q per token; s / L for each token of a
        // row's sequence ratio s).
        let corrected_slope = |k: usize| -> f64 {
            let slope = slope_of_kl(k);
            if !config.kl_bias_correction {
                return slope;
            }
            let c = ratio_row[k];
            match config.ratio_level {
                RatioLevel::Token => slope * c + kl_row[k] * c,
                // A whole-sequence ratio has no KL term (refused before the pass).
                RatioLevel::SequenceSum => slope,
                RatioLevel::Sequence => {
                    let row_sum: f64 = kl_row.iter().sum();
                    slope * c + c * row_sum / kl_row.len() as f64
                }
            }
        };
        gradient.extend(
            surrogate
                .iter()
                .enumerate()
                .map(|(k, g)| g + beta * kl_weights[i] * corrected_slope(k)),
        );
        if config.kl_bias_correction {
            kl_values.extend(kl_row.iter().zip(ratio_row).map(|(kl, c)| kl * c));
        }
    }
    out.gradient = input.logp.with_values(gradient)?;
    if config.kl_bias_correction {
        out.kl_per_token = input.logp.with_values(kl_values)?;
    }
    if plan.kl_weights.is_some() || config.kl_bias_correction {
        out.kl = out
            .kl_per_token
            .iter_rows()
            .zip(kl_weights)
            .map(|(row, w)| w * row.iter().sum::<f64>())
            .sum();
        out.loss = out.pg_loss + beta * out.kl;
    }
    if let Some(weights) = &plan.kl_weights {
        out.kl_token_weights = Some(expand_row_weights(&input.logp.lengths(), weights)?);
    }
    let finite = out.loss.is_finite() && out.gradient.flat().iter().all(|g| g.is_finite());
    if !finite {
        return Err(FieldError::new(
            "logp",
            "the loss or its gradient overflows f64 for these inputs",
        ));
    }
    Ok(())
}

/// Clip fractions as TRL (`clip_ratio/*`, `cispo_clip_ratio`) or verl (`pg_clipfrac` as
/// `low + high`, `pg_clipfrac_lower` as `dual`) count them.
fn library_clip_fraction(
    input: &PolicyLossInput<'_>,
    config: &PolicyLossConfig,
    out: &PolicyLoss,
) -> ClipFraction {
    let (ratio_low, ratio_high) = (config.clip.ratio_low(), config.clip.ratio_high());
    let verl = config.convention == Convention::Verl;
    // (low, high, dual) for one ratio and advantage.
    let count = |q: f64, a: f64| -> (bool, bool, bool) {
        match (config.objective, verl) {
            (Objective::Sapo | Objective::Vespo, _) => (false, false, false),
            (Objective::Cispo, true) => (q < ratio_low, q > ratio_high, false),
            (Objective::Cispo, false) => (false, a > 0.0 && q > ratio_high, false),
            (Objective::Ppo, _) => (
                a < 0.0 && q < ratio_low,
                a > 0.0 && q > ratio_high,
                verl && a < 0.0 && config.clip.dual_clip.is_some_and(|c| q > c),
            ),
        }
    };
    let mut sums = (0.0, 0.0, 0.0);
    let mut add = |(low, high, dual): (bool, bool, bool)| {
        sums.0 += f64::from(u8::from(low));
        sums.1 += f64::from(u8::from(high));
        sums.2 += f64::from(u8::from(dual));
    };
    // TRL's metrics at sequence level with one advantage per sequence average over the
    // batch's rows (its `global_masked_mean` of a `(B, 1)` tensor); otherwise over tokens.
    let per_row = config.convention == Convention::Trl
        && config.ratio_level == RatioLevel::Sequence
        && matches!(input.advantages, TokenAdvantages::PerSequence(_));
    let count_over = if per_row {
        let ratios = mean_log_ratios(input);
        for (i, x) in ratios.iter().enumerate() {
            add(count(x.exp(), advantage_at(input.advantages, i, 0)));
        }
        input.logp.rows() as f64
    } else {
        for (i, row) in out.ratio.iter_rows().enumerate() {
            for (k, &q) in row.iter().enumerate() {
                add(count(q, advantage_at(input.advantages, i, k)));
            }
        }
        let tokens = out.ratio.total_len() as f64;
        if verl {
            tokens + VERL_MEAN_GUARD
        } else {
            tokens
        }
    };
    let (low, high, dual) = (
        sums.0 / count_over,
        sums.1 / count_over,
        sums.2 / count_over,
    );
    let total = if config.convention == Convention::Trl {
        low + high
    } else {
        low + high + dual
    };
    ClipFraction {
        low,
        high,
        dual,
        total,
    }
}

/// The mean over tokens of `old_logp - logp` (verl's `ppo_kl`: after its clamp, except
/// GSPO's, which it reports unclamped).
fn ppo_kl(plan: &Plan, input: &PolicyLossInput<'_>, config: &PolicyLossConfig) -> f64 {
    let limit = plan.token_log_ratio_limit;
    let sum: f64 = input
        .logp
        .flat()
        .iter()
        .zip(input.old_logp.flat())
        .map(|(a, b)| -(a - b).clamp(-limit, limit))
        .sum();
    let tokens = input.logp.total_len() as f64;
    if config.convention == Convention::Verl {
        sum / (tokens + VERL_MEAN_GUARD)
    } else {
        sum / tokens
    }
}

#[cfg(test)]
mod tests {
    use crate::api::compute;
    use serde_json::{Value, json};

    fn loss_and_gradient(request: &Value) -> (f64, Vec<Vec<f64>>) {
        let out = compute("policy-loss", request.clone()).unwrap();
        let gradient = serde_json::from_value(out["gradient"].clone()).unwrap();
        (out["loss"].as_f64().unwrap(), gradient)
    }

    /// Central differences of the loss in every `logp`, against the reported gradient
    /// (to 1e-6, plus the rounding of the loss itself over the step).
    fn assert_gradient_is_the_derivative(request: &Value) {
        let (loss, gradient) = loss_and_gradient(request);
        let logp: Vec<Vec<f64>> = serde_json::from_value(request["logp"].clone()).unwrap();
        let h = 1e-6;
        for (i, row) in logp.iter().enumerate() {
            for k in 0..row.len() {
                let moved = |d: f64| {
                    let mut r = request.clone();
                    r["logp"][i][k] = json!(row[k] + d);
                    loss_and_gradient(&r).0
                };
                let numeric = (moved(h) - moved(-h)) / (2.0 * h);
                let analytic = gradient[i][k];
                let rounding = 4.0 * f64::EPSILON * loss.abs() / h;
                assert!(
                    (numeric - analytic).abs() < 1e-6 * analytic.abs().max(1.0) + rounding,
                    "token [{i}][{k}]: finite difference {numeric}, gradient {analytic} in {request}"
                );
            }
        }
    }

    fn batch() -> Value {
        json!({
            "logp": [[-0.5, -1.2, -0.9], [-2.0, -0.3], [-0.7, -1.1, -1.6, -0.4]],
            "old_logp": [[-0.6, -1.0, -1.0], [-1.7, -0.5], [-0.9, -1.0, -1.5, -0.6]],
            "ref_logp": [[-0.4, -1.3, -1.0], [-1.9, -0.4], [-0.8, -1.2, -1.4, -0.5]],
        })
    }

    #[test]
    fn trl_sequence_gradient_with_per_token_advantages_is_the_exact_derivative() {
        for loss_type in ["grpo", "sapo", "dapo"] {
            let mut r = batch();
            r["advantages"] = json!([[0.5, -0.2, 0.1], [1.0, 0.4], [-0.3, -0.8, 0.2, 0.6]]);
            r["loss_type"] = json!(loss_type);
            r["importance_sampling_level"] = json!("sequence");
            r["beta"] = json!(0.05);
            r["epsilon"] = json!(0.5);
            assert_gradient_is_the_derivative(&r);
        }
    }

    #[test]
    fn trl_bias_corrected_kl_gradient_is_the_exact_derivative() {
        for level in ["token", "sequence"] {
            let mut r = batch();
            r["advantages"] = json!([0.7, -0.4, 0.2]);
            r["loss_type"] = json!("grpo");
            r["importance_sampling_level"] = json!(level);
            r["beta"] = json!(0.3);
            r["use_bias_correction_kl"] = json!(true);
            assert_gradient_is_the_derivative(&r);
        }
    }

    #[test]
    fn verl_clamped_log_ratios_pass_no_slope_and_its_kl_keeps_loss_agg_mode() {
        let mut r = batch();
        // Token [0][1] sits 25 nats above its old log-probability: verl clamps it at 20,
        // and with clip_ratio_c huge it would otherwise carry the whole slope.
        r["old_logp"][0][1] = json!(-26.2);
        r["advantages"] = json!([-1.0, 0.5, 0.8]);
        r["loss_mode"] = json!("vanilla");
        r["clip_ratio_c"] = json!(1e12);
        r["kl_loss_coef"] = json!(0.1);
        r["kl_loss_type"] = json!("k2");
        assert_gradient_is_the_derivative(&r);
        let out = compute("policy-loss", r.clone()).unwrap();
        assert_eq!(out["convention"], json!("verl"));
        // Only the KL term's slope is left at the clamped token: beta / 9 * (logp - ref).
        let clamped = out["gradient"][0][1].as_f64().unwrap();
        assert!(
            (clamped - 0.1 / 9.0 * (-1.2 - -1.3)).abs() < 1e-15,
            "{clamped}"
        );
        assert!((out["ratio_max"].as_f64().unwrap() - 20f64.exp()).abs() < 1e-3);
        // GSPO under verl: the surrogate by seq-mean-token-mean, the KL by token-mean.
        let mut g = batch();
        g["advantages"] = json!([-1.0, 0.5, 0.8]);
        g["loss_mode"] = json!("gspo");
        g["loss_agg_mode"] = json!("token-mean");
        g["kl_loss_coef"] = json!(0.1);
        assert_gradient_is_the_derivative(&g);
        let out = compute("policy-loss", g).unwrap();
        assert_eq!(out["kl_token_weights"][0][0], json!(1.0 / 9.0));
        assert_eq!(
            out["token_weights"][0][0],
            json!(1.0 / (3.0 * (3.0 + 1e-8)))
        );
    }

    #[test]
    fn mixed_or_doubled_names_are_refused_by_field() {
        let mut r = batch();
        r["advantages"] = json!([1.0, -1.0, 0.5]);
        r["loss_type"] = json!("grpo");
        r["loss_agg_mode"] = json!("token-mean");
        assert_eq!(
            compute("policy-loss", r).unwrap_err().field,
            "loss_agg_mode"
        );
        let mut r = batch();
        r["advantages"] = json!([1.0, -1.0, 0.5]);
        r["eps_low"] = json!(0.1);
        r["epsilon"] = json!(0.2);
        assert_eq!(compute("policy-loss", r).unwrap_err().field, "epsilon");
        let mut r = batch();
        r["advantages"] = json!([1.0, -1.0, 0.5]);
        r["convention"] = json!("trl");
        r["clip_ratio"] = json!(0.2);
        assert_eq!(compute("policy-loss", r).unwrap_err().field, "clip_ratio");
        let mut r = batch();
        r["advantages"] = json!([1.0, -1.0, 0.5]);
        r["loss_type"] = json!("grpo");
        r["reduction"] = json!("token-mean");
        assert_eq!(compute("policy-loss", r).unwrap_err().field, "reduction");
    }
}

//! TRL's and verl's names for `policy-loss` settings, resolved into one configuration.
//!
//! | setting | arlbook | TRL (`GRPOConfig`, `_compute_loss` inputs) | verl (actor config) |
//! |---|---|---|---|
//! | objective and reduction | `objective`, `reduction` | `loss_type` | `loss_mode`, `loss_agg_mode` |
//! | ratio level | `ratio_level` | `importance_sampling_level` | `loss_mode = "gspo"` |
//! | clip widths | `eps_low`, `eps_high` | `epsilon`, `epsilon_high` | `clip_ratio`, `clip_ratio_low`, `clip_ratio_high` |
//! | dual clip | `dual_clip` | `delta` | `clip_ratio_c` (default 3, `vanilla` only) |
//! | reduction constant | `constant` | `max_completion_length` (default 512) | `loss_scale_factor` |
//! | KL | `beta`, `kl_estimator`, `kl_clamp` | `beta` (k3) | `kl_loss_coef`, `kl_loss_type` (default clamped `low_var_kl`) |
//! | SAPO temperatures | `sapo_tau_pos`, `sapo_tau_neg` | `sapo_temperature_pos`, `_neg` | `tau_pos`, `tau_neg` |
//! | importance weights | `importance_weights` | `importance_sampling_ratio`, or `sampling_logp` with `vllm_importance_sampling_*` | `rollout_is_weights` |
//! | off-policy mask | — | `off_policy_mask_threshold` | — |
//! | KL bias correction | — | `use_bias_correction_kl` | — |
//! | VESPO's kernel | `objective = "vespo"`, `vespo` | `loss_type = "vespo"`, `vespo_k_pos`, `vespo_lambda_pos`, `vespo_k_neg`, `vespo_lambda_neg` | `loss_mode = "vespo"`, `vespo` |
//! | entropy bonus | `entropy_coef` with `logits` or `entropies` | `entropy_coef` with `entropies` (or `logits`) | `entropy_coeff` (by `loss_agg_mode`) |
//! | padded batch | — | `completion_mask` | — |
//! | loss normaliser | — | `gradient_accumulation_steps`; `num_items_in_batch`, `num_processes` | — |
//!
//! TRL's `loss_type` maps to objective and reduction as `GRPOTrainer._compute_loss`
//! does: `grpo` and `sapo` reduce by the per-sequence token mean over all rows, `bnpo`,
//! `dapo`, `cispo` and `vespo` by the token mean (for `dapo`, `cispo`, `vespo` the token
//! sum over `num_items_in_batch / num_processes`, the batch's own count by default),
//! `dr_grpo` by `N * max_completion_length`, and `luspo` (sequence ratios only) by the
//! mean over rows of the row's token sum (with `beta > 0` or a per-token importance
//! ratio, TRL's mean over every position of the padded batch: see [`super::padded`]).
//! TRL's `cispo` clamps the ratio at `epsilon_high` itself with no lower bound. TRL's
//! `vespo` (token level only) follows `get_gamma_weights`: the kernel reads the log of
//! the sequence ratio clamped to `[ln 1e-8, 20]`, takes `(k, lambda)` from each token's
//! advantage, adds the log of the vLLM importance ratio summed over every position
//! (padding included) and does not multiply the loss by that ratio; the off-policy mask
//! multiplies its loss. `rloo` names `RLOOTrainer._compute_loss` (that trainer has no
//! `loss_type`): the whole-sequence ratio `exp(sum of log-ratios)` and the mean of
//! per-completion losses over all completions, an empty one counting with ratio 1.

use serde::{Deserialize, Serialize};

use super::{Advantages, Request};
use crate::Ragged;
use crate::error::{FieldError, Result, check};
use crate::math::clip::ClipWidths;
use crate::math::convention::{Convention, infer, one_of};
use crate::math::kl::KlEstimator;
use crate::math::policy_loss::vespo::VespoKernel;
use crate::math::policy_loss::{Objective, PolicyLossConfig, RatioLevel};
use crate::math::reduction::Reduction;
use crate::math::sampler_correction::{DEFAULT_CLIP_MAX, SamplerCorrection, sampler_weights};

/// TRL's `loss_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrlLossType {
    /// PPO clip, per-sequence token mean over all rows.
    Grpo,
    /// PPO clip, token mean.
    Bnpo,
    /// PPO clip, token sum over `N * max_completion_length`.
    DrGrpo,
    /// PPO clip, token mean over the batch (TRL's default).
    Dapo,
    /// Clamped, detached ratio times `logp`, token mean.
    Cispo,
    /// Soft gate, per-sequence token mean over all rows.
    Sapo,
    /// Sequence ratio, mean over rows of the row's token sum (with `beta > 0`, or a
    /// per-token importance ratio, the mean over every position of the padded batch).
    Luspo,
    /// VESPO: a gamma kernel of the sequence ratio times `A logp`, token sum over the
    /// global token count.
    Vespo,
    /// `RLOOTrainer`'s loss (it has no `loss_type`; this names it): the ratio of whole
    /// sequences, `exp(sum of log-ratios)`, one loss per completion, mean over all.
    Rloo,
}

/// TRL's `vllm_importance_sampling_mode`.
pub use crate::math::sampler_correction::SamplerCorrectionMode as TrlIsMode;

/// verl's `loss_agg_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum VerlAggMode {
    /// Mean over all tokens.
    #[serde(rename = "token-mean")]
    TokenMean,
    /// Mean over sequences of each one's token mean.
    #[serde(rename = "seq-mean-token-mean")]
    SeqMeanTokenMean,
    /// Mean over sequences of each one's token sum.
    #[serde(rename = "seq-mean-token-sum")]
    SeqMeanTokenSum,
    /// Token sum over `loss_scale_factor`.
    #[serde(rename = "seq-mean-token-sum-norm")]
    SeqMeanTokenSumNorm,
}

impl From<VerlAggMode> for Reduction {
    fn from(mode: VerlAggMode) -> Self {
        match mode {
            VerlAggMode::TokenMean => Self::TokenMean,
            VerlAggMode::SeqMeanTokenMean => Self::SeqMeanTokenMean,
            VerlAggMode::SeqMeanTokenSum => Self::SeqMeanTokenSum,
            VerlAggMode::SeqMeanTokenSumNorm => Self::SeqMeanTokenSumNorm,
        }
    }
}

/// verl's `policy_loss.loss_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VerlLossMode {
    /// PPO clip with the dual clip.
    Vanilla,
    /// PPO clip on sequence ratios.
    Gspo,
    /// Soft gate.
    Sapo,
    /// Clamped, detached ratio times `logp`.
    Cispo,
    /// VESPO's recipe: a gamma kernel of the sequence ratio times `A logp`.
    Vespo,
}

/// TRL's default `max_completion_length`.
const TRL_MAX_COMPLETION_LENGTH: f64 = 512.0;
/// verl's default `clip_ratio_c`.
const VERL_CLIP_RATIO_C: f64 = 3.0;

/// The names of TRL's and of verl's fields present in `request`.
fn library_fields(request: &Request) -> (Vec<&'static str>, Vec<&'static str>) {
    let r = request;
    let trl = [
        ("loss_type", r.loss_type.is_some()),
        ("epsilon", r.epsilon.is_some()),
        ("epsilon_high", r.epsilon_high.is_some()),
        ("delta", r.delta.is_some()),
        (
            "importance_sampling_level",
            r.importance_sampling_level.is_some(),
        ),
        ("max_completion_length", r.max_completion_length.is_some()),
        ("sapo_temperature_pos", r.sapo_temperature_pos.is_some()),
        ("sapo_temperature_neg", r.sapo_temperature_neg.is_some()),
        (
            "importance_sampling_ratio",
            r.importance_sampling_ratio.is_some(),
        ),
        ("sampling_logp", r.sampling_logp.is_some()),
        (
            "vllm_importance_sampling_mode",
            r.vllm_importance_sampling_mode.is_some(),
        ),
        (
            "vllm_importance_sampling_clip_min",
            r.vllm_importance_sampling_clip_min.is_some(),
        ),
        (
            "vllm_importance_sampling_clip_max",
            r.vllm_importance_sampling_clip_max.is_some(),
        ),
        (
            "off_policy_mask_threshold",
            r.off_policy_mask_threshold.is_some(),
        ),
        ("use_bias_correction_kl", r.use_bias_correction_kl.is_some()),
        ("completion_mask", r.completion_mask.is_some()),
        (
            "gradient_accumulation_steps",
            r.gradient_accumulation_steps.is_some(),
        ),
        ("num_items_in_batch", r.num_items_in_batch.is_some()),
        ("num_processes", r.num_processes.is_some()),
        ("vespo_k_pos", r.vespo_k_pos.is_some()),
        ("vespo_lambda_pos", r.vespo_lambda_pos.is_some()),
        ("vespo_k_neg", r.vespo_k_neg.is_some()),
        ("vespo_lambda_neg", r.vespo_lambda_neg.is_some()),
    ];
    let verl = [
        ("loss_agg_mode", r.loss_agg_mode.is_some()),
        ("loss_mode", r.loss_mode.is_some()),
        ("clip_ratio", r.clip_ratio.is_some()),
        ("clip_ratio_low", r.clip_ratio_low.is_some()),
        ("clip_ratio_high", r.clip_ratio_high.is_some()),
        ("clip_ratio_c", r.clip_ratio_c.is_some()),
        ("loss_scale_factor", r.loss_scale_factor.is_some()),
        ("kl_loss_coef", r.kl_loss_coef.is_some()),
        ("kl_loss_type", r.kl_loss_type.is_some()),
        ("tau_pos", r.tau_pos.is_some()),
        ("tau_neg", r.tau_neg.is_some()),
        ("rollout_is_weights", r.rollout_is_weights.is_some()),
        ("entropy_coeff", r.entropy_coeff.is_some()),
    ];
    let present = |names: &[(&'static str, bool)]| -> Vec<&'static str> {
        names.iter().filter(|(_, p)| *p).map(|(n, _)| *n).collect()
    };
    (present(&trl), present(&verl))
}

/// Objective, ratio level and (where the name fixes it) reduction from `loss_type` or
/// `loss_mode`, checked against arlbook's own fields.
fn objective_and_level(request: &Request) -> Result<(Objective, RatioLevel, Option<Reduction>)> {
    let named: Option<(&str, Objective, Option<RatioLevel>, Option<Reduction>)> =
        match (request.loss_type, request.loss_mode) {
            (Some(t), _) => Some(match t {
                TrlLossType::Grpo => (
                    "loss_type",
                    Objective::Ppo,
                    None,
                    Some(Reduction::SeqMeanTokenMean),
                ),
                TrlLossType::Bnpo | TrlLossType::Dapo => (
                    "loss_type",
                    Objective::Ppo,
                    None,
                    Some(Reduction::TokenMean),
                ),
                TrlLossType::DrGrpo => ("loss_type", Objective::Ppo, None, Some(Reduction::DrGrpo)),
                TrlLossType::Cispo => (
                    "loss_type",
                    Objective::Cispo,
                    None,
                    Some(Reduction::TokenMean),
                ),
                TrlLossType::Sapo => (
                    "loss_type",
                    Objective::Sapo,
                    None,
                    Some(Reduction::SeqMeanTokenMean),
                ),
                TrlLossType::Luspo => (
                    "loss_type",
                    Objective::Ppo,
                    Some(RatioLevel::Sequence),
                    Some(Reduction::SeqMeanTokenSum),
                ),
                TrlLossType::Rloo => (
                    "loss_type",
                    Objective::Ppo,
                    Some(RatioLevel::SequenceSum),
                    None,
                ),
                TrlLossType::Vespo => (
                    "loss_type",
                    Objective::Vespo,
                    Some(RatioLevel::Token),
                    Some(Reduction::TokenMean),
                ),
            }),
            (None, Some(m)) => Some(match m {
                VerlLossMode::Vanilla => {
                    ("loss_mode", Objective::Ppo, Some(RatioLevel::Token), None)
                }
                VerlLossMode::Gspo => (
                    "loss_mode",
                    Objective::Ppo,
                    Some(RatioLevel::Sequence),
                    None,
                ),
                VerlLossMode::Sapo => ("loss_mode", Objective::Sapo, Some(RatioLevel::Token), None),
                VerlLossMode::Cispo => {
                    ("loss_mode", Objective::Cispo, Some(RatioLevel::Token), None)
                }
                VerlLossMode::Vespo => {
                    ("loss_mode", Objective::Vespo, Some(RatioLevel::Token), None)
                }
            }),
            (None, None) => None,
        };
    let level_field = one_of(&[
        ("ratio_level", request.ratio_level),
        (
            "importance_sampling_level",
            request.importance_sampling_level,
        ),
    ])?;
    let Some((name, objective, level, reduction)) = named else {
        return Ok((
            request.objective.unwrap_or_default(),
            level_field.unwrap_or_default(),
            None,
        ));
    };
    if let Some(own) = request.objective
        && own != objective
    {
        return Err(FieldError::new(
            "objective",
            format!("contradicts `{name}`; give one of them"),
        ));
    }
    if request.reduction.is_some() && reduction.is_some() {
        return Err(FieldError::new(
            "reduction",
            format!("is set by `{name}` under TRL's rules; give one of them"),
        ));
    }
    let level = match (level, level_field) {
        (Some(fixed), Some(given)) if fixed != given => {
            let field = if request.ratio_level.is_some() {
                "ratio_level"
            } else {
                "importance_sampling_level"
            };
            return Err(FieldError::new(
                field,
                format!("contradicts `{name}`, which fixes the ratio level"),
            ));
        }
        (Some(fixed), _) => fixed,
        (None, given) => given.unwrap_or_default(),
    };
    Ok((objective, level, reduction))
}

/// Clip widths and dual clip under `convention`, each field checked under its own name.
fn clip_widths(
    request: &Request,
    convention: Convention,
    objective: Objective,
    level: RatioLevel,
) -> Result<ClipWidths> {
    let r = request;
    if let Some(both) = r.clip_ratio {
        check::in_range("clip_ratio", both, 0.0, 1.0)?;
        if let Some(name) = [("eps_low", r.eps_low), ("eps_high", r.eps_high)]
            .iter()
            .find_map(|(n, v)| v.map(|_| *n))
        {
            return Err(FieldError::new(
                name,
                "is set by `clip_ratio` too; give the widths under verl's names",
            ));
        }
    }
    let low = one_of(&[
        ("eps_low", r.eps_low),
        ("epsilon", r.epsilon),
        ("clip_ratio_low", r.clip_ratio_low),
    ])?;
    let high = one_of(&[
        ("eps_high", r.eps_high),
        ("epsilon_high", r.epsilon_high),
        ("clip_ratio_high", r.clip_ratio_high),
    ])?;
    let dual = one_of(&[
        ("dual_clip", r.dual_clip),
        ("delta", r.delta),
        ("clip_ratio_c", r.clip_ratio_c),
    ])?;
    let eps_low = low.or(r.clip_ratio).unwrap_or(0.2);
    let eps_high = high.or(r.clip_ratio).unwrap_or(eps_low);
    let trl_cispo = convention == Convention::Trl && objective == Objective::Cispo;
    if trl_cispo {
        // TRL clamps the ratio at `epsilon_high` itself, with no lower bound.
        let bound = check::positive("epsilon_high", eps_high)?;
        return Ok(ClipWidths {
            eps_low: 1.0,
            eps_high: bound - 1.0,
            dual_clip: None,
        });
    }
    let ppo_token = objective == Objective::Ppo && level == RatioLevel::Token;
    let dual_clip = match convention {
        // verl applies `clip_ratio_c` in `vanilla` only, and always there.
        Convention::Verl if ppo_token => Some(dual.unwrap_or(VERL_CLIP_RATIO_C)),
        Convention::Verl => None,
        // TRL's `delta` bounds the ratio of the PPO-clip family only.
        Convention::Trl if objective != Objective::Ppo => None,
        _ => dual,
    };
    Ok(ClipWidths {
        eps_low,
        eps_high,
        dual_clip,
    })
}

/// The multipliers of the surrogate term, per token, kept apart by kind: TRL's VESPO
/// folds the sampler's ratio into its kernel but multiplies its loss by the off-policy
/// mask, and TRL's LUSPO reads where the ratio is one per sequence.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Multipliers {
    /// The importance ratio against the sampler (given, or TRL's vLLM ratio), per token.
    pub sampler: Option<Ragged<f64>>,
    /// The field that gave or asked for `sampler`.
    pub sampler_field: &'static str,
    /// Whether `sampler` is one value per sequence (given per sequence, or TRL's
    /// sequence modes: TRL's `(B, 1)` ratio).
    pub sampler_per_sequence: bool,
    /// TRL's off-policy mask, per token (one value along each row).
    pub off_policy: Option<Ragged<f64>>,
}

impl Multipliers {
    /// The product of every multiplier, per token (`None` when there is none).
    pub fn combined(&self) -> Result<Option<Ragged<f64>>> {
        match (&self.sampler, &self.off_policy) {
            (Some(a), Some(b)) => {
                let values = a.flat().iter().zip(b.flat()).map(|(x, y)| x * y).collect();
                a.with_values(values).map(Some)
            }
            (Some(a), None) => Ok(Some(a.clone())),
            (None, Some(b)) => Ok(Some(b.clone())),
            (None, None) => Ok(None),
        }
    }
}

/// The name of the field that gives the sampler's ratio directly, if any.
pub fn given_sampler_field(request: &Request) -> Option<&'static str> {
    let r = request;
    if r.importance_weights.is_some() {
        Some("importance_weights")
    } else if r.importance_sampling_ratio.is_some() {
        Some("importance_sampling_ratio")
    } else if r.rollout_is_weights.is_some() {
        Some("rollout_is_weights")
    } else {
        None
    }
}

/// The multipliers of the surrogate term, per token, checked under their field names.
pub fn surrogate_multipliers(request: &Request) -> Result<Multipliers> {
    let r = request;
    let given = one_of(&[
        ("importance_weights", r.importance_weights.as_ref()),
        (
            "importance_sampling_ratio",
            r.importance_sampling_ratio.as_ref(),
        ),
        ("rollout_is_weights", r.rollout_is_weights.as_ref()),
    ])?;
    let mut out = Multipliers::default();
    match (given, given_sampler_field(request)) {
        (Some(weights), Some(name)) => {
            if r.vllm_importance_sampling_mode.is_some() {
                return Err(FieldError::new(
                    "vllm_importance_sampling_mode",
                    format!("computes the ratio that `{name}` gives; give one of them"),
                ));
            }
            out.sampler = Some(per_token(name, weights, &r.logp)?);
            out.sampler_field = name;
            out.sampler_per_sequence = matches!(weights, Advantages::PerSequence(_));
        }
        _ => {
            out.sampler = trl_sampler_ratio(request)?;
            out.sampler_field = "vllm_importance_sampling_mode";
            out.sampler_per_sequence = matches!(
                r.vllm_importance_sampling_mode,
                Some(TrlIsMode::SequenceMask | TrlIsMode::SequenceTruncate)
            );
        }
    }
    if let Some(threshold) = r.off_policy_mask_threshold {
        out.off_policy = Some(off_policy_mask(
            request,
            check::finite("off_policy_mask_threshold", threshold)?,
        )?);
    }
    Ok(out)
}

/// Weights given per sequence or per token, as one value per token (finite, `>= 0`).
fn per_token(field: &str, weights: &Advantages, logp: &Ragged<f64>) -> Result<Ragged<f64>> {
    let out = match weights {
        Advantages::PerSequence(w) => {
            check::same_len(field, w.len(), "logp", logp.rows())?;
            let values = logp
                .lengths()
                .iter()
                .zip(w)
                .flat_map(|(&len, &v)| std::iter::repeat_n(v, len))
                .collect();
            logp.with_values(values)?
        }
        Advantages::PerToken(w) => {
            logp.check_same_shape("logp", field, w)?;
            w.clone()
        }
    };
    for (i, row) in out.iter_rows().enumerate() {
        if let Some(k) = row.iter().position(|v| !(v.is_finite() && *v >= 0.0)) {
            return Err(FieldError::new(
                format!("{field}[{i}][{k}]"),
                format!("must be a finite weight >= 0, got {}", row[k]),
            ));
        }
    }
    Ok(out)
}

/// TRL's vLLM importance ratio `exp(old_logp - sampling_logp)` (row sums for the
/// sequence modes), truncated or masked at its bounds.
fn trl_sampler_ratio(request: &Request) -> Result<Option<Ragged<f64>>> {
    let Some(correction) = trl_sampler_correction(request)? else {
        return Ok(None);
    };
    let Some(sampling) = &request.sampling_logp else {
        return Err(FieldError::new(
            "sampling_logp",
            "is required with `vllm_importance_sampling_mode` (the sampler's log-probabilities)",
        ));
    };
    check_sampling_logp(request, sampling)?;
    sampler_weights(&request.old_logp, sampling, "sampling_logp", &correction).map(Some)
}

/// TRL's `vllm_importance_sampling_mode` with its bounds, checked (`None` without a
/// mode; the bounds are refused without one).
pub fn trl_sampler_correction(request: &Request) -> Result<Option<SamplerCorrection>> {
    let r = request;
    let Some(mode) = r.vllm_importance_sampling_mode else {
        for (name, given) in [
            (
                "vllm_importance_sampling_clip_min",
                r.vllm_importance_sampling_clip_min,
            ),
            (
                "vllm_importance_sampling_clip_max",
                r.vllm_importance_sampling_clip_max,
            ),
        ] {
            if given.is_some() {
                return Err(FieldError::new(
                    name,
                    "applies with `vllm_importance_sampling_mode`; give the mode too",
                ));
            }
        }
        return Ok(None);
    };
    let min = r
        .vllm_importance_sampling_clip_min
        .map(|v| check::finite("vllm_importance_sampling_clip_min", v))
        .transpose()?;
    let max = match r.vllm_importance_sampling_clip_max {
        Some(v) => check::finite("vllm_importance_sampling_clip_max", v)?,
        None => DEFAULT_CLIP_MAX,
    };
    if let Some(m) = min
        && m > max
    {
        return Err(FieldError::new(
            "vllm_importance_sampling_clip_min",
            "is above vllm_importance_sampling_clip_max",
        ));
    }
    Ok(Some(SamplerCorrection {
        mode,
        clip_min: min,
        clip_max: max,
    }))
}

fn check_sampling_logp(request: &Request, sampling: &Ragged<f64>) -> Result<()> {
    request
        .logp
        .check_same_shape("logp", "sampling_logp", sampling)?;
    sampling.check_finite("sampling_logp")?;
    for (i, row) in sampling.iter_rows().enumerate() {
        if let Some(k) = row.iter().position(|&v| v > 0.0) {
            return Err(FieldError::new(
                format!("sampling_logp[{i}][{k}]"),
                format!("must be a log-probability (<= 0), got {}", row[k]),
            ));
        }
    }
    Ok(())
}

/// TRL's off-policy sequence mask: 0 where the advantage is negative and the row's mean
/// `sampling_logp - logp` (`old_logp` without a sampler) exceeds `threshold`.
fn off_policy_mask(request: &Request, threshold: f64) -> Result<Ragged<f64>> {
    let r = request;
    let behaviour = match &r.sampling_logp {
        Some(sampling) => {
            check_sampling_logp(request, sampling)?;
            sampling
        }
        None => &r.old_logp,
    };
    let mut values = Vec::with_capacity(r.logp.total_len());
    for (i, (row, behave)) in r.logp.iter_rows().zip(behaviour.iter_rows()).enumerate() {
        let sum: f64 = behave.iter().zip(row).map(|(b, a)| b - a).sum();
        let mean_kl = sum / (row.len().max(1) as f64);
        let low_kl = mean_kl <= threshold;
        for k in 0..row.len() {
            let advantage = match &r.advantages {
                Advantages::PerSequence(a) => a.get(i).copied().unwrap_or(0.0),
                Advantages::PerToken(a) => a.row(i).get(k).copied().unwrap_or(0.0),
            };
            values.push(if advantage >= 0.0 || low_kl { 1.0 } else { 0.0 });
        }
    }
    r.logp.with_values(values)
}

/// The convention `request` follows: its `convention`, else the library whose names it
/// uses (mixing the two libraries' names is refused).
pub fn convention_of(request: &Request) -> Result<Convention> {
    let (trl, verl) = library_fields(request);
    infer(request.convention, &trl, &verl)
}

/// The configuration and the surrogate multipliers of `request`, multiplied into one.
pub fn resolve(request: &Request) -> Result<(PolicyLossConfig, Option<Ragged<f64>>)> {
    let (config, parts) = resolve_parts(request)?;
    Ok((config, parts.combined()?))
}

/// VESPO's kernel from `vespo` or TRL's `vespo_k_pos`, `vespo_lambda_pos`, `vespo_k_neg`
/// and `vespo_lambda_neg` (each defaulting to the kernel's default).
fn vespo_kernel(request: &Request) -> Result<Option<VespoKernel>> {
    let r = request;
    let trl = [
        ("vespo_k_pos", r.vespo_k_pos),
        ("vespo_lambda_pos", r.vespo_lambda_pos),
        ("vespo_k_neg", r.vespo_k_neg),
        ("vespo_lambda_neg", r.vespo_lambda_neg),
    ];
    let Some(&(first, _)) = trl.iter().find(|(_, v)| v.is_some()) else {
        return Ok(r.vespo);
    };
    if r.vespo.is_some() {
        return Err(FieldError::new(
            first,
            "sets VESPO's kernel, which `vespo` sets too; give one of them",
        ));
    }
    let default = VespoKernel::default();
    let kernel = VespoKernel {
        k_pos: r.vespo_k_pos.unwrap_or(default.k_pos),
        lambda_pos: r.vespo_lambda_pos.unwrap_or(default.lambda_pos),
        k_neg: r.vespo_k_neg.unwrap_or(default.k_neg),
        lambda_neg: r.vespo_lambda_neg.unwrap_or(default.lambda_neg),
    };
    for (name, value) in trl {
        if let Some(v) = value
            && !(v.is_finite() && v >= 0.0)
        {
            return Err(FieldError::new(name, "must be finite and >= 0"));
        }
    }
    Ok(Some(kernel))
}

/// The configuration of `request` and its surrogate multipliers, kept apart.
pub fn resolve_parts(request: &Request) -> Result<(PolicyLossConfig, Multipliers)> {
    let r = request;
    let convention = convention_of(request)?;
    let (objective, ratio_level, named_reduction) = objective_and_level(request)?;
    if r.loss_type == Some(TrlLossType::Luspo) && matches!(r.advantages, Advantages::PerToken(_)) {
        return Err(FieldError::new(
            "advantages",
            "TRL's `luspo` takes one advantage per sequence",
        ));
    }
    if ratio_level == RatioLevel::SequenceSum
        && let Some(name) = [
            ("reduction", r.reduction.is_some()),
            ("loss_agg_mode", r.loss_agg_mode.is_some()),
            ("constant", r.constant.is_some()),
            ("max_completion_length", r.max_completion_length.is_some()),
        ]
        .iter()
        .find_map(|&(n, given)| given.then_some(n))
    {
        return Err(FieldError::new(
            name,
            "does not apply to a whole-sequence ratio (TRL's RLOO): its loss is the mean of \
             one loss per completion over all completions",
        ));
    }
    let reduction = match named_reduction {
        Some(reduction) => reduction,
        None => one_of(&[
            ("reduction", r.reduction),
            ("loss_agg_mode", r.loss_agg_mode.map(Reduction::from)),
        ])?
        .unwrap_or_default(),
    };
    let constant = one_of(&[
        ("constant", r.constant),
        ("max_completion_length", r.max_completion_length),
        ("loss_scale_factor", r.loss_scale_factor),
    ])?;
    let constant = match (constant, convention, reduction) {
        (None, Convention::Trl, Reduction::DrGrpo) => Some(TRL_MAX_COMPLETION_LENGTH),
        (c, ..) => c,
    };
    if let (Some(c), Some(name)) = (
        constant,
        [
            ("max_completion_length", r.max_completion_length),
            ("loss_scale_factor", r.loss_scale_factor),
        ]
        .iter()
        .find_map(|(n, v)| v.map(|_| *n)),
    ) {
        check::positive(name, c)?;
    }
    let beta = one_of(&[("beta", r.beta), ("kl_loss_coef", r.kl_loss_coef)])?;
    if let (Some(b), true) = (beta, r.kl_loss_coef.is_some()) {
        check::non_negative("kl_loss_coef", b)?;
    }
    let kl_estimator = one_of(&[
        ("kl_estimator", r.kl_estimator),
        ("kl_loss_type", r.kl_loss_type),
    ])?
    .unwrap_or_default();
    let kl_clamp = r
        .kl_clamp
        .unwrap_or(convention == Convention::Verl && kl_estimator == KlEstimator::K3);
    let tau_pos = one_of(&[
        ("sapo_tau_pos", r.sapo_tau_pos),
        ("sapo_temperature_pos", r.sapo_temperature_pos),
        ("tau_pos", r.tau_pos),
    ])?;
    let tau_neg = one_of(&[
        ("sapo_tau_neg", r.sapo_tau_neg),
        ("sapo_temperature_neg", r.sapo_temperature_neg),
        ("tau_neg", r.tau_neg),
    ])?;
    let vespo = vespo_kernel(request)?;
    if vespo.is_some() && objective != Objective::Vespo {
        let field = [
            "vespo",
            "vespo_k_pos",
            "vespo_lambda_pos",
            "vespo_k_neg",
            "vespo_lambda_neg",
        ]
        .into_iter()
        .zip([
            r.vespo.is_some(),
            r.vespo_k_pos.is_some(),
            r.vespo_lambda_pos.is_some(),
            r.vespo_k_neg.is_some(),
            r.vespo_lambda_neg.is_some(),
        ])
        .find_map(|(name, given)| given.then_some(name))
        .unwrap_or("vespo");
        return Err(FieldError::new(
            field,
            "applies to objective `vespo` (TRL: loss_type = \"vespo\"; verl: loss_mode = \"vespo\")",
        ));
    }
    let clip = clip_widths(request, convention, objective, ratio_level)?;
    let config = PolicyLossConfig {
        objective,
        ratio_level,
        clip,
        sapo_tau_pos: tau_pos.unwrap_or(1.0),
        sapo_tau_neg: tau_neg.unwrap_or(1.05),
        reduction,
        constant,
        beta: beta.unwrap_or(0.0),
        kl_estimator,
        kl_clamp,
        convention,
        kl_bias_correction: r.use_bias_correction_kl.unwrap_or(false),
        vespo: vespo.unwrap_or_default(),
    };
    Ok((config, surrogate_multipliers(request)?))
}

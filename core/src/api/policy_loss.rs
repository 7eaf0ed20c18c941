//! `policy-loss`: the reduced per-token policy loss (PPO / GSPO / CISPO / SAPO / VESPO /
//! LUSPO / RLOO, with an optional KL term and entropy bonus) and its gradient (see
//! [`crate::math::policy_loss`]).
//!
//! ## Design
//! - Settings go by arlbook's names or by TRL's and verl's ([`library_names`]); a
//!   library's names make the request follow that library's code path.
//! - The batch is ragged (one row per sequence, its own length), or TRL's padded batch:
//!   `completion_mask` with rectangular rows, values in the padding read only where TRL
//!   reads them ([`padded`]): LUSPO's mean over every position, VESPO's sum of the
//!   importance ratio. Per-token response fields then have the mask's shape, 0 at the
//!   padding unless TRL's loss uses it there.
//! - The entropy bonus comes from `logits` (with its gradient in the logits) or from the
//!   caller's per-token `entropies` (TRL's tensor name). TRL subtracts `entropy_coef *
//!   H`, `H` the mean entropy over the batch's tokens divided by the normaliser below, or
//!   for `cispo`, `dapo` and `vespo` the entropy sum over `num_items_in_batch /
//!   num_processes` (`GRPOTrainer._compute_loss`, the entropy bonus); verl reduces it by
//!   `loss_agg_mode`.
//! - TRL's normalisers (`GRPOTrainer._compute_loss`, training mode): `grpo`, `bnpo`,
//!   `dr_grpo`, `sapo` and `luspo` divide the loss by `gradient_accumulation_steps`;
//!   `cispo`, `dapo` and `vespo` divide the masked token sum by `num_items_in_batch /
//!   num_processes` (TRL clamps the count at 1; default here: the batch's own token count
//!   and one process, which is the token mean). Everything linear in the loss follows the
//!   same factor, so the identities hold as stated: `loss = pg_loss + beta kl - coef
//!   entropy`, `loss = sum w_ik (l_ik + beta kl_ik) - coef entropy` with `w` the
//!   response's `token_weights`, `gradient = d loss / d logp`; `entropy` is TRL's
//!   `entropy_loss` (already divided). TRL's logged `policy_loss` metric is the loss
//!   before the entropy term and before the division by `gradient_accumulation_steps`:
//!   `(loss + coef entropy) * gradient_accumulation_steps` (for `cispo`, `dapo`, `vespo`:
//!   `loss + coef entropy`). Fields a loss type does not divide by are refused by name.

use serde::{Deserialize, Serialize};

use crate::Ragged;
use crate::api::{Entry, units};
use crate::error::Result;
use crate::error::{FieldError, check};
use crate::math::convention::{Convention, one_of};
use crate::math::entropy::entropy_term;
use crate::math::kl::KlEstimator;
use crate::math::policy_loss::vespo::{VespoKernel, VespoRules, vespo_loss_with};
use crate::math::policy_loss::{
    ClipFraction, Objective, PolicyLoss, PolicyLossConfig, PolicyLossInput, RatioLevel,
    TokenAdvantages, policy_loss_scaled, validate,
};
use crate::math::reduction::Reduction;

pub mod library_names;
pub mod padded;
use library_names::{TrlIsMode, TrlLossType, VerlAggMode, VerlLossMode};

/// Advantages: one per sequence (`[..]`) or one per token (`[[..] per sequence]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Advantages {
    /// One advantage per sequence.
    PerSequence(Vec<f64>),
    /// One advantage per token, shaped like `logp`.
    PerToken(Ragged<f64>),
}

impl Default for Advantages {
    fn default() -> Self {
        Self::PerSequence(Vec::new())
    }
}

/// Request of `policy-loss`.
///
/// Each setting has arlbook's name and, where TRL or verl has one, that library's name
/// too; a library's name makes the request follow that library's rules (see
/// [`crate::math::convention`]), and giving one setting under two names is refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// Current log-probabilities of the trainable tokens, one list per sequence (finite,
    /// `<= 0`). At least one token in the batch; empty sequences are allowed.
    pub logp: Ragged<f64>,
    /// Log-probabilities under the collecting policy, shaped like `logp`.
    pub old_logp: Ragged<f64>,
    /// Log-probabilities under the KL reference, shaped like `logp`. Required when
    /// `beta > 0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ref_logp: Option<Ragged<f64>>,
    /// Advantages per sequence `[..]` or per token `[[..]]`, finite.
    pub advantages: Advantages,
    /// `arlbook`, `trl` or `verl`: whose rules decide the edge cases. Default: the
    /// library whose names the request uses, else `arlbook`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub convention: Option<Convention>,
    /// Lower clip width in `[0, 1]`. Default 0.2. TRL: `epsilon`; verl: `clip_ratio_low`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eps_low: Option<f64>,
    /// Upper clip width `>= 0`. Default: the lower width. TRL: `epsilon_high`; verl:
    /// `clip_ratio_high`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eps_high: Option<f64>,
    /// Dual-clip constant `c > 1` (objective `ppo` only). Default: none (verl: 3 for
    /// `vanilla`). TRL: `delta`; verl: `clip_ratio_c`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dual_clip: Option<f64>,
    /// `token-mean` (default; aliases `bnpo`, `dapo`), `seq-mean-token-mean` (alias
    /// `grpo`), `seq-mean-token-sum`, `seq-mean-token-sum-norm` (verl: sum / constant)
    /// or `dr_grpo` (sum / (sequences x constant)). These are arlbook's names with
    /// arlbook's rules; TRL: `loss_type`; verl: `loss_agg_mode`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reduction: Option<Reduction>,
    /// The constant of `seq-mean-token-sum-norm` and `dr_grpo`, `> 0`. Default: the
    /// longest sequence's length (TRL: 512). TRL: `max_completion_length`; verl:
    /// `loss_scale_factor`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constant: Option<f64>,
    /// KL coefficient `>= 0`. Default 0. verl: `kl_loss_coef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beta: Option<f64>,
    /// `k1`, `k2`, `k3` (default; aliases `kl`, `mse`, `low_var_kl`) or `abs` (verl's
    /// `|logp - ref_logp|`). verl: `kl_loss_type`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kl_estimator: Option<KlEstimator>,
    /// Apply verl's `low_var_kl` clamps to k3. Default false (verl: true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kl_clamp: Option<bool>,
    /// `ppo` (default), `cispo`, `sapo` or `vespo`. TRL: `loss_type`; verl: `loss_mode`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objective: Option<Objective>,
    /// `token` (default), `sequence` (GSPO; alias `gspo`) or `sequence-sum` (the ratio of
    /// whole sequences and one loss per sequence, TRL's RLOO; no `reduction`). TRL:
    /// `importance_sampling_level`, `loss_type = "rloo"`; verl: `loss_mode = "gspo"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio_level: Option<RatioLevel>,
    /// SAPO temperature for positive advantages, `> 0`. Default 1.0. TRL:
    /// `sapo_temperature_pos`; verl: `tau_pos`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sapo_tau_pos: Option<f64>,
    /// SAPO temperature for non-positive advantages, `> 0`. Default 1.05. TRL:
    /// `sapo_temperature_neg`; verl: `tau_neg`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sapo_tau_neg: Option<f64>,
    /// Multipliers `>= 0` of each token's surrogate term (not of the KL term): importance
    /// weights against the sampler. Per sequence `[..]` or per token `[[..]]`. TRL:
    /// `importance_sampling_ratio`; verl: `rollout_is_weights`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub importance_weights: Option<Advantages>,
    /// TRL `loss_type`: `grpo`, `bnpo`, `dr_grpo`, `dapo` (TRL's default), `cispo`, `sapo`,
    /// `luspo`, `vespo`, or `rloo` (`RLOOTrainer`'s loss); sets the objective and the
    /// reduction as TRL does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_type: Option<TrlLossType>,
    /// TRL `epsilon` (lower clip width; also the upper one unless `epsilon_high`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epsilon: Option<f64>,
    /// TRL `epsilon_high`; under `loss_type = "cispo"` the absolute upper bound of
    /// the ratio (e.g. 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epsilon_high: Option<f64>,
    /// TRL `delta`: the upper bound of the unclipped ratio (the dual clip).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta: Option<f64>,
    /// TRL `importance_sampling_level`: `token` or `sequence`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub importance_sampling_level: Option<RatioLevel>,
    /// TRL `max_completion_length`, the constant of `dr_grpo` (default 512).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_completion_length: Option<f64>,
    /// TRL `sapo_temperature_pos`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sapo_temperature_pos: Option<f64>,
    /// TRL `sapo_temperature_neg`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sapo_temperature_neg: Option<f64>,
    /// TRL's vLLM `importance_sampling_ratio`, given per sequence or per token. Under
    /// `vespo` per token only, summed in log space into the kernel's sequence ratio (not
    /// multiplied into the loss); with `completion_mask` its padded values count there
    /// and in `luspo`'s mean over every position, as in TRL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub importance_sampling_ratio: Option<Advantages>,
    /// TRL `sampling_per_token_logps`: the sampler's log-probabilities, shaped like
    /// `logp`. With `vllm_importance_sampling_mode` it gives the importance ratio
    /// `exp(old_logp - sampling_logp)` (per token, or its row sum for the sequence
    /// modes); it is also what `off_policy_mask_threshold` compares against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling_logp: Option<Ragged<f64>>,
    /// TRL `vllm_importance_sampling_mode`: `token_truncate`, `token_mask`,
    /// `sequence_truncate` or `sequence_mask` (TRL's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vllm_importance_sampling_mode: Option<TrlIsMode>,
    /// TRL `vllm_importance_sampling_clip_min` (default none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vllm_importance_sampling_clip_min: Option<f64>,
    /// TRL `vllm_importance_sampling_clip_max` (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vllm_importance_sampling_clip_max: Option<f64>,
    /// TRL `off_policy_mask_threshold`: drops a sequence with a negative advantage
    /// whose mean `sampling_logp - logp` (or `old_logp - logp`) exceeds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub off_policy_mask_threshold: Option<f64>,
    /// verl `loss_agg_mode`: `token-mean` (verl's default), `seq-mean-token-mean`,
    /// `seq-mean-token-sum` or `seq-mean-token-sum-norm`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_agg_mode: Option<VerlAggMode>,
    /// verl `policy_loss.loss_mode`: `vanilla` (default), `gspo`, `sapo` or `cispo`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_mode: Option<VerlLossMode>,
    /// verl `clip_ratio` (both widths unless `clip_ratio_low` / `clip_ratio_high`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clip_ratio: Option<f64>,
    /// verl `clip_ratio_low`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clip_ratio_low: Option<f64>,
    /// verl `clip_ratio_high`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clip_ratio_high: Option<f64>,
    /// verl `clip_ratio_c`, the dual clip of `vanilla` (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clip_ratio_c: Option<f64>,
    /// verl `loss_scale_factor`, the constant of `seq-mean-token-sum-norm`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_scale_factor: Option<f64>,
    /// verl `kl_loss_coef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kl_loss_coef: Option<f64>,
    /// verl `kl_loss_type` (default `low_var_kl`, clamped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kl_loss_type: Option<KlEstimator>,
    /// verl `tau_pos` (SAPO).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tau_pos: Option<f64>,
    /// verl `tau_neg` (SAPO).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tau_neg: Option<f64>,
    /// VESPO's kernel {`k_pos` (2), `lambda_pos` (3), `k_neg` (3), `lambda_neg` (2)},
    /// for objective `vespo` (verl recipe: `loss_mode = "vespo"`,
    /// `policy_loss.vespo`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vespo: Option<VespoKernel>,
    /// Logits of every token's distribution, `[sequence][token][vocabulary]`, shaped like
    /// `logp` (for the entropy bonus).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logits: Option<Vec<Vec<Vec<f64>>>>,
    /// Entropy coefficient: `loss -= entropy_coef * entropy`, the entropy reduced like
    /// the KL term (TRL: the mean over tokens, or the sum over the global token count
    /// for `cispo`, `dapo`, `vespo`). Needs `logits` or `entropies`. Default 0. verl:
    /// `entropy_coeff`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entropy_coef: Option<f64>,
    /// verl `entropy_coeff`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entropy_coeff: Option<f64>,
    /// TRL `use_bias_correction_kl`: multiply each token's KL term by its importance
    /// ratio (token or sequence level), the gradient going through the ratio too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_bias_correction_kl: Option<bool>,
    /// verl `rollout_is_weights`, per sequence or per token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout_is_weights: Option<Advantages>,
    /// Each token's entropy in nats, shaped like `logp` (finite, `>= 0`), for the entropy
    /// bonus when the caller already has them (TRL's tensor `entropies`); instead of
    /// `logits`, not with them. The response then has no `entropy_gradient`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entropies: Option<Ragged<f64>>,
    /// TRL `completion_mask` (times its `tool_mask`): rectangular rows of 0/1, one per
    /// sequence, giving TRL's padded batch. With it, every per-token field (`logp`,
    /// `old_logp`, `ref_logp`, `sampling_logp`, per-token `advantages` and importance
    /// ratios, `entropies`, `logits`) is a rectangular row of the mask's width, values at
    /// the padded positions included; they are read only where TRL reads them unmasked
    /// (LUSPO's mean over every position, VESPO's sum of the importance ratio) and
    /// otherwise ignored. Per-token response fields are then shaped like the mask.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_mask: Option<Vec<Vec<f64>>>,
    /// TRL `gradient_accumulation_steps` (`>= 1`, default 1): `grpo`, `bnpo`, `dr_grpo`,
    /// `sapo` and `luspo` divide their loss by it (training mode), and their entropy term
    /// too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gradient_accumulation_steps: Option<u64>,
    /// TRL `num_items_in_batch`: the token count of the whole accumulated batch over all
    /// processes, by which (over `num_processes`) `cispo`, `dapo` and `vespo` divide
    /// their token sum and their entropy sum. Default: the batch's own token count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_items_in_batch: Option<u64>,
    /// TRL's `accelerator.num_processes` (`>= 1`, default 1), with `num_items_in_batch`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_processes: Option<u64>,
    /// TRL `vespo_k_pos` (default 2), VESPO's `k` for `A >= 0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vespo_k_pos: Option<f64>,
    /// TRL `vespo_lambda_pos` (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vespo_lambda_pos: Option<f64>,
    /// TRL `vespo_k_neg` (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vespo_k_neg: Option<f64>,
    /// TRL `vespo_lambda_neg` (default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vespo_lambda_neg: Option<f64>,
}

/// Response of `policy-loss`.
///
/// With TRL's `gradient_accumulation_steps` or `num_items_in_batch` the loss is the one
/// `GRPOTrainer._compute_loss` returns for the micro-batch, and `loss`, `pg_loss`, `kl`,
/// `entropy`, `token_weights`, `kl_token_weights`, `gradient` and `entropy_gradient` are
/// all of that divided loss (see the module docs). With `completion_mask`, per-token
/// fields are shaped like the mask.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// `pg_loss + beta * kl - entropy_coef * entropy`, the number an optimiser minimises.
    pub loss: f64,
    /// The reduced surrogate term (negated objective).
    pub pg_loss: f64,
    /// The reduced KL estimate; 0 when `ref_logp` is absent.
    pub kl: f64,
    /// Reduction weights `w_ik` with `loss = sum w_ik (l_ik + beta kl_ik)` (the KL term
    /// uses `kl_token_weights` instead when that is present).
    pub token_weights: Ragged<f64>,
    /// The KL term's own reduction weights, where the convention reduces it differently
    /// from the surrogate (verl's GSPO and SAPO with a `loss_agg_mode` other than
    /// `seq-mean-token-mean`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kl_token_weights: Option<Ragged<f64>>,
    /// Fractions of tokens on the clipped sides: `low`, `high`, `dual`, `total`, counted
    /// as the convention counts them (verl: `pg_clipfrac` = `low + high`,
    /// `pg_clipfrac_lower` = `dual`; TRL: `clip_ratio/low_mean`, `high_mean`,
    /// `region_mean` = `total`).
    pub clip_fraction: ClipFraction,
    /// Mean ratio over tokens.
    pub ratio_mean: f64,
    /// Largest ratio over tokens.
    pub ratio_max: f64,
    /// Mean of `old_logp - logp` over tokens (verl's `ppo_kl`, after its clamp).
    pub ppo_kl: f64,
    /// The ratio used at each token (the sequence ratio repeated under GSPO).
    pub ratio: Ragged<f64>,
    /// Per-token surrogate loss `l_ik` before weighting (times its importance weight).
    pub pg_loss_per_token: Ragged<f64>,
    /// Per-token KL estimate `kl_ik` before weighting (0 without `ref_logp`).
    pub kl_per_token: Ragged<f64>,
    /// `d loss / d logp_ik` (stop-gradient weight for `cispo`; GSPO's token form at
    /// sequence level).
    pub gradient: Ragged<f64>,
    /// The reduced entropy of the token distributions (with `logits` or `entropies`;
    /// under TRL's names its `entropy_loss`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entropy: Option<f64>,
    /// Each token's entropy in nats (with `logits` or `entropies`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entropy_per_token: Option<Ragged<f64>>,
    /// `d loss / d logits` through the entropy term, `[sequence][token][vocabulary]`
    /// (with `logits`; the surrogate's and KL's path through the logits is `gradient`
    /// times `d logp / d logits`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entropy_gradient: Option<Vec<Vec<Vec<f64>>>>,
    /// The convention that computed this: `arlbook`, `trl` or `verl`.
    pub convention: Convention,
}

/// The `policy-loss` entry.
pub struct PolicyLossEntry;

/// The math-level input, settings and surrogate multipliers a request describes
/// (borrowing from it), with TRL's and verl's names resolved.
pub fn inputs(
    request: &Request,
) -> Result<(PolicyLossInput<'_>, PolicyLossConfig, Option<Ragged<f64>>)> {
    let (config, pg_scale) = library_names::resolve(request)?;
    Ok((input_of(request), config, pg_scale))
}

/// The math-level input of a ragged request.
fn input_of(request: &Request) -> PolicyLossInput<'_> {
    let advantages = match &request.advantages {
        Advantages::PerSequence(a) => TokenAdvantages::PerSequence(a),
        Advantages::PerToken(a) => TokenAdvantages::PerToken(a),
    };
    PolicyLossInput {
        logp: &request.logp,
        old_logp: &request.old_logp,
        ref_logp: request.ref_logp.as_ref(),
        advantages,
    }
}

/// The response from a computed loss.
pub fn respond(out: PolicyLoss) -> Response {
    Response {
        loss: out.loss,
        pg_loss: out.pg_loss,
        kl: out.kl,
        token_weights: out.token_weights,
        kl_token_weights: out.kl_token_weights,
        clip_fraction: out.clip_fraction,
        ratio_mean: out.ratio_mean,
        ratio_max: out.ratio_max,
        ppo_kl: out.ppo_kl,
        ratio: out.ratio,
        pg_loss_per_token: out.pg_loss_per_token,
        kl_per_token: out.kl_per_token,
        gradient: out.gradient,
        entropy: None,
        entropy_per_token: None,
        entropy_gradient: None,
        convention: out.convention,
    }
}

impl Entry for PolicyLossEntry {
    const NAME: &'static str = "policy-loss";
    const SUMMARY: &'static str = "Reduced PPO/GSPO/CISPO/SAPO/VESPO/LUSPO/RLOO policy loss with KL, entropy bonus, token weights, clip fractions, gradient";
    type Request = Request;
    type Response = Response;

    fn compute(request: &Request) -> Result<Response> {
        if request.completion_mask.is_some() {
            return padded::compute(request);
        }
        if let Some(field) = padded::luspo_over_grid(request) {
            let lengths = request.logp.lengths();
            if lengths.windows(2).any(|w| w[0] != w[1]) {
                return Err(FieldError::new(
                    field,
                    "makes TRL's `luspo` loss a mean over every position of the padded batch \
                     (padding included), which a ragged batch of unequal rows does not have: \
                     give `completion_mask` with the padded rows",
                ));
            }
            return padded::compute(request);
        }
        let (out, config) = core(request, CoreExtras::default())?;
        finish(request, &config, respond(out))
    }
}

/// Why the GPU cannot take `request` (its CPU path then answers), if it cannot: TRL's
/// padded batch, and LUSPO's mean over it.
pub fn cpu_only(request: &Request) -> Option<&'static str> {
    if request.completion_mask.is_some() {
        Some("TRL's padded batch (completion_mask)")
    } else if padded::luspo_over_grid(request).is_some() {
        Some("TRL's luspo over every position of the batch")
    } else {
        None
    }
}

/// What a padded batch adds to a ragged computation.
#[derive(Debug, Clone, Copy, Default)]
struct CoreExtras<'a> {
    /// TRL's VESPO: each row's log importance ratio summed over its padded positions.
    vespo_row_log_offsets: Option<&'a [f64]>,
}

/// The loss of a ragged request, before the entropy bonus and TRL's scaling.
fn core(request: &Request, extras: CoreExtras<'_>) -> Result<(PolicyLoss, PolicyLossConfig)> {
    let (config, parts) = library_names::resolve_parts(request)?;
    let input = input_of(request);
    let trl_vespo = config.objective == Objective::Vespo && config.convention == Convention::Trl;
    if !trl_vespo {
        let out = policy_loss_scaled(&input, &config, parts.combined()?.as_ref())?;
        return Ok((out, config));
    }
    validate(&input, &config)?;
    if config.ratio_level != RatioLevel::Token {
        return Err(FieldError::new(
            "ratio_level",
            "does not apply to objective vespo, which always forms the true sequence ratio",
        ));
    }
    if parts.sampler.is_some() && parts.sampler_per_sequence {
        return Err(FieldError::new(
            parts.sampler_field,
            "gives one importance ratio per sequence, but TRL's vespo takes a per-token ratio \
             (it requires vllm_importance_sampling_mode token_truncate or token_mask)",
        ));
    }
    let rules = VespoRules {
        trl: true,
        row_log_offsets: extras.vespo_row_log_offsets,
        loss_scale: parts.off_policy.as_ref(),
    };
    let out = vespo_loss_with(
        &input,
        &config,
        &config.vespo,
        parts.sampler.as_ref(),
        rules,
    )?;
    Ok((out, config))
}

/// The entropy bonus and TRL's gradient-accumulation scaling, applied to a computed
/// response of the ragged `request` (the CPU's and the GPU's).
pub fn finish(
    request: &Request,
    config: &PolicyLossConfig,
    response: Response,
) -> Result<Response> {
    let tokens = response.token_weights.total_len();
    let mut response = with_entropy(request, config.convention, response)?;
    scale_response(&mut response, trl_scale(request, tokens)?);
    Ok(response)
}

/// Adds the entropy bonus of `request` (when it has `logits` or `entropies`) to a
/// computed response.
pub fn with_entropy(
    request: &Request,
    convention: Convention,
    mut response: Response,
) -> Result<Response> {
    let weights = match convention {
        Convention::Trl => uniform_weights(&response.token_weights),
        Convention::Arlbook | Convention::Verl => response
            .kl_token_weights
            .clone()
            .unwrap_or_else(|| response.token_weights.clone()),
    };
    if let Some((coef, term)) = entropy_of(request, &weights)? {
        response.loss -= coef * term.reduced;
        response.entropy = Some(term.reduced);
        response.entropy_per_token = Some(term.per_token);
        response.entropy_gradient = term.gradient;
    }
    Ok(response)
}

/// `1 / tokens` at every token of `shape`: TRL's mean over the batch's tokens.
fn uniform_weights(shape: &Ragged<f64>) -> Ragged<f64> {
    let tokens = (shape.total_len() as f64).max(1.0);
    shape.map(|_| 1.0 / tokens)
}

/// The entropy term of a request, reduced with `weights` (shaped like `logp`).
struct Entropy {
    reduced: f64,
    per_token: Ragged<f64>,
    gradient: Option<Vec<Vec<Vec<f64>>>>,
}

/// The coefficient and entropy term of `request`, from its `logits` or its `entropies`
/// (`None` when it has neither and no coefficient).
fn entropy_of(request: &Request, weights: &Ragged<f64>) -> Result<Option<(f64, Entropy)>> {
    let coef = one_of(&[
        ("entropy_coef", request.entropy_coef),
        ("entropy_coeff", request.entropy_coeff),
    ])?;
    match (&request.logits, &request.entropies) {
        (Some(_), Some(_)) => Err(FieldError::new(
            "entropies",
            "give the entropies that `logits` give too; give one of them",
        )),
        (None, None) => {
            if coef.is_some_and(|c| c != 0.0) {
                return Err(FieldError::new(
                    "logits",
                    "are required with an entropy coefficient (the entropy comes from them, \
                     or from `entropies`)",
                ));
            }
            Ok(None)
        }
        (Some(logits), None) => {
            let coef = check::finite("entropy_coef", coef.unwrap_or(0.0))?;
            let term = entropy_term(logits, weights, coef)?;
            Ok(Some((
                coef,
                Entropy {
                    reduced: term.reduced,
                    per_token: term.per_token,
                    gradient: Some(term.gradient),
                },
            )))
        }
        (None, Some(entropies)) => {
            let coef = check::finite("entropy_coef", coef.unwrap_or(0.0))?;
            request
                .logp
                .check_same_shape("logp", "entropies", entropies)?;
            for (i, row) in entropies.iter_rows().enumerate() {
                if let Some(k) = row.iter().position(|h| !(h.is_finite() && *h >= 0.0)) {
                    return Err(FieldError::new(
                        format!("entropies[{i}][{k}]"),
                        format!("must be an entropy in nats (finite, >= 0), got {}", row[k]),
                    ));
                }
            }
            let reduced = entropies
                .flat()
                .iter()
                .zip(weights.flat())
                .map(|(h, u)| h * u)
                .sum();
            Ok(Some((
                coef,
                Entropy {
                    reduced,
                    per_token: entropies.clone(),
                    gradient: None,
                },
            )))
        }
    }
}

/// TRL's factor on the loss of one micro-batch of `tokens` tokens: `1 /
/// gradient_accumulation_steps` for `grpo`, `bnpo`, `dr_grpo`, `sapo` and `luspo`;
/// `tokens * num_processes / max(num_items_in_batch, 1)` for `cispo`, `dapo` and
/// `vespo`, whose token mean becomes the token sum over the global count. 1 when none
/// of the three fields is given.
fn trl_scale(request: &Request, tokens: usize) -> Result<f64> {
    let r = request;
    let given = [
        (
            "gradient_accumulation_steps",
            r.gradient_accumulation_steps.is_some(),
        ),
        ("num_items_in_batch", r.num_items_in_batch.is_some()),
        ("num_processes", r.num_processes.is_some()),
    ];
    let Some(&(first, _)) = given.iter().find(|(_, g)| *g) else {
        return Ok(1.0);
    };
    let Some(loss_type) = r.loss_type else {
        return Err(FieldError::new(
            first,
            "applies with TRL's `loss_type`, which decides what TRL divides the loss by; \
             give it",
        ));
    };
    let global = matches!(
        loss_type,
        TrlLossType::Cispo | TrlLossType::Dapo | TrlLossType::Vespo
    );
    match loss_type {
        TrlLossType::Rloo => Err(FieldError::new(
            first,
            "does not apply to `rloo`: RLOOTrainer's loss is the mean over completions, \
             divided by neither the accumulation steps nor a global token count",
        )),
        _ if global => {
            if r.gradient_accumulation_steps.is_some() {
                return Err(FieldError::new(
                    "gradient_accumulation_steps",
                    "TRL's cispo, dapo and vespo do not divide by it: they divide the token \
                     sum by num_items_in_batch / num_processes (the accumulated batch's token \
                     count per process); give those",
                ));
            }
            let processes = r.num_processes.unwrap_or(1);
            if processes == 0 {
                return Err(FieldError::new("num_processes", "must be at least 1"));
            }
            let items = r.num_items_in_batch.unwrap_or(units(tokens)).max(1);
            Ok(tokens as f64 * processes as f64 / items as f64)
        }
        _ => {
            if let Some(name) = [
                ("num_items_in_batch", r.num_items_in_batch.is_some()),
                ("num_processes", r.num_processes.is_some()),
            ]
            .iter()
            .find_map(|&(n, g)| g.then_some(n))
            {
                return Err(FieldError::new(
                    name,
                    "only TRL's cispo, dapo and vespo divide by the global token count; this \
                     loss_type divides by gradient_accumulation_steps",
                ));
            }
            let steps = r.gradient_accumulation_steps.unwrap_or(1);
            if steps == 0 {
                return Err(FieldError::new(
                    "gradient_accumulation_steps",
                    "must be at least 1",
                ));
            }
            Ok(1.0 / steps as f64)
        }
    }
}

/// Multiplies every part of `response` that is linear in the loss by `factor`.
fn scale_response(response: &mut Response, factor: f64) {
    if factor == 1.0 {
        return;
    }
    let scale = |r: &Ragged<f64>| r.map(|v| v * factor);
    response.loss *= factor;
    response.pg_loss *= factor;
    response.kl *= factor;
    response.token_weights = scale(&response.token_weights);
    response.kl_token_weights = response.kl_token_weights.as_ref().map(scale);
    response.gradient = scale(&response.gradient);
    if let Some(entropy) = response.entropy.as_mut() {
        *entropy *= factor;
    }
    if let Some(gradient) = response.entropy_gradient.as_mut() {
        for v in gradient.iter_mut().flatten().flatten() {
            *v *= factor;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::api::compute;
    use serde_json::json;

    #[test]
    fn article_batch_under_trl_and_verl_names() {
        let s = 3f64.sqrt();
        let logp = json!([
            [-1, -1],
            [-1, -1, -1, -1],
            [-1, -1, -1, -1],
            [-1, -1, -1, -1, -1, -1]
        ]);
        let req = |reduction: &str| {
            json!({"logp": logp, "old_logp": logp, "advantages": [s, -1.0 / s, -1.0 / s, -1.0 / s],
                   "reduction": reduction})
        };
        let loss = |r: &str| {
            compute("policy-loss", req(r)).unwrap()["loss"]
                .as_f64()
                .unwrap()
        };
        assert!(loss("grpo").abs() < 1e-15);
        assert_eq!(loss("grpo"), loss("seq-mean-token-mean"));
        assert_eq!(loss("dapo"), loss("token-mean"));
        assert!((loss("bnpo") - 1.0 / (2.0 * s)).abs() < 1e-14);
        assert!((loss("dr_grpo") - 1.0 / (3.0 * s)).abs() < 1e-14);
        let out = compute("policy-loss", req("token-mean")).unwrap();
        assert_eq!(out["token_weights"][0], json!([0.0625, 0.0625]));
        assert_eq!(out["kl"], json!(0.0));
    }

    #[test]
    fn per_token_advantages_and_errors_name_fields() {
        let ok = compute(
            "policy-loss",
            json!({"logp": [[-1, -2]], "old_logp": [[-1, -2]], "advantages": [[1, -1]]}),
        )
        .unwrap();
        assert_eq!(ok["pg_loss_per_token"], json!([[-1.0, 1.0]]));
        let err = compute(
            "policy-loss",
            json!({"logp": [[-1, -2]], "old_logp": [[-1]], "advantages": [1]}),
        )
        .unwrap_err();
        assert_eq!(err.field, "old_logp[0]");
        let err = compute(
            "policy-loss",
            json!({"logp": [[-1]], "old_logp": [[-1]], "advantages": [1], "beta": 0.1}),
        )
        .unwrap_err();
        assert_eq!(err.field, "ref_logp");
        let err = compute(
            "policy-loss",
            json!({"logp": [[-1]], "old_logp": [[-1]], "advantages": [1], "reduction": "mean"}),
        )
        .unwrap_err();
        assert_eq!(err.field, "reduction");
    }

    #[test]
    fn rloo_refuses_a_reduction_and_counts_empty_rows() {
        let err = compute(
            "policy-loss",
            json!({"logp": [[-1.0]], "old_logp": [[-1.0]], "advantages": [1.0],
                   "loss_type": "rloo", "reduction": "token-mean"}),
        )
        .unwrap_err();
        assert_eq!(err.field, "reduction");
        let out = compute(
            "policy-loss",
            json!({"logp": [[-1.0], []], "old_logp": [[-1.0], []], "advantages": [1.0, 2.0],
                   "loss_type": "rloo"}),
        )
        .unwrap();
        assert_eq!(out["loss"], json!(-1.5));
        assert_eq!(out["convention"], "trl");
    }
    fn field_of(request: serde_json::Value) -> String {
        compute("policy-loss", request).unwrap_err().field
    }

    fn ragged() -> serde_json::Value {
        json!({"logp": [[-0.5, -1.2, -0.9], [-2.0, -0.3]],
               "old_logp": [[-0.6, -1.0, -1.0], [-1.7, -0.5]],
               "advantages": [0.7, -0.4]})
    }

    #[test]
    fn given_entropies_give_the_bonus_that_their_logits_give() {
        let logits = json!([
            [[0.1, 1.0, -0.5], [2.0, 0.0, 0.3], [0.0, 0.0, 0.0]],
            [[1.5, -1.0, 0.2], [0.4, 0.4, -2.0]]
        ]);
        let rows: Vec<Vec<Vec<f64>>> = serde_json::from_value(logits.clone()).unwrap();
        let entropies: Vec<Vec<f64>> = rows
            .iter()
            .map(|r| {
                r.iter()
                    .map(|z| crate::math::entropy::entropy_and_slope(z).0)
                    .collect()
            })
            .collect();
        for names in [
            json!({"loss_type": "grpo", "entropy_coef": 0.1}),
            json!({"loss_mode": "vanilla", "entropy_coeff": 0.1,
                             "loss_agg_mode": "seq-mean-token-sum"}),
        ] {
            let mut with_logits = ragged();
            let mut with_entropies = ragged();
            for (key, value) in names.as_object().unwrap() {
                with_logits[key] = value.clone();
                with_entropies[key] = value.clone();
            }
            with_logits["logits"] = logits.clone();
            with_entropies["entropies"] = json!(entropies);
            let a = compute("policy-loss", with_logits).unwrap();
            let b = compute("policy-loss", with_entropies).unwrap();
            assert!((a["loss"].as_f64().unwrap() - b["loss"].as_f64().unwrap()).abs() < 1e-15);
            assert_eq!(a["entropy"], b["entropy"]);
            assert!(b.get("entropy_gradient").is_none());
        }
    }

    #[test]
    fn entropies_errors_name_the_field() {
        let mut r = ragged();
        r["entropies"] = json!([[0.5, 0.2, 0.1], [0.3, 0.0]]);
        r["logits"] = json!([
            [[0.0, 1.0], [0.0, 1.0], [0.0, 1.0]],
            [[0.0, 1.0], [0.0, 1.0]]
        ]);
        assert_eq!(field_of(r), "entropies");
        let mut r = ragged();
        r["entropies"] = json!([[0.5, -0.2, 0.1], [0.3, 0.0]]);
        assert_eq!(field_of(r), "entropies[0][1]");
        let mut r = ragged();
        r["entropies"] = json!([[0.5, 0.2], [0.3, 0.0]]);
        assert_eq!(field_of(r), "entropies[0]");
        let mut r = ragged();
        r["entropy_coef"] = json!(0.1);
        assert_eq!(field_of(r), "logits");
    }

    #[test]
    fn gradient_accumulation_divides_the_loss_as_trl_does() {
        let at = |extra: serde_json::Value| {
            let mut r = ragged();
            r["ref_logp"] = json!([[-0.4, -1.3, -1.0], [-1.9, -0.4]]);
            r["beta"] = json!(0.05);
            r["entropies"] = json!([[0.5, 0.2, 0.1], [0.3, 0.7]]);
            r["entropy_coef"] = json!(0.02);
            for (key, value) in extra.as_object().unwrap() {
                r[key] = value.clone();
            }
            compute("policy-loss", r).unwrap()
        };
        let one = at(json!({"loss_type": "grpo"}));
        let four = at(json!({"loss_type": "grpo", "gradient_accumulation_steps": 4}));
        for key in ["loss", "pg_loss", "kl", "entropy"] {
            let (a, b) = (one[key].as_f64().unwrap(), four[key].as_f64().unwrap());
            assert!((a / 4.0 - b).abs() < 1e-15, "{key}: {a} {b}");
        }
        assert_eq!(
            four["gradient"][1][0].as_f64().unwrap(),
            one["gradient"][1][0].as_f64().unwrap() / 4.0
        );
        // dapo: the token sum over num_items_in_batch / num_processes (5 tokens here).
        let own = at(json!({"loss_type": "dapo"}));
        let global = at(json!({"loss_type": "dapo", "num_items_in_batch": 20, "num_processes": 2}));
        let (a, b) = (
            own["loss"].as_f64().unwrap(),
            global["loss"].as_f64().unwrap(),
        );
        assert!((a * 5.0 / 10.0 - b).abs() < 1e-15, "{a} {b}");
        assert_eq!(global["token_weights"][0][0], json!(0.1));
        // The batch's own count is the default.
        assert_eq!(
            at(json!({"loss_type": "dapo", "num_items_in_batch": 5})),
            own
        );
    }

    #[test]
    fn accumulation_fields_that_trl_does_not_apply_are_named() {
        let with = |extra: serde_json::Value| {
            let mut r = ragged();
            for (key, value) in extra.as_object().unwrap() {
                r[key] = value.clone();
            }
            field_of(r)
        };
        assert_eq!(
            with(json!({"gradient_accumulation_steps": 2})),
            "gradient_accumulation_steps"
        );
        assert_eq!(
            with(json!({"loss_type": "dapo", "gradient_accumulation_steps": 2})),
            "gradient_accumulation_steps"
        );
        assert_eq!(
            with(json!({"loss_type": "grpo", "num_items_in_batch": 50})),
            "num_items_in_batch"
        );
        assert_eq!(
            with(json!({"loss_type": "bnpo", "num_processes": 2})),
            "num_processes"
        );
        assert_eq!(
            with(json!({"loss_type": "grpo", "gradient_accumulation_steps": 0})),
            "gradient_accumulation_steps"
        );
        assert_eq!(
            with(json!({"loss_type": "cispo", "epsilon_high": 2.0, "num_processes": 0})),
            "num_processes"
        );
        assert_eq!(
            with(json!({"loss_type": "rloo", "gradient_accumulation_steps": 2})),
            "gradient_accumulation_steps"
        );
        // TRL's names with verl's: the mix is refused, naming verl's.
        assert_eq!(
            with(json!({"loss_mode": "vanilla", "num_items_in_batch": 8})),
            "loss_mode"
        );
    }

    fn padded() -> serde_json::Value {
        json!({"logp": [[-0.5, -1.2, 5.0, -0.9], [-2.0, -0.3, 7.0, 7.0]],
               "old_logp": [[-0.6, -1.0, 3.0, -1.0], [-1.7, -0.5, 9.0, 9.0]],
               "completion_mask": [[1, 1, 0, 1], [1, 1, 0, 0]],
               "advantages": [0.7, -0.4], "loss_type": "grpo"})
    }

    #[test]
    fn a_padded_batch_is_its_masked_tokens() {
        let out = compute("policy-loss", padded()).unwrap();
        let mut r = ragged();
        r["loss_type"] = json!("grpo");
        let reference = compute("policy-loss", r).unwrap();
        assert_eq!(out["loss"], reference["loss"]);
        assert_eq!(out["convention"], json!("trl"));
        assert_eq!(out["gradient"][0][2], json!(0.0));
        assert_eq!(out["gradient"][0][3], reference["gradient"][0][2]);
        assert_eq!(out["token_weights"][1], json!([0.25, 0.25, 0.0, 0.0]));
        // Other junk in the padding changes nothing.
        let mut moved = padded();
        moved["logp"][1][3] = json!(-40.0);
        moved["old_logp"][0][2] = json!(0.0);
        assert_eq!(compute("policy-loss", moved).unwrap(), out);
    }

    #[test]
    fn padded_errors_name_the_padded_position() {
        let mut r = padded();
        r["completion_mask"] = json!([[1, 1, 0, 1], [1, 1, 0]]);
        assert_eq!(field_of(r), "completion_mask[1]");
        let mut r = padded();
        r["completion_mask"][0][1] = json!(2);
        assert_eq!(field_of(r), "completion_mask[0][1]");
        let mut r = padded();
        r["completion_mask"] = json!([[0, 0, 0, 0], [0, 0, 0, 0]]);
        assert_eq!(field_of(r), "completion_mask");
        let mut r = padded();
        r["logp"][1] = json!([-1.0, -1.0]);
        assert_eq!(field_of(r), "logp[1]");
        let mut r = padded();
        r["old_logp"] = json!([[-1.0, -1.0, -1.0, -1.0]]);
        assert_eq!(field_of(r), "old_logp");
        // The third masked token of row 0 sits at position 3.
        let mut r = padded();
        r["logp"][0][3] = json!(0.5);
        assert_eq!(field_of(r), "logp[0][3]");
        let mut r = padded();
        r["entropies"] = json!([[0.1, 0.2, 0.3, -1.0], [0.1, 0.1, -5.0, -5.0]]);
        assert_eq!(field_of(r), "entropies[0][3]");
        let mut r = padded();
        r["loss_type"] = serde_json::Value::Null;
        r["loss_agg_mode"] = json!("token-mean");
        assert_eq!(field_of(r), "loss_agg_mode");
    }

    #[test]
    fn luspo_over_unequal_ragged_rows_asks_for_the_mask() {
        let mut r = ragged();
        r["loss_type"] = json!("luspo");
        r["ref_logp"] = json!([[-0.4, -1.3, -1.0], [-1.9, -0.4]]);
        r["beta"] = json!(0.1);
        assert_eq!(field_of(r.clone()), "beta");
        r["beta"] = json!(0.0);
        r["importance_sampling_ratio"] = json!([[1.0, 0.9, 1.1], [1.0, 1.2]]);
        assert_eq!(field_of(r.clone()), "importance_sampling_ratio");
        // One ratio per sequence keeps TRL's (B, 1) loss: computed on the ragged rows.
        r["importance_sampling_ratio"] = json!([1.0, 0.8]);
        assert!(compute("policy-loss", r).is_ok());
    }

    #[test]
    fn trl_vespo_names_and_their_errors() {
        let vespo = |extra: serde_json::Value| {
            let mut r = ragged();
            r["loss_type"] = json!("vespo");
            for (key, value) in extra.as_object().unwrap() {
                r[key] = value.clone();
            }
            r
        };
        let out = compute("policy-loss", vespo(json!({"vespo_k_pos": 1.5}))).unwrap();
        assert_eq!(out["convention"], json!("trl"));
        let same = compute(
            "policy-loss",
            vespo(json!({"convention": "trl", "vespo": {"k_pos": 1.5}})),
        )
        .unwrap();
        assert_eq!(out, same);
        assert_eq!(
            field_of(vespo(json!({"vespo_k_pos": 1.5, "vespo": {"k_pos": 1.5}}))),
            "vespo_k_pos"
        );
        assert_eq!(
            field_of(vespo(json!({"vespo_lambda_neg": -1.0}))),
            "vespo_lambda_neg"
        );
        let mut grpo = vespo(json!({"vespo_k_neg": 2.0}));
        grpo["loss_type"] = json!("grpo");
        assert_eq!(field_of(grpo), "vespo_k_neg");
        assert_eq!(
            field_of(vespo(json!({"importance_sampling_ratio": [1.0, 0.9]}))),
            "importance_sampling_ratio"
        );
        assert_eq!(
            field_of(vespo(
                json!({"sampling_logp": [[-0.6, -1.0, -1.0], [-1.7, -0.5]],
                                  "vllm_importance_sampling_mode": "sequence_mask"})
            )),
            "vllm_importance_sampling_mode"
        );
        assert_eq!(
            field_of(vespo(json!({"importance_sampling_level": "sequence"}))),
            "importance_sampling_level"
        );
    }

    #[test]
    fn trl_vespo_sums_the_importance_ratio_over_the_padding() {
        let request = |pad_ratio: f64| {
            json!({"logp": [[-0.5, -1.2, -0.9], [-2.0, -0.3, -1.0]],
                   "old_logp": [[-0.55, -1.1, -0.9], [-2.1, -0.3, -1.0]],
                   "completion_mask": [[1, 1, 1], [1, 1, 0]],
                   "advantages": [0.7, -0.4], "loss_type": "vespo",
                   "importance_sampling_ratio": [[1.0, 1.1, 0.9], [0.95, 1.0, pad_ratio]]})
        };
        let one = compute("policy-loss", request(1.0)).unwrap();
        let two = compute("policy-loss", request(2.0)).unwrap();
        // Row 1's kernel sees log 2 more; row 0 is unchanged.
        assert_eq!(one["ratio"][0], two["ratio"][0]);
        let (a, b) = (
            one["ratio"][1][0].as_f64().unwrap(),
            two["ratio"][1][0].as_f64().unwrap(),
        );
        assert!((b / a - 2.0).abs() < 1e-12, "{a} {b}");
        assert_ne!(one["loss"], two["loss"]);
        assert_eq!(field_of(request(-1.0)), "importance_sampling_ratio[1][2]");
    }
}

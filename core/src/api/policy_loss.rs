//! `policy-loss`: the reduced per-token policy loss (PPO / GSPO / CISPO / SAPO, with an
//! optional KL term) and its gradient (see [`crate::math::policy_loss`]).

use serde::{Deserialize, Serialize};

use crate::Ragged;
use crate::api::Entry;
use crate::error::Result;
use crate::error::{FieldError, check};
use crate::math::convention::{Convention, one_of};
use crate::math::entropy::entropy_term;
use crate::math::kl::KlEstimator;
use crate::math::policy_loss::vespo::VespoKernel;
use crate::math::policy_loss::{
    ClipFraction, Objective, PolicyLoss, PolicyLossConfig, PolicyLossInput, RatioLevel,
    TokenAdvantages, policy_loss_scaled,
};
use crate::math::reduction::Reduction;

pub mod library_names;
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
    /// `luspo`, or `rloo` (`RLOOTrainer`'s loss); sets the objective and the reduction as
    /// TRL does.
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
    /// TRL's vLLM `importance_sampling_ratio`, given per sequence or per token.
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
    /// the KL term (TRL: the mean over tokens). Needs `logits`. Default 0. verl:
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
}

/// Response of `policy-loss`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// `pg_loss + beta * kl`, the number an optimiser minimises.
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
    /// The reduced entropy of the token distributions (with `logits`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entropy: Option<f64>,
    /// Each token's entropy in nats (with `logits`).
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
    let advantages = match &request.advantages {
        Advantages::PerSequence(a) => TokenAdvantages::PerSequence(a),
        Advantages::PerToken(a) => TokenAdvantages::PerToken(a),
    };
    let input = PolicyLossInput {
        logp: &request.logp,
        old_logp: &request.old_logp,
        ref_logp: request.ref_logp.as_ref(),
        advantages,
    };
    let (config, pg_scale) = library_names::resolve(request)?;
    Ok((input, config, pg_scale))
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
    const SUMMARY: &'static str = "Reduced PPO/GSPO/CISPO/SAPO/VESPO/RLOO policy loss with KL, entropy bonus, token weights, clip fractions, gradient";
    type Request = Request;
    type Response = Response;

    fn compute(request: &Request) -> Result<Response> {
        let (input, config, pg_scale) = inputs(request)?;
        let response = respond(policy_loss_scaled(&input, &config, pg_scale.as_ref())?);
        with_entropy(request, config.convention, response)
    }
}

/// Adds the entropy bonus of `request` (when it has `logits`) to a computed response.
pub fn with_entropy(
    request: &Request,
    convention: Convention,
    mut response: Response,
) -> Result<Response> {
    let coef = one_of(&[
        ("entropy_coef", request.entropy_coef),
        ("entropy_coeff", request.entropy_coeff),
    ])?;
    let Some(logits) = &request.logits else {
        if coef.is_some_and(|c| c != 0.0) {
            return Err(FieldError::new(
                "logits",
                "are required with an entropy coefficient (the entropy comes from them)",
            ));
        }
        return Ok(response);
    };
    let coef = check::finite("entropy_coef", coef.unwrap_or(0.0))?;
    let weights = match convention {
        Convention::Trl => {
            let tokens = (response.token_weights.total_len() as f64).max(1.0);
            response.token_weights.map(|_| 1.0 / tokens)
        }
        Convention::Arlbook | Convention::Verl => response
            .kl_token_weights
            .clone()
            .unwrap_or_else(|| response.token_weights.clone()),
    };
    let term = entropy_term(logits, &weights, coef)?;
    response.loss -= coef * term.reduced;
    response.entropy = Some(term.reduced);
    response.entropy_per_token = Some(term.per_token);
    response.entropy_gradient = Some(term.gradient);
    Ok(response)
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
}

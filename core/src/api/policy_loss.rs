//! `policy-loss`: the reduced per-token policy loss (PPO / GSPO / CISPO / SAPO, with an
//! optional KL term) and its gradient (see [`crate::math::policy_loss`]).

use serde::{Deserialize, Serialize};

use crate::Ragged;
use crate::api::Entry;
use crate::error::Result;
use crate::math::clip::ClipWidths;
use crate::math::kl::KlEstimator;
use crate::math::policy_loss::{
    ClipFraction, Objective, PolicyLoss, PolicyLossConfig, PolicyLossInput, RatioLevel,
    TokenAdvantages, policy_loss,
};
use crate::math::reduction::Reduction;

/// Advantages: one per sequence (`[..]`) or one per token (`[[..] per sequence]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Advantages {
    /// One advantage per sequence.
    PerSequence(Vec<f64>),
    /// One advantage per token, shaped like `logp`.
    PerToken(Ragged<f64>),
}

/// Request of `policy-loss`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// Lower clip width in `[0, 1]`. Default 0.2.
    #[serde(default = "default_eps")]
    pub eps_low: f64,
    /// Upper clip width `>= 0`. Default: `eps_low`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eps_high: Option<f64>,
    /// Dual-clip constant `c > 1` (objective `ppo` only). Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dual_clip: Option<f64>,
    /// `token-mean` (default; aliases `bnpo`, `dapo`), `seq-mean-token-mean` (alias
    /// `grpo`), `seq-mean-token-sum`, `seq-mean-token-sum-norm` (verl: sum / constant)
    /// or `dr_grpo` (TRL: sum / (sequences x constant)).
    #[serde(default)]
    pub reduction: Reduction,
    /// The constant of `seq-mean-token-sum-norm` and `dr_grpo`, `> 0`. Default: the
    /// longest sequence's length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constant: Option<f64>,
    /// KL coefficient `>= 0`. Default 0.
    #[serde(default)]
    pub beta: f64,
    /// `k1`, `k2`, `k3` (default; aliases `kl`, `mse`, `low_var_kl`) or `abs` (verl's
    /// `|logp - ref_logp|`).
    #[serde(default)]
    pub kl_estimator: KlEstimator,
    /// Apply verl's `low_var_kl` clamps to k3. Default false.
    #[serde(default)]
    pub kl_clamp: bool,
    /// `ppo` (default), `cispo` or `sapo`.
    #[serde(default)]
    pub objective: Objective,
    /// `token` (default) or `sequence` (GSPO; alias `gspo`).
    #[serde(default)]
    pub ratio_level: RatioLevel,
    /// SAPO temperature for positive advantages, `> 0`. Default 1.0.
    #[serde(default = "default_tau_pos")]
    pub sapo_tau_pos: f64,
    /// SAPO temperature for non-positive advantages, `> 0`. Default 1.05.
    #[serde(default = "default_tau_neg")]
    pub sapo_tau_neg: f64,
}

fn default_eps() -> f64 {
    0.2
}

fn default_tau_pos() -> f64 {
    1.0
}

fn default_tau_neg() -> f64 {
    1.05
}

/// The documented defaults of the optional fields, with the required ones empty: a base
/// for `Request { .., ..Request::default() }`, not a valid request by itself.
impl Default for Request {
    fn default() -> Self {
        Self {
            logp: Ragged::default(),
            old_logp: Ragged::default(),
            ref_logp: None,
            advantages: Advantages::PerSequence(Vec::new()),
            eps_low: default_eps(),
            eps_high: None,
            dual_clip: None,
            reduction: Reduction::default(),
            constant: None,
            beta: 0.0,
            kl_estimator: KlEstimator::default(),
            kl_clamp: false,
            objective: Objective::default(),
            ratio_level: RatioLevel::default(),
            sapo_tau_pos: default_tau_pos(),
            sapo_tau_neg: default_tau_neg(),
        }
    }
}

/// Response of `policy-loss`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// `pg_loss + beta * kl`, the number an optimiser minimises.
    pub loss: f64,
    /// The reduced surrogate term (negated objective).
    pub pg_loss: f64,
    /// The reduced KL estimate (same reduction); 0 when `ref_logp` is absent.
    pub kl: f64,
    /// Reduction weights `w_ik` with `loss = sum w_ik (l_ik + beta kl_ik)`.
    pub token_weights: Ragged<f64>,
    /// Fractions of tokens on the clipped sides: `low`, `high`, `dual`, `total`.
    pub clip_fraction: ClipFraction,
    /// Mean ratio over tokens.
    pub ratio_mean: f64,
    /// Largest ratio over tokens.
    pub ratio_max: f64,
    /// The ratio used at each token (the sequence ratio repeated under GSPO).
    pub ratio: Ragged<f64>,
    /// Per-token surrogate loss `l_ik` before weighting.
    pub pg_loss_per_token: Ragged<f64>,
    /// `d loss / d logp_ik` (stop-gradient weight for `cispo`; GSPO's token form at
    /// sequence level).
    pub gradient: Ragged<f64>,
}

/// The `policy-loss` entry.
pub struct PolicyLossEntry;

/// The math-level input and settings a request describes (borrowing from it).
pub fn inputs(request: &Request) -> (PolicyLossInput<'_>, PolicyLossConfig) {
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
    let config = PolicyLossConfig {
        objective: request.objective,
        ratio_level: request.ratio_level,
        clip: ClipWidths {
            eps_low: request.eps_low,
            eps_high: request.eps_high.unwrap_or(request.eps_low),
            dual_clip: request.dual_clip,
        },
        sapo_tau_pos: request.sapo_tau_pos,
        sapo_tau_neg: request.sapo_tau_neg,
        reduction: request.reduction,
        constant: request.constant,
        beta: request.beta,
        kl_estimator: request.kl_estimator,
        kl_clamp: request.kl_clamp,
    };
    (input, config)
}

/// The response from a computed loss.
pub fn respond(out: PolicyLoss) -> Response {
    Response {
        loss: out.loss,
        pg_loss: out.pg_loss,
        kl: out.kl,
        token_weights: out.token_weights,
        clip_fraction: out.clip_fraction,
        ratio_mean: out.ratio_mean,
        ratio_max: out.ratio_max,
        ratio: out.ratio,
        pg_loss_per_token: out.pg_loss_per_token,
        gradient: out.gradient,
    }
}

impl Entry for PolicyLossEntry {
    const NAME: &'static str = "policy-loss";
    const SUMMARY: &'static str =
        "Reduced PPO/GSPO/CISPO/SAPO policy loss with KL, token weights, clip fractions, gradient";
    type Request = Request;
    type Response = Response;

    fn compute(request: &Request) -> Result<Response> {
        let (input, config) = inputs(request);
        Ok(respond(policy_loss(&input, &config)?))
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
}

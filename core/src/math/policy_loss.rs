//! The per-token policy loss over a ragged batch of sequences, reduced to one number,
//! with its gradient with respect to every current log-probability.
//!
//! For sequence `i`, token `k`, with `x_ik = logp_ik - logp_old_ik`:
//!
//! ```text
//! ratio   q_ik = exp(x_ik)                                    (ratio_level = token)
//!         q_ik = s_i = exp(mean_k x_ik)                       (ratio_level = sequence, GSPO)
//!         r_i = exp(sum_k x_ik), one loss per sequence        (ratio_level = sequence-sum, RLOO)
//! ppo     l_ik = -min(q A, clip(q, 1-eps_low, 1+eps_high) A)  [dual clip: for A < 0, -max(., c A)]
//! cispo   l_ik = -sg[clip(q, 1-eps_low, 1+eps_high)] A logp_ik
//! sapo    l_ik = -(4 / tau) sigmoid(tau (q - 1)) A,  tau = tau_pos if A > 0 else tau_neg
//! vespo   l_ik = -sg[phi(exp(sum_k x_ik))] A logp_ik, phi a gamma kernel (see [`vespo`])
//! loss    = sum_ik w_ik l_ik + beta * sum_ik w_ik kl_ik       (w: the reduction's weights)
//! ```
//!
//! Sources: PPO (Schulman et al. 2017, eq. 7) with DAPO's decoupled widths (Yu et al.
//! 2025, section 3.1); GSPO (Zheng et al. 2025, arXiv 2507.18071, sections 4.1-4.2; verl
//! `compute_policy_loss_gspo`, TRL `importance_sampling_level = "sequence"`); CISPO
//! (MiniMax-M1, arXiv 2506.13585, section 3.1; verl `compute_policy_loss_cispo`); SAPO
//! (arXiv 2511.20347; TRL `loss_type = "sapo"`, verl `compute_policy_loss_sapo`); the KL
//! term as TRL adds `beta * per_token_kl` before reducing and verl adds
//! `kl_loss_coef * agg_loss(kld)` (the same number, since reductions are linear).
//!
//! ## Gradient
//! [`PolicyLoss::gradient`] is `d loss / d logp_ik`. For `ppo` and `sapo` at token level
//! it is the exact derivative. At sequence level it is GSPO's token form
//! `s_ik = sg[s_i] * pi_ik / sg[pi_ik]` (what verl implements): every token of row `i`
//! gets `w_i * d l / d log s`. Because every reduction gives all tokens of a row the same
//! weight, this equals the exact derivative of the loss whenever the advantage is
//! constant along the sequence (outcome rewards); with per-token advantages it is the
//! GSPO-token gradient instead. For `cispo` the clipped weight is held constant
//! (stop-gradient), so the gradient is `-w_ik * clip(q) * A`, not the derivative of the
//! loss value.
//!
//! ## Clip fractions
//! Under arlbook's rules, fractions of all valid tokens: `low` = `q < 1 - eps_low` with
//! `A < 0`; `high` = `q > 1 + eps_high` with `A > 0`; `dual` = `q > c` with `A < 0`
//! (dual clip set); `total` = their sum. Under `ppo` these are exactly the tokens whose
//! gradient the clip zeroes; for `cispo` and `sapo` they mark tokens outside the band on
//! the side that matters. Under a library's convention they are counted as that library
//! counts them (TRL: sign-gated, over sequences at sequence level, none for SAPO,
//! CISPO's `coef > epsilon_high`; verl: `pg_clipfrac` = `low + high` over every token
//! where the clipped term is selected, `pg_clipfrac_lower` = `dual`); see
//! [`library`].
//!
//! ## Conventions
//! Under arlbook's names the ratio is exact (an overflow is an error) and the reduction is
//! always the one requested. The libraries' own behaviour is reproduced under their
//! names ([`library`]): verl clamps the log-ratio to `[-20, 20]` (GSPO's sequence
//! log-ratio to at most 10) with no slope where clamped, and reduces GSPO's and SAPO's
//! surrogate by `seq-mean-token-mean` whatever `loss_agg_mode` says; TRL counts empty
//! completions in its per-sequence means and gives the exact sequence-level gradient
//! with per-token advantages. TRL's CISPO caps the ratio at an absolute `epsilon_high`
//! (e.g. 5) with no lower bound, which is `eps_low = 1`, `eps_high = epsilon_high - 1`
//! in arlbook's names.

use serde::{Deserialize, Serialize};

use crate::Ragged;
use crate::error::{FieldError, Result, check};
use crate::math::clip::{ClipWidths, surrogate_point};
use crate::math::convention::Convention;
use crate::math::kl::KlEstimator;
use crate::math::reduction::{Reduction, row_weights_by};

/// The surrogate objective per token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Objective {
    /// PPO's clipped surrogate (GRPO, DAPO, GSPO).
    #[default]
    Ppo,
    /// Clipped, detached importance weight times `logp` (CISPO).
    Cispo,
    /// Soft sigmoid gate instead of a hard clip (SAPO).
    Sapo,
    /// A gamma kernel of the true sequence ratio as a detached coefficient on
    /// `A * logp` (VESPO; see [`vespo`]).
    Vespo,
}

/// Where the importance ratio is formed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum RatioLevel {
    /// One ratio per token.
    #[default]
    Token,
    /// One ratio per sequence, the geometric mean of its token ratios (GSPO).
    #[serde(alias = "gspo")]
    Sequence,
    /// One ratio per sequence, the product of its token ratios, and one loss per
    /// sequence averaged over all sequences (TRL's RLOO; see [`sequence_sum`]).
    #[serde(rename = "sequence-sum")]
    SequenceSum,
}

/// Advantages per sequence (outcome rewards) or per token.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TokenAdvantages<'a> {
    /// One advantage per sequence, shared by its tokens.
    PerSequence(&'a [f64]),
    /// One advantage per token, shaped like `logp`.
    PerToken(&'a Ragged<f64>),
}

/// The inputs of the loss; field names in errors are the API's (`logp`, `old_logp`,
/// `ref_logp`, `advantages`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PolicyLossInput<'a> {
    /// Current log-probabilities `logp_ik` of the sampled tokens.
    pub logp: &'a Ragged<f64>,
    /// Log-probabilities under the collecting policy.
    pub old_logp: &'a Ragged<f64>,
    /// Log-probabilities under the KL reference, if any.
    pub ref_logp: Option<&'a Ragged<f64>>,
    /// The advantages.
    pub advantages: TokenAdvantages<'a>,
}

/// Settings of the loss.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PolicyLossConfig {
    /// Per-token objective.
    pub objective: Objective,
    /// Token or sequence ratios.
    pub ratio_level: RatioLevel,
    /// Clip widths (the dual clip applies to `ppo` only).
    pub clip: ClipWidths,
    /// SAPO temperature for `A > 0`.
    pub sapo_tau_pos: f64,
    /// SAPO temperature for `A <= 0`.
    pub sapo_tau_neg: f64,
    /// How per-token terms are averaged.
    pub reduction: Reduction,
    /// The constant of the constant-denominator reductions.
    pub constant: Option<f64>,
    /// KL coefficient `beta >= 0`.
    pub beta: f64,
    /// KL estimator.
    pub kl_estimator: KlEstimator,
    /// Apply verl's `k3` clamps.
    pub kl_clamp: bool,
    /// Whose rules decide the edge cases (see [`crate::math::convention`]).
    pub convention: Convention,
    /// TRL's `use_bias_correction_kl`: each token's KL term times its importance ratio.
    pub kl_bias_correction: bool,
    /// VESPO's kernel (objective `vespo`).
    pub vespo: vespo::VespoKernel,
}

impl Default for PolicyLossConfig {
    fn default() -> Self {
        Self {
            objective: Objective::Ppo,
            ratio_level: RatioLevel::Token,
            clip: ClipWidths::symmetric(0.2),
            sapo_tau_pos: 1.0,
            sapo_tau_neg: 1.05,
            reduction: Reduction::TokenMean,
            constant: None,
            beta: 0.0,
            kl_estimator: KlEstimator::K3,
            kl_clamp: false,
            convention: Convention::Arlbook,
            kl_bias_correction: false,
            vespo: vespo::VespoKernel::default(),
        }
    }
}

/// Fractions of valid tokens on each clipped side (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct ClipFraction {
    /// `q < 1 - eps_low` with `A < 0`.
    pub low: f64,
    /// `q > 1 + eps_high` with `A > 0`.
    pub high: f64,
    /// `q > c` with `A < 0`, dual clip set.
    pub dual: f64,
    /// `low + high + dual`.
    pub total: f64,
}

/// The loss and everything a figure or a trainer logs about it.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyLoss {
    /// `pg_loss + beta * kl`, to minimise.
    pub loss: f64,
    /// The reduced surrogate term (the negated objective).
    pub pg_loss: f64,
    /// The reduced KL estimate (0 without a reference).
    pub kl: f64,
    /// Reduction weights `w_ik` (of the surrogate term; also of the KL term unless
    /// `kl_token_weights` is set).
    pub token_weights: Ragged<f64>,
    /// The KL term's own weights, where the convention reduces it differently (verl's
    /// GSPO and SAPO).
    pub kl_token_weights: Option<Ragged<f64>>,
    /// Per-token KL estimate `kl_ik` (0 without a reference).
    pub kl_per_token: Ragged<f64>,
    /// Mean of `old_logp - logp` over tokens (verl's `ppo_kl`).
    pub ppo_kl: f64,
    /// The convention that computed this.
    pub convention: Convention,
    /// Per-token surrogate loss `l_ik` (times its multiplier, if any).
    pub pg_loss_per_token: Ragged<f64>,
    /// Per-token ratio used (`s_i` repeated at sequence level).
    pub ratio: Ragged<f64>,
    /// Clip fractions.
    pub clip_fraction: ClipFraction,
    /// Mean ratio over valid tokens.
    pub ratio_mean: f64,
    /// Largest ratio over valid tokens.
    pub ratio_max: f64,
    /// `d loss / d logp_ik` (see the module docs for GSPO and CISPO).
    pub gradient: Ragged<f64>,
}

/// Every value finite and `<= 0` (NaN fails `<=`), scanned without branches.
fn all_log_probs(values: &[f64]) -> bool {
    values.chunks(4096).all(|chunk| {
        chunk
            .iter()
            .fold(true, |ok, &v| ok & (f64::MIN..=0.0).contains(&v))
    })
}

/// True when the log-probability arrays line up with `logp` and every value is a valid
/// log-probability: one scan of all of them, split across threads like the token pass.
/// Only when it is false does [`validate`] search for (and name) the first bad entry.
fn log_probs_line_up_and_are_valid(input: &PolicyLossInput<'_>) -> bool {
    let arrays: Vec<&[f64]> = [Some(input.logp), Some(input.old_logp), input.ref_logp]
        .into_iter()
        .flatten()
        .map(|values| {
            if values.offsets() == input.logp.offsets() {
                Some(values.flat())
            } else {
                None
            }
        })
        .collect::<Option<_>>()
        .unwrap_or_default();
    if arrays.is_empty() {
        return false;
    }
    let tokens = input.logp.total_len();
    let half = tokens / 2;
    if token_pass::thread_count(tokens) < 2 {
        return arrays.iter().all(|a| all_log_probs(a));
    }
    let (first, second) = crate::parallel::join(
        || arrays.iter().all(|a| all_log_probs(&a[..half])),
        || arrays.iter().all(|a| all_log_probs(&a[half..])),
    );
    first & second
}

fn check_log_probs(field: &str, values: &Ragged<f64>) -> Result<()> {
    values.check_finite(field)?;
    for (i, row) in values.iter_rows().enumerate() {
        if let Some(k) = row.iter().position(|&v| v > 0.0) {
            return Err(FieldError::new(
                format!("{field}[{i}][{k}]"),
                format!("must be a log-probability (<= 0), got {}", row[k]),
            ));
        }
    }
    Ok(())
}

/// Checks shapes, log-probabilities, advantages and settings (what [`policy_loss`] checks
/// before computing), naming the API's fields.
pub fn validate(input: &PolicyLossInput<'_>, config: &PolicyLossConfig) -> Result<()> {
    // The common, valid case skips the per-array searches; otherwise they run in their
    // usual order, so the first problem reported is the same either way.
    validate_with(input, config, log_probs_line_up_and_are_valid(input))
}

/// [`validate`], skipping the log-probability value checks when `log_probs_known_valid`.
fn validate_with(
    input: &PolicyLossInput<'_>,
    config: &PolicyLossConfig,
    log_probs_known_valid: bool,
) -> Result<()> {
    let known_valid = log_probs_known_valid;
    let logp = input.logp;
    if logp.total_len() == 0 {
        return Err(FieldError::new("logp", "must contain at least one token"));
    }
    logp.check_same_shape("logp", "old_logp", input.old_logp)?;
    if !known_valid {
        check_log_probs("logp", logp)?;
        check_log_probs("old_logp", input.old_logp)?;
    }
    if let Some(reference) = input.ref_logp {
        logp.check_same_shape("logp", "ref_logp", reference)?;
        if !known_valid {
            check_log_probs("ref_logp", reference)?;
        }
    }
    match input.advantages {
        TokenAdvantages::PerSequence(a) => {
            check::same_len("advantages", a.len(), "logp", logp.rows())?;
            check::all_finite("advantages", a)?;
        }
        TokenAdvantages::PerToken(a) => {
            logp.check_same_shape("logp", "advantages", a)?;
            a.check_finite("advantages")?;
        }
    }
    if config.objective == Objective::Cispo && config.clip.eps_high < 0.0 {
        // CISPO only clamps a weight: an upper bound below 1 (TRL's `epsilon_high < 1`)
        // is fine as long as it is not below the lower one.
        config.clip.validate_without_eps_high()?;
        if config.clip.ratio_high() < config.clip.ratio_low() {
            return Err(FieldError::new(
                "eps_high",
                "puts the upper ratio bound below the lower one",
            ));
        }
    } else {
        config.clip.validate()?;
    }
    if config.clip.dual_clip.is_some() && config.objective != Objective::Ppo {
        return Err(FieldError::new(
            "dual_clip",
            "applies to objective `ppo` only; remove it or choose `ppo`",
        ));
    }
    if config.objective == Objective::Sapo {
        check::positive("sapo_tau_pos", config.sapo_tau_pos)?;
        check::positive("sapo_tau_neg", config.sapo_tau_neg)?;
    }
    check::non_negative("beta", config.beta)?;
    if config.beta > 0.0 && input.ref_logp.is_none() {
        return Err(FieldError::new(
            "ref_logp",
            "is required when beta > 0 (the KL term needs reference log-probabilities)",
        ));
    }
    Ok(())
}

/// Per-token loss and its derivative with respect to the token's own `logp`.
struct TokenTerm {
    loss: f64,
    d_loss_d_logp: f64,
}

#[inline]
fn token_term(ratio: f64, advantage: f64, logp: f64, config: &PolicyLossConfig) -> TokenTerm {
    let widths = &config.clip;
    match config.objective {
        Objective::Ppo => {
            let p = surrogate_point(ratio, advantage, widths);
            // d ratio / d logp = ratio (token level, or GSPO's straight-through form).
            TokenTerm {
                loss: -p.objective,
                d_loss_d_logp: -p.d_objective_d_ratio * ratio,
            }
        }
        Objective::Cispo => {
            let weight = ratio.clamp(widths.ratio_low(), widths.ratio_high());
            TokenTerm {
                loss: -weight * advantage * logp,
                d_loss_d_logp: -weight * advantage,
            }
        }
        // VESPO's coefficient is per sequence and computed by `vespo` before any token
        // pass; this is its term at coefficient 1.
        Objective::Vespo => TokenTerm {
            loss: -advantage * logp,
            d_loss_d_logp: -advantage,
        },
        Objective::Sapo => {
            let tau = if advantage > 0.0 {
                config.sapo_tau_pos
            } else {
                config.sapo_tau_neg
            };
            let sigma = 1.0 / (1.0 + (-tau * (ratio - 1.0)).exp());
            TokenTerm {
                loss: -(4.0 / tau) * sigma * advantage,
                d_loss_d_logp: -4.0 * sigma * (1.0 - sigma) * ratio * advantage,
            }
        }
    }
}

/// GSPO's sequence ratio `exp(min(mean_k (logp - old_logp), limit))`, one per row (1
/// for an empty row, which has no token to carry it).
fn sequence_ratios(logp: &Ragged<f64>, old_logp: &Ragged<f64>, limit: f64) -> Vec<f64> {
    logp.iter_rows()
        .zip(old_logp.iter_rows())
        .map(|(row, old)| {
            if row.is_empty() {
                return 1.0;
            }
            let log_ratio_sum: f64 = row.iter().zip(old).map(|(a, b)| a - b).sum();
            (log_ratio_sum / row.len() as f64).min(limit).exp()
        })
        .collect()
}

/// What a whole-sequence ratio (TRL's RLOO) cannot be combined with.
fn check_sequence_sum(config: &PolicyLossConfig, pg_scale: Option<&Ragged<f64>>) -> Result<()> {
    if config.objective != Objective::Ppo {
        return Err(FieldError::new(
            "objective",
            "a whole-sequence ratio (sequence-sum, TRL's RLOO) takes the ppo objective",
        ));
    }
    if config.beta > 0.0 {
        return Err(FieldError::new(
            "beta",
            "TRL's RLOO has no KL term in its loss: it subtracts beta x sum(old - ref) from \
             the reward (group-advantages with beta and sequence_kl)",
        ));
    }
    if pg_scale.is_some() {
        return Err(FieldError::new(
            "importance_weights",
            "are per token; a whole-sequence ratio (sequence-sum) has one loss per sequence",
        ));
    }
    Ok(())
}

/// The error for a ratio that overflowed, naming its token.
fn overflow_error(logp: &Ragged<f64>, ratio: &[f64]) -> FieldError {
    let flat = ratio.iter().position(|v| !v.is_finite()).unwrap_or(0);
    let i = logp.offsets().partition_point(|&o| o <= flat) - 1;
    let k = flat - logp.offsets()[i];
    FieldError::new(
        format!("logp[{i}][{k}]"),
        "exp(logp - old_logp) overflows f64; the policies are too far apart",
    )
}

/// Computes the policy loss, its reduction weights, clip statistics and gradient.
///
/// One pass over the tokens into preallocated flat buffers: this runs on every slider
/// move in the notebook and on every batch of the trainer.
pub fn policy_loss(input: &PolicyLossInput<'_>, config: &PolicyLossConfig) -> Result<PolicyLoss> {
    policy_loss_scaled(input, config, None)
}

/// [`policy_loss`] with each token's surrogate term multiplied by `pg_scale` (finite,
/// `>= 0`, shaped like `logp`: importance weights against the sampler, off-policy
/// masks; see [`library`]).
pub fn policy_loss_scaled(
    input: &PolicyLossInput<'_>,
    config: &PolicyLossConfig,
    pg_scale: Option<&Ragged<f64>>,
) -> Result<PolicyLoss> {
    // Shapes, advantages and settings first; the log-probability values are checked by
    // the token pass as it reads them (one read of the inputs, not two). Whenever
    // anything fails, the full `validate` runs, so the error reported is the one its
    // order gives.
    let first_failure = |error: FieldError| validate(input, config).err().unwrap_or(error);
    if config.objective == Objective::Vespo {
        validate(input, config)?;
        if config.ratio_level != RatioLevel::Token {
            return Err(FieldError::new(
                "ratio_level",
                "does not apply to objective vespo, which always forms the true sequence ratio",
            ));
        }
        return vespo::vespo_loss(input, config, &config.vespo, pg_scale);
    }
    if config.ratio_level == RatioLevel::SequenceSum {
        validate(input, config)?;
        check_sequence_sum(config, pg_scale)?;
        return sequence_sum::sequence_sum_loss(input, config);
    }
    validate_with(input, config, true).map_err(first_failure)?;
    let plan = library::plan(input, config, pg_scale).map_err(first_failure)?;
    let weights = &plan.pg_weights;
    let sequence_level = match config.ratio_level {
        RatioLevel::Token | RatioLevel::SequenceSum => None,
        RatioLevel::Sequence => Some(sequence_ratios(
            input.logp,
            input.old_logp,
            plan.sequence_log_ratio_limit,
        )),
    };
    let source = sequence_level.as_deref().map_or(
        RatioSource::PerToken(plan.token_log_ratio_limit),
        RatioSource::PerRow,
    );
    let pass = token_pass::run(&plan.pass_input(input), config, source, weights);
    if !pass.log_probs_valid {
        return Err(first_failure(FieldError::new(
            "logp",
            "must hold finite log-probabilities (<= 0)",
        )));
    }
    if !pass.ratios_finite {
        return Err(overflow_error(input.logp, &pass.ratio));
    }
    // Row sums in row order: the same numbers as `weighted_sum` over the per-token terms.
    let weighted =
        |row_sums: &[f64]| -> f64 { row_sums.iter().zip(weights).map(|(s, w)| w * s).sum() };
    let pg_loss = weighted(&pass.pg_row_sums);
    let kl = weighted(&pass.kl_row_sums);
    let loss = pg_loss + config.beta * kl;
    let tokens = pass.ratio.len() as f64;
    let fraction = |n: usize| n as f64 / tokens;
    let (low, high, dual) = (pass.clipped_low, pass.clipped_high, pass.dual_clipped);
    let ratio_mean = pass.ratio_row_sums.iter().sum::<f64>() / tokens;
    let finite = [loss, pg_loss, kl, ratio_mean]
        .iter()
        .all(|v| v.is_finite())
        && pass.outputs_finite;
    if !finite {
        return Err(FieldError::new(
            "logp",
            "the loss or its gradient overflows f64 for these inputs (ratios or KL too large)",
        ));
    }
    let mut out = PolicyLoss {
        loss,
        pg_loss,
        kl,
        token_weights: input.logp.with_values(pass.token_weights)?,
        kl_token_weights: None,
        kl_per_token: input.logp.with_values(pass.kl)?,
        ppo_kl: 0.0,
        convention: config.convention,
        pg_loss_per_token: input.logp.with_values(pass.pg)?,
        clip_fraction: ClipFraction {
            low: fraction(low),
            high: fraction(high),
            dual: fraction(dual),
            total: fraction(low + high + dual),
        },
        ratio_mean,
        ratio_max: pass.ratio_max,
        ratio: input.logp.with_values(pass.ratio)?,
        gradient: input.logp.with_values(pass.gradient)?,
    };
    library::finish(&plan, input, config, &mut out)?;
    Ok(out)
}

pub mod library;
pub mod sequence_sum;
mod token_pass;
pub mod vespo;
use token_pass::RatioSource;

#[cfg(test)]
mod tests;

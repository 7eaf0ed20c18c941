//! One rollout batch's update of the table: the reduced clipped loss of
//! [`crate::math::policy_loss`] on the table's log-probabilities, its gradient chained
//! back to the logits, and `epochs` optimiser steps against the same batch.

use crate::Ragged;
use crate::error::{FieldError, Result};
use crate::math::clip::ClipWidths;
use crate::math::kl::KlEstimator;
use crate::math::policy_loss::{
    PolicyLoss, PolicyLossConfig, PolicyLossInput, TokenAdvantages, policy_loss,
};
use crate::math::reduction::Reduction;

use super::optimizer::Optimizer;
use super::table::{LogitTable, add_token_gradient, token_rows};

/// The loss settings of an update.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UpdateSettings {
    /// Clip widths `eps_low`, `eps_high` (no dual clip).
    pub clip: ClipWidths,
    /// How per-token terms are averaged.
    pub reduction: Reduction,
    /// The constant `C` of `dr_grpo` and `seq-mean-token-sum-norm` (`None`: the
    /// longest response of the batch).
    pub constant: Option<f64>,
    /// KL coefficient `beta >= 0` (0: no KL term).
    pub beta: f64,
    /// The per-token KL estimator of the KL term.
    pub kl_estimator: KlEstimator,
    /// Optimiser steps on each rollout batch, `E >= 1`.
    pub epochs: usize,
}

impl Default for UpdateSettings {
    fn default() -> Self {
        Self {
            clip: ClipWidths::symmetric(0.2),
            reduction: Reduction::TokenMean,
            constant: None,
            beta: 0.0,
            kl_estimator: KlEstimator::K3,
            epochs: 1,
        }
    }
}

impl UpdateSettings {
    /// The configuration of [`policy_loss`]: PPO's token-level clipped surrogate under
    /// arlbook's conventions.
    pub fn loss_config(&self) -> PolicyLossConfig {
        PolicyLossConfig {
            clip: self.clip,
            reduction: self.reduction,
            constant: self.constant,
            beta: self.beta,
            kl_estimator: self.kl_estimator,
            ..PolicyLossConfig::default()
        }
    }
}

/// The responses a batch trains on and one advantage for each (outcome rewards: every
/// token of a response shares it).
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    /// Token sequences, each non-empty.
    pub responses: Vec<Vec<usize>>,
    /// One advantage per response.
    pub advantages: Vec<f64>,
}

/// What an update reports.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct UpdateStats {
    /// Mean over the epochs of the fraction of tokens clipped low (`A < 0`,
    /// `ratio < 1 - eps_low`). The first epoch has ratio 1 everywhere, so it adds 0.
    pub clip_low: f64,
    /// The same for tokens clipped high (`A > 0`, `ratio > 1 + eps_high`).
    pub clip_high: f64,
    /// The loss at the first epoch, where the policy is still the sampling one.
    pub loss: f64,
    /// The reduced KL estimate at the first epoch (0 with `beta = 0`).
    pub kl_estimate: f64,
}

/// The log-probability of every token of `responses` under a table whose log-softmax
/// is `log_probs`, one row per response.
pub fn token_log_probs(
    table: &LogitTable,
    log_probs: &[f64],
    responses: &[Vec<usize>],
) -> Ragged<f64> {
    let vocab = table.vocab();
    let mut out = Ragged::default();
    let mut row_values = Vec::with_capacity(table.max_length());
    for response in responses {
        row_values.clear();
        row_values.extend(
            token_rows(table, response)
                .zip(response)
                .map(|(row, &token)| log_probs[row * vocab + token]),
        );
        out.push_row(&row_values);
    }
    out
}

/// The reduced loss at `table` for a batch sampled under `old_logp`, and its gradient
/// with respect to every logit of the table (the table's layout).
///
/// The loss is [`policy_loss`] on `logp_ik = log pi_z(token_ik | state_ik)`; its
/// gradient `d loss / d logp_ik` is chained through
/// `d logp_ik / d z_s,j = 1{s = state_ik} (1{j = token_ik} - pi_z(j | s))`, exact for
/// the token-level PPO objective.
pub fn loss_and_gradient(
    table: &LogitTable,
    batch: &Batch,
    old_logp: &Ragged<f64>,
    ref_logp: Option<&Ragged<f64>>,
    settings: &UpdateSettings,
) -> Result<(PolicyLoss, Vec<f64>)> {
    let log_probs = table.log_probs();
    let logp = token_log_probs(table, &log_probs, &batch.responses);
    let input = PolicyLossInput {
        logp: &logp,
        old_logp,
        ref_logp: if settings.beta > 0.0 { ref_logp } else { None },
        advantages: TokenAdvantages::PerSequence(&batch.advantages),
    };
    let loss = policy_loss(&input, &settings.loss_config())?;
    let probs: Vec<f64> = log_probs.iter().map(|l| l.exp()).collect();
    let vocab = table.vocab();
    let mut gradient = vec![0.0; table.logits().len()];
    for (response, d_logp) in batch.responses.iter().zip(loss.gradient.iter_rows()) {
        for ((row, &token), &g) in token_rows(table, response).zip(response).zip(d_logp) {
            add_token_gradient(&mut gradient, &probs, vocab, row, token, g);
        }
    }
    Ok((loss, gradient))
}

/// Trains `table` on `batch` for `settings.epochs` optimiser steps: the old
/// log-probabilities are the table's at entry (the policy that sampled the batch), the
/// reference ones `reference`'s. Fails (naming `logp`, from [`policy_loss`]) when a
/// ratio or KL term overflows; the caller names the setting to blame.
pub fn update(
    table: &mut LogitTable,
    reference: &LogitTable,
    optimizer: &mut Optimizer,
    batch: &Batch,
    settings: &UpdateSettings,
) -> Result<UpdateStats> {
    if batch.responses.is_empty() {
        return Err(FieldError::new(
            "responses",
            "a batch needs at least one response",
        ));
    }
    let old_logp = token_log_probs(table, &table.log_probs(), &batch.responses);
    let ref_logp = token_log_probs(reference, &reference.log_probs(), &batch.responses);
    let mut stats = UpdateStats::default();
    let epochs = settings.epochs.max(1);
    for epoch in 0..epochs {
        let (loss, gradient) =
            loss_and_gradient(table, batch, &old_logp, Some(&ref_logp), settings)?;
        if epoch == 0 {
            stats.loss = loss.loss;
            stats.kl_estimate = loss.kl;
        }
        stats.clip_low += loss.clip_fraction.low;
        stats.clip_high += loss.clip_fraction.high;
        optimizer.step(table.logits_mut(), &gradient);
    }
    stats.clip_low /= epochs as f64;
    stats.clip_high /= epochs as f64;
    Ok(stats)
}

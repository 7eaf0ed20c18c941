//! Pre-flight checks before the first GRPO update (the article's list for a first
//! optimizer step); a failure stops the run with the reason:
//! - the importance ratio is 1 on the collecting snapshot (within f32 rounding of two
//!   differently padded passes), checked on the first microbatch of the first update;
//! - prompt, observation and padding tokens carry no loss: each row's loss mask covers
//!   exactly the tokens the policy generated;
//! - a group with equal rewards gets zero advantage and a zero policy gradient.

use anyhow::{Result, bail};
use arlbook_core::Ragged;
use arlbook_core::math::advantage::group_advantages;
use arlbook_core::math::reduction::row_weights_by;
use burn::prelude::*;

use super::settings::{advantage_options, surrogate_settings};
use crate::learner::batching::{micro_batch, weight_tensor};
use crate::learner::loss::{SurrogateInputs, SurrogateSettings, surrogate_loss};
use crate::learner::optimizer::global_norm;
use crate::policy::fused::score::{Entropy, Path, score, weights_for};
use crate::policy::rollout::Rollout;
use crate::run::trainer::{Trainer, vocab};

/// Largest |ratio - 1| the pre-flight check accepts on the collecting snapshot (f32
/// rounding of two differently padded passes).
pub const RATIO_TOLERANCE: f64 = 1e-3;

/// The ratio check: `max_deviation` is the largest |ratio - 1| of the first
/// microbatch of the first update.
pub fn check_ratio(max_deviation: f64) -> Result<()> {
    if max_deviation > RATIO_TOLERANCE {
        bail!(
            "pre-flight: the importance ratio on the collecting snapshot is not 1 (max |ratio - 1| = {max_deviation:.2e} > {RATIO_TOLERANCE:.0e}); the training forward does not score tokens the way sampling did"
        );
    }
    Ok(())
}

/// The mask and zero-gradient checks on the first batch; returns the notes to print.
pub fn check_batch(trainer: &Trainer, batch: &[Vec<Rollout>]) -> Result<Vec<String>> {
    let mut notes = vec![check_masks(trainer, batch)?];
    check_equal_rewards(trainer)?;
    if let Some(group) = batch.first() {
        check_zero_gradient(trainer, group)?;
        notes.push(
            "pre-flight ok: equal rewards give zero advantages and a zero policy gradient"
                .to_owned(),
        );
    }
    Ok(notes)
}

/// Only generated tokens carry loss: the mask's row sums equal the generated token
/// counts, and every masked target is a token the policy generated.
fn check_masks(trainer: &Trainer, batch: &[Vec<Rollout>]) -> Result<String> {
    let rollouts: Vec<&Rollout> = batch.iter().flatten().collect();
    let micro = micro_batch(&rollouts, vocab(), &trainer.plain);
    let width = micro.padded.seq_len.saturating_sub(1);
    for (row, rollout) in rollouts.iter().enumerate() {
        let mask = &micro.padded.loss_mask[row * width..(row + 1) * width];
        let masked: usize = mask.iter().map(|&m| usize::from(m)).sum();
        let generated = rollout.record.generated_tokens();
        if masked != generated {
            bail!(
                "pre-flight: row {row} has {masked} loss tokens but {generated} generated tokens"
            );
        }
        let roles = rollout.record.generated_mask();
        if let Some(j) = (0..width).find(|&j| mask[j] == 1 && roles.get(j + 1) != Some(&1)) {
            bail!(
                "pre-flight: row {row} position {} carries loss but was not generated",
                j + 1
            );
        }
    }
    Ok(format!(
        "pre-flight ok: {} loss tokens over {} rows, none on prompt, observation or padding",
        micro.generated.iter().sum::<usize>(),
        rollouts.len()
    ))
}

/// A group of equal rewards gets zero advantages under the config's options.
fn check_equal_rewards(trainer: &Trainer) -> Result<()> {
    let equal = Ragged::from_rows(&[vec![1.0; trainer.config.grpo.group_size]]);
    let advantages = group_advantages(&equal, &advantage_options(&trainer.config))
        .map_err(|e| anyhow::anyhow!("pre-flight advantages: {e}"))?;
    if advantages.advantages.flat().iter().any(|&a| a != 0.0) {
        bail!("pre-flight: a group of equal rewards got nonzero advantages");
    }
    Ok(())
}

/// Zero advantages give a policy gradient of norm exactly 0 through burn's loss and the
/// update's path to the parameters.
fn check_zero_gradient(trainer: &Trainer, group: &[Rollout]) -> Result<()> {
    let chunk: Vec<&Rollout> = group.iter().collect();
    let micro = micro_batch(&chunk, vocab(), &trainer.device);
    let g = &trainer.config.grpo;
    let weights = row_weights_by(
        &micro.generated,
        g.reduction,
        g.reduction_constant,
        g.convention,
    )
    .map_err(|e| anyhow::anyhow!("pre-flight weights: {e}"))?;
    // The path the update takes (`crate::policy::fused`).
    let fused = weights_for(&trainer.model, &trainer.plain)?;
    let path = Path::for_device(&trainer.plain, fused.as_ref());
    let scored = score(
        path,
        &trainer.model,
        &micro.tokens,
        g.temperature,
        Entropy::Skip,
        &trainer.device,
    )?;
    let settings = SurrogateSettings {
        beta: 0.0,
        entropy_coef: 0.0,
        ..surrogate_settings(&trainer.config)
    };
    let inputs = SurrogateInputs {
        old_logp: micro.old_logp.clone(),
        mask: micro.mask.clone(),
        weights: weight_tensor(&micro, &weights, &trainer.device),
        advantages: Tensor::zeros([chunk.len(), 1], &trainer.device),
        ref_logp: None,
        entropy: None,
        multipliers: None,
    };
    let loss = surrogate_loss(scored.logp.clone(), &inputs, &settings);
    let grads = scored.gradients(&loss, &trainer.model, &trainer.plain)?;
    let norm = global_norm(&trainer.model, &grads)?;
    if norm != 0.0 {
        bail!("pre-flight: zero advantages gave a policy gradient of norm {norm:e}");
    }
    Ok(())
}

//! Rejection-sampling SFT (expert iteration): the arm that separates GRPO's
//! reward-weighted update from the extra data its rollouts are.
//!
//! Step `s` collects exactly the batch GRPO's step `s` would collect first (the same
//! training tasks, episode seeds and `tasks_per_batch` x `group_size` rollouts at
//! `grpo.temperature`, by [`crate::learner::grpo::collect`]) but keeps every group (no
//! dynamic-sampling filter, so no refills), then takes one optimizer step on the mean
//! negative log-likelihood of the action tokens of the **successful** rollouts only,
//! the SFT loss of [`crate::learner::sft`] on the policy's own successes. A batch without a
//! success makes no update. The rate is `rs.learning_rate` on `rs.lr_schedule` with
//! `rs.warmup_steps` (as GRPO's, `crate::learner::optimizer::learning_rate`), logged at
//! every step. The metrics row says how many rollouts were generated and how many
//! were kept.

use std::time::Instant;

use anyhow::{Result, bail};
use arlbook_core::metrics::{MetricsRow, RowStage};
use burn::prelude::*;

use crate::learner::grpo::competence::TaskSampling;
use crate::learner::grpo::remote::Source;
use crate::learner::grpo::{collect, distinct};
use crate::learner::optimizer::{clip_global_norm, learning_rate};
use crate::learner::recovery::Demonstration;
use crate::learner::sft::{demonstration_gradients, slice_episodes};
use crate::run::trainer::Trainer;

/// Runs rejection-sampling SFT from the current position to `rs.steps`.
pub fn run(trainer: &mut Trainer) -> Result<()> {
    let config = trainer.config.clone();
    let mut collecting = config.clone();
    collecting.grpo.dynamic_sampling = false;
    let steps = config.rs.steps;
    while trainer.position.step < steps {
        let step = trainer.position.step;
        let t0 = Instant::now();
        let policy = trainer.model.valid();
        let mut source = Source::Local {
            model: &policy,
            device: &trainer.plain,
        };
        let batch = collect(
            &collecting,
            &mut source,
            step,
            step,
            &mut trainer.competence,
        )?;
        let collect_s = t0.elapsed().as_secs_f64();
        let kept: Vec<Demonstration> = batch
            .rollouts
            .iter()
            .filter(|r| r.record.success())
            .map(|r| Demonstration::teacher(r.record.clone()))
            .collect();
        let mut row = MetricsRow::new(RowStage::Rs, step + 1).of_steps(steps);
        row.rollouts_sampled = Some(batch.sampled);
        row.rollouts_used = Some(kept.len());
        row.generated_tokens = Some(batch.sampled_tokens);
        row.success_rate = Some(kept.len() as f64 / batch.rollouts.len().max(1) as f64);
        row.discarded = Some(batch.discarded.clone());
        row.task_keys = Some(distinct(&batch.task_keys));
        if config.grpo.task_sampling == TaskSampling::Edge {
            row.edge_skipped = Some(batch.edge_skipped.clone());
        }
        // The schedule's rate at this step, logged also when no success makes an update.
        let rs = &config.rs;
        let lr = learning_rate(
            rs.learning_rate,
            step,
            rs.warmup_steps,
            steps,
            rs.lr_schedule,
        );
        row.lr = Some(lr);
        if !kept.is_empty() {
            let mut refs: Vec<&Demonstration> = kept.iter().collect();
            let (loss, tokens, mut grads) =
                demonstration_gradients(trainer, &mut refs, slice_episodes(&trainer.plain), 0.0)?;
            if !loss.is_finite() {
                bail!("rs step {step}: the loss is not finite ({loss})");
            }
            let grad_norm = clip_global_norm(&trainer.model, &mut grads, config.grpo.grad_clip)?;
            trainer.model = trainer.optim.step(lr, trainer.model.clone(), grads);
            row.loss = Some(loss);
            row.trained_tokens = Some(tokens);
            row.grad_norm = Some(grad_norm);
        }
        trainer.position.step += 1;
        row.collect_s = Some(collect_s);
        row.step_s = Some(t0.elapsed().as_secs_f64());
        row.wall_s = Some(trainer.wall_s());
        trainer.log(&row)?;
        if trainer.checkpoint_due(steps) {
            trainer.save_checkpoint()?;
        }
    }
    Ok(())
}

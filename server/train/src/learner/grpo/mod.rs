//! Group Relative Policy Optimization on the code-repair environment.
//!
//! One step `s`:
//! 1. **Collect** ([`collect`]). Take the batch for step `s` from the pipeline, first
//!    topping the pipeline up to `max_policy_lag + 1` batches with the current policy.
//!    Batch `c` is `tasks_per_batch` training tasks x `group_size` rollouts, each
//!    rollout in its own environment with its own seed; with dynamic sampling, groups
//!    whose rewards are all equal are dropped and more tasks are sampled (at most
//!    `max_refill_rounds` times), and the extra rollouts are logged. Episodes that an
//!    environment fault ended are left out (`exclude_env_faults`) and counted. With
//!    `task_sampling = "edge"`, tasks are drawn where the policy's recent pass rate is strictly
//!    between 0 and 1 ([`competence`]).
//! 2. **Advantages** over complete groups with `core::math::advantage` (mean or
//!    leave-one-out baseline, group / batch / no scaling, population or sample std).
//! 3. **Update** ([`update`]). `epochs` passes; each pass splits the groups into
//!    `minibatches`, one optimizer step each, with gradients accumulated over
//!    microbatches. The KL reference is frozen or refreshed every `ref_refresh_steps`.
//!
//! [`preflight`] checks run before the first update and stop the run if one fails.

mod collect;
pub mod competence;
pub mod preflight;
pub mod remote;
mod settings;
pub mod update;

use std::time::Instant;

use anyhow::{Result, bail};
use arlbook_core::Ragged;
use arlbook_core::math::advantage::group_advantages;
use arlbook_core::metrics::{MetricsRow, RowStage};
use burn::prelude::*;

use collect::regroup;
pub use collect::{collect, distinct};
use competence::TaskSampling;
pub use settings::advantage_options;

use crate::config::TrainConfig;
use crate::learner::optimizer::learning_rate;
use crate::run::checkpoint::PendingBatch;
use crate::run::trainer::Trainer;

/// Logs the validation row after `step` GRPO steps.
fn log_validation(trainer: &mut Trainer, step: usize) -> Result<()> {
    let config = &trainer.config;
    let success = crate::measure::validation::validation_success(
        config,
        &trainer.model.valid(),
        &trainer.plain,
        config.validation.tasks,
    )?;
    let mut row = MetricsRow::new(RowStage::Validation, step).of_steps(config.grpo.steps);
    row.val_success = Some(success);
    trainer.log(&row)
}

/// Runs GRPO from the current position to `grpo.steps`.
pub fn run(trainer: &mut Trainer) -> Result<()> {
    if trainer.config.grpo.kl_beta > 0.0 && trainer.reference.is_none() {
        trainer.reference = Some(trainer.model.valid());
    }
    let (steps, every) = (
        trainer.config.grpo.steps,
        trainer.config.validation.every_steps,
    );
    if trainer.position.step == 0 && every > 0 {
        log_validation(trainer, 0)?;
    }
    while trainer.position.step < steps {
        let row = step(trainer)?;
        trainer.log(&row)?;
        let done = trainer.position.step;
        if every > 0 && (done.is_multiple_of(every) || done == steps) {
            log_validation(trainer, done)?;
        }
        if trainer.checkpoint_due(steps) {
            trainer.save_checkpoint()?;
        }
    }
    Ok(())
}

/// One GRPO step: collect, advantages, update; returns its metrics row.
fn step(trainer: &mut Trainer) -> Result<MetricsRow> {
    let config = trainer.config.clone();
    let g = &config.grpo;
    let step = trainer.position.step;
    let t0 = Instant::now();
    if g.ref_refresh_steps > 0 && step > 0 && step.is_multiple_of(g.ref_refresh_steps) {
        trainer.reference = Some(trainer.model.valid());
    }
    // 1. Collect (topping up the lag pipeline with the current policy).
    let policy = trainer.model.valid();
    let mut generated_before = 0;
    let mut remote = trainer.remote.take();
    let collected = top_up(
        trainer,
        &config,
        &policy,
        remote.as_deref_mut(),
        &mut generated_before,
    );
    let stats = remote.as_mut().map(|service| service.take_stats());
    trainer.remote = remote;
    collected?;
    let collect_s = t0.elapsed().as_secs_f64();
    let Some(batch) = trainer.pending.pop_front() else {
        bail!("the rollout pipeline is empty");
    };
    let groups = regroup(&batch);
    let mut row = batch_row(&config, step, &batch, groups.len());
    if !groups.is_empty() {
        if step == 0 {
            for note in preflight::check_batch(trainer, &groups)? {
                trainer.progress.note(&note);
            }
        }
        // 2. Advantages over complete groups.
        let rewards: Vec<Vec<f64>> = groups
            .iter()
            .map(|grp| grp.iter().map(|r| r.record.reward).collect())
            .collect();
        let advantages =
            group_advantages(&Ragged::from_rows(&rewards), &advantage_options(&config))
                .map_err(|e| anyhow::anyhow!("advantages: {e}"))?;
        // 3. Update.
        let lr = learning_rate(
            g.learning_rate,
            step,
            g.warmup_steps,
            g.steps,
            g.lr_schedule,
        );
        let first = step == 0 && batch.policy_version == step;
        update::update(trainer, &groups, &advantages.advantages, lr, first)?.fill(&mut row, lr);
    }
    trainer.position.step += 1;
    if let Some(stats) = stats {
        stats.fill(&mut row);
    }
    row.collect_s = Some(collect_s);
    row.step_s = Some(t0.elapsed().as_secs_f64());
    row.tokens_per_s = Some(generated_before as f64 / collect_s.max(1e-9));
    row.wall_s = Some(trainer.wall_s());
    Ok(row)
}

/// Tops the lag pipeline up to `max_policy_lag + 1` batches with `policy` (version:
/// the current step), in this process or, with `remote`, by its workers after the
/// policy is published to them; adds every token generated to `generated`.
fn top_up(
    trainer: &mut Trainer,
    config: &TrainConfig,
    policy: &crate::policy::model::PolicyModel,
    mut remote: Option<&mut (dyn remote::RemoteRollouts + '_)>,
    generated: &mut usize,
) -> Result<()> {
    let step = trainer.position.step;
    if trainer.pending.len() > config.grpo.max_policy_lag {
        return Ok(());
    }
    if let Some(service) = remote.as_deref_mut() {
        service.publish(policy, step)?;
    }
    while trainer.pending.len() < config.grpo.max_policy_lag + 1 {
        let index = step + trainer.pending.len();
        let mut source = match remote.as_deref_mut() {
            Some(service) => remote::Source::Remote(service),
            None => remote::Source::Local {
                model: policy,
                device: &trainer.plain,
            },
        };
        let batch = collect(config, &mut source, index, step, &mut trainer.competence)?;
        // Every token generated while collecting, discarded groups included.
        *generated += batch.sampled_tokens;
        trainer.pending.push_back(batch);
    }
    Ok(())
}

/// The collection half of step `step`'s row: what was sampled, kept and discarded,
/// and the kept rollouts' statistics when some were kept (a mean over none would read
/// as a measured 0).
fn batch_row(config: &TrainConfig, step: usize, batch: &PendingBatch, groups: usize) -> MetricsRow {
    let g = &config.grpo;
    let mut row = MetricsRow::new(RowStage::Grpo, step + 1).of_steps(g.steps);
    row.policy_lag = Some(step - batch.policy_version);
    row.groups = Some(groups);
    row.rollouts_sampled = Some(batch.sampled);
    row.extra_rollouts = Some(
        batch
            .sampled
            .saturating_sub(g.tasks_per_batch * g.group_size),
    );
    row.rollouts_used = Some(batch.rollouts.len());
    row.generated_tokens = Some(batch.sampled_tokens);
    row.task_keys = Some(distinct(&batch.task_keys));
    row.discarded = Some(batch.discarded.clone());
    row.effective_group_fraction = Some(batch.effective_fraction);
    if g.task_sampling == TaskSampling::Edge {
        row.edge_skipped = Some(batch.edge_skipped.clone());
    }
    row.sampled_success_rate = Some(batch.sampled_successes as f64 / batch.sampled.max(1) as f64);
    let kept = &batch.rollouts;
    if !kept.is_empty() {
        let n = kept.len() as f64;
        let lengths: Vec<usize> = kept.iter().map(|r| r.record.generated_tokens()).collect();
        row.reward = Some(kept.iter().map(|r| r.record.reward).sum::<f64>() / n);
        row.success_rate = Some(kept.iter().filter(|r| r.record.success()).count() as f64 / n);
        row.gen_len_mean = Some(lengths.iter().sum::<usize>() as f64 / n);
        row.gen_len_max = lengths.iter().copied().max();
        row.truncation_rate = Some(kept.iter().filter(|r| r.record.truncated).count() as f64 / n);
    }
    row
}

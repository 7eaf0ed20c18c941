//! Group Relative Policy Optimization on the code-repair environment.
//!
//! One step `s`:
//! 1. **Collect.** Take the batch for step `s` from the pipeline, first topping the
//!    pipeline up to `max_policy_lag + 1` batches with the current policy. Batch `c` is
//!    `tasks_per_batch` training tasks x `group_size` rollouts, each rollout in its own
//!    environment with its own seed; with dynamic sampling, groups whose rewards are
//!    all equal are dropped and more tasks are sampled (at most `max_refill_rounds`
//!    times), and the extra rollouts are logged. Episodes that an environment fault
//!    ended are left out (`exclude_env_faults`) and counted.
//! 2. **Advantages** over complete groups with `core::math::advantage`
//!    (mean or leave-one-out baseline, group / batch / no scaling, population or sample
//!    std).
//! 3. **Update.** `epochs` passes; each pass splits the groups into `minibatches`, one
//!    optimizer step each. A minibatch's reduction weights come from
//!    `core::math::reduction::row_weights` over all its rows; its microbatches
//!    (`microbatch_rows` rows each) accumulate gradients, so the step sees exactly the
//!    minibatch loss. The loss is [`super::loss::surrogate_loss`], checked against the
//!    core's. The KL reference is frozen or refreshed every `ref_refresh_steps`.
//!
//! Random draws: the tasks of batch `c`, round `r` come from
//! `RandomStream(seed, TASK_STREAM + 64 c + r)`; rollout `g` of group `i` runs with
//! episode seed `seed ^ (c << 24 | r << 16 | i)` and sample id `g`, so its policy
//! stream is the harness's `POLICY_STREAM + g` of that seed; the update order of pass
//! `e` at step `s` comes from `RandomStream(seed, ORDER_STREAM + 64 s + e)`.
//!
//! Pre-flight checks (the article's list for the first optimizer step) run before the
//! first update and stop the run if one fails: the ratio is 1 on the collecting
//! snapshot; prompt, observation and padding tokens carry no loss; a group with equal
//! rewards gets zero advantage and zero policy gradient.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{Result, bail};
use arlbook_core::Ragged;
use arlbook_core::agent::{EpisodeIds, Split, generate_task};
use arlbook_core::math::advantage::{AdvantageOptions, Baseline, Scale, group_advantages};
use arlbook_core::math::clip::ClipWidths;
use arlbook_core::math::kl::kl_point;
use arlbook_core::math::policy_loss::{
    PolicyLossConfig, PolicyLossInput, TokenAdvantages, policy_loss,
};
use arlbook_core::math::reduction::row_weights;
use arlbook_core::rng::RandomStream;
use burn::optim::{GradientsAccumulator, GradientsParams};
use burn::prelude::*;
use serde_json::json;

use super::batching::{MicroBatch, micro_batch, weight_tensor};
use super::checkpoint::{PendingBatch, StoredRollout};
use super::config::{AdvantageScale, TrainConfig};
use super::generate::roll_out;
use super::loss::{
    SurrogateInputs, SurrogateSettings, surrogate_loss, token_entropy, token_logprobs,
};
use super::model::PolicyModel;
use super::optimizer::{clip_global_norm, learning_rate};
use super::rollout::{EpisodeSpec, Rollout};
use super::sampling::{Sampler, policy_info, sampler};
use super::state::{Trainer, vocab};

const TASK_STREAM: u64 = 0x6770_0000;
const ORDER_STREAM: u64 = 0x6771_0000;
/// Largest |ratio - 1| the pre-flight check accepts on the collecting snapshot (f32
/// rounding of two differently padded passes).
const PREFLIGHT_RATIO_TOLERANCE: f64 = 1e-3;

fn episode_seed(seed: u64, batch: usize, round: usize, group: usize) -> u64 {
    seed ^ ((batch as u64) << 24 | (round as u64) << 16 | group as u64)
}

fn all_equal(rewards: &[f64]) -> bool {
    rewards.windows(2).all(|w| w[0] == w[1])
}

/// Collects batch `index` with `model`.
pub fn collect(
    config: &TrainConfig,
    model: &PolicyModel,
    device: &Device,
    index: usize,
    version: usize,
) -> PendingBatch {
    let g = &config.grpo;
    let info = policy_info(config, format!("grpo-{version}"));
    let sampler = sampler(config);
    let mut kept: Vec<Vec<Rollout>> = Vec::new();
    let mut discarded: BTreeMap<String, usize> = BTreeMap::new();
    let mut sampled = 0;
    let mut sampled_tokens = 0;
    let mut groups_sampled = 0usize;
    let mut groups_mixed = 0usize;
    let mut task_keys = Vec::new();
    let mut sampled_successes = 0;
    let rounds = if g.dynamic_sampling {
        g.max_refill_rounds + 1
    } else {
        1
    };
    for round in 0..rounds {
        let wanted = g.tasks_per_batch - kept.len();
        if wanted == 0 {
            break;
        }
        let mut task_rng =
            RandomStream::new(config.seed, TASK_STREAM + 64 * index as u64 + round as u64);
        let mut specs = Vec::with_capacity(wanted * g.group_size);
        for group in 0..wanted {
            let task = generate_task(
                Split::Train,
                u64::from(task_rng.next_u32()) << 32 | u64::from(task_rng.next_u32()),
            );
            task_keys.push(task.key.clone());
            for sample in 0..g.group_size {
                specs.push(EpisodeSpec {
                    task: task.clone(),
                    ids: EpisodeIds {
                        group_id: (index * 1000 + round * 100 + group) as u64,
                        sample_id: sample as u64,
                    },
                    seed: episode_seed(config.seed, index, round, group),
                });
            }
        }
        let rollouts = roll_out(model, device, &specs, &config.harness, &sampler, &info);
        sampled += rollouts.len();
        sampled_successes += rollouts.iter().filter(|r| r.record.success()).count();
        sampled_tokens += rollouts
            .iter()
            .map(|r| r.record.generated_tokens())
            .sum::<usize>();
        let mut groups: Vec<Vec<Rollout>> = rollouts
            .chunks(g.group_size)
            .map(<[Rollout]>::to_vec)
            .collect();
        for group in &mut groups {
            groups_sampled += 1;
            if g.exclude_env_faults {
                let before = group.len();
                group.retain(|r| !r.record.env_fault);
                *discarded.entry("env_fault".to_owned()).or_default() += before - group.len();
            }
            if group.len() < 2 {
                *discarded.entry("group_too_small".to_owned()).or_default() += group.len();
                group.clear();
                continue;
            }
            let rewards: Vec<f64> = group.iter().map(|r| r.record.reward).collect();
            if all_equal(&rewards) {
                if g.dynamic_sampling {
                    *discarded.entry("all_equal_group".to_owned()).or_default() += group.len();
                    group.clear();
                }
            } else {
                groups_mixed += 1;
            }
        }
        for group in groups {
            if !group.is_empty() && kept.len() < g.tasks_per_batch {
                kept.push(group);
            }
        }
    }
    PendingBatch {
        policy_version: version,
        rollouts: kept.iter().flatten().map(StoredRollout::from).collect(),
        sampled,
        sampled_tokens,
        discarded,
        effective_fraction: if groups_sampled > 0 {
            groups_mixed as f64 / groups_sampled as f64
        } else {
            0.0
        },
        task_keys,
        sampled_successes,
    }
}

/// Splits stored rollouts back into groups (consecutive equal group ids).
fn regroup(batch: &PendingBatch) -> Vec<Vec<Rollout>> {
    let mut groups: Vec<Vec<Rollout>> = Vec::new();
    for stored in &batch.rollouts {
        let rollout: Rollout = stored.clone().into();
        match groups.last_mut() {
            Some(last) if last[0].record.group_id == rollout.record.group_id => last.push(rollout),
            _ => groups.push(vec![rollout]),
        }
    }
    groups
}

/// Advantage options from the config.
pub fn advantage_options(config: &TrainConfig) -> AdvantageOptions {
    AdvantageOptions {
        baseline: if config.grpo.leave_one_out {
            Baseline::LeaveOneOut
        } else {
            Baseline::Mean
        },
        scale: match config.grpo.advantage_scale {
            AdvantageScale::Group => Scale::Group,
            AdvantageScale::Batch => Scale::Batch,
            AdvantageScale::None => Scale::None,
        },
        std: config.grpo.std_kind,
        eps: 1e-6,
    }
}

fn surrogate_settings(config: &TrainConfig) -> SurrogateSettings {
    SurrogateSettings {
        eps_low: config.grpo.eps_low,
        eps_high: config.grpo.eps_high,
        dual_clip: config.grpo.dual_clip,
        beta: config.grpo.kl_beta,
        kl_estimator: config.grpo.kl_estimator,
    }
}

/// Token statistics of one step's update, summed over microbatches.
#[derive(Debug, Default)]
struct UpdateStats {
    tokens: usize,
    ratio_sum: f64,
    ratio_max: f64,
    clip_low: f64,
    clip_high: f64,
    clip_dual: f64,
    kl_sum: f64,
    entropy_sum: f64,
    loss_sum: f64,
    core_loss_sum: f64,
    grad_norms: Vec<f64>,
    max_ratio_deviation_first: f64,
}

/// Host-side copy of a `[N, T]` tensor, as rows cut to each row's generated tokens.
fn ragged_rows(tensor: Tensor<2>, micro: &MicroBatch) -> Ragged<f64> {
    let [n, t] = tensor.dims();
    let values: Vec<f32> = tensor
        .try_into_vec_as::<f32>()
        .unwrap_or_else(|_| vec![0.0; n * t]);
    let width = micro.padded.seq_len.saturating_sub(1);
    let rows: Vec<Vec<f64>> = (0..n)
        .map(|row| {
            (0..width)
                .filter(|&j| micro.padded.loss_mask[row * width + j] == 1)
                .map(|j| f64::from(values[row * t + j]))
                .collect()
        })
        .collect();
    Ragged::from_rows(&rows)
}

/// One optimizer step over `rows` (whole groups) with their advantages.
#[allow(
    clippy::too_many_lines,
    reason = "the microbatch loop reads best as one piece"
)]
fn minibatch_step(
    trainer: &mut Trainer,
    rows: &[(&Rollout, f64)],
    lr: f64,
    stats: &mut UpdateStats,
    first: bool,
) -> Result<()> {
    let config = trainer.config.clone();
    let g = &config.grpo;
    let lengths: Vec<usize> = rows
        .iter()
        .map(|(r, _)| r.record.generated_tokens())
        .collect();
    let weights_per_row = row_weights(&lengths, g.reduction, g.reduction_constant)
        .map_err(|e| anyhow::anyhow!("grpo.{}: {}", e.field, e.message))?;
    let settings = surrogate_settings(&config);
    let mut accumulator = GradientsAccumulator::<PolicyModel>::new();
    let mut start = 0;
    let mut first_micro = first;
    while start < rows.len() {
        let end = (start + g.microbatch_rows).min(rows.len());
        let chunk: Vec<&Rollout> = rows[start..end].iter().map(|(r, _)| *r).collect();
        let advantages: Vec<f32> = rows[start..end].iter().map(|(_, a)| *a as f32).collect();
        let micro = micro_batch(&chunk, vocab(), &trainer.device);
        let n = chunk.len();
        let weights = weight_tensor(&micro, &weights_per_row[start..end], &trainer.device);
        let logits = trainer.model.forward(micro.inputs.clone());
        let entropy = token_entropy(logits.clone(), g.temperature) * micro.mask.clone();
        let logp = token_logprobs(
            logits,
            micro.targets.clone(),
            g.temperature,
            micro.not_kept.clone(),
        );
        let logp_ref = trainer.reference.as_ref().map(|reference| {
            let ref_logits = reference.forward(micro.inputs.clone().to_device(&trainer.plain));
            let ref_logp = token_logprobs(
                ref_logits,
                micro.targets.clone().to_device(&trainer.plain),
                g.temperature,
                micro.not_kept.clone().map(|m| m.to_device(&trainer.plain)),
            );
            ref_logp.to_device(&trainer.device).detach()
        });
        let inputs = SurrogateInputs {
            logp_old: micro.logp_old.clone(),
            mask: micro.mask.clone(),
            weights,
            advantages: Tensor::from_data(
                TensorData::new(advantages.clone(), [n, 1]),
                &trainer.device,
            ),
            logp_ref: logp_ref.clone(),
        };
        let loss = surrogate_loss(logp.clone(), &inputs, &settings);
        let grads = loss.backward();
        stats.loss_sum += f64::from(loss.into_scalar::<f32>());
        accumulator.accumulate(
            &trainer.model,
            GradientsParams::from_grads(grads, &trainer.model),
        );

        // The same numbers through the core's loss: metrics and a live agreement check.
        let logp_host = ragged_rows(logp.detach(), &micro);
        let old_host = ragged_rows(micro.logp_old.clone(), &micro);
        let ref_host = logp_ref.map(|t| ragged_rows(t, &micro));
        let advantages_host: Vec<f64> = advantages.iter().map(|&a| f64::from(a)).collect();
        // Per-token terms from the core's loss (the reduction does not change them).
        let core = policy_loss(
            &PolicyLossInput {
                logp: &logp_host,
                logp_old: &old_host,
                logp_ref: None,
                advantages: TokenAdvantages::PerSequence(&advantages_host),
            },
            &PolicyLossConfig {
                clip: ClipWidths {
                    eps_low: g.eps_low,
                    eps_high: g.eps_high,
                    dual_clip: g.dual_clip,
                },
                ..PolicyLossConfig::default()
            },
        )
        .map_err(|e| {
            anyhow::anyhow!(
                "core policy loss on the training batch: {}: {}",
                e.field,
                e.message
            )
        })?;
        let tokens: usize = micro.generated.iter().sum();
        for i in 0..n {
            let w = weights_per_row[start + i];
            let pg: f64 = core.pg_loss_per_token.row(i).iter().sum();
            let kl: f64 = match &ref_host {
                Some(reference) => logp_host
                    .row(i)
                    .iter()
                    .zip(reference.row(i))
                    .map(|(&lp, &lr)| kl_point(lp, lr, g.kl_estimator, false).value)
                    .sum(),
                None => 0.0,
            };
            stats.core_loss_sum += w
                * (pg
                    + if ref_host.is_some() {
                        g.kl_beta * kl
                    } else {
                        0.0
                    });
            stats.kl_sum += kl;
        }
        let ratios = core.ratio.flat();
        stats.ratio_sum += ratios.iter().sum::<f64>();
        stats.ratio_max = ratios.iter().copied().fold(stats.ratio_max, f64::max);
        stats.clip_low += core.clip_fraction.low * tokens as f64;
        stats.clip_high += core.clip_fraction.high * tokens as f64;
        stats.clip_dual += core.clip_fraction.dual * tokens as f64;
        if first_micro {
            stats.max_ratio_deviation_first =
                ratios.iter().map(|q| (q - 1.0).abs()).fold(0.0, f64::max);
        }
        stats.entropy_sum += f64::from(entropy.sum().into_scalar::<f32>());
        stats.tokens += tokens;
        first_micro = false;
        start = end;
    }
    if first && stats.max_ratio_deviation_first > PREFLIGHT_RATIO_TOLERANCE {
        bail!(
            "pre-flight: the importance ratio on the collecting snapshot is not 1 (max |ratio - 1| = {:.2e} > {PREFLIGHT_RATIO_TOLERANCE:.0e}); the training forward does not score tokens the way sampling did",
            stats.max_ratio_deviation_first
        );
    }
    let mut grads = accumulator.grads();
    let norm = clip_global_norm(&trainer.model, &mut grads, g.grad_clip);
    stats.grad_norms.push(norm);
    trainer.model = trainer.optim.step(lr, trainer.model.clone(), grads);
    Ok(())
}

/// Pre-flight: loss masks, and zero gradient from a group of equal rewards.
fn preflight_static(trainer: &mut Trainer, batch: &[Vec<Rollout>]) -> Result<Vec<String>> {
    let mut notes = Vec::new();
    // 1. Only generated tokens carry loss: the mask's row sums equal the generated
    //    token counts, and every masked target is a token the policy generated.
    let rollouts: Vec<&Rollout> = batch.iter().flatten().collect();
    let micro = micro_batch(&rollouts, vocab(), &trainer.plain);
    let width = micro.padded.seq_len.saturating_sub(1);
    for (row, rollout) in rollouts.iter().enumerate() {
        let masked: usize = micro.padded.loss_mask[row * width..(row + 1) * width]
            .iter()
            .map(|&m| usize::from(m))
            .sum();
        let generated = rollout.record.generated_tokens();
        if masked != generated {
            bail!(
                "pre-flight: row {row} has {masked} loss tokens but {generated} generated tokens"
            );
        }
        let roles = rollout.record.generated_mask();
        for j in 0..width {
            if micro.padded.loss_mask[row * width + j] == 1 && roles.get(j + 1) != Some(&1) {
                bail!(
                    "pre-flight: row {row} position {} carries loss but was not generated",
                    j + 1
                );
            }
        }
    }
    notes.push(format!(
        "pre-flight ok: {} loss tokens over {} rows, none on prompt, observation or padding",
        micro.generated.iter().sum::<usize>(),
        rollouts.len()
    ));
    // 2. Equal rewards give zero advantages and a zero policy gradient.
    let options = advantage_options(&trainer.config);
    let equal = Ragged::from_rows(&[vec![1.0; trainer.config.grpo.group_size]]);
    let advantages = group_advantages(&equal, &options)
        .map_err(|e| anyhow::anyhow!("pre-flight advantages: {}: {}", e.field, e.message))?;
    if advantages.advantages.flat().iter().any(|&a| a != 0.0) {
        bail!("pre-flight: a group of equal rewards got nonzero advantages");
    }
    if let Some(group) = batch.first() {
        let rows: Vec<(&Rollout, f64)> = group.iter().map(|r| (r, 0.0)).collect();
        let chunk: Vec<&Rollout> = rows.iter().map(|(r, _)| *r).collect();
        let micro = micro_batch(&chunk, vocab(), &trainer.device);
        let lengths: Vec<usize> = micro.generated.clone();
        let weights = row_weights(
            &lengths,
            trainer.config.grpo.reduction,
            trainer.config.grpo.reduction_constant,
        )
        .map_err(|e| anyhow::anyhow!("pre-flight weights: {}: {}", e.field, e.message))?;
        let logits = trainer.model.forward(micro.inputs.clone());
        let logp = token_logprobs(
            logits,
            micro.targets.clone(),
            trainer.config.grpo.temperature,
            micro.not_kept.clone(),
        );
        let settings = SurrogateSettings {
            beta: 0.0,
            ..surrogate_settings(&trainer.config)
        };
        let inputs = SurrogateInputs {
            logp_old: micro.logp_old.clone(),
            mask: micro.mask.clone(),
            weights: weight_tensor(&micro, &weights, &trainer.device),
            advantages: Tensor::zeros([chunk.len(), 1], &trainer.device),
            logp_ref: None,
        };
        let grads = surrogate_loss(logp, &inputs, &settings).backward();
        let grads = GradientsParams::from_grads(grads, &trainer.model);
        let norm = super::optimizer::global_norm(&trainer.model, &grads);
        if norm != 0.0 {
            bail!("pre-flight: zero advantages gave a policy gradient of norm {norm:e}");
        }
        notes.push(
            "pre-flight ok: equal rewards give zero advantages and a zero policy gradient"
                .to_owned(),
        );
    }
    Ok(notes)
}

/// Greedy success on `tasks` validation tasks.
pub fn validation_success(
    config: &TrainConfig,
    model: &PolicyModel,
    device: &Device,
    tasks: usize,
) -> f64 {
    let specs: Vec<EpisodeSpec> = (0..tasks)
        .map(|i| EpisodeSpec {
            task: generate_task(Split::Validation, i as u64),
            ids: EpisodeIds {
                group_id: i as u64,
                sample_id: 0,
            },
            seed: i as u64,
        })
        .collect();
    let greedy = Sampler {
        temperature: 0.0,
        top_p: None,
    };
    let info = policy_info(config, "validation".to_owned());
    let rollouts = roll_out(model, device, &specs, &config.harness, &greedy, &info);
    rollouts.iter().filter(|r| r.record.success()).count() as f64 / tasks.max(1) as f64
}

/// Runs GRPO from the current position to `grpo.steps`.
#[allow(
    clippy::too_many_lines,
    reason = "the step, in the order the module docs give"
)]
pub fn run(trainer: &mut Trainer) -> Result<()> {
    let config = trainer.config.clone();
    let g = &config.grpo;
    if g.kl_beta > 0.0 && trainer.reference.is_none() {
        trainer.reference = Some(trainer.model.valid());
    }
    if trainer.position.step == 0 && config.validation.every_steps > 0 {
        let success = validation_success(
            &config,
            &trainer.model.valid(),
            &trainer.plain,
            config.validation.tasks,
        );
        trainer.log(
            &json!({"stage": "validation", "step": 0, "steps": g.steps, "val_success": success}),
        )?;
    }
    while trainer.position.step < g.steps {
        let step = trainer.position.step;
        let t0 = Instant::now();
        if g.ref_refresh_steps > 0 && step > 0 && step.is_multiple_of(g.ref_refresh_steps) {
            trainer.reference = Some(trainer.model.valid());
        }
        // 1. Collect (topping up the lag pipeline with the current policy).
        let policy = trainer.model.valid();
        let mut generated_before = 0;
        while trainer.pending.len() < g.max_policy_lag + 1 {
            let index = step + trainer.pending.len();
            let batch = collect(&config, &policy, &trainer.plain, index, step);
            // Every token generated while collecting, discarded groups included.
            generated_before += batch.sampled_tokens;
            trainer.pending.push_back(batch);
        }
        let collect_s = t0.elapsed().as_secs_f64();
        let Some(batch) = trainer.pending.pop_front() else {
            bail!("the rollout pipeline is empty");
        };
        let groups = regroup(&batch);
        let all: Vec<&StoredRollout> = batch.rollouts.iter().collect();
        let reward_mean = mean(all.iter().map(|r| r.record.reward));
        let gen_lengths: Vec<usize> = all.iter().map(|r| r.record.generated_tokens()).collect();
        let truncated = all.iter().filter(|r| r.record.truncated).count();
        let mut row = json!({
            "stage": "grpo",
            "step": step + 1,
            "steps": g.steps,
            "policy_lag": step - batch.policy_version,
            "groups": groups.len(),
            "rollouts_sampled": batch.sampled,
            "extra_rollouts": batch.sampled.saturating_sub(g.tasks_per_batch * g.group_size),
            "rollouts_used": batch.rollouts.len(),
            "generated_tokens": batch.sampled_tokens,
            "task_keys": distinct(&batch.task_keys),
            "discarded": batch.discarded,
            "effective_group_fraction": batch.effective_fraction,
            "sampled_success_rate": batch.sampled_successes as f64 / batch.sampled.max(1) as f64,
        });
        // Statistics of the kept rollouts exist only when some were kept (a mean over
        // none would read as a measured 0).
        if !all.is_empty() {
            merge(
                &mut row,
                json!({
                    "reward": reward_mean,
                    "success_rate": mean(all.iter().map(|r| f64::from(u8::from(r.record.success())))),
                    "gen_len_mean": mean(gen_lengths.iter().map(|&l| l as f64)),
                    "gen_len_max": gen_lengths.iter().copied().max().unwrap_or(0),
                    "truncation_rate": truncated as f64 / all.len() as f64,
                }),
            );
        }
        if !groups.is_empty() {
            if step == 0 {
                for note in preflight_static(trainer, &groups)? {
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
                    .map_err(|e| anyhow::anyhow!("advantages: {}: {}", e.field, e.message))?;
            // 3. Update.
            let lr = learning_rate(
                g.learning_rate,
                step,
                g.warmup_steps,
                g.steps,
                g.lr_schedule,
            );
            let mut stats = UpdateStats::default();
            let mut first = step == 0 && batch.policy_version == step;
            for epoch in 0..g.epochs {
                let mut order: Vec<usize> = (0..groups.len()).collect();
                let mut rng =
                    RandomStream::new(config.seed, ORDER_STREAM + 64 * step as u64 + epoch as u64);
                for i in (1..order.len()).rev() {
                    let k = rng.below((i + 1) as u32) as usize;
                    order.swap(i, k);
                }
                let per_minibatch = order.len().div_ceil(g.minibatches.min(order.len()).max(1));
                for part in order.chunks(per_minibatch) {
                    let rows: Vec<(&Rollout, f64)> = part
                        .iter()
                        .flat_map(|&gi| {
                            groups[gi]
                                .iter()
                                .zip(advantages.advantages.row(gi).iter().copied())
                        })
                        .collect();
                    minibatch_step(trainer, &rows, lr, &mut stats, first)?;
                    first = false;
                }
            }
            let tokens = stats.tokens.max(1) as f64;
            let extra = json!({
                "loss": stats.loss_sum / stats.grad_norms.len().max(1) as f64,
                "loss_core_gap": (stats.loss_sum - stats.core_loss_sum).abs(),
                "grad_norm": stats.grad_norms.iter().copied().fold(0.0, f64::max),
                "ratio_mean": stats.ratio_sum / tokens,
                "ratio_max": stats.ratio_max,
                "clip_fraction_low": stats.clip_low / tokens,
                "clip_fraction_high": stats.clip_high / tokens,
                "clip_fraction_dual": stats.clip_dual / tokens,
                "kl": stats.kl_sum / tokens,
                "entropy": stats.entropy_sum / tokens,
                "lr": lr,
                "optimizer_steps": stats.grad_norms.len(),
            });
            merge(&mut row, extra);
        }
        trainer.position.step += 1;
        let step_s = t0.elapsed().as_secs_f64();
        merge(
            &mut row,
            json!({
                "collect_s": collect_s,
                "step_s": step_s,
                "tokens_per_s": generated_before as f64 / collect_s.max(1e-9),
                "wall_s": trainer.wall_s(),
            }),
        );
        trainer.log(&row)?;
        let every = config.validation.every_steps;
        if every > 0
            && (trainer.position.step.is_multiple_of(every) || trainer.position.step == g.steps)
        {
            let success = validation_success(
                &config,
                &trainer.model.valid(),
                &trainer.plain,
                config.validation.tasks,
            );
            trainer.log(&json!({"stage": "validation", "step": trainer.position.step, "steps": g.steps, "val_success": success}))?;
        }
        if trainer.checkpoint_due(g.steps) {
            trainer.save_checkpoint()?;
        }
    }
    Ok(())
}

/// The distinct values of `keys`, sorted.
pub fn distinct(keys: &[String]) -> Vec<&str> {
    let set: std::collections::BTreeSet<&str> = keys.iter().map(String::as_str).collect();
    set.into_iter().collect()
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, count) = values.fold((0.0, 0usize), |(s, c), v| (s + v, c + 1));
    if count == 0 { 0.0 } else { sum / count as f64 }
}

/// Adds the fields of `extra` to the metrics row `row`.
pub fn merge(row: &mut serde_json::Value, extra: serde_json::Value) {
    if let (Some(row), serde_json::Value::Object(extra)) = (row.as_object_mut(), extra) {
        row.extend(extra);
    }
}

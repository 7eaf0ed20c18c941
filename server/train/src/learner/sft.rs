//! The cold start: supervised fine-tuning on the scripted teacher's demonstrations.
//!
//! Every demonstration is a full teacher episode on a training task. The loss is the
//! mean negative log-likelihood over the **generated** (action) tokens only: the
//! prompt and the tool observations are context, not targets (the shifted loss mask of
//! `core::agent::batch`). Step `k` takes the demonstrations at positions
//! `k * B .. (k + 1) * B` of a shuffled order drawn from the seed, one fresh
//! permutation per pass over the data, so a resumed run sees the same batches.
//!
//! A step's demonstrations are sorted by length, longest first, and run through the
//! model in slices of a few episodes (two on the CPU backend, eight on a GPU:
//! `crate::config::SFT_CPU_SLICE_EPISODES`), each padded only to its own longest
//! episode; every slice adds its summed token loss divided by the step's total trained
//! tokens, so the step's loss and gradient are those of one pass over the whole batch.
//! The slices run on every core of the CPU backend (`crate::learner::replicas`), each
//! core taking the next slice when it finishes one, longest first, so the cores finish
//! together; their gradients are added in slice order.
//!
//! With `sft.recovery_steps`, a second phase follows the `sft.steps` teacher steps:
//! the model attempts `sft.recovery_tasks` training tasks with the teacher taking over
//! at its first mistake (see [`crate::learner::recovery`]), and the remaining steps draw their
//! batches from those recovery demonstrations together with as many teacher ones.
//! The recovery demonstrations are saved in the run folder (`recovery.jsonl`) before
//! the phase's first step, so a resumed run trains on the same ones.
//!
//! With `sft.mistake_rate`, that share of the demonstrations (drawn per task) are
//! refused-edit demonstrations: the teacher's first edit names a text the code lacks,
//! the harness refuses it, and the teacher goes on to the right edit; their loss
//! starts after the refused call ([`arlbook_core::agent::mistake`]).
//!
//! With `sft.observation_loss_weight = w > 0`, the tool results become targets too
//! (the prompt stays context):
//!
//! `L = mean_{action targets} -log pi(x_t | x_<t) + w * mean_{observation targets} -log pi(x_t | x_<t)`,
//!
//! each mean over the step's own tokens of that kind, the observations counted from
//! `trained_from` to the end of the last action. It is the prompt-loss weight of
//! supervised fine-tuning APIs restricted to what the environment writes: the listing
//! `read_code()` prints is what an edit copies names and text from, and predicting it
//! trains that reading. The logged loss is the first term alone.
//!
//! With `sft.probe_every`, a `probe` row follows every that many steps and the last
//! (validation success, failures by cause, teacher-forced accuracy by action part:
//! [`crate::measure::probe`]), written before the step's checkpoint so a resumed run has it
//! exactly once.

use std::time::Instant;

use anyhow::{Result, bail};
use arlbook_core::agent::{
    EpisodeIds, MistakenTeacher, SpanRole, Split, Teacher, generate_task, run_episode,
};
use arlbook_core::metrics::{MetricsRow, RowStage};
use arlbook_core::rng::RandomStream;
use burn::optim::GradientsParams;
use burn::prelude::*;

use crate::config::{LrSchedule, SFT_CPU_SLICE_EPISODES, SFT_MICROBATCH_EPISODES};
use crate::learner::batching::MicroBatch;
use crate::learner::optimizer::{clip_global_norm, learning_rate};
use crate::learner::recovery::{self, Demonstration};
use crate::learner::replicas::accumulate_in_parallel;
use crate::measure::probe;
use crate::policy::fused::score::{Entropy, Path, score, weights_for};
use crate::policy::generate::rollout_threads;
use crate::policy::rollout::Rollout;
use crate::run::trainer::{Trainer, vocab};

/// Stream id of the demonstration order (plus the pass index).
const ORDER_STREAM: u64 = 0x5F70_0000;
/// Stream id of the recovery phase's order (plus the pass index).
const RECOVERY_ORDER_STREAM: u64 = 0x5F71_0000;
/// File of the recovery demonstrations in the run folder.
const RECOVERY_FILE: &str = "recovery.jsonl";
/// Stream id base of the refused-edit draws (plus the demonstration index).
const MISTAKE_STREAM: u64 = 0x5F72_0000_0000;
/// Seed offset of the demonstration tasks.
const TASK_SEED: u64 = 0x5F7_0000_0000;
/// Gradient-norm clip for SFT.
const SFT_GRAD_CLIP: f64 = 1.0;

/// The task of demonstration `i` (also task `i` of GRPO's `task_pool`).
pub fn demonstration_task(
    config: &crate::config::TrainConfig,
    i: usize,
) -> arlbook_core::agent::Task {
    generate_task(Split::Train, config.seed.wrapping_add(TASK_SEED) + i as u64)
}

/// The teacher's successful episodes on `count` training tasks, and how many distinct
/// problem keys those tasks have.
pub fn demonstrations(
    config: &crate::config::TrainConfig,
    count: usize,
) -> (Vec<Demonstration>, usize) {
    let mut keys = std::collections::BTreeSet::new();
    let demos = (0..count)
        .map(|i| {
            let task = demonstration_task(config, i);
            keys.insert(task.key.clone());
            let mut teacher = Teacher::for_harness(&task, &config.harness);
            let ids = EpisodeIds {
                group_id: i as u64,
                sample_id: 0,
            };
            mistaken_demonstration(config, &task, &teacher, ids, i).unwrap_or_else(|| {
                Demonstration::teacher(run_episode(
                    &task,
                    &mut teacher,
                    &config.harness,
                    ids,
                    i as u64,
                ))
            })
        })
        .filter(|d| d.record.success())
        .collect();
    (demos, keys.len())
}

/// With `sft.mistake_rate`, for a share of the tasks drawn from stream
/// `MISTAKE_STREAM + i`: the teacher's episode with one refused edit first
/// ([`MistakenTeacher`]), trained from the call after the refusal. `None` where the
/// draw says no, no mistaken text exists, or the episode fails or does not fit
/// `model.context` (the task then gets the teacher's own episode).
fn mistaken_demonstration(
    config: &crate::config::TrainConfig,
    task: &arlbook_core::agent::Task,
    teacher: &Teacher,
    ids: EpisodeIds,
    i: usize,
) -> Option<Demonstration> {
    let rate = config.sft.mistake_rate;
    if rate <= 0.0 {
        return None;
    }
    let mut rng = RandomStream::new(config.seed, MISTAKE_STREAM.wrapping_add(i as u64));
    if !rng.bernoulli(rate) {
        return None;
    }
    let mut mistaken = MistakenTeacher::new(teacher.clone(), rng);
    let record = run_episode(task, &mut mistaken, &config.harness, ids, i as u64);
    let at = mistaken.mistake_at()?;
    if !record.success() || record.tokens.len() > config.model.context {
        return None;
    }
    let refused = record
        .spans
        .iter()
        .filter(|span| span.role == SpanRole::Action)
        .nth(at)?;
    Some(Demonstration {
        trained_from: refused.end,
        record,
    })
}

/// A uniformly random permutation of `0..count` (Fisher-Yates, `below(i + 1)` for
/// `i = count-1 .. 1`) from `RandomStream::new(seed, stream)`.
pub fn permutation(seed: u64, stream: u64, count: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..count).collect();
    let mut rng = RandomStream::new(seed, stream);
    for i in (1..count).rev() {
        let k = rng.below((i + 1) as u32) as usize;
        order.swap(i, k);
    }
    order
}

/// The demonstration indices of SFT step `step` (the uncached form of
/// [`cached_indices`], for its test).
#[cfg(test)]
fn batch_indices(seed: u64, step: usize, batch: usize, count: usize) -> Vec<usize> {
    (0..batch)
        .map(|j| {
            let position = step * batch + j;
            permutation(seed, ORDER_STREAM + (position / count) as u64, count)[position % count]
        })
        .collect()
}

/// Runs SFT from the current position to the end of both phases.
pub fn run(trainer: &mut Trainer) -> Result<()> {
    let config = trainer.config.clone();
    let (demos, demonstration_keys) = demonstrations(&config, config.sft.tasks);
    if demos.is_empty() {
        bail!("sft.tasks: the teacher produced no successful demonstration");
    }
    check_lengths(&demos, config.model.context)?;
    if trainer.position.step < config.sft.steps {
        let phase = Phase {
            order_stream: ORDER_STREAM,
            first_step: 0,
            until: config.sft.steps,
        };
        let fields = MetricsRow {
            demonstrations: Some(demos.len()),
            demonstration_keys: Some(demonstration_keys),
            ..MetricsRow::default()
        };
        run_phase(trainer, &demos, &phase, &fields)?;
    }
    if trainer.position.step < config.sft.total_steps() {
        let (pool, summary) = recovery_pool(trainer, demos)?;
        let phase = Phase {
            order_stream: RECOVERY_ORDER_STREAM,
            first_step: config.sft.steps,
            until: config.sft.total_steps(),
        };
        run_phase(trainer, &pool, &phase, &summary)?;
    }
    Ok(())
}

fn check_lengths(demos: &[Demonstration], context: usize) -> Result<()> {
    let too_long = demos
        .iter()
        .filter(|d| d.record.tokens.len() > context)
        .count();
    if too_long > 0 {
        bail!("model.context: {too_long} demonstrations are longer than {context} tokens");
    }
    Ok(())
}

/// The recovery phase's demonstrations: those saved in the run folder, or, the first
/// time, the ones the current model's attempts yield (saved before returning), plus as
/// many teacher demonstrations. Also the numbers logged with the phase's steps.
fn recovery_pool(
    trainer: &Trainer,
    mut teacher: Vec<Demonstration>,
) -> Result<(Vec<Demonstration>, MetricsRow)> {
    let config = &trainer.config;
    let path = trainer.out.join(RECOVERY_FILE);
    let recovered = if let Some(saved) = recovery::load(&path)? {
        saved
    } else {
        let t0 = Instant::now();
        let policy = trainer.model.valid();
        let (found, clean) = recovery::collect(
            &policy,
            &trainer.plain,
            &config.harness,
            config.seed,
            config.sft.recovery_tasks,
        )?;
        eprintln!(
            "recovery: the model made no mistake on {clean} of {} tasks; {} take-overs \
             succeeded ({:.1} s)",
            config.sft.recovery_tasks,
            found.len(),
            t0.elapsed().as_secs_f64()
        );
        recovery::save(&path, &found)?;
        found
    };
    if recovered.is_empty() {
        bail!("sft.recovery_tasks: the model's attempts gave no recovery demonstration");
    }
    check_lengths(&recovered, config.model.context)?;
    let summary = MetricsRow {
        phase: Some("recovery".to_owned()),
        recovery_demos: Some(recovered.len()),
        ..MetricsRow::default()
    };
    teacher.truncate(recovered.len());
    teacher.extend(recovered);
    Ok((teacher, summary))
}

/// A phase of SFT: steps `first_step..until`, whose batches come from a pool in the
/// order of `order_stream`.
struct Phase {
    order_stream: u64,
    first_step: usize,
    until: usize,
}

/// The steps of `phase` from the current position on, on batches of `pool`; every
/// metrics row starts from `fields` (what the phase says about itself).
fn run_phase(
    trainer: &mut Trainer,
    pool: &[Demonstration],
    phase: &Phase,
    fields: &MetricsRow,
) -> Result<()> {
    let config = trainer.config.clone();
    let total = config.sft.total_steps();
    let mut orders_cache: Option<(usize, Vec<usize>)> = None;
    let mut probe_episodes = None;
    while trainer.position.step < phase.until {
        let step = trainer.position.step;
        let t0 = Instant::now();
        let indices = cached_indices(
            &mut orders_cache,
            (config.seed, phase.order_stream),
            step - phase.first_step,
            config.sft.batch_episodes,
            pool.len(),
        );
        let mut batch: Vec<&Demonstration> = indices.iter().map(|&i| &pool[i]).collect();
        let (loss_value, tokens, mut grads) = demonstration_gradients(
            trainer,
            &mut batch,
            slice_episodes(&trainer.plain),
            config.sft.observation_loss_weight,
        )?;
        if !loss_value.is_finite() {
            bail!("sft step {step}: the loss is not finite ({loss_value})");
        }
        let grad_norm = clip_global_norm(&trainer.model, &mut grads, SFT_GRAD_CLIP)?;
        let lr = learning_rate(
            config.sft.learning_rate,
            step,
            config.sft.warmup_steps,
            total,
            LrSchedule::Cosine,
        );
        trainer.model = trainer.optim.step(lr, trainer.model.clone(), grads);
        trainer.position.step += 1;
        let step_s = t0.elapsed().as_secs_f64();
        let row = MetricsRow {
            stage: RowStage::Sft,
            step: trainer.position.step,
            steps: Some(total),
            loss: Some(loss_value),
            grad_norm: Some(grad_norm),
            lr: Some(lr),
            tokens: Some(tokens),
            tokens_per_s: Some(tokens as f64 / step_s),
            step_s: Some(step_s),
            wall_s: Some(trainer.wall_s()),
            ..fields.clone()
        };
        trainer.log(&row)?;
        let step = trainer.position.step;
        if config.sft.probe_every > 0
            && (step.is_multiple_of(config.sft.probe_every) || step == total)
        {
            let teacher = probe_episodes
                .get_or_insert_with(|| probe::teacher_episodes(&config, config.sft.probe_tasks));
            let row = probe::probe_row(
                &config,
                &trainer.model.valid(),
                &trainer.plain,
                teacher,
                (step, total),
            )?;
            trainer.log(&row)?;
        }
        if trainer.checkpoint_due(phase.until) {
            trainer.save_checkpoint()?;
        }
    }
    Ok(())
}

/// Demonstrations per slice of a step on `device` (the module docs).
pub(super) fn slice_episodes(device: &Device) -> usize {
    if *device == Device::flex() {
        SFT_CPU_SLICE_EPISODES
    } else {
        SFT_MICROBATCH_EPISODES
    }
}

/// One SFT step's loss, trained-token count and gradients over `batch`, sorted by
/// length in place (longest first) and run `slice_episodes` at a time (the slicing of
/// the module docs). With `observation_weight > 0` the gradient is that of the action
/// loss plus `observation_weight` times the observations' mean negative log-likelihood
/// (`sft.observation_loss_weight`, the module docs); the loss returned is the actions'
/// alone either way, so it reads the same with and without the weight.
///
/// # Errors
/// When a slice's loss cannot be read back from the device.
pub(super) fn demonstration_gradients(
    trainer: &Trainer,
    batch: &mut [&Demonstration],
    slice_episodes: usize,
    observation_weight: f64,
) -> Result<(f64, usize, GradientsParams)> {
    batch.sort_by_key(|d| std::cmp::Reverse(d.record.tokens.len()));
    let tokens: usize = batch.iter().map(|d| d.trained_tokens()).sum();
    let with_observations = observation_weight > 0.0;
    let observed: usize = if with_observations {
        batch.iter().map(|d| observation_targets(d).count()).sum()
    } else {
        0
    };
    let slices: Vec<&[&Demonstration]> = batch.chunks(slice_episodes.max(1)).collect();
    let device = &trainer.device;
    // The fused CPU path on the CPU backend, burn's graph elsewhere (`crate::policy::fused`).
    let weights = weights_for(&trainer.model, &trainer.plain)?;
    let path = Path::for_device(&trainer.plain, weights.as_ref());
    // The slices' forward and backward passes on every core (see `crate::learner::replicas`).
    let (grads, losses) = accumulate_in_parallel(
        &trainer.model,
        &slices,
        rollout_threads(&trainer.plain),
        |model, slice| {
            let (micro, masks) = demonstration_batch(slice, with_observations, device);
            let scored = score(path, model, &micro.tokens, 1.0, Entropy::Skip, device)?;
            let action_loss = (scored.logp.clone() * masks.action)
                .sum()
                .neg()
                .div_scalar(tokens.max(1) as f64);
            let value = action_loss
                .clone()
                .try_into_scalar::<f32>()
                .map_err(|e| anyhow::anyhow!("reading the SFT loss back from the device: {e:?}"))?;
            let loss = match masks.observation {
                Some(mask) if observed > 0 => {
                    let observation_loss = (scored.logp.clone() * mask)
                        .sum()
                        .neg()
                        .mul_scalar(observation_weight / observed as f64);
                    action_loss + observation_loss
                }
                _ => action_loss,
            };
            let grads = scored.gradients(&loss, model, &trainer.plain)?;
            Ok((grads, f64::from(value)))
        },
    )?;
    let loss_value = losses.iter().sum();
    Ok((loss_value, tokens, grads))
}

/// The token indices of `demo`'s observation tokens that are targets of the
/// observation loss: at or after `trained_from`, before the end of the last action
/// (the microbatch stops there), and not the first token.
fn observation_targets(demo: &Demonstration) -> impl Iterator<Item = usize> + '_ {
    // No action, no observation target: nothing the policy did follows them.
    let last_action_end = crate::learner::batching::last_action_end(&demo.record).unwrap_or(0);
    let first = demo.trained_from.max(1);
    demo.record
        .spans
        .iter()
        .filter(|s| s.role == SpanRole::Observation)
        .flat_map(move |s| s.start.max(first)..s.end.min(last_action_end))
}

/// A microbatch's loss masks: the action targets (always) and the observation
/// targets (with an observation loss).
struct LossMasks {
    action: Tensor<2>,
    observation: Option<Tensor<2>>,
}

/// The microbatch of `rows` and its loss masks restricted to their trained tokens;
/// `with_observations` adds the observation mask and has the fused path score those
/// positions too.
fn demonstration_batch(
    rows: &[&Demonstration],
    with_observations: bool,
    device: &Device,
) -> (MicroBatch, LossMasks) {
    let rollouts: Vec<Rollout> = rows
        .iter()
        .map(|d| Rollout {
            record: d.record.clone(),
            keep: Vec::new(),
            entropy: Vec::new(),
        })
        .collect();
    let refs: Vec<&Rollout> = rollouts.iter().collect();
    let mut micro = crate::learner::batching::micro_batch(&refs, vocab(), device);
    let action = trained_mask(&micro, rows, device);
    let observation = with_observations.then(|| {
        let [n, t] = micro.mask.dims();
        let mut mask = vec![0.0f32; n * t];
        for (row, demo) in rows.iter().enumerate() {
            // Target `j` is token `j + 1`.
            for j in observation_targets(demo)
                .map(|target| target - 1)
                .filter(|&j| j < t)
            {
                mask[row * t + j] = 1.0;
                micro.tokens.host.scored[row * t + j] = true;
            }
        }
        Tensor::from_data(TensorData::new(mask, [n, t]), device)
    });
    (
        micro,
        LossMasks {
            action,
            observation,
        },
    )
}

/// The microbatch's loss mask without the targets before each row's `trained_from`
/// (target `j` is token `j + 1`).
fn trained_mask(micro: &MicroBatch, rows: &[&Demonstration], device: &Device) -> Tensor<2> {
    if rows.iter().all(|d| d.trained_from == 0) {
        return micro.mask.clone();
    }
    let [n, t] = micro.mask.dims();
    let width = micro.padded.seq_len.saturating_sub(1);
    let mut mask = vec![0.0f32; n * t];
    for (row, demo) in rows.iter().enumerate() {
        for j in 0..width.min(t) {
            if j + 1 >= demo.trained_from && micro.padded.loss_mask[row * width + j] == 1 {
                mask[row * t + j] = 1.0;
            }
        }
    }
    Tensor::from_data(TensorData::new(mask, [n, t]), device)
}

/// [`batch_indices`] with the permutation of the current pass kept between steps.
fn cached_indices(
    cache: &mut Option<(usize, Vec<usize>)>,
    (seed, stream): (u64, u64),
    step: usize,
    batch: usize,
    count: usize,
) -> Vec<usize> {
    (0..batch)
        .map(|j| {
            let position = step * batch + j;
            let pass = position / count;
            if cache.as_ref().is_none_or(|(p, _)| *p != pass) {
                *cache = Some((pass, permutation(seed, stream + pass as u64, count)));
            }
            cache
                .as_ref()
                .map_or(0, |(_, order)| order[position % count])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ModelConfig, TrainConfig};

    /// A fresh one-block trainer in its own temporary folder (removed by the caller)
    /// and the teacher's demonstrations on the first `tasks` training tasks.
    fn tiny_trainer(name: &str, tasks: usize) -> (Trainer, Vec<Demonstration>, std::path::PathBuf) {
        let out = std::env::temp_dir().join(format!("arlbook-sft-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        let config = TrainConfig {
            model: ModelConfig {
                layers: 1,
                width: 32,
                heads: 2,
                context: 640,
                ..ModelConfig::default()
            },
            ..TrainConfig::default()
        };
        let (demos, _) = demonstrations(&config, tasks);
        let trainer = Trainer::fresh(config, &out, burn::tensor::Device::flex()).unwrap();
        (trainer, demos, out)
    }

    /// Slicing a step into microbatches must not change what the step computes: the
    /// loss is the whole step's token mean and the gradient is the same (its global
    /// norm compared here), because each slice divides by the step's token count.
    #[test]
    fn sliced_sft_step_equals_one_pass_over_the_batch() {
        let (trainer, demos, out) = tiny_trainer("slices", 7);
        assert!(demos.len() >= 5, "the teacher solves most training tasks");
        let mut readings = Vec::new();
        for observation_weight in [0.0, 0.5] {
            let mut whole: Vec<&Demonstration> = demos.iter().collect();
            let mut sliced = whole.clone();
            let (loss_whole, tokens_whole, mut grads_whole) =
                demonstration_gradients(&trainer, &mut whole, usize::MAX, observation_weight)
                    .unwrap();
            let (loss_sliced, tokens_sliced, mut grads_sliced) =
                demonstration_gradients(&trainer, &mut sliced, 2, observation_weight).unwrap();
            assert_eq!(tokens_whole, tokens_sliced);
            assert!(
                (loss_whole - loss_sliced).abs() < 1e-5,
                "{loss_whole} vs {loss_sliced}"
            );
            let norm_whole = clip_global_norm(&trainer.model, &mut grads_whole, 0.0).unwrap();
            let norm_sliced = clip_global_norm(&trainer.model, &mut grads_sliced, 0.0).unwrap();
            assert!(norm_whole > 0.0);
            assert!(
                (norm_whole - norm_sliced).abs() < 1e-4 * norm_whole,
                "{norm_whole} vs {norm_sliced} (observation weight {observation_weight})"
            );
            readings.push((loss_whole, norm_whole));
        }
        // The logged loss is the actions' alone; the observations change the gradient.
        assert_eq!(readings[0].0, readings[1].0);
        assert!((readings[0].1 - readings[1].1).abs() > 1e-3 * readings[0].1);
        let _ = std::fs::remove_dir_all(&out);
    }

    /// With `sft.mistake_rate = 1` the demonstrations start with a refused edit (where
    /// a mistaken text exists), are trained only after it, and still succeed; with 0
    /// they are the teacher's own episodes, as before the setting existed.
    #[test]
    fn refused_edit_demonstrations_are_trained_after_the_refusal() {
        let mut config = TrainConfig::default();
        config.harness.edit_tool = true;
        config.harness.listing_on_refusal = true;
        let (clean, _) = demonstrations(&config, 12);
        assert!(clean.iter().all(|d| d.trained_from == 0));
        config.sft.mistake_rate = 1.0;
        let (mistaken, _) = demonstrations(&config, 12);
        assert_eq!(mistaken.len(), clean.len());
        let refused: Vec<_> = mistaken.iter().filter(|d| d.trained_from > 0).collect();
        assert!(
            refused.len() >= 9,
            "{} of {}",
            refused.len(),
            mistaken.len()
        );
        for demo in refused {
            assert!(demo.record.success());
            let refusals: Vec<usize> = (0..demo.record.calls.len())
                .filter(|&k| {
                    demo.record.calls[k]
                        .observation_text
                        .starts_with("error: the code does not contain")
                })
                .collect();
            assert_eq!(refusals.len(), 1, "one refused edit");
            // The refused call is context: its action span ends at `trained_from`.
            let refused_span = demo
                .record
                .spans
                .iter()
                .filter(|s| s.role == arlbook_core::agent::SpanRole::Action)
                .nth(refusals[0])
                .unwrap();
            assert_eq!(refused_span.end, demo.trained_from);
            assert!(demo.trained_tokens() < demo.record.generated_tokens());
            assert!(demo.trained_tokens() > 0);
        }
    }

    /// `demo` trained only from its second call on, as a taken-over demonstration is.
    fn trained_from_the_second_call(demo: &Demonstration) -> Demonstration {
        let second_call = demo
            .record
            .spans
            .iter()
            .filter(|s| s.role == SpanRole::Action)
            .nth(1)
            .unwrap()
            .start;
        Demonstration {
            record: demo.record.clone(),
            trained_from: second_call,
        }
    }

    /// A demonstration taken over by the teacher is trained only from `trained_from`:
    /// the mask keeps exactly its trained tokens, and all of a teacher episode's.
    #[test]
    fn the_mask_starts_at_each_demonstrations_trained_from() {
        let config = TrainConfig::default();
        let (demos, _) = demonstrations(&config, 3);
        let partial = trained_from_the_second_call(&demos[0]);
        assert!(partial.trained_tokens() < partial.record.generated_tokens());
        let rows = [&demos[1], &partial];
        let (_, masks) = demonstration_batch(&rows, false, &burn::tensor::Device::flex());
        assert!(masks.observation.is_none());
        let per_row: Vec<f32> = masks.action.sum_dim(1).try_into_vec_as::<f32>().unwrap();
        assert_eq!(per_row[0] as usize, demos[1].trained_tokens());
        assert_eq!(per_row[1] as usize, partial.trained_tokens());
    }

    /// The observation mask holds exactly the tool results up to the last action (the
    /// listing among them), after `trained_from`, and none of the action targets.
    #[test]
    fn the_observation_mask_holds_the_tool_results_up_to_the_last_action() {
        let config = TrainConfig::default();
        let (demos, _) = demonstrations(&config, 4);
        let partial = trained_from_the_second_call(&demos[0]);
        let rows = [&demos[1], &partial];
        let device = burn::tensor::Device::flex();
        let (micro, masks) = demonstration_batch(&rows, true, &device);
        let observation = masks.observation.unwrap();
        let [n, t] = observation.dims();
        let values: Vec<f32> = observation.try_into_vec_as::<f32>().unwrap();
        let action: Vec<f32> = masks.action.try_into_vec_as::<f32>().unwrap();
        let tokenizer = arlbook_core::agent::tokenizer::tokenizer();
        for (row, demo) in rows.iter().enumerate() {
            let record = &demo.record;
            let last_action_end = record
                .spans
                .iter()
                .filter(|s| s.role == SpanRole::Action)
                .map(|s| s.end)
                .max()
                .unwrap();
            let expected: Vec<usize> = (demo.trained_from.max(1)..last_action_end)
                .filter(|&i| {
                    record
                        .spans
                        .iter()
                        .any(|s| s.role == SpanRole::Observation && (s.start..s.end).contains(&i))
                })
                .collect();
            assert!(!expected.is_empty());
            let marked: Vec<usize> = (0..t)
                .filter(|&j| values[row * t + j] == 1.0)
                .map(|j| j + 1)
                .collect();
            assert_eq!(marked, expected, "row {row}");
            for j in 0..t {
                assert!(values[row * t + j] == 0.0 || action[row * t + j] == 0.0);
                assert_eq!(
                    micro.tokens.host.scored[row * t + j],
                    values[row * t + j] == 1.0 || micro.padded.loss_mask[row * t + j] == 1,
                );
            }
            let ids: Vec<u32> = marked.iter().map(|&i| record.tokens[i]).collect();
            let text = tokenizer.decode(&ids);
            assert!(text.contains("def "), "the listing is a target: {text}");
        }
        assert_eq!(n, 2);
    }

    /// The fused CPU path scores the observation targets as burn's graph does: the
    /// summed log-likelihood under the observation mask agrees, so the positions the
    /// observation loss reads were scored, not left at 0.
    #[test]
    fn fused_and_graph_paths_agree_on_the_observation_targets() {
        let (trainer, demos, out) = tiny_trainer("observed", 3);
        let rows: Vec<&Demonstration> = demos.iter().collect();
        let (micro, masks) = demonstration_batch(&rows, true, &trainer.device);
        let observation = masks.observation.unwrap();
        let weights = weights_for(&trainer.model, &trainer.plain)
            .unwrap()
            .unwrap();
        let summed = |path| -> f64 {
            let scored = score(
                path,
                &trainer.model,
                &micro.tokens,
                1.0,
                Entropy::Skip,
                &trainer.device,
            )
            .unwrap();
            let total = (scored.logp * observation.clone()).sum();
            f64::from(total.try_into_scalar::<f32>().unwrap())
        };
        let fused = summed(Path::Fused(&weights));
        let graph = summed(Path::Graph);
        assert!(fused < 0.0, "{fused}");
        assert!(
            (fused - graph).abs() < 1e-4 * graph.abs(),
            "{fused} vs {graph}"
        );
        let _ = std::fs::remove_dir_all(&out);
    }

    #[test]
    fn batches_cover_every_demonstration_once_per_pass_and_are_reproducible() {
        let count = 10;
        let mut seen = vec![0; count];
        let mut cache = None;
        for step in 0..5 {
            let indices = cached_indices(&mut cache, (3, ORDER_STREAM), step, 2, count);
            assert_eq!(indices, batch_indices(3, step, 2, count));
            for i in indices {
                seen[i] += 1;
            }
        }
        assert!(seen.iter().all(|&s| s == 1), "{seen:?}");
    }
}

//! A synthetic GRPO workload with fixed shapes, timed the same way as
//! `xtask/bench/torch_policy.py` times the same model and loss in PyTorch, so that
//! `cargo xtask bench train` can print the ratio of the two on one machine.
//!
//! Workload (the default CPU model): `rows` sequences of `prompt` random tokens are
//! prefilled and extended by `new_tokens` greedy decode steps with the KV cache, the
//! rows split across cores as the trainer's rollouts are (rollout tokens/s); then the
//! update runs forward, the clipped token-mean loss, backward and an AdamW step over
//! the same rows in microbatches (update tokens/s).
//! A GRPO step's time is the sum of the two phases.
//!
//! Multi-turn workload (an agent's episodes): each row generates `turn_tokens` greedy
//! tokens per turn for `turns` turns, and between turns a tool result of
//! `observation_tokens` tokens is appended. arlbook keeps each episode's key/value
//! cache across turns and encodes only the new tokens ([`PolicyModel::extend`]), as
//! the trainer's rollouts do; the PyTorch side re-prefills the whole context at every
//! turn, as a plain `generate` loop called once per turn does.
//!
//! Both sides report the process's peak resident memory at the end
//! ([`crate::resident`]).

use std::time::Instant;

use arlbook_core::rng::RandomStream;
use burn::optim::GradientsParams;
use burn::prelude::*;
use serde::Serialize;

use super::config::ModelConfig;
use crate::learner::batching::{HostArrays, Tokens};
use crate::learner::loss::{SurrogateInputs, SurrogateSettings, surrogate_loss};
use crate::learner::optimizer::adamw;
use crate::learner::replicas::accumulate_in_parallel;
use crate::policy::fused::score::{Entropy, Path, score, weights_for};
use crate::policy::generate::{Engine, rollout_threads, try_in_parts};
use crate::policy::model::PolicyModel;
use crate::run::trainer::vocab;

/// The shapes of the workload.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Workload {
    /// Sequences per GRPO step (`B x G`).
    pub rows: usize,
    /// Context tokens before generation.
    pub prompt: usize,
    /// Generated tokens per row.
    pub new_tokens: usize,
    /// Rows per forward pass in the update.
    pub microbatch_rows: usize,
    /// Timed repetitions (after one warm-up).
    pub repeats: usize,
    /// Turns per episode of the multi-turn workload.
    pub turns: usize,
    /// Generated tokens per turn of the multi-turn workload.
    pub turn_tokens: usize,
    /// Tokens of each tool result between two turns.
    pub observation_tokens: usize,
    /// Threads of the update's microbatches ([`crate::learner::replicas`]); `None`: as the
    /// trainer ([`rollout_threads`]).
    pub update_threads: Option<usize>,
    /// burn's forward passes and autodiff graph even on the CPU backend, where the
    /// trainer takes the fused passes ([`crate::policy::fused`]): the comparison of the two.
    pub burn_only: bool,
}

impl Workload {
    /// Tokens a multi-turn episode holds at its end.
    pub fn episode_tokens(&self) -> usize {
        self.prompt
            + self.turns * self.turn_tokens
            + self.turns.saturating_sub(1) * self.observation_tokens
    }
}

/// Measured times (best of the repetitions).
#[derive(Debug, Clone, Serialize)]
pub struct Timing {
    /// Implementation name.
    pub implementation: &'static str,
    /// Parameters of the model.
    pub parameters: usize,
    /// Tokens of the vocabulary (the environment's tokenizer): the other side of the
    /// benchmark builds its model with as many.
    pub vocab: usize,
    /// Rollout phase seconds.
    pub rollout_s: f64,
    /// Generated tokens per second.
    pub rollout_tokens_per_s: f64,
    /// Update phase seconds.
    pub update_s: f64,
    /// Trained tokens per second (all positions of the forward).
    pub update_tokens_per_s: f64,
    /// `rollout_s + update_s`.
    pub grpo_step_s: f64,
    /// Seconds of the multi-turn rollout of all rows.
    pub multi_turn_s: f64,
    /// Generated tokens per second of the multi-turn rollout.
    pub multi_turn_tokens_per_s: f64,
    /// Peak resident memory of the process at the end, MiB (absent where the system
    /// does not say).
    pub peak_resident_mib: Option<f64>,
}

/// One episode of the multi-turn workload: its prompt and the tool results that follow
/// each turn but the last.
struct Episode {
    prompt: Vec<u32>,
    observations: Vec<Vec<u32>>,
}

impl Episode {
    /// Random tokens: a prompt of `prompt`, and `turns - 1` tool results of
    /// `observation_tokens`.
    fn random(
        rng: &mut RandomStream,
        prompt: usize,
        turns: usize,
        observation_tokens: usize,
    ) -> Self {
        Self {
            prompt: random_tokens(rng, prompt),
            observations: (1..turns)
                .map(|_| random_tokens(rng, observation_tokens))
                .collect(),
        }
    }
}

fn random_tokens(rng: &mut RandomStream, count: usize) -> Vec<u32> {
    let v = vocab() as u32;
    (0..count).map(|_| 6 + rng.below(v - 6)).collect()
}

/// Extends each of `contexts` by `new_tokens` greedy tokens: one prefill, then one
/// cached decode step per token, through `engine` (the trainer's).
fn greedy_decode(
    engine: Engine<'_>,
    contexts: &[Vec<u32>],
    new_tokens: usize,
) -> anyhow::Result<Vec<Vec<u32>>> {
    let refs: Vec<&[u32]> = contexts.iter().map(Vec::as_slice).collect();
    let (mut cache, mut logits) = engine.prefill(&refs)?;
    let mut sequences = contexts.to_vec();
    let live = vec![true; contexts.len()];
    for step in 0..new_tokens {
        let next = greedy(&logits, contexts.len());
        for (s, &t) in sequences.iter_mut().zip(&next) {
            s.push(t);
        }
        // As the PyTorch side: a decode step after every token, the last included.
        logits = engine.step(&mut cache, &next, &live, step)?;
    }
    Ok(sequences)
}

/// The greedy token of each of the `rows` rows of `logits` (`[rows, V]`).
fn greedy(logits: &[f32], rows: usize) -> Vec<u32> {
    let vocab = logits.len() / rows.max(1);
    logits
        .chunks_exact(vocab.max(1))
        .map(|row| {
            row.iter()
                .enumerate()
                .fold((0, f32::NEG_INFINITY), |best, (i, &v)| {
                    if v > best.1 { (i, v) } else { best }
                })
                .0 as u32
        })
        .collect()
}

/// Plays `episodes` turn by turn with one cache each: a prefill of the prompts, then per
/// turn `turn_tokens` greedy tokens, and between turns an extension of the cache by the
/// turn's last token and the tool result. Returns each row's whole token stream.
fn multi_turn_episodes(
    engine: Engine<'_>,
    episodes: &[Episode],
    turn_tokens: usize,
) -> anyhow::Result<Vec<Vec<u32>>> {
    let prompts: Vec<&[u32]> = episodes.iter().map(|e| e.prompt.as_slice()).collect();
    let (mut cache, mut logits) = engine.prefill(&prompts)?;
    let mut streams: Vec<Vec<u32>> = episodes.iter().map(|e| e.prompt.clone()).collect();
    let live = vec![true; episodes.len()];
    let turns = episodes.first().map_or(0, |e| e.observations.len() + 1);
    for turn in 0..turns {
        for i in 0..turn_tokens {
            let next = greedy(&logits, episodes.len());
            for (s, &t) in streams.iter_mut().zip(&next) {
                s.push(t);
            }
            if i + 1 < turn_tokens {
                logits = engine.step(&mut cache, &next, &live, i)?;
            }
        }
        if turn + 1 < turns {
            // The turn's last token is not in the cache yet: it leads the suffix.
            let suffixes: Vec<Vec<u32>> = streams
                .iter()
                .zip(episodes)
                .map(|(s, e)| {
                    let mut suffix = vec![*s.last().unwrap_or(&0)];
                    suffix.extend_from_slice(&e.observations[turn]);
                    suffix
                })
                .collect();
            let refs: Vec<&[u32]> = suffixes.iter().map(Vec::as_slice).collect();
            logits = engine.extend(&mut cache, &refs)?;
            for (s, e) in streams.iter_mut().zip(episodes) {
                s.extend_from_slice(&e.observations[turn]);
            }
        }
    }
    Ok(streams)
}

/// The clipped token-mean loss's gradients for one microbatch of `sequences` (its
/// tokens after `prompt` are the generated ones, each weighing `weight`), through
/// `path` (see `crate::policy::fused::score`).
fn microbatch_gradients(
    model: &PolicyModel,
    path: Path<'_>,
    chunk: &[Vec<u32>],
    prompt: usize,
    weight: f32,
    settings: &SurrogateSettings,
    device: &Device,
) -> anyhow::Result<GradientsParams> {
    let n = chunk.len();
    let t = chunk.first().map_or(1, Vec::len) - 1;
    let scored: Vec<bool> = (0..n)
        .flat_map(|_| (0..t).map(|j| j + 1 >= prompt))
        .collect();
    let mask: Vec<f32> = scored.iter().map(|&s| if s { 1.0 } else { 0.0 }).collect();
    let host = HostArrays {
        rows: n,
        seq: t,
        inputs: chunk.iter().flat_map(|s| s[..t].iter().copied()).collect(),
        targets: chunk.iter().flat_map(|s| s[1..].iter().copied()).collect(),
        scored,
        kept: None,
    };
    let tokens = Tokens::new(host, vocab(), device);
    let weights: Vec<f32> = mask.iter().map(|m| m * weight).collect();
    let mask = Tensor::<2>::from_data(TensorData::new(mask, [n, t]), device);
    let scores = score(path, model, &tokens, 1.0, Entropy::Skip, device)?;
    let inputs = SurrogateInputs {
        old_logp: scores.logp.clone().detach() * mask.clone(),
        mask,
        weights: Tensor::from_data(TensorData::new(weights, [n, t]), device),
        advantages: Tensor::from_data(TensorData::new(vec![0.5f32; n], [n, 1]), device),
        ref_logp: None,
        entropy: None,
        multipliers: None,
    };
    let loss = surrogate_loss(scores.logp.clone(), &inputs, settings);
    scores.gradients(&loss, model, &device.clone().inner())
}

/// Runs the workload on `device` with the model shape `config`.
///
/// # Errors
/// When a result cannot be read back from the device.
pub fn run(config: &ModelConfig, workload: &Workload, device: &Device) -> anyhow::Result<Timing> {
    let train_device = device.clone().autodiff();
    train_device.seed(1);
    let mut model = PolicyModel::new(config, vocab(), &train_device);
    let mut optim = adamw();
    let mut rng = RandomStream::new(1, 0);
    let contexts: Vec<Vec<u32>> = (0..workload.rows)
        .map(|_| random_tokens(&mut rng, workload.prompt))
        .collect();
    let seq = workload.prompt + workload.new_tokens;
    let mut best_rollout = f64::INFINITY;
    let mut best_update = f64::INFINITY;
    let settings = SurrogateSettings {
        eps_low: 0.2,
        eps_high: 0.28,
        ..SurrogateSettings::default()
    };
    let update_threads = workload
        .update_threads
        .unwrap_or_else(|| rollout_threads(device));
    // The fused CPU passes on the CPU backend, as the trainer (unless `burn_only`).
    let fused_weights =
        |model: &PolicyModel| -> anyhow::Result<Option<crate::policy::fused::Weights>> {
            if workload.burn_only {
                Ok(None)
            } else {
                weights_for(model, device)
            }
        };
    for repeat in 0..=workload.repeats {
        // Rollout: prefill + greedy decode with the cache.
        let t0 = Instant::now();
        let policy = model.valid();
        let weights = fused_weights(&policy)?;
        let engine = Engine {
            model: &policy,
            device,
            weights: weights.as_ref(),
        };
        let sequences = try_in_parts(&contexts, rollout_threads(device), |part| {
            greedy_decode(engine, part, workload.new_tokens)
        })?;
        let rollout_s = t0.elapsed().as_secs_f64();
        // Update: forward, loss, backward over microbatches, one optimizer step.
        let t1 = Instant::now();
        let weight = 1.0 / (workload.rows * workload.new_tokens) as f32;
        let chunks: Vec<&[Vec<u32>]> = sequences.chunks(workload.microbatch_rows).collect();
        let weights = fused_weights(&model)?;
        let path = Path::for_device(device, weights.as_ref());
        let (grads, _) =
            accumulate_in_parallel(&model, &chunks, update_threads, |replica, chunk| {
                let grads = microbatch_gradients(
                    replica,
                    path,
                    chunk,
                    workload.prompt,
                    weight,
                    &settings,
                    &train_device,
                )?;
                Ok((grads, ()))
            })?;
        model = optim.step(1e-4, model, grads);
        let update_s = t1.elapsed().as_secs_f64();
        if repeat > 0 {
            best_rollout = best_rollout.min(rollout_s);
            best_update = best_update.min(update_s);
        }
    }
    let episodes: Vec<Episode> = (0..workload.rows)
        .map(|_| {
            Episode::random(
                &mut rng,
                workload.prompt,
                workload.turns,
                workload.observation_tokens,
            )
        })
        .collect();
    let mut best_multi_turn = f64::INFINITY;
    let policy = model.valid();
    let weights = fused_weights(&policy)?;
    let engine = Engine {
        model: &policy,
        device,
        weights: weights.as_ref(),
    };
    for repeat in 0..=workload.repeats {
        let t0 = Instant::now();
        try_in_parts(&episodes, rollout_threads(device), |part| {
            multi_turn_episodes(engine, part, workload.turn_tokens)
        })?;
        if repeat > 0 {
            best_multi_turn = best_multi_turn.min(t0.elapsed().as_secs_f64());
        }
    }
    Ok(Timing {
        implementation: if workload.burn_only || *device != Device::flex() {
            "arlbook (burn)"
        } else {
            "arlbook (fused CPU passes)"
        },
        parameters: model.num_params(),
        vocab: vocab(),
        rollout_s: best_rollout,
        rollout_tokens_per_s: (workload.rows * workload.new_tokens) as f64 / best_rollout,
        update_s: best_update,
        update_tokens_per_s: (workload.rows * (seq - 1)) as f64 / best_update,
        grpo_step_s: best_rollout + best_update,
        multi_turn_s: best_multi_turn,
        multi_turn_tokens_per_s: (workload.rows * workload.turns * workload.turn_tokens) as f64
            / best_multi_turn,
        peak_resident_mib: crate::resident::peak_resident_mib(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same episodes the PyTorch side plays: every turn re-prefills the whole
    /// context so far with a fresh cache.
    fn reprefilled(engine: Engine<'_>, episodes: &[Episode], turn_tokens: usize) -> Vec<Vec<u32>> {
        let mut streams: Vec<Vec<u32>> = episodes.iter().map(|e| e.prompt.clone()).collect();
        let turns = episodes[0].observations.len() + 1;
        for turn in 0..turns {
            let contexts = streams.clone();
            let generated = greedy_decode(engine, &contexts, turn_tokens).expect("decode");
            streams = generated;
            if turn + 1 < turns {
                for (s, e) in streams.iter_mut().zip(episodes) {
                    s.extend_from_slice(&e.observations[turn]);
                }
            }
        }
        streams
    }

    #[test]
    fn the_multi_turn_workload_plays_the_episodes_a_full_reprefill_plays() {
        let device = Device::flex();
        device.seed(3);
        let config = ModelConfig {
            layers: 1,
            width: 16,
            heads: 2,
            context: 64,
            ..ModelConfig::default()
        };
        let policy = PolicyModel::new(&config, vocab(), &device);
        let mut rng = RandomStream::new(5, 0);
        // Three turns: two tool results of four tokens.
        let episodes: Vec<Episode> = (0..3).map(|_| Episode::random(&mut rng, 7, 3, 4)).collect();
        let weights = crate::policy::fused::Weights::of(&policy).expect("weights");
        // burn's passes and the fused ones.
        for weights in [None, Some(&weights)] {
            let engine = Engine {
                model: &policy,
                device: &device,
                weights,
            };
            let cached = multi_turn_episodes(engine, &episodes, 3).expect("episodes");
            assert_eq!(cached, reprefilled(engine, &episodes, 3));
            // Prompt, three turns of three tokens, two tool results of four.
            assert!(cached.iter().all(|s| s.len() == 7 + 9 + 8));
        }
    }
}

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

use std::time::Instant;

use arlbook_core::math::kl::KlEstimator;
use arlbook_core::rng::RandomStream;
use burn::optim::{GradientsAccumulator, GradientsParams};
use burn::prelude::*;
use serde::Serialize;

use super::config::ModelConfig;
use super::generate::{rollout_threads, try_in_parts};
use super::loss::{SurrogateInputs, SurrogateSettings, surrogate_loss, token_logprobs};
use super::model::PolicyModel;
use super::optimizer::adamw;
use super::trainer::vocab;

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
}

/// Measured times (best of the repetitions).
#[derive(Debug, Clone, Serialize)]
pub struct Timing {
    /// Implementation name.
    pub implementation: &'static str,
    /// Parameters of the model.
    pub parameters: usize,
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
}

fn random_tokens(rng: &mut RandomStream, count: usize) -> Vec<u32> {
    let v = vocab() as u32;
    (0..count).map(|_| 6 + rng.below(v - 6)).collect()
}

/// Extends each of `contexts` by `new_tokens` greedy tokens: one prefill, then one
/// cached decode step per token.
fn greedy_decode(
    policy: &PolicyModel,
    contexts: &[Vec<u32>],
    new_tokens: usize,
    device: &Device,
) -> anyhow::Result<Vec<Vec<u32>>> {
    let refs: Vec<&[u32]> = contexts.iter().map(Vec::as_slice).collect();
    let (mut cache, mut logits) = policy.prefill(&refs, device);
    let mut sequences = contexts.to_vec();
    for _ in 0..new_tokens {
        let next: Vec<u32> = logits
            .argmax(1)
            .try_into_vec_as::<i64>()
            .map_err(|e| anyhow::anyhow!("reading the greedy tokens back from the device: {e:?}"))?
            .iter()
            .map(|&t| t as u32)
            .collect();
        for (s, &t) in sequences.iter_mut().zip(&next) {
            s.push(t);
        }
        logits = policy.decode_step(&mut cache, &next, &vec![true; next.len()], device);
    }
    // Wait for the last step (a GPU backend queues work).
    logits
        .try_into_data()
        .map_err(|e| anyhow::anyhow!("finishing the last decode step on the device: {e:?}"))?;
    Ok(sequences)
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
        dual_clip: None,
        beta: 0.0,
        kl_estimator: KlEstimator::K3,
    };
    for repeat in 0..=workload.repeats {
        // Rollout: prefill + greedy decode with the cache.
        let t0 = Instant::now();
        let policy = model.valid();
        let sequences = try_in_parts(&contexts, rollout_threads(device), |part| {
            greedy_decode(&policy, part, workload.new_tokens, device)
        })?;
        let rollout_s = t0.elapsed().as_secs_f64();
        // Update: forward, loss, backward over microbatches, one optimizer step.
        let t1 = Instant::now();
        let mut accumulator = GradientsAccumulator::<PolicyModel>::new();
        let weight = 1.0 / (workload.rows * workload.new_tokens) as f32;
        for chunk in sequences.chunks(workload.microbatch_rows) {
            let n = chunk.len();
            let t = seq - 1;
            let inputs: Vec<i32> = chunk
                .iter()
                .flat_map(|s| s[..t].iter().map(|&v| v as i32))
                .collect();
            let targets: Vec<i32> = chunk
                .iter()
                .flat_map(|s| s[1..].iter().map(|&v| v as i32))
                .collect();
            let mask: Vec<f32> = (0..n)
                .flat_map(|_| (0..t).map(|j| if j + 1 >= workload.prompt { 1.0 } else { 0.0 }))
                .collect();
            let weights: Vec<f32> = mask.iter().map(|m| m * weight).collect();
            let mask = Tensor::<2>::from_data(TensorData::new(mask, [n, t]), &train_device);
            let logits = model.forward(Tensor::from_data(
                TensorData::new(inputs, [n, t]),
                &train_device,
            ));
            let logp = token_logprobs(
                logits,
                Tensor::from_data(TensorData::new(targets, [n, t]), &train_device),
                1.0,
                None,
            );
            let inputs = SurrogateInputs {
                old_logp: logp.clone().detach() * mask.clone(),
                mask,
                weights: Tensor::from_data(TensorData::new(weights, [n, t]), &train_device),
                advantages: Tensor::from_data(
                    TensorData::new(vec![0.5f32; n], [n, 1]),
                    &train_device,
                ),
                ref_logp: None,
            };
            let grads = surrogate_loss(logp, &inputs, &settings).backward();
            accumulator.accumulate(&model, GradientsParams::from_grads(grads, &model));
        }
        model = optim.step(1e-4, model, accumulator.grads());
        let update_s = t1.elapsed().as_secs_f64();
        if repeat > 0 {
            best_rollout = best_rollout.min(rollout_s);
            best_update = best_update.min(update_s);
        }
    }
    Ok(Timing {
        implementation: "arlbook (burn)",
        parameters: model.num_params(),
        rollout_s: best_rollout,
        rollout_tokens_per_s: (workload.rows * workload.new_tokens) as f64 / best_rollout,
        update_s: best_update,
        update_tokens_per_s: (workload.rows * (seq - 1)) as f64 / best_update,
        grpo_step_s: best_rollout + best_update,
    })
}

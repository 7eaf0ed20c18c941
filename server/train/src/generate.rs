//! The transformer as a [`Generator`]: one prefill of the left-padded contexts, then
//! one cached decode step per generated token, sampling every row on the host with its
//! own episode stream.
//!
//! [`roll_out`] runs a batch of episodes with it. On the CPU backend it splits the
//! episodes into one contiguous part per core and runs each part's lockstep on its own
//! thread: the small matrices of a decode step keep burn's CPU kernels on one core,
//! so without this the other cores idle through every rollout. Episodes are isolated
//! (each samples from its own stream), so the split changes no episode's draws.

use anyhow::{Result, anyhow};
use arlbook_core::agent::tokenizer::{END, PAD};
use arlbook_core::agent::{HarnessConfig, PolicyInfo};
pub use arlbook_core::parallel::{in_parts, try_in_parts};
use burn::prelude::*;

use super::model::PolicyModel;
use super::rollout::{Action, EpisodeSpec, Generator, Request, Rollout, run_lockstep};
use super::sampling::Sampler;

/// Most rows generated together (bounds the cache's memory).
const MAX_ROWS: usize = 128;

/// A model (without autodiff) generating on `device`.
#[derive(Debug)]
pub struct ModelGenerator<'m> {
    /// The policy, in inference mode.
    pub model: &'m PolicyModel,
    /// Where it runs.
    pub device: Device,
}

impl<'m> ModelGenerator<'m> {
    /// A generator over `model` on `device`.
    pub fn new(model: &'m PolicyModel, device: Device) -> Self {
        Self { model, device }
    }

    fn generate_chunk(
        &mut self,
        requests: &mut [Request<'_>],
        sampler: &Sampler,
    ) -> Result<Vec<Action>> {
        let n = requests.len();
        let contexts: Vec<&[u32]> = requests.iter().map(|r| r.context).collect();
        let (mut cache, mut logits) = self.model.prefill(&contexts, &self.device);
        let mut actions = vec![Action::default(); n];
        let mut done: Vec<bool> = requests.iter().map(|r| r.limit == 0).collect();
        let longest = requests.iter().map(|r| r.limit).max().unwrap_or(0);
        for step in 0..longest {
            let vocab = logits.dims()[1];
            let rows: Vec<f32> = logits.try_into_vec_as::<f32>().map_err(|e| {
                anyhow!(
                    "reading the [{n}, {vocab}] logits of generation step {step} back from \
                     the device: {e:?}"
                )
            })?;
            let mut next = vec![PAD; n];
            for (i, request) in requests.iter_mut().enumerate() {
                if done[i] {
                    continue;
                }
                let draw = sampler.draw(&rows[i * vocab..(i + 1) * vocab], request.rng);
                let action = &mut actions[i];
                action.generation.tokens.push(draw.token);
                action.generation.logprobs.push(draw.logprob);
                action.entropy.push(draw.entropy);
                if let Some(keep) = draw.keep {
                    action.keep.push(keep);
                }
                next[i] = draw.token;
                if draw.token == END || action.generation.tokens.len() >= request.limit {
                    done[i] = true;
                }
            }
            if done.iter().all(|&d| d) {
                break;
            }
            logits = self.model.decode_step(&mut cache, &next, &self.device);
        }
        Ok(actions)
    }
}

impl Generator for ModelGenerator<'_> {
    fn generate(&mut self, requests: &mut [Request<'_>], sampler: &Sampler) -> Result<Vec<Action>> {
        let mut actions = Vec::with_capacity(requests.len());
        for chunk in requests.chunks_mut(MAX_ROWS) {
            actions.extend(self.generate_chunk(chunk, sampler)?);
        }
        Ok(actions)
    }
}

/// How many threads share a rollout on `device`: one per core on the CPU backend, one
/// on a GPU (whose queue already runs the batch in parallel).
pub fn rollout_threads(device: &Device) -> usize {
    if *device == Device::flex() {
        arlbook_core::parallel::available_threads()
    } else {
        1
    }
}

/// Runs every episode of `specs` to its end with `model` on `device`, returning the
/// rollouts in the order of `specs` (see the module docs for the threads).
///
/// # Errors
/// When the model's logits cannot be read back from the device.
pub fn roll_out(
    model: &PolicyModel,
    device: &Device,
    specs: &[EpisodeSpec],
    harness: &HarnessConfig,
    sampler: &Sampler,
    info: &PolicyInfo,
) -> Result<Vec<Rollout>> {
    try_in_parts(specs, rollout_threads(device), |part| {
        let mut generator = ModelGenerator::new(model, device.clone());
        run_lockstep(part, harness, &mut generator, sampler, info)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ModelConfig;
    use crate::trainer::vocab;
    use arlbook_core::agent::{EpisodeIds, Split, generate_task};

    /// Splitting a rollout across threads must give every episode the same tokens as
    /// one lockstep over all of them: each episode samples from its own stream, and a
    /// row's logits do not depend on the other rows of its batch.
    #[test]
    fn threaded_rollout_equals_one_lockstep() {
        let device = Device::flex();
        device.seed(3);
        let config = ModelConfig {
            layers: 1,
            width: 32,
            heads: 2,
            context: 640,
        };
        let model = PolicyModel::new(&config, vocab(), &device);
        let specs: Vec<EpisodeSpec> = (0..5)
            .map(|i| EpisodeSpec {
                task: generate_task(Split::Train, i),
                ids: EpisodeIds {
                    group_id: i,
                    sample_id: 0,
                },
                seed: 40 + i,
            })
            .collect();
        let harness = HarnessConfig {
            max_turns: 3,
            ..HarnessConfig::default()
        };
        let sampler = Sampler {
            temperature: 1.0,
            top_p: None,
        };
        let info = PolicyInfo {
            name: "test".to_owned(),
            version: "0".to_owned(),
            sampling: arlbook_core::agent::SamplingSettings::default(),
        };
        let mut generator = ModelGenerator::new(&model, device.clone());
        let together = run_lockstep(&specs, &harness, &mut generator, &sampler, &info).unwrap();
        let threaded = try_in_parts(&specs, 2, |part| {
            let mut generator = ModelGenerator::new(&model, device.clone());
            run_lockstep(part, &harness, &mut generator, &sampler, &info)
        })
        .unwrap();
        assert_eq!(together.len(), threaded.len());
        for (a, b) in together.iter().zip(&threaded) {
            assert_eq!(a.record.group_id, b.record.group_id);
            assert_eq!(a.record.tokens, b.record.tokens);
            assert!(a.record.generated_tokens() > 0);
            for (x, y) in a.entropy.iter().zip(&b.entropy) {
                assert!((x - y).abs() < 1e-5, "{x} vs {y}");
            }
        }
    }
}

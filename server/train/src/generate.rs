//! The transformer as a [`Generator`]: one prefill of the left-padded contexts, then
//! one cached decode step per generated token, sampling every row on the host with its
//! own episode stream.
//!
//! **The cache lives across turns.** After a turn, each batch's key/value cache is
//! kept with the tokens each row holds. When an episode asks again (the tool's
//! observation and the next prompt appended to its context), and its new context
//! starts with what its row holds, only the new tokens are encoded
//! ([`PolicyModel::extend`]); the rows of finished episodes are dropped
//! ([`crate::model::KvCache::select`]). A row whose context does not continue its cached
//! tokens (a wrapper answered a turn in its place, say) starts a fresh prefill with
//! the other such rows. The logits are those of a full prefill within `f32` rounding,
//! so the episodes' tokens are the same (tested against [`ModelGenerator::without_reuse`],
//! today's full re-prefill of every turn).
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

use super::model::{KvCache, PolicyModel};
use super::rollout::{Action, EpisodeSpec, Generator, Request, Rollout, run_lockstep};
use super::sampling::Sampler;

/// Most rows generated together (bounds the cache's memory).
const MAX_ROWS: usize = 128;

/// A batch's cache kept after its turn, with what each row holds.
#[derive(Debug)]
struct Kept {
    cache: KvCache,
    /// Per row: the episode (its index in the lockstep's specs).
    episodes: Vec<usize>,
    /// Per row: the token ids the cache holds, in order (its real columns).
    tokens: Vec<Vec<u32>>,
}

/// A model (without autodiff) generating on `device`.
#[derive(Debug)]
pub struct ModelGenerator<'m> {
    /// The policy, in inference mode.
    pub model: &'m PolicyModel,
    /// Where it runs.
    pub device: Device,
    /// Whether caches are kept across turns.
    reuse: bool,
    kept: Vec<Kept>,
    /// Model calls answered from a kept cache, and by a fresh prefill.
    calls_extended: usize,
    calls_prefilled: usize,
}

impl<'m> ModelGenerator<'m> {
    /// A generator over `model` on `device`, keeping each episode's cache across turns.
    pub fn new(model: &'m PolicyModel, device: Device) -> Self {
        Self {
            model,
            device,
            reuse: true,
            kept: Vec::new(),
            calls_extended: 0,
            calls_prefilled: 0,
        }
    }

    /// Model calls answered so far by extending a kept cache, and by a fresh prefill.
    pub fn calls(&self) -> (usize, usize) {
        (self.calls_extended, self.calls_prefilled)
    }

    /// A generator that prefills every turn's whole context (the reference the
    /// cross-turn cache is tested against).
    pub fn without_reuse(model: &'m PolicyModel, device: Device) -> Self {
        Self {
            reuse: false,
            ..Self::new(model, device)
        }
    }

    /// Samples every request's action from `logits` onwards, feeding each token back
    /// through `cache`; `holds[i]` is what row `i` of the cache holds (its context),
    /// extended with the tokens fed. Returns the actions and the batch to keep.
    fn decode(
        &self,
        mut cache: KvCache,
        mut logits: Tensor<2>,
        requests: &mut [&mut Request<'_>],
        mut holds: Vec<Vec<u32>>,
        sampler: &Sampler,
    ) -> Result<(Vec<Action>, Kept)> {
        let n = requests.len();
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
            let mut live = vec![false; n];
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
                live[i] = true;
                if draw.token == END || action.generation.tokens.len() >= request.limit {
                    done[i] = true;
                }
            }
            if done.iter().all(|&d| d) {
                break;
            }
            for ((held, &token), &live) in holds.iter_mut().zip(&next).zip(&live) {
                if live {
                    held.push(token);
                }
            }
            logits = self
                .model
                .decode_step(&mut cache, &next, &live, &self.device);
        }
        let episodes = requests.iter().map(|r| r.episode).collect();
        Ok((
            actions,
            Kept {
                cache,
                episodes,
                tokens: holds,
            },
        ))
    }
}

/// The kept rows whose episode asks again with a context that continues what the row
/// holds: `(row, request index)` pairs, in request order.
fn continuing(kept: &Kept, requests: &[Request<'_>], claimed: &[bool]) -> Vec<(usize, usize)> {
    let mut pairs: Vec<(usize, usize)> = kept
        .episodes
        .iter()
        .enumerate()
        .filter_map(|(row, &episode)| {
            let k = requests.iter().position(|r| r.episode == episode)?;
            let (context, held) = (requests[k].context, &kept.tokens[row]);
            (!claimed[k] && context.len() > held.len() && context.starts_with(held))
                .then_some((row, k))
        })
        .collect();
    pairs.sort_by_key(|&(_, k)| k);
    pairs
}

/// The requests at `indices` (ascending), mutably.
fn pick<'r, 'a>(requests: &'r mut [Request<'a>], indices: &[usize]) -> Vec<&'r mut Request<'a>> {
    requests
        .iter_mut()
        .enumerate()
        .filter(|(k, _)| indices.binary_search(k).is_ok())
        .map(|(_, r)| r)
        .collect()
}

impl Generator for ModelGenerator<'_> {
    fn generate(&mut self, requests: &mut [Request<'_>], sampler: &Sampler) -> Result<Vec<Action>> {
        let mut actions: Vec<Option<Action>> = vec![None; requests.len()];
        let mut claimed = vec![false; requests.len()];
        let mut kept_now = Vec::new();
        let kept_before = if self.reuse {
            std::mem::take(&mut self.kept)
        } else {
            Vec::new()
        };
        // Episodes that continue a kept batch: encode only their new tokens.
        for kept in kept_before {
            let pairs = continuing(&kept, requests, &claimed);
            if pairs.is_empty() {
                continue;
            }
            let rows: Vec<usize> = pairs.iter().map(|&(row, _)| row).collect();
            let indices: Vec<usize> = pairs.iter().map(|&(_, k)| k).collect();
            let mut cache = kept.cache.select(&rows, &self.device);
            let suffixes: Vec<&[u32]> = pairs
                .iter()
                .map(|&(row, k)| &requests[k].context[kept.tokens[row].len()..])
                .collect();
            let logits = self.model.extend(&mut cache, &suffixes, &self.device);
            self.calls_extended += pairs.len();
            let holds: Vec<Vec<u32>> = indices
                .iter()
                .map(|&k| requests[k].context.to_vec())
                .collect();
            let mut picked = pick(requests, &indices);
            let (generated, batch) = self.decode(cache, logits, &mut picked, holds, sampler)?;
            for (&k, action) in indices.iter().zip(generated) {
                actions[k] = Some(action);
                claimed[k] = true;
            }
            kept_now.push(batch);
        }
        // The others: a fresh prefill, at most MAX_ROWS rows at a time.
        let fresh: Vec<usize> = (0..requests.len()).filter(|&k| !claimed[k]).collect();
        for indices in fresh.chunks(MAX_ROWS) {
            let contexts: Vec<&[u32]> = indices.iter().map(|&k| requests[k].context).collect();
            let (cache, logits) = self.model.prefill(&contexts, &self.device);
            self.calls_prefilled += indices.len();
            let holds: Vec<Vec<u32>> = contexts.iter().map(|c| c.to_vec()).collect();
            let mut picked = pick(requests, indices);
            let (generated, batch) = self.decode(cache, logits, &mut picked, holds, sampler)?;
            for (&k, action) in indices.iter().zip(generated) {
                actions[k] = Some(action);
            }
            kept_now.push(batch);
        }
        if self.reuse {
            self.kept = kept_now;
        }
        Ok(actions.into_iter().map(Option::unwrap_or_default).collect())
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
    use arlbook_core::agent::{EpisodeIds, SamplingSettings, Split, generate_task};

    /// A fresh model of `layers` blocks, width 32, on the CPU with `seed`.
    fn fresh_model(layers: usize, seed: u64) -> PolicyModel {
        let device = Device::flex();
        device.seed(seed);
        let config = ModelConfig {
            layers,
            width: 32,
            heads: 2,
            context: 640,
        };
        PolicyModel::new(&config, vocab(), &device)
    }

    /// `count` training episodes: task `first_task + i`, seed `first_seed + i`.
    fn episodes(count: u64, first_task: u64, first_seed: u64) -> Vec<EpisodeSpec> {
        (0..count)
            .map(|i| EpisodeSpec {
                task: generate_task(Split::Train, first_task + i),
                ids: EpisodeIds {
                    group_id: i,
                    sample_id: 0,
                },
                seed: first_seed + i,
            })
            .collect()
    }

    const SAMPLER: Sampler = Sampler {
        temperature: 1.0,
        top_p: None,
    };

    fn info() -> PolicyInfo {
        PolicyInfo {
            name: "test".to_owned(),
            version: "0".to_owned(),
            sampling: SamplingSettings::default(),
        }
    }

    /// The cross-turn cache against a full prefill of every turn, on the same streams:
    /// multi-turn episodes (a fresh model's calls are malformed, so each gets an error
    /// observation and another turn), the same tokens exactly, log-probabilities and
    /// entropies within `f32` rounding of the logits.
    #[test]
    fn the_cross_turn_cache_gives_the_tokens_of_a_full_prefill() {
        let (model, device) = (fresh_model(2, 9), Device::flex());
        let specs = episodes(6, 70, 500);
        let harness = HarnessConfig {
            max_turns: 5,
            max_malformed: 5,
            max_new_tokens: 12,
            ..HarnessConfig::default()
        };
        let info = info();
        let mut cached = ModelGenerator::new(&model, device.clone());
        let with_cache = run_lockstep(&specs, &harness, &mut cached, &SAMPLER, &info).unwrap();
        let mut plain = ModelGenerator::without_reuse(&model, device);
        let without = run_lockstep(&specs, &harness, &mut plain, &SAMPLER, &info).unwrap();
        let mut turns = 0;
        for (a, b) in with_cache.iter().zip(&without) {
            assert_eq!(
                a.record.tokens, b.record.tokens,
                "episode {}",
                a.record.group_id
            );
            assert_eq!(a.record.spans, b.record.spans);
            turns += a.record.calls.len();
            for (ca, cb) in a.record.calls.iter().zip(&b.record.calls) {
                assert_eq!(ca.context_ids, cb.context_ids);
                for (x, y) in ca.behaviour_logprobs.iter().zip(&cb.behaviour_logprobs) {
                    assert!((x - y).abs() < 1e-4, "log-probability {x} vs {y}");
                }
            }
            for (x, y) in a.entropy.iter().zip(&b.entropy) {
                assert!((x - y).abs() < 1e-4, "entropy {x} vs {y}");
            }
        }
        // Several turns per episode, and every call after an episode's first came
        // from its kept cache.
        assert!(turns >= 3 * specs.len(), "only {turns} model calls");
        assert_eq!(cached.calls(), (turns - specs.len(), specs.len()));
        assert_eq!(plain.calls(), (0, turns));
    }

    /// Splitting a rollout across threads must give every episode the same tokens as
    /// one lockstep over all of them: each episode samples from its own stream, and a
    /// row's logits do not depend on the other rows of its batch.
    #[test]
    fn threaded_rollout_equals_one_lockstep() {
        let (model, device) = (fresh_model(1, 3), Device::flex());
        let specs = episodes(5, 0, 40);
        let harness = HarnessConfig {
            max_turns: 3,
            ..HarnessConfig::default()
        };
        let info = info();
        let mut generator = ModelGenerator::new(&model, device.clone());
        let together = run_lockstep(&specs, &harness, &mut generator, &SAMPLER, &info).unwrap();
        let threaded = try_in_parts(&specs, 2, |part| {
            let mut generator = ModelGenerator::new(&model, device.clone());
            run_lockstep(part, &harness, &mut generator, &SAMPLER, &info)
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

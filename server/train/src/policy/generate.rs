//! The transformer as a [`Generator`]: one prefill of the left-padded contexts, then
//! one cached decode step per generated token, sampling every row on the host with its
//! own episode stream.
//!
//! **A context is encoded once.** The episodes of a GRPO group (or an evaluation's
//! samples of one task) open with the same prompt; a fresh prefill encodes each
//! distinct context once and copies its cache row and logits to every episode that
//! asked with it. Rows never mix in a prefill, so each episode's logits are those of
//! its own prefill (tested).
//!
//! **The cache lives across turns.** After a turn, each batch's key/value cache is
//! kept with the tokens each row holds. When an episode asks again (the tool's
//! observation and the next prompt appended to its context), and its new context
//! starts with what its row holds, only the new tokens are encoded
//! ([`PolicyModel::extend`]); the rows of finished episodes are dropped
//! ([`crate::policy::model::KvCache::select`]). A row whose context does not continue its cached
//! tokens (a wrapper answered a turn in its place, say) starts a fresh prefill with
//! the other such rows. The logits are those of a full prefill within `f32` rounding,
//! so the episodes' tokens are the same (tested against [`ModelGenerator::without_reuse`],
//! today's full re-prefill of every turn).
//!
//! **Two engines.** On the CPU backend the forward passes are the fused ones of
//! [`crate::policy::fused::infer`] (a host cache per row, no padding); elsewhere, and with
//! [`ModelGenerator::with_burn`], they are burn's [`PolicyModel::prefill`],
//! [`PolicyModel::extend`] and [`PolicyModel::decode_step`]. Both give the same logits
//! within `f32` rounding.
//!
//! [`roll_out`] runs a batch of episodes with it. On the CPU backend it splits the
//! episodes into one contiguous part per core and runs each part's lockstep on its own
//! thread: the small matrices of a decode step keep burn's CPU kernels on one core,
//! so without this the other cores idle through every rollout. Episodes are isolated
//! (each samples from its own stream), so the split changes no episode's draws.

use std::collections::HashMap;

use anyhow::{Result, anyhow};
use arlbook_core::agent::tokenizer::{END, PAD};
use arlbook_core::agent::{HarnessConfig, PolicyInfo};
pub use arlbook_core::parallel::{in_parts, try_in_parts};
use burn::prelude::*;

use crate::policy::fused::Weights;
use crate::policy::fused::infer::{self, advance};
use crate::policy::model::{KvCache, PolicyModel};
use crate::policy::rollout::{Action, EpisodeSpec, Generator, Request, Rollout, run_lockstep};
use crate::policy::sampling::Sampler;

/// Most rows generated together (bounds the cache's memory).
const MAX_ROWS: usize = 128;

/// A batch's key/value cache: burn's on its device, or the fused path's on the host.
#[derive(Debug)]
pub enum Cache {
    /// burn's, on its device.
    Burn(KvCache),
    /// The fused path's, one per row on the host.
    Host(infer::Cache),
}

/// A batch's cache kept after its turn, with what each row holds.
#[derive(Debug)]
struct Kept {
    cache: Cache,
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
    /// Whether the fused CPU passes run the model (on the CPU backend, unless
    /// [`ModelGenerator::with_burn`]).
    fused: bool,
    /// Their weights, read at the first call.
    weights: Option<Weights>,
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
            fused: device == Device::flex(),
            device,
            reuse: true,
            weights: None,
            kept: Vec::new(),
            calls_extended: 0,
            calls_prefilled: 0,
        }
    }

    /// Model calls answered so far by extending a kept cache, and by a fresh prefill.
    pub fn calls(&self) -> (usize, usize) {
        (self.calls_extended, self.calls_prefilled)
    }

    /// A generator on burn's forward passes even on the CPU backend (the reference the
    /// fused passes are compared with).
    pub fn with_burn(model: &'m PolicyModel, device: Device) -> Self {
        Self {
            fused: false,
            ..Self::new(model, device)
        }
    }

    /// The fused weights, read at the first call (`None` on burn's passes).
    fn load_weights(&mut self) -> Result<()> {
        if self.fused && self.weights.is_none() {
            self.weights = Some(crate::policy::fused::Weights::of(self.model)?);
        }
        Ok(())
    }

    /// The engine the model calls go through.
    fn engine(&self) -> Engine<'_> {
        Engine {
            model: self.model,
            device: &self.device,
            weights: self.weights.as_ref().filter(|_| self.fused),
        }
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
        mut cache: Cache,
        mut rows: Vec<f32>,
        requests: &mut [&mut Request<'_>],
        mut holds: Vec<Vec<u32>>,
        sampler: &Sampler,
    ) -> Result<(Vec<Action>, Kept)> {
        let n = requests.len();
        let vocab = rows.len() / n.max(1);
        let mut actions = vec![Action::default(); n];
        let mut done: Vec<bool> = requests.iter().map(|r| r.limit == 0).collect();
        let longest = requests.iter().map(|r| r.limit).max().unwrap_or(0);
        for step in 0..longest {
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
            rows = self.engine().step(&mut cache, &next, &live, step)?;
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

/// `contexts` with repeats removed: the distinct ones in order of first appearance, and
/// for each context the index of its distinct one.
fn distinct<'c>(contexts: &[&'c [u32]]) -> (Vec<&'c [u32]>, Vec<usize>) {
    let mut first: HashMap<&[u32], usize> = HashMap::with_capacity(contexts.len());
    let mut unique = Vec::new();
    let of_row = contexts
        .iter()
        .map(|&context| {
            *first.entry(context).or_insert_with(|| {
                unique.push(context);
                unique.len() - 1
            })
        })
        .collect();
    (unique, of_row)
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

/// The model's forward passes for generation: the fused CPU ones over `weights` when
/// given, burn's on `device` otherwise.
#[derive(Debug, Clone, Copy)]
pub struct Engine<'a> {
    /// The policy (burn's passes).
    pub model: &'a PolicyModel,
    /// Where burn's passes run.
    pub device: &'a Device,
    /// The fused passes' weights (`fused::Weights::of`).
    pub weights: Option<&'a Weights>,
}

impl Engine<'_> {
    /// Encodes `contexts` from scratch: their cache and last logits `[N, V]`.
    pub fn prefill(&self, contexts: &[&[u32]]) -> Result<(Cache, Vec<f32>)> {
        match self.weights {
            Some(weights) => {
                let mut cache = infer::Cache::new(contexts.len(), weights.blocks.len());
                let logits = advance(weights, &mut cache, contexts);
                Ok((Cache::Host(cache), logits))
            }
            None => {
                let (cache, logits) = self.model.prefill(contexts, self.device);
                Ok((Cache::Burn(cache), read_logits(logits, "the prefill")?))
            }
        }
    }

    /// Encodes `contexts` from scratch, each distinct one once: the cache (one row per
    /// context, repeats copied) and the logits `[N, V]`. A row's logits are those of its
    /// own prefill: rows do not mix in a prefill (tested).
    pub fn prefill_distinct(&self, contexts: &[&[u32]]) -> Result<(Cache, Vec<f32>)> {
        let (unique, of_row) = distinct(contexts);
        let (cache, logits) = self.prefill(&unique)?;
        if unique.len() == contexts.len() {
            return Ok((cache, logits));
        }
        let vocab = logits.len() / unique.len();
        let logits = of_row
            .iter()
            .flat_map(|&u| logits[u * vocab..(u + 1) * vocab].iter().copied())
            .collect();
        Ok((self.select(&cache, &of_row), logits))
    }

    /// Appends `suffixes` to the rows of `cache`: the logits at each row's last new token.
    pub fn extend(&self, cache: &mut Cache, suffixes: &[&[u32]]) -> Result<Vec<f32>> {
        match (cache, self.weights) {
            (Cache::Host(cache), Some(weights)) => Ok(advance(weights, cache, suffixes)),
            (Cache::Burn(cache), _) => read_logits(
                self.model.extend(cache, suffixes, self.device),
                "an extension",
            ),
            (Cache::Host(_), None) => Err(anyhow!("a host cache without the fused weights")),
        }
    }

    /// One token per live row: the next logits `[N, V]`.
    pub fn step(
        &self,
        cache: &mut Cache,
        tokens: &[u32],
        live: &[bool],
        step: usize,
    ) -> Result<Vec<f32>> {
        match (cache, self.weights) {
            (Cache::Host(cache), Some(weights)) => {
                let fed: Vec<&[u32]> = tokens
                    .iter()
                    .zip(live)
                    .map(|(t, &l)| if l { std::slice::from_ref(t) } else { &[] })
                    .collect();
                Ok(advance(weights, cache, &fed))
            }
            (Cache::Burn(cache), _) => read_logits(
                self.model.decode_step(cache, tokens, live, self.device),
                &format!("generation step {step}"),
            ),
            (Cache::Host(_), None) => Err(anyhow!("a host cache without the fused weights")),
        }
    }

    /// The rows `rows` of `cache`.
    pub fn select(&self, cache: &Cache, rows: &[usize]) -> Cache {
        match cache {
            Cache::Burn(cache) => Cache::Burn(cache.select(rows, self.device)),
            Cache::Host(cache) => Cache::Host(cache.select(rows)),
        }
    }
}

/// Logits `[N, V]` read back from the device, or an error naming `what` produced them.
fn read_logits(logits: Tensor<2>, what: &str) -> Result<Vec<f32>> {
    let [n, vocab] = logits.dims();
    logits.try_into_vec_as::<f32>().map_err(|e| {
        anyhow!("reading the [{n}, {vocab}] logits of {what} back from the device: {e:?}")
    })
}

impl Generator for ModelGenerator<'_> {
    fn generate(&mut self, requests: &mut [Request<'_>], sampler: &Sampler) -> Result<Vec<Action>> {
        self.load_weights()?;
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
            let mut cache = self.engine().select(&kept.cache, &rows);
            let suffixes: Vec<&[u32]> = pairs
                .iter()
                .map(|&(row, k)| &requests[k].context[kept.tokens[row].len()..])
                .collect();
            let logits = self.engine().extend(&mut cache, &suffixes)?;
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
        // The others: a fresh prefill, at most MAX_ROWS rows at a time, each distinct
        // context encoded once (a group's episodes open with the same prompt).
        let fresh: Vec<usize> = (0..requests.len()).filter(|&k| !claimed[k]).collect();
        for indices in fresh.chunks(MAX_ROWS) {
            let contexts: Vec<&[u32]> = indices.iter().map(|&k| requests[k].context).collect();
            let (cache, logits) = self.engine().prefill_distinct(&contexts)?;
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
    use crate::run::trainer::vocab;
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
            ..ModelConfig::default()
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

    /// The fused CPU passes against burn's on the same streams: the same tokens, and
    /// log-probabilities and entropies within `f32` rounding of the logits.
    #[test]
    fn the_fused_passes_generate_the_episodes_burn_s_passes_generate() {
        let (model, device) = (fresh_model(2, 4), Device::flex());
        let specs = episodes(6, 30, 300);
        let harness = HarnessConfig {
            max_turns: 4,
            max_malformed: 4,
            max_new_tokens: 12,
            ..HarnessConfig::default()
        };
        let info = info();
        let mut fused = ModelGenerator::new(&model, device.clone());
        let a = run_lockstep(&specs, &harness, &mut fused, &SAMPLER, &info).unwrap();
        let mut burn = ModelGenerator::with_burn(&model, device);
        let b = run_lockstep(&specs, &harness, &mut burn, &SAMPLER, &info).unwrap();
        let mut tokens = 0;
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(
                x.record.tokens, y.record.tokens,
                "episode {}",
                x.record.group_id
            );
            tokens += x.record.generated_tokens();
            for (cx, cy) in x.record.calls.iter().zip(&y.record.calls) {
                for (p, q) in cx.behaviour_logprobs.iter().zip(&cy.behaviour_logprobs) {
                    assert!((p - q).abs() < 1e-4, "log-probability {p} vs {q}");
                }
            }
            for (p, q) in x.entropy.iter().zip(&y.entropy) {
                assert!((p - q).abs() < 1e-4, "entropy {p} vs {q}");
            }
        }
        assert!(tokens >= 100, "only {tokens} generated tokens");
    }

    #[test]
    fn distinct_keeps_first_appearances_and_maps_every_repeat() {
        let (a, b, c): (&[u32], &[u32], &[u32]) = (&[4, 5, 6], &[4, 5], &[7]);
        let (unique, of_row) = distinct(&[a, b, a, c, b, a]);
        assert_eq!(unique, vec![a, b, c]);
        assert_eq!(of_row, vec![0, 1, 0, 2, 1, 0]);
        assert_eq!(distinct(&[]), (Vec::new(), Vec::new()));
    }

    /// A prefill with repeated contexts, each encoded once, against the prefill of every
    /// row, on both engines: the same logits (bit for bit on the fused passes, whose rows
    /// never mix; within `f32` rounding on burn's, whose batch is smaller), and caches
    /// that give the same logits on a decode step after it.
    #[test]
    fn a_repeated_context_is_encoded_once_and_each_row_reads_its_own() {
        let model = fresh_model(2, 11);
        let context =
            |n: u32, shift: u32| -> Vec<u32> { (0..n).map(|i| 3 + (i * 7 + shift) % 40).collect() };
        let (a, b, c) = (context(30, 0), context(17, 5), context(30, 9));
        let contexts: Vec<&[u32]> = vec![&a, &b, &a, &c, &a, &b];
        let next = [5, 6, 7, 8, 9, 10];
        let live = [true; 6];
        for fused in [true, false] {
            let mut generator = if fused {
                ModelGenerator::new(&model, Device::flex())
            } else {
                ModelGenerator::with_burn(&model, Device::flex())
            };
            generator.load_weights().unwrap();
            let engine = generator.engine();
            let (mut shared, shared_logits) = engine.prefill_distinct(&contexts).unwrap();
            let (mut every, every_logits) = engine.prefill(&contexts).unwrap();
            let tolerance = if fused { 0.0 } else { 1e-4 };
            let close = |x: &[f32], y: &[f32], what: &str| {
                assert_eq!(x.len(), y.len());
                for (p, q) in x.iter().zip(y) {
                    assert!(
                        (p - q).abs() <= tolerance,
                        "{what} (fused {fused}): {p} vs {q}"
                    );
                }
            };
            close(&shared_logits, &every_logits, "the prefill's logits");
            let after_shared = engine.step(&mut shared, &next, &live, 0).unwrap();
            let after_every = engine.step(&mut every, &next, &live, 0).unwrap();
            close(&after_shared, &after_every, "a decode step's logits");
        }
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

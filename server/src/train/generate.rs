//! The transformer as a [`Generator`]: one prefill of the left-padded contexts, then
//! one cached decode step per generated token, sampling every row on the host with its
//! own episode stream.

use arlbook_core::agent::tokenizer::{END, PAD};
use burn::prelude::*;

use super::model::PolicyModel;
use super::rollout::{Action, Generator, Request};
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
    /// Generated tokens so far (for tokens/s).
    pub tokens_generated: usize,
}

impl<'m> ModelGenerator<'m> {
    /// A generator over `model` on `device`.
    pub fn new(model: &'m PolicyModel, device: Device) -> Self {
        Self {
            model,
            device,
            tokens_generated: 0,
        }
    }

    fn generate_chunk(&mut self, requests: &mut [Request<'_>], sampler: &Sampler) -> Vec<Action> {
        let n = requests.len();
        let contexts: Vec<&[u32]> = requests.iter().map(|r| r.context).collect();
        let (mut cache, mut logits) = self.model.prefill(&contexts, &self.device);
        let mut actions = vec![Action::default(); n];
        let mut done: Vec<bool> = requests.iter().map(|r| r.limit == 0).collect();
        let longest = requests.iter().map(|r| r.limit).max().unwrap_or(0);
        for _ in 0..longest {
            let vocab = logits.dims()[1];
            let rows: Vec<f32> = logits
                .try_into_vec_as::<f32>()
                .unwrap_or_else(|_| vec![0.0; n * vocab]);
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
                self.tokens_generated += 1;
                if draw.token == END || action.generation.tokens.len() >= request.limit {
                    done[i] = true;
                }
            }
            if done.iter().all(|&d| d) {
                break;
            }
            logits = self.model.decode_step(&mut cache, &next, &self.device);
        }
        actions
    }
}

impl Generator for ModelGenerator<'_> {
    fn generate(&mut self, requests: &mut [Request<'_>], sampler: &Sampler) -> Vec<Action> {
        let mut actions = Vec::with_capacity(requests.len());
        for chunk in requests.chunks_mut(MAX_ROWS) {
            actions.extend(self.generate_chunk(chunk, sampler));
        }
        actions
    }
}

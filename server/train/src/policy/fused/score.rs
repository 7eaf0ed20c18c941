//! A microbatch scored by the policy: each position's log-probability and entropy as
//! burn tensors, on which the caller builds any loss in burn, and the parameters'
//! gradients of that loss ([`Scored::gradients`]).
//!
//! Two paths give the same numbers (within `f32` rounding, tested in `super::tests`):
//! - [`Path::Graph`]: burn's autodiff through `PolicyModel::forward`,
//!   `loss::token_logprobs` and `loss::entropy_with_graph` (every backend);
//! - [`Path::Fused`]: [`super::network`] computes the scores on the host; they enter
//!   burn as leaves, so `loss.backward()` stops at them, and their gradients are
//!   carried through the network by hand. The CPU backend's path.

use anyhow::{Result, anyhow};
use burn::optim::GradientsParams;
use burn::prelude::*;

use super::network::{self, Batch, Tape};
use super::weights::Weights;
use crate::learner::batching::Tokens;
use crate::learner::loss::{entropy_with_graph, token_entropy, token_logprobs};
use crate::policy::model::PolicyModel;

/// How a microbatch is scored and differentiated.
#[derive(Debug, Clone, Copy)]
pub enum Path<'a> {
    /// burn's graph through the model.
    Graph,
    /// The fused CPU passes over these weights (the model's, read once per step).
    Fused(&'a Weights),
}

impl<'a> Path<'a> {
    /// The fused path where `plain` (the device without autodiff) is the CPU backend and
    /// `weights` were read; burn's graph otherwise.
    pub fn for_device(plain: &Device, weights: Option<&'a Weights>) -> Self {
        match weights {
            Some(w) if *plain == Device::flex() => Self::Fused(w),
            _ => Self::Graph,
        }
    }
}

/// Reads `model`'s weights for the fused path when `plain` is the CPU backend.
///
/// # Errors
/// When a parameter cannot be read back.
pub fn weights_for(model: &PolicyModel, plain: &Device) -> Result<Option<Weights>> {
    if *plain == Device::flex() {
        Weights::of(model).map(Some)
    } else {
        Ok(None)
    }
}

/// Whether the entropy is needed, and with its graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entropy {
    /// Not at all (it comes back as zeros).
    Skip,
    /// Its values only.
    Values,
    /// Its values, differentiable (an entropy bonus in the loss).
    Graph,
}

/// A scored microbatch.
pub struct Scored<'a> {
    /// `log pi(target)` per position, `[N, T]`, differentiable in the parameters.
    pub logp: Tensor<2>,
    /// The entropy per position, `[N, T]` (differentiable under [`Entropy::Graph`]).
    /// Positions the loss does not read may hold 0.
    pub entropy: Tensor<2>,
    fused: Option<FusedParts<'a>>,
}

struct FusedParts<'a> {
    weights: &'a Weights,
    tape: Tape,
}

impl Scored<'_> {
    /// The gradients of `loss` (built on [`Scored::logp`] and [`Scored::entropy`]) with
    /// respect to `model`'s parameters, on `plain` (the device without autodiff).
    ///
    /// # Errors
    /// When a gradient cannot be read back from the device.
    pub fn gradients(
        self,
        loss: &Tensor<1>,
        model: &PolicyModel,
        plain: &Device,
    ) -> Result<GradientsParams> {
        let grads = loss.backward();
        let Some(fused) = self.fused else {
            return Ok(GradientsParams::from_grads(grads, model));
        };
        let read = |tensor: &Tensor<2>| -> Result<Option<Vec<f32>>> {
            tensor
                .grad(&grads)
                .map(|g| {
                    g.try_into_vec_as::<f32>()
                        .map_err(|e| anyhow!("reading a score's gradient back: {e:?}"))
                })
                .transpose()
        };
        let [n, t] = self.logp.dims();
        let d_logp = read(&self.logp)?.unwrap_or_else(|| vec![0.0; n * t]);
        let d_entropy = read(&self.entropy)?;
        let weight_grads =
            network::backward(fused.weights, &fused.tape, &d_logp, d_entropy.as_deref());
        Ok(weight_grads.into_gradients(plain))
    }
}

/// Scores `tokens` with `model` (the graph path) or the fused weights, at `temperature`.
/// `device` is the one the tensors live on.
///
/// # Errors
/// When the fused scores cannot be moved to the device.
pub fn score<'a>(
    path: Path<'a>,
    model: &PolicyModel,
    tokens: &Tokens,
    temperature: f64,
    entropy: Entropy,
    device: &Device,
) -> Result<Scored<'a>> {
    match path {
        Path::Graph => {
            let logits = model.forward(tokens.inputs.clone());
            let [n, t, _] = logits.dims();
            let entropy = match entropy {
                Entropy::Skip => Tensor::zeros([n, t], device),
                Entropy::Values => token_entropy(logits.clone(), temperature),
                Entropy::Graph => entropy_with_graph(logits.clone(), temperature),
            };
            let logp = token_logprobs(
                logits,
                tokens.targets.clone(),
                temperature,
                tokens.not_kept.clone(),
            );
            Ok(Scored {
                logp,
                entropy,
                fused: None,
            })
        }
        Path::Fused(weights) => {
            let host = &tokens.host;
            let (n, t) = (host.rows, host.seq);
            let batch = Batch {
                rows: n,
                seq: t,
                inputs: &host.inputs,
                targets: &host.targets,
                scored: &host.scored,
                kept: host.kept.as_deref(),
                temperature: temperature as f32,
            };
            let (scores, tape) = network::forward(weights, &batch);
            let leaf = |values: Vec<f32>, graph: bool| {
                let tensor = Tensor::<2>::from_data(TensorData::new(values, [n, t]), device);
                if graph { tensor.require_grad() } else { tensor }
            };
            let entropy = match entropy {
                Entropy::Skip => Tensor::zeros([n, t], device),
                Entropy::Values => leaf(scores.entropy, false),
                Entropy::Graph => leaf(scores.entropy, true),
            };
            Ok(Scored {
                logp: leaf(scores.logp, device.is_autodiff()),
                entropy,
                fused: Some(FusedParts { weights, tape }),
            })
        }
    }
}

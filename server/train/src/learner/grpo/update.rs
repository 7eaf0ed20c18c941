//! The update: `epochs` passes over a batch's groups, each split into `minibatches`
//! optimizer steps. A minibatch's reduction weights come from
//! `core::math::reduction::row_weights` over all its rows; its microbatches
//! (`microbatch_rows` rows each) accumulate gradients, so the step sees exactly the
//! minibatch loss. The loss is [`crate::learner::loss::surrogate_loss`]; every microbatch is also
//! scored by the core's `policy_loss` on the same log-probabilities, which gives the
//! logged ratios, clip fractions and `loss_core_gap`.
//!
//! One loss path per microbatch, and no device round trip per microbatch: the
//! microbatches' forward and backward passes are queued one after another, and what
//! the host needs of them (each loss, entropy sum, log-probabilities under the policy
//! and the reference) is read back in one transfer at the end of the minibatch, where
//! the step waits for the device anyway (its gradient norm). The behaviour
//! log-probabilities come from the host copy the batch was built from. The core then
//! scores the read-back values on the host.
//!
//! The microbatches' forward and backward passes run on every core of the CPU backend,
//! each thread on a replica of the model, their gradients added in microbatch order
//! (`crate::learner::replicas`: the same sums on one core as on many).
//!
//! Under `importance_correction`, the update first scores its whole batch under the
//! policy it starts from (no graph): the ratio is taken against those
//! log-probabilities, and each token's surrogate term is multiplied by its importance
//! weight against the sampler's (`core::math::sampler_correction`, TRL's modes),
//! which the core's check applies too.
//!
//! The update order of pass `e` at step `s` comes from `RandomStream(seed,
//! ORDER_STREAM + 64 s + e)`.

use anyhow::{Context, Result};
use arlbook_core::Ragged;
use arlbook_core::math::clip::ClipWidths;
use arlbook_core::math::convention::Convention;
use arlbook_core::math::kl::{KlEstimator, kl_point};
use arlbook_core::math::policy_loss::{
    PolicyLossConfig, PolicyLossInput, TokenAdvantages, policy_loss_scaled,
};
use arlbook_core::math::reduction::row_weights_by;
use arlbook_core::math::sampler_correction::{SamplerCorrection, sampler_weights};
use arlbook_core::metrics::MetricsRow;
use arlbook_core::rng::RandomStream;
use burn::prelude::*;

use super::preflight;
use super::settings::surrogate_settings;
use crate::config::{GrpoConfig, TrainConfig};
use crate::learner::batching::{MicroBatch, micro_batch, token_tensor, weight_tensor};
use crate::learner::loss::{EntropyBonus, SurrogateInputs, surrogate_loss, token_logprobs};
use crate::learner::optimizer::clip_global_norm;
use crate::learner::replicas::accumulate_in_parallel;
use crate::policy::fused::score::{Entropy, Path, Scored, score, weights_for};
use crate::policy::generate::rollout_threads;
use crate::policy::model::PolicyModel;
use crate::policy::rollout::Rollout;
use crate::run::trainer::{Trainer, vocab};

const ORDER_STREAM: u64 = 0x6771_0000;

/// Token statistics of one step's update, summed over microbatches.
#[derive(Debug, Default)]
pub struct UpdateStats {
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
}

impl UpdateStats {
    /// Writes the update's measurements into the step's metrics row.
    pub fn fill(&self, row: &mut MetricsRow, lr: f64) {
        let tokens = self.tokens.max(1) as f64;
        row.loss = Some(self.loss_sum / self.grad_norms.len().max(1) as f64);
        row.loss_core_gap = Some((self.loss_sum - self.core_loss_sum).abs());
        row.grad_norm = Some(self.grad_norms.iter().copied().fold(0.0, f64::max));
        row.ratio_mean = Some(self.ratio_sum / tokens);
        row.ratio_max = Some(self.ratio_max);
        row.clip_fraction_low = Some(self.clip_low / tokens);
        row.clip_fraction_high = Some(self.clip_high / tokens);
        row.clip_fraction_dual = Some(self.clip_dual / tokens);
        row.kl = Some(self.kl_sum / tokens);
        row.entropy = Some(self.entropy_sum / tokens);
        row.lr = Some(lr);
        row.optimizer_steps = Some(self.grad_norms.len());
    }
}

/// Every pass of the update over `groups` with their `advantages` (one row per
/// group). `first` marks the run's first update on the collecting snapshot, whose
/// ratios the pre-flight check requires to be 1.
pub fn update(
    trainer: &mut Trainer,
    groups: &[Vec<Rollout>],
    advantages: &Ragged<f64>,
    lr: f64,
    mut first: bool,
) -> Result<UpdateStats> {
    let config = trainer.config.clone();
    let g = &config.grpo;
    let step = trainer.position.step;
    let mut stats = UpdateStats::default();
    // Under an importance correction, the log-probabilities the ratio is taken
    // against: the batch scored once by the policy the update starts from.
    let proximal = match g.importance_correction.mode() {
        Some(_) => Some(proximal_logp(trainer, groups)?),
        None => None,
    };
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
            let rows: Vec<Row<'_>> = part
                .iter()
                .flat_map(|&gi| {
                    let prox = proximal.as_ref().map(|p| &p[gi]);
                    groups[gi]
                        .iter()
                        .zip(advantages.row(gi).iter().copied())
                        .enumerate()
                        .map(move |(m, (rollout, advantage))| Row {
                            rollout,
                            advantage,
                            proximal: prox.map(|p| p[m].as_slice()),
                        })
                })
                .collect();
            minibatch_step(trainer, &rows, lr, &mut stats, first)?;
            first = false;
        }
    }
    Ok(stats)
}

/// One rollout of a minibatch: its advantage and, under an importance correction, its
/// generated tokens' log-probabilities under the policy the update started from.
struct Row<'a> {
    rollout: &'a Rollout,
    advantage: f64,
    proximal: Option<&'a [f64]>,
}

/// Every rollout of `groups` scored by the current policy without a graph, one row of
/// generated-token log-probabilities each, `[group][member][token]`.
fn proximal_logp(trainer: &Trainer, groups: &[Vec<Rollout>]) -> Result<Vec<Vec<Vec<f64>>>> {
    let g = &trainer.config.grpo;
    let policy = trainer.model.valid();
    let weights = weights_for(&policy, &trainer.plain)?;
    let path = Path::for_device(&trainer.plain, weights.as_ref());
    let all: Vec<&Rollout> = groups.iter().flatten().collect();
    let mut rows: Vec<Vec<f64>> = Vec::with_capacity(all.len());
    for chunk in all.chunks(g.microbatch_rows.max(1)) {
        let micro = micro_batch(chunk, vocab(), &trainer.plain);
        let logp = score(
            path,
            &policy,
            &micro.tokens,
            g.temperature,
            Entropy::Skip,
            &trainer.plain,
        )?
        .logp;
        let [_, t] = logp.dims();
        let values: Vec<f32> = logp
            .try_into_vec_as::<f32>()
            .map_err(|e| anyhow::anyhow!("reading the proximal log-probabilities back: {e:?}"))?;
        let scored = ragged_rows(&values, t, &micro);
        rows.extend(scored.iter_rows().map(<[f64]>::to_vec));
    }
    let mut rows = rows.into_iter();
    Ok(groups
        .iter()
        .map(|group| rows.by_ref().take(group.len()).collect())
        .collect())
}

/// The log-probabilities of one microbatch under the policy (with the graph) and the
/// reference (detached, on the training device), and the masked entropy's sum `[1]`.
struct MicroScores<'a> {
    /// The policy's scores, whose gradients the loss's backward pass gives.
    scored: Scored<'a>,
    ref_logp: Option<Tensor<2>>,
    entropy_sum: Tensor<1>,
    /// The masked entropy with its graph, for the entropy bonus.
    entropy: Option<Tensor<2>>,
}

/// What scoring a microbatch needs besides the policy: the reference model on the plain
/// device, both devices, the sampling temperature, and the paths (`crate::policy::fused`).
struct Scorer<'a> {
    reference: Option<&'a PolicyModel>,
    plain: &'a Device,
    device: &'a Device,
    temperature: f64,
    /// Whether the loss has an entropy bonus (its entropy keeps the graph).
    entropy_bonus: bool,
    /// The policy's path.
    path: Path<'a>,
    /// The reference's path.
    reference_path: Path<'a>,
}

impl<'a> Scorer<'a> {
    fn score(&self, model: &PolicyModel, micro: &MicroBatch) -> Result<MicroScores<'a>> {
        let wanted = if self.entropy_bonus {
            Entropy::Graph
        } else {
            Entropy::Values
        };
        let scored = score(
            self.path,
            model,
            &micro.tokens,
            self.temperature,
            wanted,
            self.device,
        )?;
        let entropy = scored.entropy.clone() * micro.mask.clone();
        let bonus = self.entropy_bonus.then(|| entropy.clone());
        let ref_logp = self
            .reference
            .map(|reference| self.reference_logp(reference, micro))
            .transpose()?;
        Ok(MicroScores {
            scored,
            ref_logp,
            entropy_sum: entropy.detach().sum(),
            entropy: bonus,
        })
    }

    /// The reference's log-probabilities, computed without a graph on the plain device.
    fn reference_logp(&self, reference: &PolicyModel, micro: &MicroBatch) -> Result<Tensor<2>> {
        let logp = match self.reference_path {
            Path::Fused(_) => {
                score(
                    self.reference_path,
                    reference,
                    &micro.tokens,
                    self.temperature,
                    Entropy::Skip,
                    self.plain,
                )?
                .logp
            }
            Path::Graph => {
                let ref_logits =
                    reference.forward(micro.tokens.inputs.clone().to_device(self.plain));
                token_logprobs(
                    ref_logits,
                    micro.tokens.targets.clone().to_device(self.plain),
                    self.temperature,
                    micro
                        .tokens
                        .not_kept
                        .clone()
                        .map(|m| m.to_device(self.plain)),
                )
            }
        };
        Ok(logp.to_device(self.device).detach())
    }
}

/// A microbatch whose loss and gradient are queued, with the device values the host
/// reads back at the end of the minibatch (all detached).
struct Queued {
    micro: MicroBatch,
    advantages: Vec<f32>,
    /// The microbatch's rows within the minibatch.
    rows: std::ops::Range<usize>,
    logp: Tensor<2>,
    ref_logp: Option<Tensor<2>>,
    loss: Tensor<1>,
    entropy_sum: Tensor<1>,
    /// `sum u H` of the entropy bonus (0 without one), detached.
    entropy_term: Tensor<1>,
    /// The importance correction's log-probabilities and weights, when there is one.
    correction: Option<Correction>,
}

/// A microbatch's importance correction: the log-probabilities the ratio is taken
/// against and each token's weight against the sampler (`core::math::sampler_correction`).
struct Correction {
    proximal: Ragged<f64>,
    weights: Ragged<f64>,
}

/// The correction of a microbatch's `rows` (none without a mode).
fn correction(rows: &[Row<'_>], micro: &MicroBatch, g: &GrpoConfig) -> Result<Option<Correction>> {
    let (Some(mode), Some(proximal)) = (
        g.importance_correction.mode(),
        rows.iter()
            .map(|r| r.proximal)
            .collect::<Option<Vec<&[f64]>>>(),
    ) else {
        return Ok(None);
    };
    let proximal = Ragged::from_rows(&proximal.iter().map(|p| p.to_vec()).collect::<Vec<_>>());
    let sampler = behaviour_logp(micro);
    let weights = sampler_weights(
        &proximal,
        &sampler,
        "behaviour_logp",
        &SamplerCorrection {
            mode,
            clip_min: None,
            clip_max: g.importance_cap,
        },
    )
    .map_err(|e| anyhow::anyhow!("grpo.importance_correction: {e}"))?;
    Ok(Some(Correction { proximal, weights }))
}

/// The behaviour (sampler's) log-probabilities of a microbatch's generated tokens from
/// the host copy, rounded to the `f32` the device's loss uses.
fn behaviour_logp(micro: &MicroBatch) -> Ragged<f64> {
    let old_f32: Vec<f32> = micro.padded.old_logp.iter().map(|&l| l as f32).collect();
    let width = micro.padded.seq_len.saturating_sub(1);
    ragged_rows(&old_f32, width, micro)
}

/// What the host reads back of one queued microbatch.
struct HostValues {
    loss: f64,
    entropy_sum: f64,
    entropy_term: f64,
    logp: Ragged<f64>,
    ref_logp: Option<Ragged<f64>>,
}

/// The generated-token entries of a `[N, T]` array as rows (each cut to its row's
/// generated tokens).
fn ragged_rows(values: &[f32], t: usize, micro: &MicroBatch) -> Ragged<f64> {
    let width = micro.padded.seq_len.saturating_sub(1);
    let rows: Vec<Vec<f64>> = (0..micro.padded.rows)
        .map(|row| {
            (0..width)
                .filter(|&j| micro.padded.loss_mask[row * width + j] == 1)
                .map(|j| f64::from(values[row * t + j]))
                .collect()
        })
        .collect();
    Ragged::from_rows(&rows)
}

/// Every queued microbatch's values, in one transfer from the device.
fn read_back(queued: &[Queued]) -> Result<Vec<HostValues>> {
    let mut parts: Vec<Tensor<1>> = Vec::new();
    for q in queued {
        let [n, t] = q.logp.dims();
        parts.push(q.loss.clone());
        parts.push(q.entropy_sum.clone());
        parts.push(q.entropy_term.clone());
        parts.push(q.logp.clone().reshape([n * t]));
        if let Some(reference) = &q.ref_logp {
            parts.push(reference.clone().reshape([n * t]));
        }
    }
    if parts.is_empty() {
        return Ok(Vec::new());
    }
    let values: Vec<f32> = Tensor::cat(parts, 0)
        .try_into_vec_as::<f32>()
        .map_err(|e| {
            anyhow::anyhow!(
                "reading the minibatch's losses and log-probabilities back from the device: {e:?}"
            )
        })?;
    let mut at = 0;
    let mut take = |len: usize| {
        let slice = &values[at..at + len];
        at += len;
        slice
    };
    Ok(queued
        .iter()
        .map(|q| {
            let [n, t] = q.logp.dims();
            let loss = f64::from(take(1)[0]);
            let entropy_sum = f64::from(take(1)[0]);
            let entropy_term = f64::from(take(1)[0]);
            let logp = ragged_rows(take(n * t), t, &q.micro);
            let ref_logp = q
                .ref_logp
                .as_ref()
                .map(|_| ragged_rows(take(n * t), t, &q.micro));
            HostValues {
                loss,
                entropy_sum,
                entropy_term,
                logp,
                ref_logp,
            }
        })
        .collect())
}

/// One optimizer step over `rows` (whole groups) with their advantages.
fn minibatch_step(
    trainer: &mut Trainer,
    rows: &[Row<'_>],
    lr: f64,
    stats: &mut UpdateStats,
    first: bool,
) -> Result<()> {
    let config = trainer.config.clone();
    let g = &config.grpo;
    let lengths: Vec<usize> = rows
        .iter()
        .map(|r| r.rollout.record.generated_tokens())
        .collect();
    let weights_per_row = row_weights_by(&lengths, g.reduction, g.reduction_constant, g.convention)
        .map_err(|e| anyhow::anyhow!("grpo.{e}"))?;
    let entropy_weights = entropy_weights(&lengths, &weights_per_row, g.convention);
    let settings = surrogate_settings(&config);
    let spans: Vec<std::ops::Range<usize>> = (0..rows.len())
        .step_by(g.microbatch_rows.max(1))
        .map(|start| start..(start + g.microbatch_rows).min(rows.len()))
        .collect();
    // The fused CPU path on the CPU backend, burn's graph elsewhere (`crate::policy::fused`).
    let weights = weights_for(&trainer.model, &trainer.plain)?;
    let reference_weights = match &trainer.reference {
        Some(reference) => weights_for(reference, &trainer.plain)?,
        None => None,
    };
    let scorer = Scorer {
        reference: trainer.reference.as_ref(),
        plain: &trainer.plain,
        device: &trainer.device,
        temperature: g.temperature,
        entropy_bonus: g.entropy_coef > 0.0,
        path: Path::for_device(&trainer.plain, weights.as_ref()),
        reference_path: Path::for_device(&trainer.plain, reference_weights.as_ref()),
    };
    // Each microbatch's forward and backward, on every core (see `crate::learner::replicas`).
    let (mut grads, queued) = accumulate_in_parallel(
        &trainer.model,
        &spans,
        rollout_threads(&trainer.plain),
        |model, span| {
            let chunk: Vec<&Rollout> = rows[span.clone()].iter().map(|r| r.rollout).collect();
            let advantages: Vec<f32> = rows[span.clone()]
                .iter()
                .map(|r| r.advantage as f32)
                .collect();
            let micro = micro_batch(&chunk, vocab(), scorer.device);
            let correction = correction(&rows[span.clone()], &micro, g)?;
            let scored = scorer.score(model, &micro)?;
            let inputs = SurrogateInputs {
                old_logp: correction.as_ref().map_or_else(
                    || micro.old_logp.clone(),
                    |c| {
                        let rows: Vec<&[f64]> = c.proximal.iter_rows().collect();
                        token_tensor(&micro, &rows, scorer.device)
                    },
                ),
                multipliers: correction.as_ref().map(|c| {
                    let rows: Vec<&[f64]> = c.weights.iter_rows().collect();
                    token_tensor(&micro, &rows, scorer.device)
                }),
                mask: micro.mask.clone(),
                weights: weight_tensor(&micro, &weights_per_row[span.clone()], scorer.device),
                advantages: Tensor::from_data(
                    TensorData::new(advantages.clone(), [chunk.len(), 1]),
                    scorer.device,
                ),
                ref_logp: scored.ref_logp.clone(),
                entropy: scored.entropy.map(|entropy| EntropyBonus {
                    entropy,
                    weights: weight_tensor(&micro, &entropy_weights[span.clone()], scorer.device),
                }),
            };
            let entropy_term = inputs.entropy.as_ref().map_or_else(
                || Tensor::zeros([1], scorer.device),
                |bonus| {
                    (bonus.entropy.clone() * bonus.weights.clone())
                        .sum()
                        .detach()
                },
            );
            let loss = surrogate_loss(scored.scored.logp.clone(), &inputs, &settings);
            let logp = scored.scored.logp.clone().detach();
            let grads = scored.scored.gradients(&loss, model, scorer.plain)?;
            let queued = Queued {
                micro,
                advantages,
                rows: span.clone(),
                logp,
                ref_logp: scored.ref_logp,
                loss: loss.detach(),
                entropy_sum: scored.entropy_sum.detach(),
                entropy_term,
                correction,
            };
            Ok((grads, queued))
        },
    )?;
    // The minibatch's one transfer; then the core scores the same numbers on the host.
    for (k, (q, host)) in queued.iter().zip(read_back(&queued)?).enumerate() {
        stats.loss_sum += host.loss;
        stats.entropy_sum += host.entropy_sum;
        // The entropy bonus is checked against the core by the loss's unit test; the
        // live check compares the surrogate and KL terms.
        stats.core_loss_sum -= g.entropy_coef * host.entropy_term;
        let check = CoreCheck {
            micro: &q.micro,
            logp: host.logp,
            ref_logp: host.ref_logp,
            advantages: &q.advantages,
            weights: &weights_per_row[q.rows.clone()],
            correction: q.correction.as_ref(),
        };
        let max_ratio_deviation = check.add_to(stats, &config)?;
        if first && k == 0 {
            preflight::check_ratio(max_ratio_deviation)?;
        }
    }
    let norm = clip_global_norm(&trainer.model, &mut grads, g.grad_clip)?;
    stats.grad_norms.push(norm);
    trainer.model = trainer.optim.step(lr, trainer.model.clone(), grads);
    Ok(())
}

/// The entropy bonus's row weights: the loss's own, or under TRL's rules the token
/// mean over the minibatch (`core::api::policy_loss::with_entropy` applies the same).
fn entropy_weights(lengths: &[usize], weights: &[f64], convention: Convention) -> Vec<f64> {
    match convention {
        Convention::Trl => {
            let tokens = lengths.iter().sum::<usize>().max(1) as f64;
            vec![1.0 / tokens; lengths.len()]
        }
        Convention::Arlbook | Convention::Verl => weights.to_vec(),
    }
}

/// One microbatch scored again by the core's loss, on the host: the logged token
/// statistics, and a live agreement check with burn's loss.
struct CoreCheck<'a> {
    micro: &'a MicroBatch,
    logp: Ragged<f64>,
    ref_logp: Option<Ragged<f64>>,
    advantages: &'a [f32],
    weights: &'a [f64],
    correction: Option<&'a Correction>,
}

impl CoreCheck<'_> {
    /// Adds this microbatch to `stats`; returns its largest |ratio - 1|.
    fn add_to(self, stats: &mut UpdateStats, config: &TrainConfig) -> Result<f64> {
        let g = &config.grpo;
        let logp = self.logp;
        // The ratio's denominators as the device's loss used them.
        let old = self
            .correction
            .map_or_else(|| behaviour_logp(self.micro), |c| c.proximal.clone());
        let reference = self.ref_logp;
        let advantages: Vec<f64> = self.advantages.iter().map(|&a| f64::from(a)).collect();
        let kl_clamp = g.convention == Convention::Verl && g.kl_estimator == KlEstimator::K3;
        // Per-token terms from the core's loss (the reduction does not change them).
        let core = policy_loss_scaled(
            &PolicyLossInput {
                logp: &logp,
                old_logp: &old,
                ref_logp: None,
                advantages: TokenAdvantages::PerSequence(&advantages),
            },
            &PolicyLossConfig {
                clip: ClipWidths {
                    eps_low: g.eps_low,
                    eps_high: g.eps_high,
                    dual_clip: g.dual_clip,
                },
                convention: g.convention,
                ..PolicyLossConfig::default()
            },
            self.correction.map(|c| &c.weights),
        )
        .context("core policy loss on the training batch")?;
        for (i, &w) in self.weights.iter().enumerate() {
            let pg: f64 = core.pg_loss_per_token.row(i).iter().sum();
            let kl: f64 = reference.as_ref().map_or(0.0, |reference| {
                logp.row(i)
                    .iter()
                    .zip(reference.row(i))
                    .map(|(&lp, &lr)| kl_point(lp, lr, g.kl_estimator, kl_clamp).value)
                    .sum()
            });
            let penalty = if reference.is_some() {
                g.kl_beta * kl
            } else {
                0.0
            };
            stats.core_loss_sum += w * (pg + penalty);
            stats.kl_sum += kl;
        }
        let tokens: usize = self.micro.generated.iter().sum();
        let ratios = core.ratio.flat();
        stats.ratio_sum += ratios.iter().sum::<f64>();
        stats.ratio_max = ratios.iter().copied().fold(stats.ratio_max, f64::max);
        stats.clip_low += core.clip_fraction.low * tokens as f64;
        stats.clip_high += core.clip_fraction.high * tokens as f64;
        stats.clip_dual += core.clip_fraction.dual * tokens as f64;
        stats.tokens += tokens;
        Ok(ratios.iter().map(|q| (q - 1.0).abs()).fold(0.0, f64::max))
    }
}

//! The training loop: sample, score, compare within groups, update; and the per-step
//! curves it records.

use serde::{Deserialize, Serialize};

use crate::Ragged;
use crate::error::{FieldError, Result, check};
use crate::math::advantage::{AdvantageOptions, group_advantages};
use crate::rng::RandomStream;

use super::optimizer::{Optimizer, OptimizerKind};
use super::table::{END, LogitTable, MAX_LOGIT, row_entropy, row_kl, sample_response, token_rows};
use super::task::Task;
use super::update::{Batch, UpdateSettings, update};

/// The largest KL coefficient accepted, far beyond any useful value: at `beta = 1` the
/// default task's pass rate already stays near 0.45 (against 0.96 without the term).
pub const MAX_BETA: f64 = 100.0;

/// The table the run starts from, which is also the frozen KL reference.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct InitialTable {
    /// Logit of the end token in every row (the others start at 0): with `V` tokens and
    /// no favoured token the end token has probability `e^b / (e^b + V - 1)` at every
    /// position.
    pub end_logit: f64,
    /// A token every row prefers (`0` for none; the end token cannot be preferred)...
    pub favoured_token: usize,
    /// ...and its logit in every row.
    pub favoured_logit: f64,
}

impl InitialTable {
    /// Checks the logits are finite and the favoured token exists (fields `end_logit`,
    /// `favoured_token`, `favoured_logit`).
    pub fn validate(&self, vocab: usize) -> Result<()> {
        check::in_range("end_logit", self.end_logit, -50.0, 50.0)?;
        check::count("favoured_token", self.favoured_token, 0, vocab - 1)?;
        check::in_range("favoured_logit", self.favoured_logit, -50.0, 50.0)?;
        Ok(())
    }

    /// The table: every row `[end_logit, 0, .., favoured_logit (at favoured_token), .., 0]`.
    pub fn table(&self, vocab: usize, max_length: usize) -> LogitTable {
        let mut table = LogitTable::zeros(vocab, max_length);
        for row in table.logits_mut().chunks_exact_mut(vocab) {
            row[END] = self.end_logit;
            if self.favoured_token != END {
                row[self.favoured_token] = self.favoured_logit;
            }
        }
        table
    }
}

/// Everything a run needs besides its seed.
#[derive(Debug, Clone, PartialEq)]
pub struct ToySettings {
    /// The task and its reward.
    pub task: Task,
    /// The starting (and reference) table.
    pub initial: InitialTable,
    /// Groups per step, `B` (each a fresh group of responses to the one prompt).
    pub groups: usize,
    /// Responses per group, `G`.
    pub group_size: usize,
    /// Training steps (rollout batches).
    pub steps: usize,
    /// Advantage baseline and scaling.
    pub advantage: AdvantageOptions,
    /// Drop the groups whose rewards are all equal before the update (DAPO's dynamic
    /// sampling, without refilling the batch).
    pub dynamic_sampling: bool,
    /// The loss and the epochs per batch.
    pub update: UpdateSettings,
    /// The optimiser.
    pub optimizer: OptimizerKind,
    /// Its learning rate, `> 0`.
    pub learning_rate: f64,
}

/// Per-step curves of one run (one value per step, measured on the step's rollouts,
/// before its update).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Curves {
    /// Mean reward of the step's `B G` responses.
    pub reward: Vec<f64>,
    /// Fraction of responses containing the target.
    pub pass_rate: Vec<f64>,
    /// Mean per-token entropy (nats) of the policy at the states of the sampled tokens.
    pub entropy: Vec<f64>,
    /// Mean response length in tokens (the end token counts).
    pub length: Vec<f64>,
    /// Mean length of the passing responses (0 when none passed).
    pub length_passing: Vec<f64>,
    /// Mean length of the failing responses (0 when all passed).
    pub length_failing: Vec<f64>,
    /// Mean over the epochs of the fraction of trained tokens clipped low (0 when the
    /// step trained on nothing: dynamic sampling dropped every group).
    pub clip_low: Vec<f64>,
    /// The same, clipped high.
    pub clip_high: Vec<f64>,
    /// Mean exact `KL(pi || pi_ref)` over the states of the sampled tokens.
    pub kl: Vec<f64>,
    /// Fraction of groups whose rewards are not all equal (the groups with a signal).
    pub effective_groups: Vec<f64>,
    /// Tokens sampled in the step.
    pub tokens: Vec<f64>,
}

/// The fields of [`Curves`], in order, for code that treats them alike.
macro_rules! curve_fields {
    ($m:ident) => {
        $m!(
            reward,
            pass_rate,
            entropy,
            length,
            length_passing,
            length_failing,
            clip_low,
            clip_high,
            kl,
            effective_groups,
            tokens
        )
    };
}

impl Curves {
    /// Number of curves.
    pub const COUNT: usize = 11;

    fn with_capacity(steps: usize) -> Self {
        macro_rules! make {
            ($($f:ident),*) => { Self { $($f: Vec::with_capacity(steps)),* } };
        }
        curve_fields!(make)
    }

    /// The first `steps` values of every curve (all of them when there are fewer).
    #[must_use]
    pub fn truncated(&self, steps: usize) -> Self {
        macro_rules! cut {
            ($($f:ident),*) => {
                Self { $($f: self.$f[..steps.min(self.$f.len())].to_vec()),* }
            };
        }
        curve_fields!(cut)
    }

    /// Element-wise mean, minimum and maximum over `runs` (all of the same length).
    pub fn mean_min_max(runs: &[&Self]) -> (Self, Self, Self) {
        fn combine(series: &[&[f64]]) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
            let steps = series.first().map_or(0, |s| s.len());
            let n = series.len() as f64;
            let mut mean = Vec::with_capacity(steps);
            let mut low = Vec::with_capacity(steps);
            let mut high = Vec::with_capacity(steps);
            for i in 0..steps {
                let values = series.iter().map(|s| s[i]);
                mean.push(values.clone().sum::<f64>() / n);
                low.push(values.clone().fold(f64::INFINITY, f64::min));
                high.push(values.fold(f64::NEG_INFINITY, f64::max));
            }
            (mean, low, high)
        }
        let mut mean = Self::default();
        let mut low = Self::default();
        let mut high = Self::default();
        macro_rules! each {
            ($($f:ident),*) => {
                $(
                    let series: Vec<&[f64]> = runs.iter().map(|r| r.$f.as_slice()).collect();
                    (mean.$f, low.$f, high.$f) = combine(&series);
                )*
            };
        }
        curve_fields!(each);
        (mean, low, high)
    }
}

/// One finished run.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// Its curves.
    pub curves: Curves,
    /// The table after the last step.
    pub table: LogitTable,
}

/// Checks the settings (fields named as in the API).
pub fn validate(settings: &ToySettings) -> Result<()> {
    settings.task.validate()?;
    settings.initial.validate(settings.task.vocab)?;
    check::count("groups", settings.groups, 1, 4096)?;
    check::count("group_size", settings.group_size, 1, 4096)?;
    check::count("steps", settings.steps, 1, 100_000)?;
    check::count("epochs", settings.update.epochs, 1, 64)?;
    settings.update.clip.validate()?;
    check::in_range("beta", settings.update.beta, 0.0, MAX_BETA)?;
    if let Some(c) = settings.update.constant {
        check::positive("constant", c)?;
    }
    check::non_negative("eps", settings.advantage.eps)?;
    check::positive("learning_rate", settings.learning_rate)?;
    Ok(())
}

/// The error for a run whose table or loss left `f64`.
fn diverged(step: usize, cause: &FieldError) -> FieldError {
    FieldError::new(
        "learning_rate",
        format!(
            "training diverged at step {step} ({}); lower learning_rate or beta",
            cause.message
        ),
    )
}

/// Rollouts of one step and what they say before any update.
struct Rollouts {
    responses: Vec<Vec<usize>>,
    rewards: Vec<f64>,
}

/// Records the rollout curves of a step; `layout` is any table of the run's shape (it
/// maps a response's tokens to their rows).
fn record_rollouts(
    curves: &mut Curves,
    task: &Task,
    rollouts: &Rollouts,
    row_entropies: &[f64],
    row_kls: &[f64],
    layout: &LogitTable,
) {
    let n = rollouts.responses.len() as f64;
    let (mut tokens, mut pass, mut pass_tokens) = (0usize, 0usize, 0usize);
    let (mut entropy, mut kl) = (0.0, 0.0);
    for response in &rollouts.responses {
        tokens += response.len();
        if task.passes(response) {
            pass += 1;
            pass_tokens += response.len();
        }
        for row in token_rows(layout, response) {
            entropy += row_entropies[row];
            kl += row_kls[row];
        }
    }
    let fail = rollouts.responses.len() - pass;
    let mean_or_zero = |total: usize, count: usize| {
        if count == 0 {
            0.0
        } else {
            total as f64 / count as f64
        }
    };
    curves.reward.push(rollouts.rewards.iter().sum::<f64>() / n);
    curves.pass_rate.push(pass as f64 / n);
    curves.entropy.push(entropy / tokens as f64);
    curves.kl.push(kl / tokens as f64);
    curves.length.push(tokens as f64 / n);
    curves.length_passing.push(mean_or_zero(pass_tokens, pass));
    curves
        .length_failing
        .push(mean_or_zero(tokens - pass_tokens, fail));
    curves.tokens.push(tokens as f64);
}

/// The batch a step trains on: the group advantages of `rewards` (consecutive groups
/// of `group_size`, [`group_advantages`] with `advantage`), every response with its
/// advantage, less the groups whose rewards are all equal when `dynamic_sampling`;
/// and the number of groups that are not all equal. The advantages are computed over
/// all groups first, so `scale = batch` uses the whole batch's spread either way.
pub fn build_batch(
    responses: &[Vec<usize>],
    rewards: &[f64],
    group_size: usize,
    advantage: &AdvantageOptions,
    dynamic_sampling: bool,
) -> Result<(Batch, usize)> {
    let groups = rewards.len() / group_size.max(1);
    let grouped = Ragged::from_flat(rewards.to_vec(), &vec![group_size; groups])?;
    let advantages = group_advantages(&grouped, advantage)
        .map_err(|e| FieldError::new("length_penalty", e.message))?
        .advantages;
    let mut batch = Batch {
        responses: Vec::with_capacity(responses.len()),
        advantages: Vec::with_capacity(responses.len()),
    };
    let mut mixed_count = 0;
    for ((group, group_rewards), group_advantages) in responses
        .chunks_exact(group_size)
        .zip(grouped.iter_rows())
        .zip(advantages.iter_rows())
    {
        let mixed = group_rewards.iter().any(|&r| r != group_rewards[0]);
        mixed_count += usize::from(mixed);
        if dynamic_sampling && !mixed {
            continue;
        }
        batch.responses.extend_from_slice(group);
        batch.advantages.extend_from_slice(group_advantages);
    }
    Ok((batch, mixed_count))
}

/// A run in progress: the table, its optimiser and its random stream after some steps,
/// advanced one step at a time by [`ToyRun::step`] (the page trains a few steps per
/// animation frame; [`train`] runs every step at once, with the same numbers).
///
/// Draw order: one [`RandomStream`], `RandomStream::new(seed, stream)`; each step draws
/// its `B` groups in order, each group its `G` responses in order, each response one
/// categorical draw per token. Nothing else is random, so a run is a pure function of
/// its settings, `seed` and `stream`, however its steps are split.
#[derive(Debug, Clone)]
pub struct ToyRun {
    settings: ToySettings,
    rng: RandomStream,
    reference: LogitTable,
    ref_log_probs: Vec<f64>,
    table: LogitTable,
    optimizer: Optimizer,
    curves: Curves,
}

impl ToyRun {
    /// A run at step 0 from stream `stream` of generator `seed` (checks `settings`).
    pub fn new(settings: &ToySettings, seed: u64, stream: u64) -> Result<Self> {
        validate(settings)?;
        let (vocab, max_length) = (settings.task.vocab, settings.task.max_length);
        let reference = settings.initial.table(vocab, max_length);
        let ref_log_probs = reference.log_probs();
        let table = reference.clone();
        let optimizer = Optimizer::new(
            settings.optimizer,
            settings.learning_rate,
            table.logits().len(),
        );
        Ok(Self {
            settings: settings.clone(),
            rng: RandomStream::new(seed, stream),
            reference,
            ref_log_probs,
            table,
            optimizer,
            curves: Curves::with_capacity(settings.steps),
        })
    }

    /// Steps taken so far.
    pub fn steps_done(&self) -> usize {
        self.curves.reward.len()
    }

    /// Whether every step of `settings.steps` has been taken.
    pub fn finished(&self) -> bool {
        self.steps_done() >= self.settings.steps
    }

    /// The curves so far, one value per step taken.
    pub fn curves(&self) -> &Curves {
        &self.curves
    }

    /// The table after the steps taken.
    pub fn table(&self) -> &LogitTable {
        &self.table
    }

    /// The finished run (or the run so far).
    pub fn into_run(self) -> Run {
        Run {
            curves: self.curves,
            table: self.table,
        }
    }

    /// Takes up to `count` more steps (fewer when the run ends first); returns how many.
    /// An error (divergence, or a cancelled computation) leaves the run where it
    /// stopped.
    pub fn advance(&mut self, count: usize) -> Result<usize> {
        let mut taken = 0;
        while taken < count && !self.finished() {
            self.step()?;
            taken += 1;
        }
        Ok(taken)
    }

    /// Takes one step: sample `B G` responses, record the curves, build the batch, and
    /// update the table for `E` epochs.
    pub fn step(&mut self) -> Result<()> {
        if crate::cancel::requested() {
            return Err(crate::cancel::cancelled_error());
        }
        let settings = &self.settings;
        let step = self.steps_done();
        let task = &settings.task;
        let (vocab, max_length) = (task.vocab, task.max_length);
        let group_size = settings.group_size;
        let log_probs = self.table.log_probs();
        let probs: Vec<f64> = log_probs.iter().map(|l| l.exp()).collect();
        let row_entropies: Vec<f64> = log_probs.chunks_exact(vocab).map(row_entropy).collect();
        let row_kls: Vec<f64> = log_probs
            .chunks_exact(vocab)
            .zip(self.ref_log_probs.chunks_exact(vocab))
            .map(|(l, r)| row_kl(l, r))
            .collect();
        let responses: Vec<Vec<usize>> = (0..settings.groups * group_size)
            .map(|_| sample_response(&probs, vocab, max_length, &mut self.rng))
            .collect();
        let rewards: Vec<f64> = responses.iter().map(|r| task.reward(r)).collect();
        let rollouts = Rollouts { responses, rewards };
        let (batch, mixed_count) = build_batch(
            &rollouts.responses,
            &rollouts.rewards,
            group_size,
            &settings.advantage,
            settings.dynamic_sampling,
        )?;
        let stats = if batch.responses.is_empty() {
            None
        } else {
            let stats = update(
                &mut self.table,
                &self.reference,
                &mut self.optimizer,
                &batch,
                &settings.update,
            )
            .map_err(|e| diverged(step, &e))?;
            if !self.table.is_bounded() {
                return Err(diverged(
                    step,
                    &FieldError::new(
                        "logits",
                        format!("a logit left [-{MAX_LOGIT:e}, {MAX_LOGIT:e}]"),
                    ),
                ));
            }
            Some(stats)
        };
        // The step's row is pushed whole only once the update has succeeded, so the
        // curves always have one value per step taken.
        let curves = &mut self.curves;
        record_rollouts(
            curves,
            task,
            &rollouts,
            &row_entropies,
            &row_kls,
            &self.reference,
        );
        curves
            .effective_groups
            .push(mixed_count as f64 / settings.groups as f64);
        curves.clip_low.push(stats.map_or(0.0, |s| s.clip_low));
        curves.clip_high.push(stats.map_or(0.0, |s| s.clip_high));
        Ok(())
    }
}

/// Trains one run from stream `stream` of generator `seed`: [`ToyRun`] to its last step.
pub fn train(settings: &ToySettings, seed: u64, stream: u64) -> Result<Run> {
    let mut run = ToyRun::new(settings, seed, stream)?;
    run.advance(settings.steps)?;
    Ok(run.into_run())
}

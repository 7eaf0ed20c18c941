//! The run state: the policy, its optimizer and KL reference, the position, the lag
//! pipeline and the metrics file; a fresh run, a resumed one or one initialised from
//! another run's checkpoint, and its checkpoints. The stages (`sft`, `grpo`,
//! `rejection`, `selection`) work on it; `pipeline` runs them in order.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use arlbook_core::agent::tokenizer;
use burn::optim::ModuleOptimizer;
use burn::prelude::*;

use crate::config::TrainConfig;
use crate::learner::grpo::competence::Competence;
use crate::learner::grpo::remote::RemoteRollouts;
use crate::learner::optimizer::adamw;
use crate::policy::model::PolicyModel;
use crate::run::checkpoint::{self, PendingBatch, State};
use crate::run::metrics::{MetricsWriter, Position};
use crate::run::progress::Progress;
use arlbook_core::metrics::MetricsRow;

/// A training run in progress.
pub struct Trainer {
    /// The configuration.
    pub config: TrainConfig,
    /// The output folder.
    pub out: PathBuf,
    /// Autodiff device.
    pub device: Device,
    /// The same device without autodiff (rollouts, reference, evaluation).
    pub plain: Device,
    /// The policy (parameters on `device`).
    pub model: PolicyModel,
    /// AdamW state.
    pub optim: ModuleOptimizer,
    /// The KL reference (inference mode), when `kl_beta > 0`.
    pub reference: Option<PolicyModel>,
    /// Steps completed.
    pub position: Position,
    /// Batches collected ahead (the lag pipeline), oldest first.
    pub pending: VecDeque<PendingBatch>,
    /// Recent pass rates by unit (edge-of-competence sampling).
    pub competence: Competence,
    /// The metrics file.
    pub metrics: MetricsWriter,
    /// The progress line.
    pub progress: Progress,
    /// Wall-clock seconds of this process's steps.
    pub started: Instant,
    /// Rollout workers that collect GRPO's batches in place of this process, when
    /// the run has a broker (`arlbook train --nats`).
    pub remote: Option<Box<dyn RemoteRollouts>>,
}

impl std::fmt::Debug for Trainer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trainer")
            .field("out", &self.out)
            .field("position", &self.position)
            .finish_non_exhaustive()
    }
}

/// The vocabulary size of the environment's tokenizer.
pub fn vocab() -> usize {
    tokenizer::tokenizer().vocab_size()
}

impl Trainer {
    /// Starts a fresh run in `out` (refusing a folder that already has checkpoints).
    pub fn fresh(config: TrainConfig, out: &Path, plain: Device) -> Result<Self> {
        if checkpoint::latest(out)?.is_some() {
            bail!(
                "{} already holds a run; pass --resume to continue it or choose another --out",
                out.display()
            );
        }
        std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
        std::fs::write(out.join("config.toml"), toml::to_string(&config)?)?;
        let device = plain.clone().autodiff();
        device.seed(config.seed);
        let model = PolicyModel::new(&config.model, vocab(), &device);
        let metrics = MetricsWriter::open(&out.join("metrics.jsonl"), None)?;
        Ok(Self {
            reference: None,
            position: Position { stage: 0, step: 0 },
            pending: VecDeque::new(),
            competence: Competence::default(),
            metrics,
            progress: Progress::new(),
            started: Instant::now(),
            remote: None,
            optim: adamw(),
            model,
            device,
            plain,
            out: out.to_owned(),
            config,
        })
    }

    /// Continues the run in `out` from its latest checkpoint.
    pub fn resume(out: &Path, plain: Device) -> Result<Self> {
        let Some(folder) = checkpoint::latest(out)? else {
            bail!("{} holds no checkpoint to resume from", out.display());
        };
        let state = checkpoint::read_state(&folder)?;
        let device = plain.clone().autodiff();
        let model = load_model(&state.config, &folder.join("model.bpk"), &device)?;
        let optim = adamw()
            .load(folder.join("optimizer.bpk"))
            .map_err(|e| anyhow::anyhow!("loading the optimizer state: {e}"))?;
        let reference = if state.has_reference {
            Some(load_model(
                &state.config,
                &folder.join("reference.bpk"),
                &plain,
            )?)
        } else {
            None
        };
        let metrics = MetricsWriter::open(&out.join("metrics.jsonl"), Some(state.position))?;
        Ok(Self {
            config: state.config,
            out: out.to_owned(),
            device,
            plain,
            model,
            optim,
            reference,
            position: state.position,
            pending: state.pending.into(),
            competence: state.competence,
            metrics,
            progress: Progress::new(),
            started: Instant::now(),
            remote: None,
        })
    }

    /// Replaces the weights with those of another run's checkpoint (an RL stage from an
    /// SFT checkpoint made elsewhere) and places the run at the start of `rl_stage`.
    pub fn init_from(&mut self, folder: &Path, rl_stage: u8) -> Result<()> {
        let state = checkpoint::read_state(folder)?;
        if state.config.model != self.config.model {
            bail!("--init: the checkpoint's [model] differs from this config's");
        }
        self.model = load_model(&state.config, &folder.join("model.bpk"), &self.device)?;
        self.position = Position {
            stage: rl_stage,
            step: 0,
        };
        Ok(())
    }

    /// Whether the step just completed (of a stage with `last` steps) gets a
    /// checkpoint: every `checkpoint_every` steps, at selection candidates, and at the
    /// end.
    pub fn checkpoint_due(&self, last: usize) -> bool {
        let step = self.position.step;
        step.is_multiple_of(self.config.checkpoint_every)
            || step == last
            || self.config.is_candidate(self.position)
    }

    /// Writes a checkpoint of the current position.
    pub fn save_checkpoint(&self) -> Result<PathBuf> {
        let state = State {
            config: self.config.clone(),
            position: self.position,
            pending: self.pending.iter().cloned().collect(),
            has_reference: self.reference.is_some(),
            competence: self.competence.clone(),
        };
        checkpoint::save(&self.out, &state, |dir| {
            self.model
                .clone()
                .save_file(dir.join("model.bpk"))
                .map_err(|e| anyhow::anyhow!("saving the model: {e}"))?;
            self.optim
                .save(dir.join("optimizer.bpk"))
                .map_err(|e| anyhow::anyhow!("saving the optimizer: {e}"))?;
            if let Some(reference) = &self.reference {
                reference
                    .clone()
                    .save_file(dir.join("reference.bpk"))
                    .map_err(|e| anyhow::anyhow!("saving the reference: {e}"))?;
            }
            Ok(())
        })
    }

    /// Appends a metrics row and updates the progress line.
    pub fn log(&mut self, row: &MetricsRow) -> Result<()> {
        self.metrics.write(row)?;
        self.progress.show(row);
        Ok(())
    }

    /// The number of trainable parameters of the policy.
    pub fn parameter_count(&self) -> usize {
        burn::module::Module::num_params(&self.model)
    }

    /// Seconds since this process started training.
    pub fn wall_s(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }
}

/// A model with `config`'s shape and the weights of `path`.
pub fn load_model(config: &TrainConfig, path: &Path, device: &Device) -> Result<PolicyModel> {
    PolicyModel::new(&config.model, vocab(), device)
        .try_load_file(path)
        .map_err(|e| anyhow::anyhow!("loading {}: {e}", path.display()))
}

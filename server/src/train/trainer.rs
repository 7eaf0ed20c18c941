//! The training run: state, the SFT and GRPO loops, checkpoints and resume.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use arlbook_core::agent::tokenizer;
use burn::optim::ModuleOptimizer;
use burn::prelude::*;
use serde_json::{Value, json};

use super::checkpoint::{self, PendingBatch, State};
use super::config::{RlArm, TrainConfig};
use super::metrics::{MetricsWriter, Position};
use super::model::PolicyModel;
use super::optimizer::adamw;
use super::progress::Progress;

/// Which stages a `train` invocation runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Stage {
    /// Supervised cold start only.
    Sft,
    /// GRPO only (after SFT in the same output folder, or from `--init`).
    Grpo,
    /// Rejection-sampling SFT only (after SFT in the same output folder, or from
    /// `--init`): the comparison arm of GRPO.
    Rs,
    /// SFT, then the config's `arm` (GRPO unless `arm = "rs"`).
    All,
}

impl Stage {
    /// The RL stage (position stage number) this invocation runs under `config`, if any.
    pub fn rl_stage(self, config: &TrainConfig) -> Option<u8> {
        match self {
            Self::Sft => None,
            Self::Grpo => Some(1),
            Self::Rs => Some(2),
            Self::All => Some(match config.arm {
                RlArm::Grpo => 1,
                RlArm::Rs => 2,
            }),
        }
    }
}

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
    /// The metrics file.
    pub metrics: MetricsWriter,
    /// The progress line.
    pub progress: Progress,
    /// Wall-clock seconds of this process's steps.
    pub started: Instant,
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
            metrics,
            progress: Progress::new(),
            started: Instant::now(),
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
            metrics,
            progress: Progress::new(),
            started: Instant::now(),
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
    pub fn log(&mut self, row: &Value) -> Result<()> {
        self.metrics.write(row)?;
        self.progress.show(row);
        Ok(())
    }

    /// Seconds since this process started training.
    pub fn wall_s(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// Runs the requested stages from the current position to the end.
    pub fn run(&mut self, stage: Stage) -> Result<()> {
        if matches!(stage, Stage::Sft | Stage::All) && self.position.stage == 0 {
            super::sft::run(self)?;
        }
        if let Some(rl) = stage.rl_stage(&self.config) {
            if self.position.stage == 0 {
                if self.position.step < self.config.sft.total_steps() {
                    bail!(
                        "the SFT stage is not finished in {}; run --stage sft (or all) first, or pass --init",
                        self.out.display()
                    );
                }
                self.begin_rl(rl)?;
            } else if self.position.stage != rl {
                bail!(
                    "{} holds a {} run; --stage {} needs its own --out",
                    self.out.display(),
                    Position::stage_name(self.position.stage),
                    Position::stage_name(rl)
                );
            }
            let last = if rl == 1 {
                super::grpo::run(self)?;
                self.config.grpo.steps
            } else {
                super::rejection::run(self)?;
                self.config.rs.steps
            };
            if self.config.selection.enabled && last > 0 {
                let steps = self.config.selection.rl_steps.clone();
                super::selection::choose(self, rl, &steps, last)?;
            }
        }
        self.progress.finish();
        let summary = json!({
            "stage": "done",
            "position": self.position,
            "out": self.out,
            "selection": super::selection::recorded(&self.out)?,
            "cost": super::metrics::cost(&self.out.join("metrics.jsonl"))?,
        });
        std::fs::write(
            self.out.join("summary.json"),
            serde_json::to_vec_pretty(&summary)?,
        )?;
        Ok(())
    }

    /// From the end of SFT to the start of RL stage `rl`: with selection, the chosen
    /// SFT checkpoint's weights (and a fresh optimizer, as with `--init`) after the gate.
    fn begin_rl(&mut self, rl: u8) -> Result<()> {
        if self.config.selection.enabled {
            let steps = self.config.selection.sft_steps.clone();
            let total = self.config.sft.total_steps();
            let chosen = super::selection::choose(self, 0, &steps, total)?;
            super::selection::gate(self, &chosen.chosen)?;
            self.model = load_model(&self.config, &chosen.chosen.join("model.bpk"), &self.device)?;
            self.optim = adamw();
        }
        self.position = Position { stage: rl, step: 0 };
        Ok(())
    }
}

/// A model with `config`'s shape and the weights of `path`.
pub fn load_model(config: &TrainConfig, path: &Path, device: &Device) -> Result<PolicyModel> {
    PolicyModel::new(&config.model, vocab(), device)
        .try_load_file(path)
        .map_err(|e| anyhow::anyhow!("loading {}: {e}", path.display()))
}

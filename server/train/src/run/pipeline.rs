//! Running a `train` invocation's stages in order: SFT; at its end, with
//! `[selection]`, the SFT checkpoint chosen on validation and the gate; the RL arm
//! (GRPO or rejection-sampling SFT) and its checkpoint chosen on validation; then
//! `summary.json` with the choices and each stage's cost.

use anyhow::{Result, bail};

use crate::config::{RlArm, TrainConfig};
use crate::learner::optimizer::adamw;
use crate::run::metrics::Position;
use crate::run::trainer::{Trainer, load_model};

/// Which stages a `train` invocation runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Supervised cold start only.
    Sft,
    /// GRPO only (after SFT in the same output folder, or from `--init`).
    Grpo,
    /// Rejection-sampling SFT only (after SFT in the same output folder, or from
    /// `--init`): the comparison arm of GRPO.
    Rs,
    /// SFT, then the config's `arm` (GRPO unless `arm = "rs"`); on a run already in an
    /// RL stage, that stage (an RS arm started with `--stage rs` resumes with a plain
    /// `--resume`).
    All,
}

impl Stage {
    /// The RL stage (position stage number) this invocation runs under `config`, if any,
    /// on a run now in stage `current` (0 for SFT or a fresh run): `all` continues the RL
    /// stage a run is already in, whatever the config's `arm`.
    pub fn rl_stage(self, config: &TrainConfig, current: u8) -> Option<u8> {
        match self {
            Self::Sft => None,
            Self::Grpo => Some(1),
            Self::Rs => Some(2),
            Self::All if current != 0 => Some(current),
            Self::All => Some(match config.arm {
                RlArm::Grpo => 1,
                RlArm::Rs => 2,
            }),
        }
    }
}

crate::config::named_variants!(
    Stage,
    "stage",
    [("sft", Sft), ("grpo", Grpo), ("rs", Rs), ("all", All)]
);

impl Trainer {
    /// Runs the requested stages from the current position to the end.
    pub fn run(&mut self, stage: Stage) -> Result<()> {
        if matches!(stage, Stage::Sft | Stage::All) && self.position.stage == 0 {
            crate::learner::sft::run(self)?;
        }
        if let Some(rl) = stage.rl_stage(&self.config, self.position.stage) {
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
                crate::learner::grpo::run(self)?;
                self.config.grpo.steps
            } else {
                crate::learner::rejection::run(self)?;
                self.config.rs.steps
            };
            if self.config.selection.enabled && last > 0 {
                let steps = self.config.selection.rl_steps.clone();
                crate::run::selection::choose(self, rl, &steps, last)?;
            }
        }
        self.progress.finish();
        let summary = arlbook_report::summary::RunSummary {
            stage: "done".to_owned(),
            position: self.position.into(),
            out: self.out.clone(),
            selection: crate::run::selection::recorded(&self.out)?,
            cost: crate::run::metrics::cost(&self.out.join("metrics.jsonl"))?,
        };
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
            let chosen = crate::run::selection::choose(self, 0, &steps, total)?;
            crate::run::selection::gate(self, &chosen.chosen)?;
            self.model = load_model(&self.config, &chosen.chosen.join("model.bpk"), &self.device)?;
            self.optim = adamw();
        }
        self.position = Position { stage: rl, step: 0 };
        Ok(())
    }
}

//! Choosing checkpoints on validation, and the gate before reinforcement learning.
//!
//! The test split is for the end: a checkpoint is chosen by its success on
//! validation at `selection.temperature` (1 by default, the temperature `arlbook eval`
//! reads test at; `selection.tasks` tasks x `selection.samples` samples, the same task
//! and episode seeds for every candidate; the best mean wins, ties go to the later
//! step). At the chosen SFT checkpoint the gate measures validation pass@1 and pass@k
//! with `k = selection.gate_samples` at GRPO's sampling temperature:
//! GRPO learns only from groups with mixed outcomes, which need tasks the policy
//! solves sometimes but not always, and `pass@k - pass@1` is the headroom such tasks
//! give. A gap below `selection.min_gap` is reported as a warning (in the log, the
//! metrics and `summary.json`), not hidden. Every choice is written to
//! `selection.json` in the run folder, which `summary.json` includes.

use std::path::Path;

use anyhow::{Context, Result, bail};
use arlbook_core::agent::Split;
pub use arlbook_core::metrics::Candidate;
use arlbook_core::metrics::{MetricsRow, RowStage};

use crate::measure::eval::{self, EvalPlan};
use crate::run::checkpoint;
use crate::run::metrics::Position;
use crate::run::trainer::Trainer;

/// The file of the choices in the run folder.
pub const SELECTION_FILE: &str = "selection.json";
/// Seed of the validation episodes of every selection (the same for all candidates).
const SELECTION_SEED: u64 = 0x5E1E_C700;

pub use arlbook_report::summary::{Gate, Selection, Selections};

fn validation_plan(tasks: usize, samples: usize, ks: Vec<usize>, temperature: f64) -> EvalPlan {
    EvalPlan {
        split: Split::Validation,
        tasks,
        first_task: 0,
        samples,
        ks,
        temperature,
        seed: SELECTION_SEED,
        show: 0,
        recovery: false,
    }
}

/// Scores the checkpoints of `stage` at `steps` (the stage's last step `last` added)
/// and chooses one; logs a row per candidate and the choice.
pub fn choose(trainer: &mut Trainer, stage: u8, steps: &[usize], last: usize) -> Result<Selection> {
    let config = trainer.config.clone();
    let v = &config.selection;
    let plan = validation_plan(v.tasks, v.samples, vec![1], v.temperature);
    let mut wanted: Vec<usize> = steps.iter().copied().filter(|&s| s < last).collect();
    wanted.push(last);
    wanted.sort_unstable();
    wanted.dedup();
    let arm = Position::stage_name(stage).to_owned();
    let mut candidates = Vec::with_capacity(wanted.len());
    for step in wanted {
        let folder = checkpoint::folder_of(&trainer.out, Position { stage, step });
        if !folder.join("state.json").is_file() {
            bail!(
                "selection: the {arm} checkpoint at step {step} is missing ({})",
                folder.display()
            );
        }
        let summary = eval::score(&folder, &plan, &trainer.plain)?;
        let candidate = Candidate {
            step,
            checkpoint: folder,
            success: summary.success.mean,
            ci95: summary.success.ci95,
        };
        trainer.progress.note(&format!(
            "selection: {arm} step {step}: validation success {:.3} [{:.3}, {:.3}]",
            candidate.success, candidate.ci95[0], candidate.ci95[1]
        ));
        candidates.push(candidate);
    }
    let best = candidates
        .iter()
        .max_by(|a, b| a.success.total_cmp(&b.success).then(a.step.cmp(&b.step)))
        .context("selection: no candidate")?
        .clone();
    let selection = Selection {
        arm: arm.clone(),
        tasks: v.tasks,
        samples: v.samples,
        temperature: plan.temperature,
        candidates,
        chosen_step: best.step,
        chosen: best.checkpoint.clone(),
    };
    trainer.log(&MetricsRow {
        arm: Some(arm.clone()),
        val_success: Some(best.success),
        candidates: Some(selection.candidates.clone()),
        ..MetricsRow::new(RowStage::Selection, best.step)
    })?;
    trainer.progress.note(&format!(
        "selection: chose {arm} step {} ({})",
        best.step,
        best.checkpoint.display()
    ));
    record(&trainer.out, |all| {
        if all.set(selection.clone()) {
            Ok(())
        } else {
            bail!("selection: no arm called {}", selection.arm)
        }
    })?;
    Ok(selection)
}

/// The gate at `folder`: validation pass@1 and pass@k; logged and recorded.
pub fn gate(trainer: &mut Trainer, folder: &Path) -> Result<Gate> {
    let config = trainer.config.clone();
    let v = &config.selection;
    let k = v.gate_samples;
    let plan = validation_plan(v.gate_tasks, k, vec![1, k], config.grpo.temperature);
    let summary = eval::score(folder, &plan, &trainer.plain)?;
    let pass_at = |k: usize| {
        summary
            .pass_at_k
            .iter()
            .find(|p| p.k == k)
            .map_or(0.0, |p| p.estimate.mean)
    };
    let (pass_at_1, pass_at_k) = (pass_at(1), pass_at(k));
    let gap = pass_at_k - pass_at_1;
    let warning = (gap < v.min_gap).then(|| {
        format!(
            "gate: validation pass@{k} - pass@1 = {gap:.3} is below selection.min_gap = {}: \
             few tasks give groups with mixed outcomes, so GRPO has little to learn from",
            v.min_gap
        )
    });
    let gate = Gate {
        checkpoint: folder.to_owned(),
        tasks: v.gate_tasks,
        samples: k,
        pass_at_1,
        pass_at_k,
        gap,
        warning,
    };
    trainer.log(&MetricsRow {
        k: Some(k),
        pass_at_1: Some(pass_at_1),
        pass_at_k: Some(pass_at_k),
        gap: Some(gap),
        warning: gate.warning.clone(),
        ..MetricsRow::new(RowStage::Gate, 0)
    })?;
    trainer.progress.note(&format!(
        "gate: validation pass@1 {pass_at_1:.3}, pass@{k} {pass_at_k:.3} ({} tasks)",
        v.gate_tasks
    ));
    if let Some(warning) = &gate.warning {
        trainer.progress.note(warning);
    }
    record(&trainer.out, |all| {
        all.gate = Some(gate.clone());
        Ok(())
    })?;
    Ok(gate)
}

/// The choices recorded so far in `out` (none made: all empty).
pub fn recorded(out: &Path) -> Result<Selections> {
    let path = out.join(SELECTION_FILE);
    match std::fs::read(&path) {
        Ok(bytes) => {
            serde_json::from_slice(&bytes).with_context(|| format!("parsing {}", path.display()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Selections::default()),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// The checkpoint a path names: the folder itself when it holds `state.json`; in a
/// run folder, the checkpoint chosen on validation in the stage of its latest
/// checkpoint once that choice is recorded (so a finished run names the checkpoint its
/// selection kept, not its last step), else its latest checkpoint (a run still in a
/// stage, or one without `[selection]`).
pub fn named_checkpoint(path: &Path) -> Result<std::path::PathBuf> {
    if path.join("state.json").is_file() {
        return Ok(path.to_owned());
    }
    let Some(latest) = checkpoint::latest(path)? else {
        bail!(
            "checkpoint: {} is neither a checkpoint nor a run folder with one",
            path.display()
        );
    };
    let stage = checkpoint::read_state(&latest)?.position.stage;
    let choices = recorded(path)?;
    let Some(choice) = choices.of(Position::stage_name(stage)) else {
        return Ok(latest);
    };
    let chosen = checkpoint::folder_of(
        path,
        Position {
            stage,
            step: choice.chosen_step,
        },
    );
    if !chosen.join("state.json").is_file() {
        bail!(
            "checkpoint: {} chose {} step {}, but {} is missing",
            path.join(SELECTION_FILE).display(),
            choice.arm,
            choice.chosen_step,
            chosen.display()
        );
    }
    Ok(chosen)
}

/// Changes `selection.json` by `change` (written to a temporary file, then renamed).
fn record(out: &Path, change: impl FnOnce(&mut Selections) -> Result<()>) -> Result<()> {
    let mut all = recorded(out)?;
    change(&mut all)?;
    let path = out.join(SELECTION_FILE);
    let tmp = out.join(format!(".{SELECTION_FILE}.tmp"));
    std::fs::write(&tmp, serde_json::to_vec_pretty(&all)?)?;
    std::fs::rename(&tmp, &path)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TrainConfig;

    /// A run folder with checkpoints at `sft-000002`, `grpo-000001` and `grpo-000002`
    /// (the latest), and no choice recorded.
    fn run_folder(name: &str) -> std::path::PathBuf {
        let out = std::env::temp_dir().join(format!("arlbook-named-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        for (stage, step) in [(0, 2), (1, 1), (1, 2)] {
            let state = checkpoint::State {
                config: TrainConfig::default(),
                position: Position { stage, step },
                pending: Vec::new(),
                has_reference: false,
                competence: crate::learner::grpo::competence::Competence::default(),
            };
            checkpoint::save(&out, &state, |_| Ok(())).unwrap();
        }
        out
    }

    fn choice(arm: &str, step: usize) -> Selection {
        Selection {
            arm: arm.into(),
            tasks: 1,
            samples: 1,
            temperature: 1.0,
            candidates: Vec::new(),
            chosen_step: step,
            chosen: format!("elsewhere/{arm}-{step:06}").into(),
        }
    }

    #[test]
    fn a_run_folder_names_the_checkpoint_its_stage_chose_else_its_latest() {
        let out = run_folder("choice");
        let folder = |name: &str| checkpoint::root(&out).join(name);
        // No choice yet: the latest checkpoint.
        assert_eq!(named_checkpoint(&out).unwrap(), folder("grpo-000002"));
        // The SFT choice alone does not name a checkpoint of the GRPO stage under way.
        record(&out, |all| {
            all.set(choice("sft", 2));
            Ok(())
        })
        .unwrap();
        assert_eq!(named_checkpoint(&out).unwrap(), folder("grpo-000002"));
        // Once GRPO's choice is recorded, that checkpoint, found in this folder (not at
        // the path the run wrote, which may have moved).
        record(&out, |all| {
            all.set(choice("grpo", 1));
            Ok(())
        })
        .unwrap();
        assert_eq!(named_checkpoint(&out).unwrap(), folder("grpo-000001"));
        // A checkpoint folder names itself.
        assert_eq!(
            named_checkpoint(&folder("sft-000002")).unwrap(),
            folder("sft-000002")
        );
        std::fs::remove_dir_all(&out).unwrap();
    }

    #[test]
    fn a_choice_whose_checkpoint_is_gone_is_an_error_naming_it() {
        let out = run_folder("gone");
        record(&out, |all| {
            all.set(choice("grpo", 7));
            Ok(())
        })
        .unwrap();
        let message = named_checkpoint(&out).unwrap_err().to_string();
        assert!(message.contains("grpo-000007"), "{message}");
        let nothing = out.join("nothing-here");
        let message = named_checkpoint(&nothing).unwrap_err().to_string();
        assert!(
            message.contains("neither a checkpoint nor a run folder"),
            "{message}"
        );
        std::fs::remove_dir_all(&out).unwrap();
    }
}

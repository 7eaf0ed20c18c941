//! `summary.json`: what `arlbook train` leaves in its run folder when it finishes.
//!
//! `selection` holds the choices recorded in `selection.json` as the run made them
//! (the SFT checkpoint chosen on validation, the gate at it, the RL checkpoint chosen);
//! `cost` sums each training stage's metrics rows (validation and selection not
//! included).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Where a run is: a stage and the steps completed in it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
pub struct Position {
    /// 0 = SFT, 1 = GRPO, 2 = rejection-sampling SFT.
    pub stage: u8,
    /// Steps completed in that stage.
    pub step: usize,
}

/// One candidate checkpoint of a selection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    /// Its step in its stage.
    pub step: usize,
    /// The checkpoint folder.
    pub checkpoint: PathBuf,
    /// Validation success at the sampling temperature (a fraction of episodes).
    pub success: f64,
    /// Its 95% interval, clustered by problem key.
    pub ci95: [f64; 2],
}

/// The choice among one stage's checkpoints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    /// The stage (`sft`, `grpo`, `rs`).
    pub arm: String,
    /// Validation tasks per candidate.
    pub tasks: usize,
    /// Samples per task.
    pub samples: usize,
    /// Temperature.
    pub temperature: f64,
    /// Every candidate, by step.
    pub candidates: Vec<Candidate>,
    /// The chosen step.
    pub chosen_step: usize,
    /// The chosen checkpoint.
    pub chosen: PathBuf,
}

/// The gate at the chosen SFT checkpoint: validation pass@1 and pass@k.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gate {
    /// The checkpoint.
    pub checkpoint: PathBuf,
    /// Validation tasks.
    pub tasks: usize,
    /// Samples per task (`k`).
    pub samples: usize,
    /// pass@1.
    pub pass_at_1: f64,
    /// pass@k.
    pub pass_at_k: f64,
    /// `pass@k - pass@1`.
    pub gap: f64,
    /// Set when the gap is below `selection.min_gap`.
    pub warning: Option<String>,
}

/// The choices a run has made so far (`selection.json`), each present once made.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Selections {
    /// The SFT checkpoint chosen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sft: Option<Selection>,
    /// The gate at it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<Gate>,
    /// The GRPO checkpoint chosen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpo: Option<Selection>,
    /// The rejection-sampling checkpoint chosen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rs: Option<Selection>,
}

impl Selections {
    /// The choice of stage `arm` (`sft`, `grpo` or `rs`), if made.
    pub fn of(&self, arm: &str) -> Option<&Selection> {
        match arm {
            "sft" => self.sft.as_ref(),
            "grpo" => self.grpo.as_ref(),
            "rs" => self.rs.as_ref(),
            _ => None,
        }
    }

    /// Records `selection` as its arm's choice; `false` for an arm that is not one of
    /// `sft`, `grpo` and `rs`.
    pub fn set(&mut self, selection: Selection) -> bool {
        let slot = match selection.arm.as_str() {
            "sft" => &mut self.sft,
            "grpo" => &mut self.grpo,
            "rs" => &mut self.rs,
            _ => return false,
        };
        *slot = Some(selection);
        true
    }
}

/// What one training stage of a run cost, summed over its metrics rows (validation
/// and selection not included).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StageCost {
    /// Optimizer steps (rows) of the stage.
    pub steps: usize,
    /// Distinct training problem keys: SFT's demonstration keys, an RL stage's keys
    /// sampled over all its steps.
    pub training_keys: usize,
    /// Rollouts generated, discarded groups included.
    pub rollouts_generated: usize,
    /// Rollouts trained on after filtering.
    pub rollouts_used: usize,
    /// Tokens the policy generated.
    pub generated_tokens: usize,
    /// Seconds its steps took.
    pub step_s: f64,
}

/// `summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// `done`: the run finished every stage it was asked for.
    pub stage: String,
    /// Where it stopped.
    pub position: Position,
    /// Its folder.
    pub out: PathBuf,
    /// The checkpoints chosen and the gate.
    pub selection: Selections,
    /// Each training stage's cost, by stage name (`sft`, `grpo`, `rs`).
    pub cost: BTreeMap<String, StageCost>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selection(arm: &str, step: usize) -> Selection {
        Selection {
            arm: arm.into(),
            tasks: 4,
            samples: 2,
            temperature: 1.0,
            candidates: vec![Candidate {
                step,
                checkpoint: PathBuf::from(format!("c/{arm}-{step:06}")),
                success: 0.25,
                ci95: [0.0, 0.5],
            }],
            chosen_step: step,
            chosen: PathBuf::from(format!("c/{arm}-{step:06}")),
        }
    }

    #[test]
    fn choices_are_filed_by_arm_and_only_made_ones_are_written() {
        let mut all = Selections::default();
        assert_eq!(serde_json::to_string(&all).unwrap(), "{}");
        assert!(all.set(selection("sft", 6)));
        assert!(all.set(selection("rs", 3)));
        assert!(!all.set(selection("ppo", 1)));
        assert_eq!(all.of("sft").unwrap().chosen_step, 6);
        assert_eq!(all.of("rs").unwrap().chosen_step, 3);
        assert!(all.of("grpo").is_none() && all.of("ppo").is_none());
        let json = serde_json::to_value(&all).unwrap();
        let keys: Vec<&String> = json.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["rs", "sft"]);
        assert_eq!(serde_json::from_value::<Selections>(json).unwrap(), all);
    }

    #[test]
    fn a_summary_reads_back_as_written() {
        let mut selection_made = Selections::default();
        selection_made.set(selection("grpo", 2));
        let summary = RunSummary {
            stage: "done".into(),
            position: Position { stage: 1, step: 2 },
            out: PathBuf::from("runs/x"),
            selection: selection_made,
            cost: BTreeMap::from([(
                "grpo".to_owned(),
                StageCost {
                    steps: 2,
                    step_s: 1.5,
                    ..StageCost::default()
                },
            )]),
        };
        let text = serde_json::to_string_pretty(&summary).unwrap();
        assert_eq!(serde_json::from_str::<RunSummary>(&text).unwrap(), summary);
    }
}

//! One row of a training run's metrics, the contract between the trainer that writes
//! `metrics.jsonl`, the server that streams it, the notebook's live chapter and
//! `arlbook train-plot` that read it.
//!
//! A row is one JSON object per line, tagged with its [`stage`](MetricsRow::stage) and
//! [`step`](MetricsRow::step). Every other field belongs to some stages only and is
//! left out of the JSON where a stage does not measure it (never written as a
//! made-up 0): a GRPO step that kept no rollout has no `reward`, a validation row has
//! only `val_success`. Reading accepts rows written by older versions: fields this
//! definition does not know are ignored and missing ones are `None`.
//!
//! Units are in each field's docs. "Kept rollouts" are the ones a GRPO step trained
//! on, after dynamic sampling dropped groups whose rewards were all equal; "sampled"
//! counts every rollout generated for the step.

use std::collections::BTreeMap;

/// One candidate checkpoint of a selection row (the type `summary.json` uses too).
pub use arlbook_report::summary::Candidate;
use serde::{Deserialize, Serialize};

/// The stage a row belongs to.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum RowStage {
    /// One optimizer step of supervised fine-tuning on demonstrations.
    Sft,
    /// One GRPO step.
    Grpo,
    /// One step of rejection-sampling SFT (the comparison arm of GRPO).
    Rs,
    /// Greedy success on held-out validation tasks, during GRPO.
    Validation,
    /// The checkpoint chosen among a stage's candidates on validation.
    Selection,
    /// Validation pass@1 and pass@k before RL.
    Gate,
    /// During SFT: validation success with failures by cause, and the teacher-forced
    /// accuracy by action part on held-out teacher episodes.
    Probe,
    /// A stage this version does not know (a row from a newer trainer).
    #[default]
    #[serde(other)]
    Unknown,
}

impl RowStage {
    /// The stage's name in the JSON (`sft`, `grpo`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Self::Sft => "sft",
            Self::Grpo => "grpo",
            Self::Rs => "rs",
            Self::Validation => "validation",
            Self::Selection => "selection",
            Self::Gate => "gate",
            Self::Probe => "probe",
            Self::Unknown => "unknown",
        }
    }

    /// Whether rows of this stage are optimizer steps of an RL arm (GRPO or RS).
    pub fn is_rl(self) -> bool {
        matches!(self, Self::Grpo | Self::Rs)
    }
}

/// One metrics row. Build one with [`MetricsRow::new`] and set the fields the stage
/// measures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MetricsRow {
    /// The stage.
    pub stage: RowStage,
    /// The step within its stage, counted from 1 for the row written after that many
    /// steps. Validation rows: the GRPO step they followed (0 before the first
    /// update); a gate row: 0; a selection row: the chosen candidate's step.
    pub step: usize,
    /// Steps planned for the stage (the progress bar's total).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<usize>,

    // --- SFT ---
    /// SFT and RS: mean cross-entropy per target token (nats). GRPO: the surrogate
    /// loss, averaged over the step's optimizer steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<f64>,
    /// Gradient norm before clipping (the largest over a GRPO step's optimizer steps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grad_norm: Option<f64>,
    /// Learning rate of the step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lr: Option<f64>,
    /// SFT: target tokens trained on in the step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<usize>,
    /// SFT: trained tokens per second; GRPO: generated tokens per second of collection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_s: Option<f64>,
    /// SFT: teacher demonstrations in the pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demonstrations: Option<usize>,
    /// SFT: distinct problem keys among the demonstrations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demonstration_keys: Option<usize>,
    /// SFT: `recovery` in the second phase (one round of `DAgger`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// SFT recovery phase: demonstrations gathered from the model's own attempts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_demos: Option<usize>,

    // --- GRPO and RS: collection ---
    /// GRPO: steps between the policy that sampled the batch and the one trained.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_lag: Option<usize>,
    /// GRPO: groups kept for the update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<usize>,
    /// Rollouts generated for the step, discarded groups included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollouts_sampled: Option<usize>,
    /// GRPO: rollouts beyond `tasks_per_batch x group_size` (dynamic sampling's refills).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra_rollouts: Option<usize>,
    /// Rollouts trained on (GRPO: kept groups; RS: successes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollouts_used: Option<usize>,
    /// Tokens the policy generated while collecting the step's batch, all rollouts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generated_tokens: Option<usize>,
    /// The distinct training problem keys sampled for the step, sorted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_keys: Option<Vec<String>>,
    /// Rollouts left out, by reason (`all_equal_group`, `env_fault`, `group_too_small`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discarded: Option<BTreeMap<String, usize>>,
    /// GRPO / RS with edge-of-competence sampling: candidate tasks skipped because
    /// their unit was recently always solved (`solved`) or never (`unsolved`), and
    /// draws taken anyway after the most candidates (`forced`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edge_skipped: Option<BTreeMap<String, usize>>,
    /// GRPO: fraction of sampled groups whose rewards were not all equal (the groups
    /// with a nonzero advantage).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effective_group_fraction: Option<f64>,
    /// GRPO: fraction of every sampled rollout that solved its task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampled_success_rate: Option<f64>,
    /// GRPO: fraction of the kept rollouts that solved their task (with dynamic
    /// sampling only mixed groups are kept, so this is not the policy's rate). RS:
    /// fraction of the collected rollouts that solved their task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success_rate: Option<f64>,
    /// GRPO: mean episode reward of the kept rollouts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reward: Option<f64>,
    /// GRPO: mean generated tokens per episode (all of an episode's turns) over the
    /// kept rollouts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gen_len_mean: Option<f64>,
    /// GRPO: the most generated tokens of one kept episode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gen_len_max: Option<usize>,
    /// GRPO: fraction of kept episodes cut by the context or turn limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncation_rate: Option<f64>,

    // --- GRPO: update ---
    /// GRPO: |burn's loss - the core's loss| summed over microbatches (an agreement
    /// check; f32 rounding).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_core_gap: Option<f64>,
    /// GRPO: mean importance ratio `pi_theta / pi_old` over generated tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio_mean: Option<f64>,
    /// GRPO: largest importance ratio of a generated token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio_max: Option<f64>,
    /// GRPO: fraction of tokens whose ratio was clipped below `1 - eps_low`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clip_fraction_low: Option<f64>,
    /// GRPO: fraction of tokens whose ratio was clipped above `1 + eps_high`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clip_fraction_high: Option<f64>,
    /// GRPO: fraction of tokens bounded by the dual clip.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clip_fraction_dual: Option<f64>,
    /// GRPO: estimated KL divergence to the reference policy (nats per token; 0
    /// without a reference).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kl: Option<f64>,
    /// GRPO: mean entropy of the sampling distribution (nats per token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entropy: Option<f64>,
    /// GRPO: optimizer steps taken (epochs x minibatches).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optimizer_steps: Option<usize>,
    /// RS: action tokens of the successes trained on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trained_tokens: Option<usize>,

    // --- time ---
    // --- GRPO with rollout workers (`arlbook train --nats`) ---
    /// Rollouts per second of each worker over the step (its rollouts over its seconds
    /// of work).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_rollouts_per_s: Option<BTreeMap<String, f64>>,
    /// The most rollout jobs waiting in the work queue during the step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_depth: Option<usize>,
    /// Results whose job was delivered more than once (its first worker died or did
    /// not acknowledge it in time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redeliveries: Option<usize>,
    /// Results of a job already answered, dropped (a group is never counted twice).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicate_results: Option<usize>,
    /// Jobs and results of an earlier learner of the run (before a restart), drained
    /// and dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_dropped: Option<usize>,
    /// Results refused because their records did not check (their job is published
    /// again after `cluster.resend_after_s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused_results: Option<usize>,
    /// Jobs published again because their group did not come back in time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs_resent: Option<usize>,
    /// Bytes of the step's rollout results as they crossed the wire (encoded groups).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_bytes: Option<usize>,

    /// GRPO and RS: seconds spent generating the step's rollouts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collect_s: Option<f64>,
    /// Seconds the whole step took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_s: Option<f64>,
    /// Seconds since this training process started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_s: Option<f64>,

    // --- validation, selection, gate ---
    /// Validation: greedy success on held-out tasks (a fraction). Selection: the
    /// chosen candidate's success at the sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub val_success: Option<f64>,
    /// Selection: the stage whose checkpoints were compared (`sft`, `grpo`, `rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arm: Option<String>,
    /// Selection: every candidate with its validation success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidates: Option<Vec<Candidate>>,
    /// Gate: the `k` of pass@k.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k: Option<usize>,
    /// Gate: validation pass@1 (a fraction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass_at_1: Option<f64>,
    /// Gate: validation pass@k (a fraction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass_at_k: Option<f64>,
    /// Gate: pass@k - pass@1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gap: Option<f64>,
    /// Gate: the warning when the gap is below `selection.min_gap`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,

    // --- probe (during SFT) ---
    /// Probe: failed validation episodes by cause (`no_edit`, `unknown_name`,
    /// `wrong_line`, `wrong_text`, `turn_budget`, `token_budget`, `malformed_call`,
    /// `env_fault`); `val_success` is the probe's greedy success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_causes: Option<BTreeMap<String, usize>>,
    /// Probe: held-out teacher action tokens the policy predicts (argmax, teacher
    /// forced), a fraction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tf_token_accuracy: Option<f64>,
    /// Probe: teacher calls whose tool name the policy predicts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tf_tool_accuracy: Option<f64>,
    /// Probe: teacher `write_code` calls whose line number the policy predicts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tf_line_accuracy: Option<f64>,
    /// Probe: teacher `write_code` calls whose text the policy predicts exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tf_text_exact: Option<f64>,
    /// Probe: teacher `finish` calls the policy predicts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tf_finish_accuracy: Option<f64>,
    /// Probe: the teacher's other calls that the policy would start with `finish`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tf_early_finish: Option<f64>,
}

impl MetricsRow {
    /// A row of `stage` at `step` with no measurement yet.
    pub fn new(stage: RowStage, step: usize) -> Self {
        Self {
            stage,
            step,
            ..Self::default()
        }
    }

    /// The row with `steps` set.
    #[must_use]
    pub fn of_steps(mut self, steps: usize) -> Self {
        self.steps = Some(steps);
        self
    }

    /// Parses one JSON line.
    pub fn parse(line: &str) -> Result<Self, String> {
        serde_json::from_str(line).map_err(|e| format!("not a metrics row: {e}"))
    }

    /// The row as one line of JSON (no newline).
    pub fn to_line(&self) -> String {
        // A struct of numbers, strings, maps with string keys and lists always
        // serialises; non-finite floats become `null`, read back as `None`.
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_writes_only_what_it_measured_and_reads_back_equal() {
        let mut row = MetricsRow::new(RowStage::Grpo, 3).of_steps(20);
        row.kl = Some(0.25);
        row.discarded = Some(BTreeMap::from([("all_equal_group".to_owned(), 8)]));
        let line = row.to_line();
        assert_eq!(
            line,
            r#"{"stage":"grpo","step":3,"steps":20,"discarded":{"all_equal_group":8},"kl":0.25}"#
        );
        assert_eq!(MetricsRow::parse(&line).unwrap(), row);
    }

    #[test]
    fn unknown_fields_and_stages_are_read_and_nulls_are_none() {
        let row =
            MetricsRow::parse(r#"{"stage":"later","step":1,"kl":null,"new_field":[1]}"#).unwrap();
        assert_eq!(row.stage, RowStage::Unknown);
        assert_eq!(row.kl, None);
        assert!(
            MetricsRow::parse(r#"{"step":1}"#).is_err(),
            "a row needs its stage"
        );
        assert!(
            MetricsRow::parse(r#"{"stage":"sft"}"#).is_err(),
            "and its step"
        );
        assert!(
            MetricsRow::parse(r#"{"stage":"sft","step":1,"loss":"high"}"#).is_err(),
            "a field of the wrong type is an error, not a default"
        );
    }

    #[test]
    fn stage_names_round_trip() {
        for stage in [
            RowStage::Sft,
            RowStage::Grpo,
            RowStage::Rs,
            RowStage::Validation,
            RowStage::Selection,
            RowStage::Gate,
            RowStage::Probe,
        ] {
            let json = serde_json::to_string(&stage).unwrap();
            assert_eq!(json, format!("\"{}\"", stage.name()));
            assert_eq!(serde_json::from_str::<RowStage>(&json).unwrap(), stage);
        }
        assert!(RowStage::Rs.is_rl() && !RowStage::Validation.is_rl());
    }
}

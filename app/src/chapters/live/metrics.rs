//! A training run's metrics rows, as the trainer writes them to `metrics.jsonl` and the
//! server streams them: one [`MetricsRow`] per line, the core's definition that the
//! trainer writes, so the chapter reads exactly the fields (and units) it wrote.

/// One metrics row: the core's [`MetricsRow`], under the name the chapter uses.
pub use arlbook_core::metrics::MetricsRow as Row;
use arlbook_core::metrics::{MetricsRow, RowStage};

use crate::figure::Readout;

/// Prefix of the chapter's readout ids (`live-rows`, `live-step`, ...).
pub const READOUT_PREFIX: &str = "live";

/// How the charts group rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Supervised fine-tuning on teacher demonstrations.
    Sft,
    /// One RL update: a GRPO step, or a step of the rejection-sampling arm (`rs`).
    Rl,
    /// A held-out evaluation during GRPO.
    Validation,
    /// A row these charts do not draw (the selection, the gate, a newer stage).
    Other,
}

impl Stage {
    /// The group of `row`.
    pub fn of(row: &MetricsRow) -> Self {
        match row.stage {
            RowStage::Sft => Self::Sft,
            RowStage::Grpo | RowStage::Rs => Self::Rl,
            RowStage::Validation => Self::Validation,
            RowStage::Selection | RowStage::Gate | RowStage::Probe | RowStage::Unknown => {
                Self::Other
            }
        }
    }
}

/// The rows received so far, in arrival order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Run {
    /// Every row.
    pub rows: Vec<Row>,
}

impl Run {
    /// Parses a JSON-lines text (blank lines skipped); an error names the line.
    pub fn from_jsonl(text: &str) -> Result<Self, String> {
        let rows = text
            .lines()
            .enumerate()
            .filter(|(_, line)| !line.trim().is_empty())
            .map(|(i, line)| Row::parse(line).map_err(|e| format!("line {}: {e}", i + 1)))
            .collect::<Result<_, _>>()?;
        Ok(Self { rows })
    }

    /// Appends one row.
    pub fn push(&mut self, row: Row) {
        self.rows.push(row);
    }

    /// The rows of `stage`.
    pub fn of(&self, stage: Stage) -> impl DoubleEndedIterator<Item = &Row> {
        self.rows.iter().filter(move |r| Stage::of(r) == stage)
    }

    /// Points `(step, value)` of one field over the rows of `stage` that have it
    /// (non-finite values skipped).
    pub fn series(&self, stage: Stage, field: impl Fn(&Row) -> Option<f64>) -> Vec<(f64, f64)> {
        self.of(stage)
            .filter_map(|r| {
                field(r)
                    .filter(|v| v.is_finite())
                    .map(|v| (r.step as f64, v))
            })
            .collect()
    }

    /// The step of the last row (0 before any).
    pub fn last_step(&self) -> usize {
        self.rows.last().map_or(0, |r| r.step)
    }

    /// The success rate of the last GRPO row that has one.
    pub fn last_success(&self) -> Option<f64> {
        self.of(Stage::Rl).rev().find_map(|r| r.success_rate)
    }

    /// The workers that collected rollouts (`arlbook train --nats`), sorted by name.
    pub fn workers(&self) -> Vec<String> {
        let names: std::collections::BTreeSet<&String> = self
            .of(Stage::Rl)
            .filter_map(|r| r.worker_rollouts_per_s.as_ref())
            .flat_map(|m| m.keys())
            .collect();
        names.into_iter().cloned().collect()
    }

    /// The sum of a count over the RL rows.
    fn total(&self, field: impl Fn(&Row) -> Option<usize>) -> f64 {
        self.of(Stage::Rl).filter_map(field).sum::<usize>() as f64
    }

    /// The numbers shown under the charts: `live-rows`, `live-step`, `live-success`
    /// (NaN, shown as a dash, before the first GRPO row); for a run collected by
    /// workers also `live-workers`, `live-queue` (the last step's deepest queue),
    /// `live-redeliveries` and `live-stale` (totals).
    pub fn readouts(&self) -> Vec<Readout> {
        let mut readouts = self.main_readouts();
        let workers = self.workers();
        if workers.is_empty() {
            return readouts;
        }
        let last_queue = self.of(Stage::Rl).rev().find_map(|r| r.queue_depth);
        readouts.extend([
            Readout::new(
                READOUT_PREFIX,
                "workers",
                "workers seen",
                workers.len() as f64,
            ),
            Readout::new(
                READOUT_PREFIX,
                "queue",
                "jobs queued (last step)",
                last_queue.map_or(f64::NAN, |q| q as f64),
            ),
            Readout::new(
                READOUT_PREFIX,
                "redeliveries",
                "jobs redelivered",
                self.total(|r| r.redeliveries),
            ),
            Readout::new(
                READOUT_PREFIX,
                "stale",
                "stale jobs and results dropped",
                self.total(|r| r.stale_dropped),
            ),
        ]);
        readouts
    }

    fn main_readouts(&self) -> Vec<Readout> {
        vec![
            Readout::new(
                READOUT_PREFIX,
                "rows",
                "rows received",
                self.rows.len() as f64,
            ),
            Readout::new(
                READOUT_PREFIX,
                "step",
                match self.rows.last().map(Stage::of) {
                    Some(Stage::Rl | Stage::Validation) => "last step (RL)",
                    Some(Stage::Sft) => "last step (SFT)",
                    _ => "last step",
                },
                self.last_step() as f64,
            ),
            Readout::new(
                READOUT_PREFIX,
                "success",
                "last GRPO success rate",
                self.last_success().unwrap_or(f64::NAN),
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chapters::live::RECORDED_RUN;

    #[test]
    fn the_recorded_run_has_its_sft_grpo_and_validation_rows() {
        let run = Run::from_jsonl(RECORDED_RUN).unwrap();
        assert_eq!(run.rows.len(), 1225);
        assert_eq!(run.of(Stage::Sft).count(), 600);
        assert_eq!(run.of(Stage::Rl).count(), 600);
        assert_eq!(run.of(Stage::Validation).count(), 25);
        let loss = run.series(Stage::Sft, |r| r.loss);
        assert_eq!(loss.len(), 600);
        assert_eq!(
            (loss[0].0, loss[599].0),
            (10.0, 6000.0),
            "every tenth SFT step"
        );
        assert!(loss[0].1 > loss[599].1, "SFT loss falls");
        assert_eq!(run.last_step(), 600);
        // The last RL row's success, read from the file's text directly.
        let last: serde_json::Value = RECORDED_RUN
            .lines()
            .rev()
            .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
            .find(|row| row["stage"] == "grpo" && row.get("success_rate").is_some())
            .unwrap();
        assert_eq!(run.last_success(), last["success_rate"].as_f64());
    }

    #[test]
    fn unknown_fields_are_ignored_and_missing_ones_are_none() {
        let row = Row::parse(r#"{"stage":"grpo","step":3,"kl":0.5,"discarded":{"x":1}}"#).unwrap();
        assert_eq!(Stage::of(&row), Stage::Rl);
        assert_eq!(row.kl, Some(0.5));
        assert_eq!(row.entropy, None);
        let row = Row::parse(r#"{"stage":"grpo","step":3,"kl":null}"#).unwrap();
        assert_eq!(row.kl, None);
    }

    #[test]
    fn a_bad_line_is_named() {
        let err = Run::from_jsonl("{\"stage\":\"sft\",\"step\":1}\n\n{oops\n").unwrap_err();
        assert!(err.starts_with("line 3:"), "{err}");
        assert!(
            Row::parse(r#"{"step":1}"#).is_err(),
            "a row needs its stage"
        );
    }

    #[test]
    fn readouts_have_stable_ids_and_full_values() {
        let mut run = Run::default();
        let ids: Vec<String> = run.readouts().into_iter().map(|r| r.id).collect();
        assert_eq!(ids, ["live-rows", "live-step", "live-success"]);
        assert!(run.readouts()[2].value.is_nan(), "no GRPO row yet");
        run.push(Row::parse(r#"{"stage":"sft","step":1,"loss":2.0}"#).unwrap());
        run.push(Row::parse(r#"{"stage":"grpo","step":1,"success_rate":0.375}"#).unwrap());
        run.push(Row::parse(r#"{"stage":"grpo","step":2}"#).unwrap());
        let values: Vec<f64> = run.readouts().into_iter().map(|r| r.value).collect();
        assert_eq!(values, [3.0, 2.0, 0.375]);
    }

    #[test]
    fn a_run_collected_by_workers_reads_out_its_workers_and_faults() {
        let run = Run::from_jsonl(
            "{\"stage\":\"grpo\",\"step\":1,\"worker_rollouts_per_s\":{\"w1\":40.0},\"queue_depth\":12,\"redeliveries\":1,\"stale_dropped\":3}\n\
             {\"stage\":\"grpo\",\"step\":2,\"worker_rollouts_per_s\":{\"w0\":41.0,\"w1\":39.0},\"queue_depth\":6,\"redeliveries\":2,\"stale_dropped\":0}\n",
        )
        .unwrap();
        assert_eq!(run.workers(), ["w0", "w1"]);
        let readouts = run.readouts();
        let ids: Vec<&str> = readouts.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "live-rows",
                "live-step",
                "live-success",
                "live-workers",
                "live-queue",
                "live-redeliveries",
                "live-stale"
            ]
        );
        let values: Vec<f64> = readouts[3..].iter().map(|r| r.value).collect();
        assert_eq!(values, [2.0, 6.0, 3.0, 3.0]);
    }

    #[test]
    fn series_skip_rows_without_the_field() {
        let run = Run::from_jsonl(
            "{\"stage\":\"grpo\",\"step\":1,\"kl\":0.1}\n\
             {\"stage\":\"validation\",\"step\":1,\"val_success\":0.5}\n\
             {\"stage\":\"grpo\",\"step\":2}\n\
             {\"stage\":\"grpo\",\"step\":3,\"kl\":0.3}\n",
        )
        .unwrap();
        assert_eq!(run.series(Stage::Rl, |r| r.kl), [(1.0, 0.1), (3.0, 0.3)]);
        assert_eq!(
            run.series(Stage::Validation, |r| r.val_success),
            [(1.0, 0.5)]
        );
    }
}

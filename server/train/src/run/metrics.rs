//! Metrics as JSON lines, one row per optimizer step, written so that a run killed at
//! any moment and resumed from its last checkpoint ends with every step's row exactly
//! once.
//!
//! Each row is a [`MetricsRow`] (the core's definition, which the notebook's live
//! chapter reads too) with its `stage` (`sft`, `probe`, `grpo`, `rs`, `validation`,
//! `selection`, `gate`) and `step`. Rows are
//! appended and flushed after the step they describe. On resume the file is cut back
//! to the rows at or before the checkpoint's position (rows written after the
//! checkpoint belong to steps that will run again), a torn last line included, and
//! rewritten atomically (temporary file, then rename).

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use arlbook_core::metrics::{MetricsRow, RowStage};

/// Where a run is: the stage and the number of steps that stage has completed.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct Position {
    /// 0 = SFT, 1 = GRPO, 2 = rejection-sampling SFT.
    pub stage: u8,
    /// Steps completed in that stage.
    pub step: usize,
}

impl From<Position> for arlbook_report::summary::Position {
    fn from(p: Position) -> Self {
        Self {
            stage: p.stage,
            step: p.step,
        }
    }
}

impl Position {
    /// The stage's name in metric rows.
    pub fn stage_name(stage: u8) -> &'static str {
        Self::row_stage(stage).name()
    }

    /// The metrics rows' stage of a position's stage number.
    pub fn row_stage(stage: u8) -> RowStage {
        match stage {
            0 => RowStage::Sft,
            1 => RowStage::Grpo,
            _ => RowStage::Rs,
        }
    }

    /// The stage number of a training stage's rows (`None` for the others).
    pub fn stage_number(stage: RowStage) -> Option<u8> {
        match stage {
            RowStage::Sft => Some(0),
            RowStage::Grpo => Some(1),
            RowStage::Rs => Some(2),
            _ => None,
        }
    }

    /// The stage number of a name from [`Position::stage_name`].
    pub fn stage_of(name: &str) -> Option<u8> {
        serde_json::from_value(serde_json::Value::from(name))
            .ok()
            .and_then(Self::stage_number)
    }
}

/// The position a metrics row belongs to: `(stage, step)` where `step` counts from 1
/// for the row written after that many steps. Validation rows belong to their GRPO
/// step, probe rows to their SFT step; the choice of an SFT checkpoint and the gate come before the first RL step
/// (`(1, 0)`), the choice among an RL stage's checkpoints after all of its steps.
fn row_position(row: &MetricsRow) -> Option<Position> {
    let step = row.step;
    match row.stage {
        RowStage::Validation => Some(Position { stage: 1, step }),
        RowStage::Probe => Some(Position { stage: 0, step }),
        RowStage::Gate => Some(Position { stage: 1, step: 0 }),
        RowStage::Selection => match Position::stage_of(row.arm.as_deref()?)? {
            0 => Some(Position { stage: 1, step: 0 }),
            rl => Some(Position {
                stage: rl,
                step: usize::MAX,
            }),
        },
        stage => Some(Position {
            stage: Position::stage_number(stage)?,
            step,
        }),
    }
}

/// An append-only JSON-lines metrics file.
#[derive(Debug)]
pub struct MetricsWriter {
    path: PathBuf,
    out: BufWriter<File>,
}

impl MetricsWriter {
    /// Opens `path` for a fresh run (truncating) or, with `resume_at`, keeps the rows at
    /// or before that position and appends after them.
    pub fn open(path: &Path, resume_at: Option<Position>) -> Result<Self> {
        match resume_at {
            None => {
                File::create(path).with_context(|| format!("creating {}", path.display()))?;
            }
            Some(position) => truncate_after(path, position)?,
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        Ok(Self {
            path: path.to_owned(),
            out: BufWriter::new(file),
        })
    }

    /// Appends one row and flushes it to the file.
    pub fn write(&mut self, row: &MetricsRow) -> Result<()> {
        serde_json::to_writer(&mut self.out, row)?;
        self.out.write_all(b"\n")?;
        self.out
            .flush()
            .with_context(|| format!("writing {}", self.path.display()))
    }
}

/// Keeps the rows of `path` at or before `position`, dropping later and torn rows.
fn truncate_after(path: &Path, position: Position) -> Result<()> {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let mut kept = String::new();
    for line in text.lines() {
        let Ok(row) = MetricsRow::parse(line) else {
            continue;
        };
        if row_position(&row).is_some_and(|p| p <= position) {
            kept.push_str(line);
            kept.push('\n');
        }
    }
    let temporary = path.with_extension("jsonl.tmp");
    fs::write(&temporary, kept).with_context(|| format!("writing {}", temporary.display()))?;
    fs::rename(&temporary, path).with_context(|| format!("replacing {}", path.display()))
}

pub use arlbook_report::summary::StageCost;

/// What each training stage of a run cost, from its metrics rows, by stage name.
pub fn cost(path: &Path) -> Result<BTreeMap<String, StageCost>> {
    /// A stage's totals, its SFT demonstration keys and its sampled task keys.
    type Running = (StageCost, Option<usize>, BTreeSet<String>);
    let mut stages = BTreeMap::<&'static str, Running>::new();
    for row in read_rows(path)? {
        if Position::stage_number(row.stage).is_none() {
            continue;
        }
        let (totals, demonstration_keys, keys) = stages.entry(row.stage.name()).or_default();
        totals.steps += 1;
        totals.rollouts_generated += row.rollouts_sampled.unwrap_or(0);
        totals.rollouts_used += row.rollouts_used.unwrap_or(0);
        totals.generated_tokens += row.generated_tokens.unwrap_or(0);
        totals.step_s += row.step_s.unwrap_or(0.0);
        if row.demonstration_keys.is_some() {
            *demonstration_keys = row.demonstration_keys;
        }
        keys.extend(row.task_keys.into_iter().flatten());
    }
    Ok(stages
        .into_iter()
        .map(|(stage, (mut totals, demonstration_keys, keys))| {
            totals.training_keys = demonstration_keys.unwrap_or(keys.len());
            (stage.to_owned(), totals)
        })
        .collect())
}

/// Reads every row of a metrics file (torn lines skipped).
pub fn read_rows(path: &Path) -> Result<Vec<MetricsRow>> {
    let text = fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(text
        .lines()
        .filter_map(|line| MetricsRow::parse(line).ok())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(stage: RowStage, step: usize) -> MetricsRow {
        MetricsRow::new(stage, step)
    }

    #[test]
    fn resume_drops_rows_after_the_checkpoint_and_torn_lines() {
        let dir = std::env::temp_dir().join(format!("arlbook-metrics-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("metrics.jsonl");
        let mut writer = MetricsWriter::open(&path, None).unwrap();
        for step in 1..=3 {
            writer.write(&row(RowStage::Sft, step)).unwrap();
        }
        for step in 1..=4 {
            writer.write(&row(RowStage::Grpo, step)).unwrap();
        }
        drop(writer);
        let mut torn = OpenOptions::new().append(true).open(&path).unwrap();
        torn.write_all(b"{\"stage\": \"grpo\", \"st").unwrap();
        drop(torn);
        let position = Position { stage: 1, step: 2 };
        let mut writer = MetricsWriter::open(&path, Some(position)).unwrap();
        writer.write(&row(RowStage::Grpo, 3)).unwrap();
        let rows = read_rows(&path).unwrap();
        let steps: Vec<(String, usize)> = rows
            .iter()
            .map(|r| (r.stage.name().to_owned(), r.step))
            .collect();
        let expected: Vec<(String, usize)> = [
            ("sft", 1),
            ("sft", 2),
            ("sft", 3),
            ("grpo", 1),
            ("grpo", 2),
            ("grpo", 3),
        ]
        .iter()
        .map(|(s, n)| ((*s).to_owned(), *n))
        .collect();
        assert_eq!(steps, expected);
        fs::remove_dir_all(&dir).unwrap();
    }
}

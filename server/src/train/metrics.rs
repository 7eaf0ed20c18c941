//! Metrics as JSON lines, one row per optimizer step, written so that a run killed at
//! any moment and resumed from its last checkpoint ends with every step's row exactly
//! once.
//!
//! Each row carries its `stage` (`sft`, `grpo`, `rs`, `validation`, `selection`,
//! `gate`) and `step`. Rows are
//! appended and flushed after the step they describe. On resume the file is cut back
//! to the rows at or before the checkpoint's position (rows written after the
//! checkpoint belong to steps that will run again), a torn last line included, and
//! rewritten atomically (temporary file, then rename).

use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::Value;

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

impl Position {
    /// The stage's name in metric rows.
    pub fn stage_name(stage: u8) -> &'static str {
        match stage {
            0 => "sft",
            1 => "grpo",
            _ => "rs",
        }
    }

    /// The stage of a name from [`Position::stage_name`].
    pub fn stage_of(name: &str) -> Option<u8> {
        match name {
            "sft" => Some(0),
            "grpo" => Some(1),
            "rs" => Some(2),
            _ => None,
        }
    }
}

/// The position a metrics row belongs to: `(stage, step)` where `step` counts from 1
/// for the row written after that many steps. Validation rows belong to their GRPO
/// step; the choice of an SFT checkpoint and the gate come before the first RL step
/// (`(1, 0)`), the choice among an RL stage's checkpoints after all of its steps.
fn row_position(row: &Value) -> Option<Position> {
    let step = usize::try_from(row.get("step")?.as_u64()?).ok()?;
    let stage = row.get("stage")?.as_str()?;
    match stage {
        "validation" => Some(Position { stage: 1, step }),
        "gate" => Some(Position { stage: 1, step: 0 }),
        "selection" => match Position::stage_of(row.get("arm")?.as_str()?)? {
            0 => Some(Position { stage: 1, step: 0 }),
            rl => Some(Position {
                stage: rl,
                step: usize::MAX,
            }),
        },
        _ => Some(Position {
            stage: Position::stage_of(stage)?,
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
    pub fn write(&mut self, row: &Value) -> Result<()> {
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
        let Ok(row) = serde_json::from_str::<Value>(line) else {
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

/// What each training stage of a run cost, from its metrics rows: steps, distinct
/// training problem keys, rollouts generated and used after filtering, generated
/// tokens, and the seconds its steps took (validation and selection not included).
pub fn cost(path: &Path) -> Result<Value> {
    /// One stage's running totals.
    #[derive(Default)]
    struct Totals {
        steps: f64,
        rollouts_generated: f64,
        rollouts_used: f64,
        generated_tokens: f64,
        step_s: f64,
        demonstration_keys: Option<u64>,
        keys: std::collections::BTreeSet<String>,
    }
    let mut stages = std::collections::BTreeMap::<String, Totals>::new();
    for row in read_rows(path)? {
        let Some(stage) = row.get("stage").and_then(Value::as_str) else {
            continue;
        };
        if Position::stage_of(stage).is_none() {
            continue;
        }
        let number = |key: &str| row.get(key).and_then(Value::as_f64).unwrap_or(0.0);
        let totals = stages.entry(stage.to_owned()).or_default();
        totals.steps += 1.0;
        totals.rollouts_generated += number("rollouts_sampled");
        totals.rollouts_used += number("rollouts_used");
        totals.generated_tokens += number("generated_tokens");
        totals.step_s += number("step_s");
        if let Some(keys) = row.get("demonstration_keys").and_then(Value::as_u64) {
            totals.demonstration_keys = Some(keys);
        }
        if let Some(Value::Array(keys)) = row.get("task_keys") {
            totals
                .keys
                .extend(keys.iter().filter_map(|k| k.as_str().map(str::to_owned)));
        }
    }
    let stages: serde_json::Map<String, Value> = stages
        .into_iter()
        .map(|(stage, t)| {
            let keys = t
                .demonstration_keys
                .map_or(t.keys.len() as f64, |k| k as f64);
            let value = serde_json::json!({
                "steps": t.steps, "training_keys": keys,
                "rollouts_generated": t.rollouts_generated, "rollouts_used": t.rollouts_used,
                "generated_tokens": t.generated_tokens, "step_s": t.step_s,
            });
            (stage, value)
        })
        .collect();
    Ok(Value::Object(stages))
}

/// Reads every row of a metrics file (torn lines skipped).
pub fn read_rows(path: &Path) -> Result<Vec<Value>> {
    let text = fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(text
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn resume_drops_rows_after_the_checkpoint_and_torn_lines() {
        let dir = std::env::temp_dir().join(format!("arlbook-metrics-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("metrics.jsonl");
        let mut writer = MetricsWriter::open(&path, None).unwrap();
        for step in 1..=3 {
            writer
                .write(&json!({"stage": "sft", "step": step}))
                .unwrap();
        }
        for step in 1..=4 {
            writer
                .write(&json!({"stage": "grpo", "step": step}))
                .unwrap();
        }
        drop(writer);
        let mut torn = OpenOptions::new().append(true).open(&path).unwrap();
        torn.write_all(b"{\"stage\": \"grpo\", \"st").unwrap();
        drop(torn);
        let position = Position { stage: 1, step: 2 };
        let mut writer = MetricsWriter::open(&path, Some(position)).unwrap();
        writer.write(&json!({"stage": "grpo", "step": 3})).unwrap();
        let rows = read_rows(&path).unwrap();
        let steps: Vec<(String, u64)> = rows
            .iter()
            .map(|r| {
                (
                    r["stage"].as_str().unwrap().to_owned(),
                    r["step"].as_u64().unwrap(),
                )
            })
            .collect();
        let expected: Vec<(String, u64)> = [
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

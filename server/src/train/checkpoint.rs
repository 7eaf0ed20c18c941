//! Checkpoints: everything a run needs to continue exactly where it stopped.
//!
//! A checkpoint is a folder `checkpoints/<stage>-<step>/` holding `model.bpk` (the
//! weights), `optimizer.bpk` (AdamW's moments), `reference.bpk` (the KL reference,
//! when one is kept) and `state.json` (config, position, policy version and the
//! rollouts waiting in the lag pipeline). It is written under a temporary name and
//! renamed into place, then `checkpoints/latest` is replaced (again by rename), so a
//! kill at any instant leaves the previous checkpoint intact and `latest` pointing at a
//! complete one. The newest two checkpoints are kept, and the last SFT checkpoint
//! (the baseline of the GRPO stage) is never removed. The random draws of a step are derived from the seed and the step
//! (see `grpo`), so the position is the whole random state.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use super::config::TrainConfig;
use super::metrics::Position;
use super::rollout::Rollout;

/// Checkpoints kept on disk (older ones are removed).
const KEEP: usize = 2;

/// A batch collected by an older policy, waiting in the lag pipeline.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PendingBatch {
    /// The policy version (GRPO steps completed) that collected it.
    pub policy_version: usize,
    /// Its rollouts.
    pub rollouts: Vec<StoredRollout>,
    /// Rollouts sampled to assemble it (dynamic sampling included).
    pub sampled: usize,
    /// Discarded episodes by cause.
    pub discarded: std::collections::BTreeMap<String, usize>,
    /// Groups kept over groups sampled.
    pub effective_fraction: f64,
}

/// A rollout as stored in `state.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredRollout {
    /// The record.
    pub record: arlbook_core::agent::EpisodeRecord,
    /// Nucleus keep sets.
    pub keep: Vec<super::sampling::KeepMask>,
    /// Entropies.
    pub entropy: Vec<f64>,
}

impl From<&Rollout> for StoredRollout {
    fn from(r: &Rollout) -> Self {
        Self {
            record: r.record.clone(),
            keep: r.keep.clone(),
            entropy: r.entropy.clone(),
        }
    }
}

impl From<StoredRollout> for Rollout {
    fn from(r: StoredRollout) -> Self {
        Self {
            record: r.record,
            keep: r.keep,
            entropy: r.entropy,
        }
    }
}

/// The JSON part of a checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct State {
    /// The run's configuration (a resumed run must use the same).
    pub config: TrainConfig,
    /// Steps completed.
    pub position: Position,
    /// Batches waiting in the lag pipeline, oldest first.
    pub pending: Vec<PendingBatch>,
    /// Whether `reference.bpk` is present.
    pub has_reference: bool,
}

/// The checkpoint folder's name for `position`.
pub fn folder_name(position: Position) -> String {
    format!(
        "{}-{:06}",
        Position::stage_name(position.stage),
        position.step
    )
}

/// `out/checkpoints`.
pub fn root(out: &Path) -> PathBuf {
    out.join("checkpoints")
}

/// The latest complete checkpoint folder under `out`, if any.
pub fn latest(out: &Path) -> Result<Option<PathBuf>> {
    let pointer = root(out).join("latest");
    match fs::read_to_string(&pointer) {
        Ok(name) => {
            let folder = root(out).join(name.trim());
            if !folder.join("state.json").is_file() {
                bail!(
                    "{} names {} which is incomplete",
                    pointer.display(),
                    folder.display()
                );
            }
            Ok(Some(folder))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", pointer.display())),
    }
}

/// Writes a checkpoint atomically: `fill` writes the tensor files into the temporary
/// folder it is given; then the state, the rename and the `latest` pointer.
pub fn save(out: &Path, state: &State, fill: impl FnOnce(&Path) -> Result<()>) -> Result<PathBuf> {
    let root = root(out);
    fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
    let name = folder_name(state.position);
    let staging = root.join(format!(".{name}.partial"));
    if staging.exists() {
        fs::remove_dir_all(&staging)?;
    }
    fs::create_dir_all(&staging)?;
    fill(&staging)?;
    fs::write(staging.join("state.json"), serde_json::to_vec(state)?)?;
    let folder = root.join(&name);
    if folder.exists() {
        fs::remove_dir_all(&folder)?;
    }
    fs::rename(&staging, &folder)?;
    let pointer_tmp = root.join(".latest.tmp");
    fs::write(&pointer_tmp, &name)?;
    fs::rename(&pointer_tmp, root.join("latest"))?;
    prune(&root, &name)?;
    Ok(folder)
}

/// Removes all but the newest [`KEEP`] checkpoints (and stray partial folders).
fn prune(root: &Path, newest: &str) -> Result<()> {
    let mut names: Vec<String> = fs::read_dir(root)?
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    for name in &names {
        if name.starts_with('.') && !name.starts_with(&format!(".{newest}")) {
            let _ = fs::remove_dir_all(root.join(name));
        }
    }
    let complete: Vec<&String> = names.iter().filter(|n| !n.starts_with('.')).collect();
    // Folder names sort by stage then step ("grpo-" after "sft-" is wrong order
    // alphabetically), so order by position instead.
    let mut ordered: Vec<(Position, &String)> = complete
        .iter()
        .filter_map(|n| parse_folder(n).map(|p| (p, *n)))
        .collect();
    ordered.sort();
    // The last SFT checkpoint stays: it is the baseline GRPO is compared against.
    let last_sft = ordered
        .iter()
        .rev()
        .find(|(p, _)| p.stage == 0)
        .map(|(_, n)| (*n).clone());
    let excess = ordered.len().saturating_sub(KEEP);
    for (_, name) in ordered.into_iter().take(excess) {
        if name != newest && Some(name) != last_sft.as_ref() {
            let _ = fs::remove_dir_all(root.join(name));
        }
    }
    Ok(())
}

fn parse_folder(name: &str) -> Option<Position> {
    let (stage, step) = name.split_once('-')?;
    let stage = match stage {
        "sft" => 0,
        "grpo" => 1,
        _ => return None,
    };
    Some(Position {
        stage,
        step: step.parse().ok()?,
    })
}

/// Reads `state.json` of a checkpoint folder.
pub fn read_state(folder: &Path) -> Result<State> {
    let path = folder.join("state.json");
    let bytes = fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_slice(&bytes).with_context(|| format!("parsing {}", path.display()))
}

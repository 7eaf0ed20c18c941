//! The names a run has on the broker.
//!
//! One run `R` owns:
//! - the stream `ARLBOOK_R_JOBS` (subject `arlbook.R.jobs`): rollout jobs, a work
//!   queue (a job leaves it when a worker acknowledges it), file storage;
//! - the stream `ARLBOOK_R_RESULTS` (subject `arlbook.R.results`): each job's group
//!   of episode records, a work queue the learner drains;
//! - the key/value bucket `arlbook_R`: `config` (the run's TOML), `learner` (the
//!   current learner's incarnation), `current` (the newest policy version's record)
//!   and `v_I_V` (the record of version `V` of incarnation `I`);
//! - the object store `arlbook_R_weights`: object `v_I_V`, the weights of version `V`.
//!
//! The bucket `arlbook_runs` holds, under `current`, the run workers follow, so a
//! worker needs only the broker's URL.

use std::path::Path;

use anyhow::{Result, bail};

/// The bucket naming the run workers follow.
pub const RUNS_BUCKET: &str = "arlbook_runs";
/// Its key.
pub const CURRENT_RUN: &str = "current";
/// The durable consumer the workers share on a run's job stream.
pub const WORKERS: &str = "workers";
/// The learner's durable consumer on a run's result stream.
pub const LEARNER: &str = "learner";
/// The key of a run's bucket holding the run's TOML.
pub const CONFIG_KEY: &str = "config";
/// The key of a run's bucket holding the current learner's incarnation.
pub const INCARNATION_KEY: &str = "learner";
/// The key of a run's bucket holding the newest policy version's record.
pub const NEWEST_VERSION_KEY: &str = "current";

/// Whether `name` can name a run: 1 to 32 letters, digits, `-` or `_`.
pub fn valid_run(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// A run name from an output folder: its last component with every other character
/// replaced by `_`, cut to 32.
pub fn run_from_folder(out: &Path) -> Result<String> {
    let base = out
        .canonicalize()
        .unwrap_or_else(|_| out.to_owned())
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(32)
        .collect();
    if !valid_run(&name) {
        bail!(
            "--out {}: no run name can be made of it; set [cluster] run",
            out.display()
        );
    }
    Ok(name)
}

/// The broker names of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunNames {
    /// The run.
    pub run: String,
}

impl RunNames {
    /// The names of run `run` (checked by [`valid_run`]).
    pub fn new(run: &str) -> Result<Self> {
        if !valid_run(run) {
            bail!("run name {run:?}: must be 1 to 32 letters, digits, '-' or '_'");
        }
        Ok(Self {
            run: run.to_owned(),
        })
    }

    /// The job stream.
    pub fn jobs_stream(&self) -> String {
        format!("ARLBOOK_{}_JOBS", self.run)
    }

    /// The job subject.
    pub fn jobs_subject(&self) -> String {
        format!("arlbook.{}.jobs", self.run)
    }

    /// The result stream.
    pub fn results_stream(&self) -> String {
        format!("ARLBOOK_{}_RESULTS", self.run)
    }

    /// The result subject.
    pub fn results_subject(&self) -> String {
        format!("arlbook.{}.results", self.run)
    }

    /// The key/value bucket.
    pub fn bucket(&self) -> String {
        format!("arlbook_{}", self.run)
    }

    /// The object store of the weights.
    pub fn weights(&self) -> String {
        format!("arlbook_{}_weights", self.run)
    }
}

/// The key and object name of version `version` of learner incarnation `incarnation`.
pub fn version_key(incarnation: u64, version: u64) -> String {
    format!("v_{incarnation}_{version}")
}

/// The message id of a job (the broker drops a second publish of the same id).
pub fn job_id(incarnation: u64, batch: u64, round: u64, group: u64, attempt: u64) -> String {
    format!("{incarnation}-{batch}-{round}-{group}-{attempt}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_names_come_from_folders_and_are_checked() {
        assert_eq!(
            run_from_folder(Path::new("/tmp/no/such/my run.v2")).unwrap(),
            "my_run_v2"
        );
        assert!(valid_run("seed-7_a"));
        assert!(!valid_run(""));
        assert!(!valid_run("a.b"));
        assert!(!valid_run(&"x".repeat(33)));
        let names = RunNames::new("r1").unwrap();
        assert_eq!(names.jobs_stream(), "ARLBOOK_r1_JOBS");
        assert_eq!(names.results_subject(), "arlbook.r1.results");
        assert_eq!(names.weights(), "arlbook_r1_weights");
        assert!(RunNames::new("a b").is_err());
        assert_eq!(version_key(2, 17), "v_2_17");
    }
}

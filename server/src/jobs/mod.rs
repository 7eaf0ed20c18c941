//! Training jobs run by `arlbook serve`: a queue of `arlbook train` processes whose
//! state lives in `SQLite` and whose output lives in one folder per job.
//!
//! - [`db`]: the `jobs` table in `<data>/arlbook.db` (WAL mode).
//! - [`runner`]: the scheduler thread: starts queued jobs as child processes (at most
//!   `--max-jobs` at a time), reaps them, cancels them, resumes interrupted ones.
//! - [`lock`]: one server per data folder; [`identity`]: each job folder's key.
//! - [`input`]: a job request (training config as JSON, optionally on top of a preset)
//!   into a validated [`TrainConfig`](arlbook_train::config::TrainConfig).
//!
//! The HTTP side of jobs (the handlers, the metrics stream, the `OpenAPI` document)
//! lives in [`crate::serve`]; this module knows nothing about HTTP.
//!
//! ## Design
//! The server never writes a job's metrics or checkpoints: the training process owns
//! its folder, exactly as `arlbook train --out <folder>` does. A restart therefore
//! resumes with `arlbook train --resume`, which already guarantees every metrics row
//! exactly once. Children exit when their standard input closes, so a server killed
//! with SIGKILL leaves no training process behind to race a resumed one.

pub mod db;
pub mod identity;
pub mod input;
pub mod lock;
pub mod runner;

use serde::Serialize;

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// Waiting for a free slot.
    Queued,
    /// A training process is working on it.
    Running,
    /// Its process stopped with the server; it resumes from its last checkpoint.
    Interrupted,
    /// Training finished.
    Succeeded,
    /// The training process exited with an error.
    Failed,
    /// Cancelled by `DELETE /api/jobs/{id}`.
    Cancelled,
}

impl JobState {
    /// Every state, for parsing and documentation.
    pub const ALL: [Self; 6] = [
        Self::Queued,
        Self::Running,
        Self::Interrupted,
        Self::Succeeded,
        Self::Failed,
        Self::Cancelled,
    ];

    /// The name stored in the database and shown in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Interrupted => "interrupted",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    /// The state called `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Whether the job will never run again.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::Cancelled)
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

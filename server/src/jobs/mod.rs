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

/// Where a job is in its life (the type the job API's views share with the notebook).
pub use arlbook_report::job::JobState;

/// Milliseconds since the Unix epoch.
pub fn now_unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

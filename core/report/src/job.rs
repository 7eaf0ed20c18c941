//! A training job as the job API shows it: `GET /api/jobs` lists [`JobView`]s
//! (`{"jobs": [...]}`, [`JobList`]), `GET /api/jobs/{id}` answers a [`JobDetail`].

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
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

impl std::fmt::Display for JobState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One job in the list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobView {
    /// Its number (positive); its folder is `dir`.
    pub id: i64,
    /// Its state.
    pub state: JobState,
    /// The preset it started from, if any.
    pub preset: Option<String>,
    /// When it was submitted (Unix milliseconds).
    pub created_unix_ms: i64,
    /// When its latest training process started (Unix milliseconds).
    pub started_unix_ms: Option<i64>,
    /// When it reached a final state (Unix milliseconds).
    pub finished_unix_ms: Option<i64>,
    /// How many times a process resumed it from a checkpoint.
    pub resumes: i64,
    /// The training process's exit code, once it exited.
    pub exit_code: Option<i64>,
    /// Why it failed (the end of its log), if it did.
    pub error: Option<String>,
    /// The process id of its latest training process.
    pub pid: Option<i64>,
    /// Its run folder (`metrics.jsonl`, `checkpoints/`, `summary.json`).
    pub dir: PathBuf,
}

/// The answer of `GET /api/jobs`: every job, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobList {
    /// The jobs.
    pub jobs: Vec<JobView>,
}

/// The answer of `GET /api/jobs/{id}`: the job with its config, its latest checkpoint
/// and its last metrics row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobDetail {
    /// What the list shows.
    #[serde(flatten)]
    pub job: JobView,
    /// The validated training config (TOML tables as objects).
    pub config: Value,
    /// Its latest complete checkpoint folder, once it has one.
    pub checkpoint: Option<PathBuf>,
    /// Its last metrics row, once it has one.
    pub last_metrics: Option<Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip_by_name_and_through_json() {
        for state in JobState::ALL {
            assert_eq!(JobState::parse(state.name()), Some(state));
            let json = serde_json::to_string(&state).unwrap();
            assert_eq!(json, format!("\"{}\"", state.name()));
            assert_eq!(serde_json::from_str::<JobState>(&json).unwrap(), state);
        }
        assert_eq!(JobState::parse("done"), None);
        let finals: Vec<_> = JobState::ALL.into_iter().filter(|s| s.is_final()).collect();
        assert_eq!(
            finals,
            [JobState::Succeeded, JobState::Failed, JobState::Cancelled]
        );
    }

    #[test]
    fn a_detail_is_the_list_view_with_three_more_fields() {
        let job = JobView {
            id: 3,
            state: JobState::Running,
            preset: Some("tiny".into()),
            created_unix_ms: 1,
            started_unix_ms: Some(2),
            finished_unix_ms: None,
            resumes: 0,
            exit_code: None,
            error: None,
            pid: Some(44),
            dir: PathBuf::from("/data/jobs/3"),
        };
        let detail = JobDetail {
            job: job.clone(),
            config: serde_json::json!({"seed": 7}),
            checkpoint: None,
            last_metrics: None,
        };
        let value = serde_json::to_value(&detail).unwrap();
        assert_eq!(value["state"], "running");
        assert_eq!(value["config"]["seed"], 7);
        assert!(value["checkpoint"].is_null() && value.get("checkpoint").is_some());
        let back: JobDetail = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(back, detail);
        // The list view reads from a detail too (extra fields are ignored).
        assert_eq!(serde_json::from_value::<JobView>(value).unwrap(), job);
    }
}

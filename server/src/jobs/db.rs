//! The `jobs` table: one row per job, in an `SQLite` file opened in WAL mode so a
//! killed server never leaves it half-written.

use std::path::Path;

use anyhow::{Context, Result};
use rusqlite::{Connection, OptionalExtension, Row, params};

use super::JobState;

/// One job as stored.
#[derive(Debug, Clone)]
pub struct JobRow {
    /// The job's number (its folder is `<data>/jobs/<id>`).
    pub id: i64,
    /// Its state.
    pub state: JobState,
    /// The validated training config, as JSON text.
    pub config_json: String,
    /// The preset it started from, if any.
    pub preset: Option<String>,
    /// When it was submitted (Unix ms).
    pub created_unix_ms: i64,
    /// When its latest process started (Unix ms).
    pub started_unix_ms: Option<i64>,
    /// When it reached a final state (Unix ms).
    pub finished_unix_ms: Option<i64>,
    /// How many times a process resumed it from a checkpoint.
    pub resumes: i64,
    /// The training process's exit code, once it exited.
    pub exit_code: Option<i64>,
    /// Why it failed (the end of its log).
    pub error: Option<String>,
    /// The process id of its latest training process.
    pub pid: Option<i64>,
    /// The job's identity, also in its folder's `job.key` (none for rows written
    /// before keys existed).
    pub job_key: Option<String>,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    state TEXT NOT NULL,
    config_json TEXT NOT NULL,
    preset TEXT,
    created_unix_ms INTEGER NOT NULL,
    started_unix_ms INTEGER,
    finished_unix_ms INTEGER,
    resumes INTEGER NOT NULL DEFAULT 0,
    exit_code INTEGER,
    error TEXT,
    pid INTEGER,
    job_key TEXT
);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs(state, id);
";

const COLUMNS: &str = "id, state, config_json, preset, created_unix_ms, started_unix_ms, \
                       finished_unix_ms, resumes, exit_code, error, pid, job_key";

fn from_row(row: &Row<'_>) -> rusqlite::Result<JobRow> {
    let state: String = row.get(1)?;
    Ok(JobRow {
        id: row.get(0)?,
        // An unknown name can only come from a newer arlbook; treat it as failed.
        state: JobState::parse(&state).unwrap_or(JobState::Failed),
        config_json: row.get(2)?,
        preset: row.get(3)?,
        created_unix_ms: row.get(4)?,
        started_unix_ms: row.get(5)?,
        finished_unix_ms: row.get(6)?,
        resumes: row.get(7)?,
        exit_code: row.get(8)?,
        error: row.get(9)?,
        pid: row.get(10)?,
        job_key: row.get(11)?,
    })
}

/// The open database.
#[derive(Debug)]
pub struct Db {
    conn: Connection,
}

impl Db {
    /// Opens (creating if needed) the database at `path`.
    pub fn open(path: &Path) -> Result<Self> {
        let conn = Connection::open(path).with_context(|| format!("opening {}", path.display()))?;
        // WAL: a commit is one append, so a SIGKILL at any instant keeps every
        // committed row; NORMAL sync is durable across process crashes.
        let mode: String =
            conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            anyhow::bail!("{} cannot use WAL journaling (got {mode})", path.display());
        }
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.execute_batch(SCHEMA)
            .with_context(|| format!("creating the tables of {}", path.display()))?;
        // A database from before job keys: add the column (its rows keep no key).
        let has_key: bool = conn.query_row(
            "SELECT COUNT(*) > 0 FROM pragma_table_info('jobs') WHERE name = 'job_key'",
            [],
            |r| r.get(0),
        )?;
        if !has_key {
            conn.execute_batch("ALTER TABLE jobs ADD COLUMN job_key TEXT")
                .with_context(|| format!("adding job keys to {}", path.display()))?;
        }
        Ok(Self { conn })
    }

    /// The journal mode in force (`wal`).
    #[cfg(test)]
    pub fn journal_mode(&self) -> Result<String> {
        Ok(self
            .conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))?)
    }

    /// Adds a queued job and returns its id.
    pub fn insert(
        &self,
        config_json: &str,
        preset: Option<&str>,
        job_key: &str,
        now: i64,
    ) -> Result<i64> {
        self.conn.execute(
            "INSERT INTO jobs (state, config_json, preset, created_unix_ms, job_key) \
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![JobState::Queued.name(), config_json, preset, now, job_key],
        )?;
        Ok(self.conn.last_insert_rowid())
    }

    /// How many jobs wait to run (queued or interrupted).
    pub fn waiting(&self) -> Result<usize> {
        let count: i64 = self.conn.query_row(
            "SELECT COUNT(*) FROM jobs WHERE state IN ('queued', 'interrupted')",
            [],
            |r| r.get(0),
        )?;
        Ok(usize::try_from(count).unwrap_or(usize::MAX))
    }

    /// The job `id`.
    pub fn get(&self, id: i64) -> Result<Option<JobRow>> {
        Ok(self
            .conn
            .query_row(
                &format!("SELECT {COLUMNS} FROM jobs WHERE id = ?1"),
                [id],
                from_row,
            )
            .optional()?)
    }

    /// Every job, oldest first.
    pub fn list(&self) -> Result<Vec<JobRow>> {
        let mut statement = self
            .conn
            .prepare(&format!("SELECT {COLUMNS} FROM jobs ORDER BY id"))?;
        let rows = statement.query_map([], from_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The next job to start: interrupted ones first (they were running), then the
    /// queue in submission order.
    pub fn next_to_start(&self) -> Result<Option<JobRow>> {
        Ok(self
            .conn
            .query_row(
                &format!(
                    "SELECT {COLUMNS} FROM jobs WHERE state IN ('interrupted', 'queued') \
                     ORDER BY state = 'queued', id LIMIT 1"
                ),
                [],
                from_row,
            )
            .optional()?)
    }

    /// Marks every running job interrupted (at start-up: their processes died with
    /// the previous server) and returns them.
    pub fn interrupt_running(&self) -> Result<Vec<JobRow>> {
        let running: Vec<JobRow> = self
            .list()?
            .into_iter()
            .filter(|j| j.state == JobState::Running)
            .collect();
        self.conn.execute(
            "UPDATE jobs SET state = 'interrupted' WHERE state = 'running'",
            [],
        )?;
        Ok(running)
    }

    /// Records that a process started on `id`.
    pub fn mark_started(&self, id: i64, pid: u32, resumed: bool, now: i64) -> Result<()> {
        self.conn.execute(
            "UPDATE jobs SET state = 'running', pid = ?2, started_unix_ms = ?3, \
             resumes = resumes + ?4 WHERE id = ?1",
            params![id, pid, now, i64::from(resumed)],
        )?;
        Ok(())
    }

    /// Moves `id` to `state` without finishing it (queued or interrupted).
    pub fn set_state(&self, id: i64, state: JobState) -> Result<()> {
        self.conn.execute(
            "UPDATE jobs SET state = ?2 WHERE id = ?1",
            params![id, state.name()],
        )?;
        Ok(())
    }

    /// Marks `id` interrupted with `error` saying why (it resumes when a slot is free).
    pub fn interrupt(&self, id: i64, error: &str) -> Result<()> {
        self.conn.execute(
            "UPDATE jobs SET state = 'interrupted', error = ?2 WHERE id = ?1",
            params![id, error],
        )?;
        Ok(())
    }

    /// Records a final state.
    pub fn finish(
        &self,
        id: i64,
        state: JobState,
        exit_code: Option<i32>,
        error: Option<&str>,
        now: i64,
    ) -> Result<()> {
        self.conn.execute(
            "UPDATE jobs SET state = ?2, exit_code = ?3, error = ?4, finished_unix_ms = ?5 \
             WHERE id = ?1",
            params![id, state.name(), exit_code, error, now],
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("arlbook-db-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn jobs_survive_reopening_and_running_ones_become_interrupted() {
        let dir = scratch("reopen");
        let path = dir.join("arlbook.db");
        {
            let db = Db::open(&path).unwrap();
            assert_eq!(db.journal_mode().unwrap(), "wal");
            let a = db.insert("{}", Some("cpu-small"), "key-a", 1).unwrap();
            let b = db.insert("{}", None, "key-b", 2).unwrap();
            db.mark_started(a, 42, false, 3).unwrap();
            assert_eq!(db.next_to_start().unwrap().unwrap().id, b);
        }
        let db = Db::open(&path).unwrap();
        let interrupted = db.interrupt_running().unwrap();
        assert_eq!(interrupted.len(), 1);
        assert_eq!(interrupted[0].pid, Some(42));
        let jobs = db.list().unwrap();
        assert_eq!(jobs[0].state, JobState::Interrupted);
        assert_eq!(jobs[1].state, JobState::Queued);
        // The interrupted job goes before the older queue.
        assert_eq!(db.next_to_start().unwrap().unwrap().id, jobs[0].id);
        db.finish(jobs[0].id, JobState::Failed, Some(1), Some("boom"), 9)
            .unwrap();
        let failed = db.get(jobs[0].id).unwrap().unwrap();
        assert_eq!(failed.state, JobState::Failed);
        assert_eq!(failed.error.as_deref(), Some("boom"));
        assert!(db.get(999).unwrap().is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

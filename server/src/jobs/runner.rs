//! The scheduler: one thread that reaps finished training processes and starts
//! waiting jobs while fewer than `max_jobs` run.
//!
//! Every change of state happens under one mutex that also guards the database
//! connection and the table of child processes, so a cancel can never race a start.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::JobState;
use super::db::{Db, JobRow};
use super::identity;
use super::now_unix_ms;
use arlbook_train::run::checkpoint;

/// How often the scheduler looks at its children when nothing wakes it.
const TICK: Duration = Duration::from_millis(200);
/// How long a restarted server waits for a previous server's training processes to
/// notice that their parent is gone.
const STALE_PROCESS_WAIT: Duration = Duration::from_secs(30);
/// How much of a failed job's log is kept as its error.
const ERROR_TAIL_BYTES: usize = 2000;

/// A training process the scheduler watches.
#[derive(Debug)]
struct Running {
    /// Its standard input stays open (and unread) while the server lives.
    child: Child,
}

#[derive(Debug)]
struct Inner {
    db: Db,
    running: HashMap<i64, Running>,
    stopping: bool,
}

/// Why a job was not queued.
#[derive(Debug)]
pub enum SubmitError {
    /// `max_queued` jobs already wait.
    QueueFull(usize),
    /// The database or the job folder failed.
    Failed(anyhow::Error),
}

impl From<anyhow::Error> for SubmitError {
    fn from(err: anyhow::Error) -> Self {
        Self::Failed(err)
    }
}

/// What `cancel` did.
#[derive(Debug)]
pub enum CancelOutcome {
    /// No such job.
    NotFound,
    /// The job had already finished in this state.
    AlreadyFinal(JobState),
    /// The job is now cancelled.
    Cancelled(JobRow),
}

/// The signal that ended a process, if one did.
#[cfg(unix)]
fn killing_signal(status: std::process::ExitStatus) -> Option<i32> {
    std::os::unix::process::ExitStatusExt::signal(&status)
}

/// The signal that ended a process, if one did (never, off Unix).
#[cfg(not(unix))]
fn killing_signal(_status: std::process::ExitStatus) -> Option<i32> {
    None
}

/// Resumes after a trainer killed by a signal before its job counts as failed.
pub const MAX_RESUMES: i64 = 3;

/// How much the queue takes on.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Training processes at the same time.
    pub max_jobs: usize,
    /// Jobs waiting (queued or interrupted) beyond which a submission is refused.
    pub max_queued: usize,
}

/// The job queue and its training processes.
#[derive(Debug)]
pub struct Runner {
    inner: Mutex<Inner>,
    wake: Condvar,
    data: PathBuf,
    exe: PathBuf,
    max_jobs: usize,
    max_queued: usize,
}

impl Runner {
    /// Opens `<data>/arlbook.db`, marks the jobs a previous server left running as
    /// interrupted, and starts the scheduler thread, which resumes them first.
    pub fn open(data: &Path, limits: Limits, exe: PathBuf) -> Result<Arc<Self>> {
        std::fs::create_dir_all(data.join("jobs"))
            .with_context(|| format!("creating {}", data.join("jobs").display()))?;
        let db = Db::open(&data.join("arlbook.db"))?;
        let stale = db.interrupt_running()?;
        if !stale.is_empty() {
            eprintln!(
                "{} job(s) were running when the server stopped; resuming them",
                stale.len()
            );
        }
        let runner = Arc::new(Self {
            inner: Mutex::new(Inner {
                db,
                running: HashMap::new(),
                stopping: false,
            }),
            wake: Condvar::new(),
            data: data.to_owned(),
            exe,
            max_jobs: limits.max_jobs.max(1),
            max_queued: limits.max_queued,
        });
        let scheduler = Arc::clone(&runner);
        std::thread::Builder::new()
            .name("arlbook-jobs".to_owned())
            .spawn(move || {
                for job in &stale {
                    wait_for_stale_process(job, &scheduler.job_dir(job.id));
                }
                scheduler.schedule();
            })
            .context("starting the job scheduler")?;
        Ok(runner)
    }

    /// The folder of job `id`.
    pub fn job_dir(&self, id: i64) -> PathBuf {
        self.data.join("jobs").join(id.to_string())
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves consistent rows (each change is one
        // SQL statement), so keep going with the data.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues a job: writes `<dir>/config.toml`, then the row; refused when
    /// `max_queued` jobs already wait.
    pub fn submit(
        &self,
        config_toml: &str,
        config_json: &str,
        preset: Option<&str>,
    ) -> Result<JobRow, SubmitError> {
        let inner = self.lock();
        let waiting = inner.db.waiting().with_context(|| self.database())?;
        if waiting >= self.max_queued {
            return Err(SubmitError::QueueFull(waiting));
        }
        let key = identity::new_key()?;
        let id = inner
            .db
            .insert(config_json, preset, &key, now_unix_ms())
            .with_context(|| self.database())?;
        let dir = self.job_dir(id);
        let written = identity::claim(&dir, &key, now_unix_ms()).and_then(|aside| {
            if let Some(aside) = aside {
                eprintln!(
                    "job {id}: its folder held another run (a lost database?); moved it to {}",
                    aside.display()
                );
            }
            std::fs::write(dir.join("config.toml"), config_toml)
                .with_context(|| format!("writing {}", dir.join("config.toml").display()))
        });
        if let Err(err) = written {
            let message = format!("{err:#}");
            inner
                .db
                .finish(id, JobState::Failed, None, Some(&message), now_unix_ms())?;
            return Err(anyhow::anyhow!(message).into());
        }
        let row = inner.db.get(id)?.context("the job vanished after insert")?;
        drop(inner);
        self.wake.notify_all();
        Ok(row)
    }

    /// The job `id`.
    pub fn get(&self, id: i64) -> Result<Option<JobRow>> {
        self.lock().db.get(id).with_context(|| self.database())
    }

    /// Names the database file, for an error's context.
    fn database(&self) -> String {
        format!(
            "the job database {}",
            self.data.join("arlbook.db").display()
        )
    }

    /// Every job.
    pub fn list(&self) -> Result<Vec<JobRow>> {
        self.lock().db.list().with_context(|| self.database())
    }

    /// Cancels `id`: a waiting job never starts, a running one's process is killed.
    pub fn cancel(&self, id: i64) -> Result<CancelOutcome> {
        let mut inner = self.lock();
        let Some(job) = inner.db.get(id).with_context(|| self.database())? else {
            return Ok(CancelOutcome::NotFound);
        };
        if job.state.is_final() {
            return Ok(CancelOutcome::AlreadyFinal(job.state));
        }
        let mut exit_code = None;
        if let Some(mut running) = inner.running.remove(&id) {
            // Already exited on its own is fine: it is cancelled all the same.
            let _ = running.child.kill();
            exit_code = running.child.wait().ok().and_then(|s| s.code());
        }
        inner
            .db
            .finish(id, JobState::Cancelled, exit_code, None, now_unix_ms())?;
        let row = inner.db.get(id)?.context("the job vanished")?;
        drop(inner);
        self.wake.notify_all();
        Ok(CancelOutcome::Cancelled(row))
    }

    /// Stops the scheduler and kills every training process; their jobs become
    /// interrupted and resume when a server next opens this data folder.
    pub fn shutdown(&self) {
        let mut inner = self.lock();
        inner.stopping = true;
        let running: Vec<(i64, Running)> = inner.running.drain().collect();
        for (id, mut job) in running {
            let _ = job.child.kill();
            let _ = job.child.wait();
            if let Err(err) = inner.db.set_state(id, JobState::Interrupted) {
                eprintln!("error: marking job {id} interrupted: {err:#}");
            }
        }
        drop(inner);
        self.wake.notify_all();
    }

    /// The scheduler loop.
    fn schedule(&self) {
        let mut inner = self.lock();
        while !inner.stopping {
            if let Err(err) = self.tick(&mut inner) {
                eprintln!("error: job scheduler, {}: {err:#}", self.database());
            }
            inner = self
                .wake
                .wait_timeout(inner, TICK)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    fn tick(&self, inner: &mut Inner) -> Result<()> {
        let mut done = Vec::new();
        for (&id, job) in &mut inner.running {
            match job.child.try_wait() {
                Ok(Some(status)) => done.push((id, Some(status))),
                Ok(None) => {}
                Err(_) => done.push((id, None)),
            }
        }
        for (id, status) in done {
            inner.running.remove(&id);
            let code = status.and_then(|s| s.code());
            if status.is_some_and(|s| s.success()) {
                inner
                    .db
                    .finish(id, JobState::Succeeded, code, None, now_unix_ms())?;
            } else if let Some(reason) = self.resumable_kill(&inner.db, id, status)? {
                inner.db.interrupt(id, &reason)?;
            } else {
                let tail = log_tail(&self.job_dir(id).join("train.log"));
                inner
                    .db
                    .finish(id, JobState::Failed, code, Some(&tail), now_unix_ms())?;
            }
        }
        while inner.running.len() < self.max_jobs {
            let Some(job) = inner.db.next_to_start()? else {
                break;
            };
            let dir = self.job_dir(job.id);
            let resume = matches!(checkpoint::latest(&dir), Ok(Some(_)));
            let started = identity::verify(&dir, job.job_key.as_deref(), resume)
                .and_then(|()| self.spawn(&dir, resume));
            match started {
                Ok(child) => {
                    inner
                        .db
                        .mark_started(job.id, child.id(), resume, now_unix_ms())?;
                    inner.running.insert(job.id, Running { child });
                }
                Err(err) => {
                    let message = format!("not started: {err:#}");
                    inner.db.finish(
                        job.id,
                        JobState::Failed,
                        None,
                        Some(&message),
                        now_unix_ms(),
                    )?;
                }
            }
        }
        Ok(())
    }

    /// Why job `id`'s trainer, ended by `status`, should be resumed, if it should: it
    /// was killed by a signal (the OOM killer, a `kill -9`, a reboot of its session)
    /// rather than failing on its own, it has a checkpoint to resume from, and it has
    /// been resumed fewer than [`MAX_RESUMES`] times (a job killed at every start
    /// fails instead of looping).
    fn resumable_kill(
        &self,
        db: &super::db::Db,
        id: i64,
        status: Option<std::process::ExitStatus>,
    ) -> Result<Option<String>> {
        let Some(signal) = status.and_then(killing_signal) else {
            return Ok(None);
        };
        let has_checkpoint = matches!(checkpoint::latest(&self.job_dir(id)), Ok(Some(_)));
        let resumes = db.get(id)?.map_or(i64::MAX, |job| job.resumes);
        if !has_checkpoint || resumes >= MAX_RESUMES {
            return Ok(None);
        }
        Ok(Some(format!(
            "the training process was killed by signal {signal}; resuming from its last \
             checkpoint (resume {} of at most {MAX_RESUMES})",
            resumes + 1
        )))
    }

    /// `arlbook train` on the job folder: fresh, or `--resume` from its checkpoint.
    fn spawn(&self, dir: &Path, resume: bool) -> Result<Child> {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("train.log"))
            .with_context(|| format!("opening {}", dir.join("train.log").display()))?;
        let mut command = Command::new(&self.exe);
        command.arg("train");
        if resume {
            command.arg("--resume");
        } else {
            command.arg("--config").arg(dir.join("config.toml"));
        }
        command
            .arg("--out")
            .arg(dir)
            .arg("--exit-on-stdin-eof")
            .stdin(Stdio::piped())
            .stdout(log.try_clone()?)
            .stderr(log);
        command
            .spawn()
            .with_context(|| format!("running {}", self.exe.display()))
    }
}

/// The end of a log file, as text.
fn log_tail(path: &Path) -> String {
    let Ok(bytes) = std::fs::read(path) else {
        return "the training process failed (no log)".to_owned();
    };
    let start = bytes.len().saturating_sub(ERROR_TAIL_BYTES);
    // The progress line redraws with carriage returns; keep the last drawing only.
    String::from_utf8_lossy(&bytes[start..])
        .rsplit('\r')
        .next()
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// Waits until the training process a previous server started for `job` is gone
/// (it exits when its standard input closes), so two processes never write one
/// folder. A process id reused by an unrelated program does not match `dir`.
fn wait_for_stale_process(job: &JobRow, dir: &Path) {
    let Some(pid) = job.pid else { return };
    let cmdline = PathBuf::from(format!("/proc/{pid}/cmdline"));
    let needle = dir.to_string_lossy().into_owned();
    let deadline = Instant::now() + STALE_PROCESS_WAIT;
    while Instant::now() < deadline {
        let alive = File::open(&cmdline)
            .and_then(|mut f| {
                let mut text = String::new();
                std::io::Read::read_to_string(&mut f, &mut text).map(|_| text)
            })
            .is_ok_and(|text| text.contains(&needle));
        if !alive {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!(
        "warning: the previous training process {pid} of job {} is still alive",
        job.id
    );
}

//! What the served chapter shares between the form, the job list and the chart: the
//! jobs, the watched job and its stream, the rows received, the bearer token.

use leptos::prelude::*;
use leptos::task::spawn_local;

use super::http;
use super::stream::{MetricsStream, StreamEvent};
use crate::chapters::live::jobs::{self, JobView};
use crate::chapters::live::metrics::{Row, Run};
use crate::web::browser;

/// The URL query key holding the watched job's id.
pub const JOB_KEY: &str = "job";

/// Where the watched job's stream is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamStatus {
    /// `idle`, `connecting`, `open`, `retrying`, `ended` or `error` (the element's
    /// `data-state`).
    pub state: &'static str,
    /// The same in words.
    pub text: String,
}

impl StreamStatus {
    fn new(state: &'static str, text: impl Into<String>) -> Self {
        Self {
            state,
            text: text.into(),
        }
    }
}

/// The served chapter's shared state (signals, so it is `Copy`).
#[derive(Clone, Copy)]
pub struct Session {
    /// The rows of the watched job.
    pub run: RwSignal<Run>,
    /// The jobs, newest first.
    pub jobs: RwSignal<Vec<JobView>>,
    /// An error of the job list or of a cancellation.
    pub jobs_error: RwSignal<Option<String>>,
    /// The watched job.
    pub watched: RwSignal<Option<i64>>,
    /// Its stream's status.
    pub status: RwSignal<StreamStatus>,
    /// The bearer token typed in the form (may be empty).
    pub token: RwSignal<String>,
    stream: StoredValue<Option<MetricsStream>, LocalStorage>,
}

impl Session {
    /// A session drawing into `run`.
    pub fn new(run: RwSignal<Run>) -> Self {
        Self {
            run,
            jobs: RwSignal::new(Vec::new()),
            jobs_error: RwSignal::new(None),
            watched: RwSignal::new(None),
            status: RwSignal::new(StreamStatus::new(
                "idle",
                "No job watched: start one, or press Watch on a job below.",
            )),
            token: RwSignal::new(String::new()),
            stream: StoredValue::new_local(None),
        }
    }

    /// The job id in the page's URL (`?job=ID`), if any.
    pub fn job_in_url() -> Option<i64> {
        browser::query_pairs()
            .into_iter()
            .find(|(key, _)| key == JOB_KEY)
            .and_then(|(_, value)| value.parse().ok())
            .filter(|id| *id > 0)
    }

    /// Watches job `id`: closes any previous stream, clears the rows, writes the id
    /// into the URL and opens the job's metrics stream.
    pub fn watch(self, id: i64) {
        self.stream.set_value(None);
        self.run.set(Run::default());
        self.watched.set(Some(id));
        browser::write_query(JOB_KEY, vec![(JOB_KEY.to_owned(), id.to_string())]);
        self.status.set(StreamStatus::new(
            "connecting",
            format!("Connecting to job {id}…"),
        ));
        match MetricsStream::open(id, move |event| self.on_stream(id, event)) {
            Ok(stream) => self.stream.set_value(Some(stream)),
            Err(message) => self.status.set(StreamStatus::new("error", message)),
        }
    }

    fn on_stream(self, id: i64, event: StreamEvent) {
        match event {
            StreamEvent::Opened => {
                // Every connection replays the file from its first row.
                self.run.set(Run::default());
                self.status.set(StreamStatus::new(
                    "open",
                    format!("Job {id}: receiving rows."),
                ));
            }
            StreamEvent::Row(text) => match Row::parse(&text) {
                Ok(row) => self.run.update(|run| run.push(row)),
                Err(message) => self.status.set(StreamStatus::new(
                    "error",
                    format!("Job {id}: a row could not be read ({message})."),
                )),
            },
            StreamEvent::End(state) => {
                self.status.set(StreamStatus::new(
                    "ended",
                    format!("Job {id} {state}; every row has arrived."),
                ));
                self.refresh_jobs();
            }
            StreamEvent::Error { retrying } => {
                let status = if retrying {
                    StreamStatus::new("retrying", format!("Job {id}: connection lost, retrying…"))
                } else {
                    StreamStatus::new("error", format!("Job {id}: the metrics stream closed."))
                };
                self.status.set(status);
            }
        }
    }

    /// Reads the job list again.
    pub fn refresh_jobs(self) {
        spawn_local(async move {
            let listed = http::get("/api/jobs").await.and_then(|answer| {
                if answer.ok() {
                    jobs::parse_jobs(&answer.body)
                } else {
                    let err = jobs::api_error(answer.status, &answer.body);
                    Err(err.to_string())
                }
            });
            match listed {
                Ok(list) => {
                    if self.jobs.with_untracked(|old| *old != list) {
                        self.jobs.set(list);
                    }
                    if self.jobs_error.with_untracked(Option::is_some) {
                        self.jobs_error.set(None);
                    }
                }
                Err(message) => self
                    .jobs_error
                    .set(Some(format!("Listing jobs failed: {message}"))),
            }
        });
    }

    /// Cancels job `id` (`DELETE /api/jobs/{id}`, with the token).
    pub fn cancel(self, id: i64) {
        let token = self.token.get_untracked();
        spawn_local(async move {
            let answer = http::send("DELETE", &format!("/api/jobs/{id}"), None, &token).await;
            match answer {
                Ok(answer) if answer.ok() => self.jobs_error.set(None),
                Ok(answer) => {
                    let err = jobs::api_error(answer.status, &answer.body);
                    self.jobs_error.set(Some(format!(
                        "Cancelling job {id} failed ({}): {}",
                        err.field, err.message
                    )));
                }
                Err(message) => self
                    .jobs_error
                    .set(Some(format!("Cancelling job {id} failed: {message}"))),
            }
            self.refresh_jobs();
        });
    }
}

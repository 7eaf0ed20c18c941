//! The job list: each job's id, preset, state, and Watch and Cancel buttons. Rows are
//! keyed by job id, so a refresh that only changes a state keeps the buttons (and the
//! keyboard focus on them) in place. A finished job's Cancel button is marked
//! `aria-disabled` rather than `disabled`: a disabled button drops the keyboard focus
//! the reader had on it when the cancellation went through.

use leptos::prelude::*;

use super::session::Session;
use crate::chapters::live::jobs::{JobState, JobView};

/// `HH:MM:SS` in the reader's time zone.
fn local_time(unix_ms: i64) -> String {
    let date = js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(unix_ms as f64));
    String::from(date.to_locale_time_string("en-GB"))
}

/// One job's row.
#[component]
fn JobRow(job: JobView, session: Session) -> impl IntoView {
    let id = job.id;
    let state = move || {
        session
            .jobs
            .with(|jobs| jobs.iter().find(|j| j.id == id).map(|j| j.state))
    };
    let name = move || state().map(JobState::name).unwrap_or_default();
    let is_final = move || state().is_some_and(JobState::is_final);
    let watched = move || session.watched.get() == Some(id);
    view! {
        <li id=format!("live-job-{id}") class="live-job" class:watched=watched>
            <span class="live-job-name">{format!("job {id}")}</span>
            <span class="live-job-preset">{job.preset.clone().unwrap_or_else(|| "custom".to_owned())}</span>
            <span class="live-job-time">{local_time(job.created_unix_ms)}</span>
            <span class="badge" id=format!("live-job-{id}-state") data-state=name>{name}</span>
            <span class="live-job-buttons">
                <button
                    type="button"
                    id=format!("live-job-{id}-watch")
                    aria-pressed=move || watched().to_string()
                    on:click=move |_| session.watch(id)
                >
                    "Watch"
                </button>
                <button
                    type="button"
                    id=format!("live-job-{id}-cancel")
                    aria-disabled=move || is_final().to_string()
                    on:click=move |_| {
                        if !is_final() {
                            session.cancel(id);
                        }
                    }
                >
                    "Cancel"
                </button>
            </span>
        </li>
    }
}

/// The list of jobs, newest first.
#[component]
pub fn JobList(session: Session) -> impl IntoView {
    view! {
        <section class="live-jobs" aria-labelledby="live-jobs-title">
            <h3 id="live-jobs-title">"Jobs"</h3>
            <p class="error" id="live-jobs-error" role="alert" hidden=move || session.jobs_error.with(Option::is_none)>
                {move || session.jobs_error.get().unwrap_or_default()}
            </p>
            <p class="summary" hidden=move || session.jobs.with(|j| !j.is_empty())>
                "No jobs on this server yet."
            </p>
            <ul class="live-job-list">
                <For
                    each=move || session.jobs.get()
                    key=|job| job.id
                    children=move |job| view! { <JobRow job=job session=session/> }
                />
            </ul>
        </section>
    }
}

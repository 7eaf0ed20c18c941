//! The live-training chapter's panel (wasm32 only). It first asks `GET /api/health`:
//! with an `arlbook serve` behind the page it shows the start form, the job list and
//! the watched job's streamed metrics; without one (static files) it says so and
//! charts the recorded run shipped in the bundle.
//!
//! Element ids for tests: `live-mode` (`data-mode`: `checking`, `server` or
//! `recorded`), the form (`live-preset`, `live-seed`, `live-sft-steps`,
//! `live-recovery-steps`, `live-grpo-steps`, `live-token`, `live-start`, `live-error`
//! with `data-field`), the jobs (`live-job-{id}`, `-state` with `data-state`, `-watch`, `-cancel`), the
//! stream (`live-stream`: `data-state`, `data-job`), the chart (`live-canvas`, hidden with
//! `live-empty` shown until the run has rows) and the
//! readouts (`live-rows`, `live-step`, `live-success`, each with `data-value`).

use std::time::Duration;

use leptos::prelude::*;
use leptos::task::spawn_local;

mod chart_view;
mod form;
mod http;
mod job_list;
mod session;
mod stream;

use crate::chapters::live::RECORDED_RUN;
use crate::chapters::live::metrics::Run;
use chart_view::LiveChart;
use form::JobForm;
use job_list::JobList;
use session::Session;

/// How often the job list is read again.
const JOBS_REFRESH: Duration = Duration::from_secs(2);

/// Whether a server is behind the page.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Mode {
    Checking,
    Server,
    Recorded,
}

impl Mode {
    fn name(&self) -> &'static str {
        match self {
            Self::Checking => "checking",
            Self::Server => "server",
            Self::Recorded => "recorded",
        }
    }
}

/// The panel.
#[component]
pub fn LiveTraining() -> impl IntoView {
    let mode = RwSignal::new(Mode::Checking);
    let run = RwSignal::new(Run::default());
    spawn_local(async move {
        mode.set(if http::server_is_up().await {
            Mode::Server
        } else {
            Mode::Recorded
        });
    });
    view! {
        <section class="figure live" id="live-training-panel" aria-label="Live training">
            <p class="live-mode" id="live-mode" data-mode=move || mode.with(Mode::name)>
                {move || match mode.get() {
                    Mode::Checking => "Looking for a training server…",
                    Mode::Server => "Connected to the arlbook server: runs start and stream from here.",
                    Mode::Recorded => "No training server answered (this page is static files), so \
                                       the chart shows a recorded run.",
                }}
            </p>
            {move || match mode.get() {
                Mode::Checking => ().into_any(),
                Mode::Server => view! { <Served run=run/> }.into_any(),
                Mode::Recorded => view! { <Recorded run=run/> }.into_any(),
            }}
            <LiveChart run=run/>
        </section>
    }
}

/// Static mode: the recorded run.
#[component]
fn Recorded(run: RwSignal<Run>) -> impl IntoView {
    let parsed = Run::from_jsonl(RECORDED_RUN);
    let error = parsed.as_ref().err().cloned();
    let rl_steps = parsed.as_ref().map_or(0, Run::last_step);
    if let Ok(recorded) = parsed {
        run.set(recorded);
    }
    view! {
        <p class="summary">
            "Recorded with " <code>"arlbook train --config configs/cpu-small.toml --seed 7"</code>
            {format!(" on a 2-core CPU: 6,000 SFT steps (every tenth shown), then {rl_steps} GRPO steps with validation every 25. ")}
            "Run " <code>"arlbook serve"</code> " and open this chapter from it to start and watch runs of your own."
        </p>
        {error.map(|e| view! { <p class="error">{format!("The recorded run could not be read: {e}")}</p> })}
    }
}

/// Server mode: the form, the jobs, the stream's status.
#[component]
fn Served(run: RwSignal<Run>) -> impl IntoView {
    let session = Session::new(run);
    session.refresh_jobs();
    if let Ok(handle) = set_interval_with_handle(move || session.refresh_jobs(), JOBS_REFRESH) {
        on_cleanup(move || handle.clear());
    }
    if let Some(id) = Session::job_in_url() {
        session.watch(id);
    }
    let status = session.status;
    view! {
        <div class="live-columns">
            <JobForm session=session/>
            <JobList session=session/>
        </div>
        <p
            class="live-stream"
            id="live-stream"
            role="status"
            data-state=move || status.with(|s| s.state)
            data-job=move || session.watched.get().map(|id| id.to_string()).unwrap_or_default()
        >
            {move || status.with(|s| s.text.clone())}
        </p>
    }
}

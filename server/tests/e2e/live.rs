//! The live-training chapter against the real server and without one.
//!
//! With `arlbook serve`: the chapter finds the server, lists the presets, starts a tiny
//! job from its form (4 SFT steps, no recovery steps, 1 GRPO step of `cpu-small`),
//! follows its metrics stream to the end, and shows exactly the rows the job wrote. From plain static files
//! (no API): it says so and charts the recorded run bundled with the app.

use std::time::Duration;

use arlbook_tests::browser::Gpu;
use arlbook_tests::cli::workspace_root;
use arlbook_tests::http;
use arlbook_tests::webdriver::Browser;
use serde_json::{Value, json};

use super::{Checks, web_dir};

const PAGE: &str = "/chapter/live-training";
/// Loading the page and asking the server whether it is there.
const SETTLE: Duration = Duration::from_secs(30);
/// A 5-step job on a loaded 2-core machine, with its process start-up.
const JOB: Duration = Duration::from_secs(600);

/// Waits until the chapter has decided whether a server is there; returns the mode.
fn mode(browser: &Browser) -> Option<String> {
    browser
        .wait_for(
            "const e = document.getElementById('live-mode'); \
             return e !== null && e.dataset.mode !== 'checking' ? e.dataset.mode : null;",
            &[],
            SETTLE,
        )?
        .as_str()
        .map(str::to_owned)
}

/// What the test types into the form: a job of a few seconds.
const TINY_JOB: [(&str, &str); 3] = [
    ("live-sft-steps", "4"),
    ("live-recovery-steps", "0"),
    ("live-grpo-steps", "1"),
];

/// Types [`TINY_JOB`] into the form and turns the selection on validation off.
fn fill_tiny_job(browser: &Browser, checks: &mut Checks) {
    for (id, value) in TINY_JOB {
        match browser.find(id, SETTLE) {
            Some(field) => browser.send_keys(&field, value),
            None => checks.failures.push(format!("{PAGE}: no field {id}")),
        }
    }
    // No checkpoint selection on validation: it would score hundreds of episodes.
    let chosen = browser.execute(
        "const s = document.getElementById('live-selection'); if (!s) return false; \
         s.value = 'off'; s.dispatchEvent(new Event('change', {bubbles: true})); return true;",
        &[],
    );
    if chosen != Value::Bool(true) {
        checks
            .failures
            .push(format!("{PAGE}: no select live-selection"));
    }
}

/// Before any job is watched: one line instead of a chart of empty panels.
fn note_stands_in_for_the_empty_chart(browser: &Browser, checks: &mut Checks) {
    let waiting = browser.execute(
        "const e = document.getElementById('live-empty'); \
         const c = document.getElementById('live-canvas'); \
         return e !== null && c !== null && !e.hidden && c.hidden;",
        &[],
    );
    if waiting != Value::Bool(true) {
        checks.failures.push(format!(
            "{PAGE}: with no job watched, the chart is shown empty instead of the note"
        ));
    }
}

/// Served by `arlbook serve`: a job started from the form is streamed to its end.
pub fn a_job_started_from_the_page_streams_to_its_end(checks: &mut Checks) {
    let browser = Browser::start(Gpu::Disabled, 1100, 1400);
    browser.goto(&format!("{}{PAGE}", checks.base));
    let found = mode(&browser);
    if found.as_deref() != Some("server") {
        checks
            .failures
            .push(format!("{PAGE}: served by arlbook, the mode is {found:?}"));
        return;
    }
    let presets = browser.wait_for(
        "return document.querySelectorAll('#live-preset option').length || null;",
        &[],
        SETTLE,
    );
    if presets.is_none() {
        checks.failures.push(format!("{PAGE}: no presets listed"));
        return;
    }
    note_stands_in_for_the_empty_chart(&browser, checks);
    fill_tiny_job(&browser, checks);
    let Some(start) = browser.find("live-start", SETTLE) else {
        checks.failures.push(format!("{PAGE}: no start button"));
        return;
    };
    browser.click(&start);
    let job = browser.wait_for(
        "const e = document.getElementById('live-stream'); \
         return e !== null && e.dataset.job ? e.dataset.job : null;",
        &[],
        SETTLE,
    );
    let Some(job) = job.and_then(|v| v.as_str().map(str::to_owned)) else {
        let error = browser.execute(
            "const e = document.getElementById('live-error'); return e && e.textContent;",
            &[],
        );
        checks.failures.push(format!(
            "{PAGE}: starting a job watched nothing (error: {error})"
        ));
        return;
    };
    let ended = browser.wait_for(
        "const e = document.getElementById('live-stream'); \
         return e !== null && e.dataset.state === 'ended';",
        &[],
        JOB,
    );
    if ended.is_none() {
        let state = browser.data_attribute("live-stream", "state");
        checks.failures.push(format!(
            "{PAGE}: job {job}'s stream did not end (state {state:?})"
        ));
        return;
    }
    // The job's own record: its state and the rows it wrote.
    let (status, body) = http::request(
        checks.base.trim_start_matches("http://"),
        "GET",
        &format!("/api/jobs/{job}"),
        &[],
        b"",
    );
    let record: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let dir = record["dir"].as_str().unwrap_or_default();
    let rows: Vec<Value> = std::fs::read_to_string(format!("{dir}/metrics.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    if status != 200 || record["state"] != "succeeded" || rows.is_empty() {
        checks.failures.push(format!(
            "{PAGE}: job {job} is {} with {} rows ({status})",
            record["state"],
            rows.len()
        ));
        return;
    }
    let shown_state = browser.wait_for(
        "const e = document.getElementById(arguments[0]); \
         return e !== null && e.dataset.state === 'succeeded';",
        &[json!(format!("live-job-{job}-state"))],
        SETTLE,
    );
    if shown_state.is_none() {
        checks.failures.push(format!(
            "{PAGE}: the job list does not show job {job} succeeded"
        ));
    }
    let last_step = rows
        .iter()
        .rev()
        .find_map(|r| r["step"].as_f64())
        .unwrap_or(f64::NAN);
    for (id, want) in [("live-rows", rows.len() as f64), ("live-step", last_step)] {
        let got = browser.readout(id);
        if got != Some(want) {
            checks
                .failures
                .push(format!("{PAGE}: {id} = {got:?}, the job wrote {want}"));
        }
    }
    let search = browser.execute("return location.search;", &[]);
    if !search
        .as_str()
        .unwrap_or_default()
        .contains(&format!("job={job}"))
    {
        checks
            .failures
            .push(format!("{PAGE}: the URL {search} does not name job {job}"));
    }
    eprintln!(
        "live chapter: job {job} started from the page streamed {} rows to its end",
        rows.len()
    );
}

/// From static files: the chapter says there is no server and shows the recorded run.
pub fn without_a_server_the_recorded_run_is_shown(checks: &mut Checks) {
    let addr = http::serve_static(&web_dir());
    let browser = Browser::start(Gpu::Disabled, 1100, 1400);
    browser.goto(&format!("http://{addr}{PAGE}"));
    let found = mode(&browser);
    if found.as_deref() != Some("recorded") {
        checks
            .failures
            .push(format!("static {PAGE}: the mode is {found:?}"));
        return;
    }
    let recorded = std::fs::read_to_string(
        workspace_root()
            .join("app")
            .join("data")
            .join("recorded-run.jsonl"),
    )
    .unwrap_or_default();
    let rows = recorded.lines().filter(|l| !l.trim().is_empty()).count() as f64;
    let drawn = browser.wait_for(
        "const e = document.getElementById('live-rows'); \
         return e !== null && Number(e.dataset.value) === arguments[0];",
        &[json!(rows)],
        SETTLE,
    );
    if drawn.is_none() {
        let got = browser.readout("live-rows");
        checks.failures.push(format!(
            "static {PAGE}: live-rows = {got:?}, the recording has {rows}"
        ));
    }
    // The recorded run's chart: its labels inside the canvas and apart, as a figure's.
    let labels = browser.wait_for(
        &format!(
            "{}\nconst c = document.getElementById('live-canvas'); \
             return c !== null && c.dataset.labels ? labelProblems(c, 'live-canvas') : null;",
            super::sweep::LABELS
        ),
        &[],
        SETTLE,
    );
    match labels {
        Some(Value::Array(problems)) => checks.failures.extend(
            problems
                .iter()
                .map(|p| format!("static {PAGE}: {}", p.as_str().unwrap_or_default())),
        ),
        other => checks.failures.push(format!(
            "static {PAGE}: the chart noted no labels ({other:?})"
        )),
    }
    let start = browser.execute(
        "return document.getElementById('live-start') !== null;",
        &[],
    );
    if start == Value::Bool(true) {
        checks
            .failures
            .push(format!("static {PAGE}: a start button without a server"));
    }
}

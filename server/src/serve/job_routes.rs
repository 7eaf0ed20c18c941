//! The job API's handlers. Errors are `{"error": {"field", "message"}}`.

use std::path::PathBuf;
use std::sync::Arc;

use arlbook_core::FieldError;
use arlbook_report::job::{JobDetail, JobList, JobView};
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::watch;

use super::{error_response, metrics_stream};
use crate::jobs::db::JobRow;
use crate::jobs::input;
use crate::jobs::runner::{CancelOutcome, Runner, SubmitError};
use arlbook_train::run::checkpoint;

/// What the job handlers share.
#[derive(Debug, Clone)]
pub struct JobsState {
    /// The queue.
    pub runner: Arc<Runner>,
    /// Where presets (`<name>.toml`) are found.
    pub configs: PathBuf,
    /// The broker of distributed jobs (`arlbook serve --nats URL`), if any.
    pub broker: Option<String>,
    /// Becomes `true` when the server shuts down (ends the metrics streams).
    pub shutdown: watch::Receiver<bool>,
}

fn internal(err: &anyhow::Error) -> Response {
    error_response(
        StatusCode::INTERNAL_SERVER_ERROR,
        &FieldError::new("(server)", format!("{err:#}")),
    )
}

fn not_found(id: &str) -> Response {
    error_response(
        StatusCode::NOT_FOUND,
        &FieldError::new("id", format!("no job `{id}`; GET /api/jobs lists them")),
    )
}

/// A job id from the path: a positive integer.
fn parse_id(raw: &str) -> Option<i64> {
    raw.parse::<i64>().ok().filter(|&id| id > 0)
}

/// A job as the list shows it.
fn view(runner: &Runner, job: &JobRow) -> JobView {
    JobView {
        id: job.id,
        state: job.state,
        preset: job.preset.clone(),
        created_unix_ms: job.created_unix_ms,
        started_unix_ms: job.started_unix_ms,
        finished_unix_ms: job.finished_unix_ms,
        resumes: job.resumes,
        exit_code: job.exit_code,
        error: job.error.clone(),
        pid: job.pid,
        dir: runner.job_dir(job.id),
    }
}

/// A job with its config, its latest checkpoint and its last metrics row.
fn detail(runner: &Runner, job: &JobRow) -> JobDetail {
    let view = view(runner, job);
    let dir = view.dir.clone();
    JobDetail {
        job: view,
        config: serde_json::from_str(&job.config_json).unwrap_or(Value::Null),
        checkpoint: checkpoint::latest(&dir).ok().flatten(),
        last_metrics: metrics_stream::last_row(&dir.join("metrics.jsonl")),
    }
}

/// `POST /api/jobs`: queue a training job.
pub async fn submit(State(state): State<JobsState>, body: Bytes) -> Response {
    let request = match input::parse(&body, &state.configs, state.broker.as_deref()) {
        Ok(request) => request,
        Err(err) => return error_response(StatusCode::UNPROCESSABLE_ENTITY, &err),
    };
    let (Ok(toml_text), Ok(json_text)) = (
        toml::to_string(&request.config),
        serde_json::to_string(&request.config),
    ) else {
        return internal(&anyhow::anyhow!("the config does not serialise"));
    };
    let runner = Arc::clone(&state.runner);
    let preset = request.preset.clone();
    let submitted = tokio::task::spawn_blocking(move || {
        runner.submit(&toml_text, &json_text, preset.as_deref())
    })
    .await;
    match submitted {
        Ok(Ok(job)) => {
            let location = format!("/api/jobs/{}", job.id);
            (
                StatusCode::CREATED,
                [(header::LOCATION, location)],
                Json(detail(&state.runner, &job)),
            )
                .into_response()
        }
        Ok(Err(SubmitError::QueueFull(waiting))) => error_response(
            StatusCode::TOO_MANY_REQUESTS,
            &FieldError::new(
                "(queue)",
                format!(
                    "{waiting} jobs already wait to run (`arlbook serve --max-queued`); \
                     try again when some have finished, or cancel one"
                ),
            ),
        ),
        Ok(Err(SubmitError::Failed(err))) => internal(&err),
        Err(err) => internal(&anyhow::anyhow!("{err}")),
    }
}

/// `GET /api/presets`: the training presets a job can start from, with every setting
/// (defaults filled in). A preset file that does not parse is left out.
pub async fn presets(State(state): State<JobsState>) -> Response {
    let configs = state.configs.clone();
    let listed = tokio::task::spawn_blocking(move || {
        input::presets(&configs)
            .into_iter()
            .filter_map(|name| {
                let config = input::resolved_preset(&name, &configs).ok()?;
                let summary = input::preset_summary(&name, &configs);
                Some(json!({ "name": name, "summary": summary, "config": config }))
            })
            .collect::<Vec<Value>>()
    })
    .await;
    match listed {
        Ok(presets) => Json(json!({ "presets": presets })).into_response(),
        Err(err) => internal(&anyhow::anyhow!("{err}")),
    }
}

/// `GET /api/jobs`: every job, oldest first.
pub async fn list(State(state): State<JobsState>) -> Response {
    match state.runner.list() {
        Ok(jobs) => {
            let jobs = jobs.iter().map(|j| view(&state.runner, j)).collect();
            Json(JobList { jobs }).into_response()
        }
        Err(err) => internal(&err),
    }
}

/// `GET /api/jobs/{id}`.
pub async fn get(State(state): State<JobsState>, Path(raw): Path<String>) -> Response {
    let Some(id) = parse_id(&raw) else {
        return not_found(&raw);
    };
    match state.runner.get(id) {
        Ok(Some(job)) => Json(detail(&state.runner, &job)).into_response(),
        Ok(None) => not_found(&raw),
        Err(err) => internal(&err),
    }
}

/// `DELETE /api/jobs/{id}`: cancel.
pub async fn cancel(State(state): State<JobsState>, Path(raw): Path<String>) -> Response {
    let Some(id) = parse_id(&raw) else {
        return not_found(&raw);
    };
    let runner = Arc::clone(&state.runner);
    match tokio::task::spawn_blocking(move || runner.cancel(id)).await {
        Ok(Ok(CancelOutcome::Cancelled(job))) => Json(detail(&state.runner, &job)).into_response(),
        Ok(Ok(CancelOutcome::AlreadyFinal(final_state))) => error_response(
            StatusCode::CONFLICT,
            &FieldError::new(
                "id",
                format!("job {id} has already finished ({})", final_state.name()),
            ),
        ),
        Ok(Ok(CancelOutcome::NotFound)) => not_found(&raw),
        Ok(Err(err)) => internal(&err),
        Err(err) => internal(&anyhow::anyhow!("{err}")),
    }
}

/// `GET /api/jobs/{id}/metrics`: server-sent events.
pub async fn metrics(State(state): State<JobsState>, Path(raw): Path<String>) -> Response {
    let Some(id) = parse_id(&raw) else {
        return not_found(&raw);
    };
    match state.runner.get(id) {
        Ok(Some(_)) => {
            metrics_stream::stream(Arc::clone(&state.runner), id, state.shutdown.clone())
                .into_response()
        }
        Ok(None) => not_found(&raw),
        Err(err) => internal(&err),
    }
}

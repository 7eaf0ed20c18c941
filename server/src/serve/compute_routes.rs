//! The compute API over HTTP: the same entries as `arlbook compute`.
//!
//! Each computation runs on a blocking thread under its own cancellation token
//! (`arlbook_core::cancel`). The token is cancelled when the request's future is
//! dropped: when the request deadline (`--request-timeout`) answers 408, or when the
//! client closes the connection. The computation's loops then stop at their next check
//! instead of finishing work nobody will read. `GET /api/health` reports how many
//! computations are running, and the accept loop's connection counts.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use arlbook_core::cancel::{self, CancelToken};
use arlbook_core::{FieldError, api};
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::error_response;
use super::listen::ConnectionCounts;

fn known(name: &str) -> bool {
    api::ENTRIES.iter().any(|e| e.name == name)
}

fn unknown(name: &str) -> Response {
    error_response(
        StatusCode::NOT_FOUND,
        &FieldError::new(
            "name",
            format!("unknown computation `{name}`; GET /api/compute lists them"),
        ),
    )
}

/// Computations running now, on the blocking threads.
static RUNNING: AtomicUsize = AtomicUsize::new(0);
/// Computations stopped by their token since the server started.
static CANCELLED: AtomicUsize = AtomicUsize::new(0);

/// Counts one running computation while it lives.
struct Running;

impl Running {
    fn start() -> Self {
        RUNNING.fetch_add(1, Ordering::Relaxed);
        Self
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        RUNNING.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Cancels its token when dropped: when the handler's future ends, finished or not.
struct CancelOnDrop(CancelToken);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// `GET /api/health`: the version, the computations running now and those stopped
/// unfinished since the start, and the connections (see [`ConnectionCounts::report`]).
pub async fn health(State(connections): State<Arc<ConnectionCounts>>) -> Json<Value> {
    Json(json!({
        "status": "ok",
        "version": env!("CARGO_PKG_VERSION"),
        "computations_running": RUNNING.load(Ordering::Relaxed),
        "computations_cancelled": CANCELLED.load(Ordering::Relaxed),
        "connections": connections.report(),
    }))
}

/// `GET /api/compute`.
pub async fn list() -> Json<Value> {
    Json(json!({ "entries": api::ENTRIES }))
}

/// `GET /api/compute/{name}/example`.
pub async fn example(Path(name): Path<String>) -> Response {
    match api::examples::example(&name) {
        Some(request) if known(&name) => Json(request).into_response(),
        _ => unknown(&name),
    }
}

/// `POST /api/compute/{name}`: runs the computation off the async threads, stopped if
/// the request is dropped before it finishes.
pub async fn compute(Path(name): Path<String>, body: Bytes) -> Response {
    if !known(&name) {
        return unknown(&name);
    }
    let request: Value = match crate::strict_json::parse(&body) {
        Ok(v) => v,
        Err(err) => return error_response(StatusCode::UNPROCESSABLE_ENTITY, &err),
    };
    let token = CancelToken::new();
    let _cancel_on_drop = CancelOnDrop(token.clone());
    let outcome = tokio::task::spawn_blocking(move || {
        let _running = Running::start();
        let outcome = cancel::with(Some(&token), || api::compute(&name, request));
        if outcome
            .as_ref()
            .is_err_and(|err| *err == cancel::cancelled_error())
        {
            CANCELLED.fetch_add(1, Ordering::Relaxed);
        }
        outcome
    })
    .await;
    match outcome {
        Ok(Ok(response)) => Json(response).into_response(),
        Ok(Err(err)) => error_response(StatusCode::UNPROCESSABLE_ENTITY, &err),
        Err(join_error) => error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            &FieldError::new("(server)", format!("the computation failed: {join_error}")),
        ),
    }
}

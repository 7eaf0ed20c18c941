//! The compute API over HTTP: the same entries as `arlbook compute`.

use arlbook_core::{FieldError, api};
use axum::Json;
use axum::body::Bytes;
use axum::extract::Path;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::error_response;

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

/// `GET /api/health`.
pub async fn health() -> Json<Value> {
    Json(json!({ "status": "ok", "version": env!("CARGO_PKG_VERSION") }))
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

/// `POST /api/compute/{name}`: runs the computation off the async threads.
pub async fn compute(Path(name): Path<String>, body: Bytes) -> Response {
    if !known(&name) {
        return unknown(&name);
    }
    let request: Value = match crate::strict_json::parse(&body) {
        Ok(v) => v,
        Err(err) => return error_response(StatusCode::UNPROCESSABLE_ENTITY, &err),
    };
    let outcome = tokio::task::spawn_blocking(move || api::compute(&name, request)).await;
    match outcome {
        Ok(Ok(response)) => Json(response).into_response(),
        Ok(Err(err)) => error_response(StatusCode::UNPROCESSABLE_ENTITY, &err),
        Err(join_error) => error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            &FieldError::new("(server)", format!("the computation failed: {join_error}")),
        ),
    }
}

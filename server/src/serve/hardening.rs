//! What every response goes through: the bearer token on job-changing routes, JSON
//! bodies for every error (including the ones the body-limit, timeout and routing
//! layers produce as plain text or nothing), and a caught panic answered as a 500.

use std::sync::Arc;

use arlbook_core::FieldError;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

use super::error_response;

/// The token the job-changing routes require, if any.
#[derive(Debug, Clone, Default)]
pub struct Token(pub Option<Arc<str>>);

/// Compares without stopping at the first differing byte.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0_u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Middleware: `POST` and `DELETE` need `Authorization: Bearer <token>` when a token
/// is set; reading stays open.
pub async fn require_token(State(token): State<Token>, request: Request, next: Next) -> Response {
    let Some(expected) = &token.0 else {
        return next.run(request).await;
    };
    if matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    ) {
        return next.run(request).await;
    }
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if given.is_some_and(|g| same(g.trim().as_bytes(), expected.as_bytes())) {
        return next.run(request).await;
    }
    let mut response = error_response(
        StatusCode::UNAUTHORIZED,
        &FieldError::new(
            "authorization",
            "this route needs `Authorization: Bearer <token>` (the token `arlbook serve` printed)",
        ),
    );
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// The request deadline in force (`--request-timeout`), for the 408's message.
#[derive(Debug, Clone, Copy)]
pub struct Deadline(pub std::time::Duration);

/// Middleware: an error status whose body is not JSON gets a JSON body naming the
/// problem (413 from the body limit, 408 from the timeout, 405 from routing...).
pub async fn json_errors(
    State(Deadline(deadline)): State<Deadline>,
    request: Request,
    next: Next,
) -> Response {
    let body_limit = if request.uri().path().starts_with("/api/jobs") {
        super::MAX_JOB_BODY_BYTES
    } else {
        super::MAX_BODY_BYTES
    };
    let response = next.run(request).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let message = match status {
        StatusCode::PAYLOAD_TOO_LARGE => {
            format!(
                "the request body is larger than this route accepts ({body_limit} bytes at most)"
            )
        }
        StatusCode::REQUEST_TIMEOUT => format!(
            "the request took longer than {} s (--request-timeout)",
            deadline.as_secs()
        ),
        StatusCode::METHOD_NOT_ALLOWED => {
            "this path does not answer this method (see /api/openapi.json)".to_owned()
        }
        other => other
            .canonical_reason()
            .unwrap_or("request failed")
            .to_owned(),
    };
    let mut answer = error_response(status, &FieldError::new("(request)", message));
    // Keep headers such as `Allow` from the original answer.
    for (name, value) in response.headers() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            answer.headers_mut().insert(name.clone(), value.clone());
        }
    }
    answer
}

/// A caught panic: a 500 with a JSON error, never a dropped connection.
pub fn panic_response(_payload: Box<dyn std::any::Any + Send + 'static>) -> Response {
    error_response(
        StatusCode::INTERNAL_SERVER_ERROR,
        &FieldError::new(
            "(server)",
            "the server failed while answering; the request was not completed",
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::Router;
    use axum::routing::get;
    use tower::ServiceExt;

    async fn boom() -> &'static str {
        panic!("a handler bug")
    }

    async fn answer(router: Router, uri: &str) -> (StatusCode, serde_json::Value) {
        let request = axum::http::Request::builder()
            .uri(uri)
            .body(axum::body::Body::empty())
            .unwrap();
        let response = router.oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .unwrap();
        (status, serde_json::from_slice(&bytes).unwrap())
    }

    #[tokio::test]
    async fn a_panicking_handler_answers_500_with_json() {
        let router = Router::new()
            .route("/boom", get(boom))
            .layer(axum::middleware::from_fn_with_state(
                Deadline(std::time::Duration::from_secs(30)),
                json_errors,
            ))
            .layer(tower_http::catch_panic::CatchPanicLayer::custom(
                panic_response,
            ));
        let (status, body) = answer(router, "/boom").await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(body["error"]["field"], "(server)");
    }

    #[tokio::test]
    async fn plain_error_statuses_get_a_json_body() {
        let router = Router::new()
            .route(
                "/teapot",
                get(|| async { (StatusCode::IM_A_TEAPOT, "short and stout") }),
            )
            .layer(axum::middleware::from_fn_with_state(
                Deadline(std::time::Duration::from_secs(30)),
                json_errors,
            ));
        let (status, body) = answer(router, "/teapot").await;
        assert_eq!(status, StatusCode::IM_A_TEAPOT);
        assert!(body["error"]["message"].is_string());
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"abcd"));
    }
}

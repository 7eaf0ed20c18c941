//! The built notebook: files from the web folder, and the app's page for its own routes.
//!
//! A path whose last segment names a file (`/arlbook_app.js`, `/style.css`) is served
//! from the folder or answered 404. Any other path (`/`, `/chapter/grpo`,
//! `/embed/bandit`) is a route of the single-page app: when no file matches it, the
//! answer is `index.html` with status 200, and the app reads the path itself.
//! `ServeDir` refuses paths that would leave the folder (`..`, encoded or not).

use std::path::Path;

use axum::body::Body;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use tower::ServiceExt;
use tower_http::services::{ServeDir, ServeFile};

/// Whether the path's last segment looks like a file name (has an extension).
fn names_a_file(path: &str) -> bool {
    path.rsplit('/')
        .next()
        .is_some_and(|last| last.contains('.'))
}

/// Answers `request` from `web_dir` (see the module docs).
pub async fn serve(web_dir: &Path, request: Request) -> Response {
    let (method, uri) = (request.method().clone(), request.uri().clone());
    let from_folder = match ServeDir::new(web_dir).oneshot(request).await {
        Ok(response) => response.into_response(),
        Err(never) => match never {},
    };
    if from_folder.status() != StatusCode::NOT_FOUND || names_a_file(uri.path()) {
        return from_folder;
    }
    let page_request = Request::builder()
        .method(method)
        .uri(uri)
        .body(Body::empty())
        .unwrap_or_default();
    match ServeFile::new(web_dir.join("index.html"))
        .oneshot(page_request)
        .await
    {
        Ok(response) => response.into_response(),
        Err(never) => match never {},
    }
}

#[cfg(test)]
mod tests {
    use super::names_a_file;

    #[test]
    fn file_names_and_app_routes_are_told_apart() {
        assert!(names_a_file("/arlbook_app_bg.wasm"));
        assert!(names_a_file("/assets/style.css"));
        assert!(!names_a_file("/"));
        assert!(!names_a_file("/chapter/grpo"));
        assert!(!names_a_file("/embed/bandit"));
    }
}

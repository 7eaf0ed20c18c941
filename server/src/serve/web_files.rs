//! The built notebook: files from the web folder, and the app's page for its own routes.
//!
//! A path whose last segment names a file (`/arlbook_app.js`, `/style.css`) is served
//! from the folder or answered 404. Any other path (`/`, `/chapter/grpo`,
//! `/embed/bandit`) is a route of the single-page app: when no file matches it, the
//! answer is `index.html` with status 200, and the app reads the path itself.
//! `ServeDir` refuses paths that would leave the folder (`..`, encoded or not); a
//! symbolic link inside the folder that points out of it is refused here (404), so no
//! file outside the folder is served whatever the folder holds.

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

/// `%XX` escapes decoded (an invalid escape is kept as written).
fn percent_decode(path: &str) -> Vec<u8> {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(high), Some(low)) => {
                out.push((high * 16 + low) as u8);
                i += 3;
            }
            (byte, _, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    out
}

/// Whether the file `path` names under `web_dir` resolves (links followed) outside
/// the folder.
fn leaves_folder(web_dir: &Path, path: &str) -> bool {
    let decoded = String::from_utf8_lossy(&percent_decode(path)).into_owned();
    let relative = decoded.trim_start_matches('/');
    let (Ok(root), Ok(target)) = (
        std::fs::canonicalize(web_dir),
        std::fs::canonicalize(web_dir.join(relative)),
    ) else {
        // Nothing there (ServeDir answers 404), or the folder itself is missing.
        return false;
    };
    !target.starts_with(root)
}

/// Answers `request` from `web_dir` (see the module docs).
pub async fn serve(web_dir: &Path, request: Request) -> Response {
    let (method, uri) = (request.method().clone(), request.uri().clone());
    if leaves_folder(web_dir, uri.path()) {
        return StatusCode::NOT_FOUND.into_response();
    }
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
    use super::{leaves_folder, names_a_file, percent_decode};

    #[test]
    fn links_out_of_the_folder_are_refused() {
        let base = std::env::temp_dir().join(format!("arlbook-web-links-{}", std::process::id()));
        let web = base.join("web");
        std::fs::create_dir_all(web.join("inner")).unwrap();
        std::fs::write(base.join("secret.txt"), "outside").unwrap();
        std::fs::write(web.join("inner/page.txt"), "inside").unwrap();
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(base.join("secret.txt"), web.join("leak.txt")).unwrap();
            std::os::unix::fs::symlink(web.join("inner"), web.join("alias")).unwrap();
            assert!(leaves_folder(&web, "/leak.txt"));
            assert!(
                leaves_folder(&web, "/%6Ceak.txt"),
                "an encoded name is decoded first"
            );
            assert!(
                !leaves_folder(&web, "/alias/page.txt"),
                "a link within the folder is fine"
            );
        }
        assert!(!leaves_folder(&web, "/inner/page.txt"));
        assert!(!leaves_folder(&web, "/missing.js"));
        assert_eq!(percent_decode("/a%2Fb%zz"), b"/a/b%zz");
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn file_names_and_app_routes_are_told_apart() {
        assert!(names_a_file("/arlbook_app_bg.wasm"));
        assert!(names_a_file("/assets/style.css"));
        assert!(!names_a_file("/"));
        assert!(!names_a_file("/chapter/grpo"));
        assert!(!names_a_file("/embed/bandit"));
    }
}

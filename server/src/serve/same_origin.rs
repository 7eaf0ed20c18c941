//! Requests from other web sites are refused, so a page a user visits cannot drive the
//! local server (cross-site writes) or read it after re-pointing a DNS name at it (DNS
//! rebinding). Applied to every `/api` route:
//!
//! - **Host**: must be an IP literal (`127.0.0.1:8080`, `[::1]:8080`), `localhost` (or a
//!   name under `.localhost`), or a name given with `--allowed-host`. A rebinding page
//!   always reaches the server under its own DNS name, never an IP literal; a missing
//!   Host is refused too. 403, field `host`.
//! - **Origin**, on every method that changes something (anything but GET, HEAD and
//!   OPTIONS): absent (curl, the CLI, a server-side client) or the request's own origin
//!   (`http://<Host>`, or `https`), or one given with `--allowed-origin`; `null` and
//!   every other site are refused. 403, field `origin`.
//! - **Content-Type**, on POST, PUT and PATCH: `application/json` (parameters such as
//!   `charset` allowed). A cross-site form or `fetch` can send `text/plain` without a
//!   preflight; JSON needs one, which this server never grants. 415, field
//!   `content-type`.

use std::net::IpAddr;
use std::sync::Arc;

use arlbook_core::FieldError;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

use super::error_response;

/// The names and origins let through besides the defaults.
#[derive(Debug, Clone, Default)]
pub struct SameOrigin {
    /// Host names (`--allowed-host`), lower case, without port.
    pub hosts: Arc<[String]>,
    /// Origins (`--allowed-origin`), such as `https://course.example.org`.
    pub origins: Arc<[String]>,
}

/// The host part of a `Host` header value (`name`, `1.2.3.4`, `[::1]`), without port.
fn host_name(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    host.rsplit_once(':')
        .filter(|(_, port)| port.chars().all(|c| c.is_ascii_digit()))
        .map_or(host, |(name, _)| name)
}

impl SameOrigin {
    /// Whether a request with `Host: host` may be answered.
    pub fn host_allowed(&self, host: &str) -> bool {
        let name = host_name(host).to_ascii_lowercase();
        name.parse::<IpAddr>().is_ok()
            || name == "localhost"
            || name.ends_with(".localhost")
            || self.hosts.contains(&name)
    }

    /// Whether a changing request from `origin` to `host` may be answered.
    pub fn origin_allowed(&self, origin: &str, host: &str) -> bool {
        let own = |scheme: &str| origin.eq_ignore_ascii_case(&format!("{scheme}://{host}"));
        own("http")
            || own("https")
            || self
                .origins
                .iter()
                .any(|allowed| allowed.eq_ignore_ascii_case(origin))
    }
}

fn header_text<'a>(headers: &'a HeaderMap, name: &header::HeaderName) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn is_json(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"))
}

/// The refusal for `request`, if any.
fn refusal(rules: &SameOrigin, request: &Request) -> Option<(StatusCode, FieldError)> {
    let headers = request.headers();
    let host = header_text(headers, &header::HOST).unwrap_or("");
    if !rules.host_allowed(host) {
        return Some((
            StatusCode::FORBIDDEN,
            FieldError::new(
                "host",
                format!(
                    "this server answers its API only under an IP address, localhost or a name \
                     given with --allowed-host (got `{host}`)"
                ),
            ),
        ));
    }
    let method = request.method();
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return None;
    }
    if let Some(origin) = header_text(headers, &header::ORIGIN)
        && !rules.origin_allowed(origin, host)
    {
        return Some((
            StatusCode::FORBIDDEN,
            FieldError::new(
                "origin",
                format!(
                    "requests that change something are accepted from this server's own \
                     pages or an --allowed-origin only (got `{origin}`)"
                ),
            ),
        ));
    }
    let has_body = matches!(*method, Method::POST | Method::PUT | Method::PATCH);
    if has_body && !header_text(headers, &header::CONTENT_TYPE).is_some_and(is_json) {
        return Some((
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            FieldError::new(
                "content-type",
                "the body must be sent as `Content-Type: application/json`",
            ),
        ));
    }
    None
}

/// Middleware: the checks of the module docs.
pub async fn check(State(rules): State<SameOrigin>, request: Request, next: Next) -> Response {
    let path = request.uri().path();
    if !(path == "/api" || path.starts_with("/api/")) {
        // The notebook's files are public and change nothing.
        return next.run(request).await;
    }
    match refusal(&rules, &request) {
        Some((status, error)) => error_response(status, &error),
        None => next.run(request).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> SameOrigin {
        SameOrigin {
            hosts: Arc::from(vec!["notebook.lan".to_owned()]),
            origins: Arc::from(vec!["https://course.example.org".to_owned()]),
        }
    }

    fn request(method: &str, headers: &[(&str, &str)]) -> Request {
        let mut builder = axum::http::Request::builder()
            .method(method)
            .uri("/api/jobs");
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(axum::body::Body::empty()).unwrap()
    }

    fn status(method: &str, headers: &[(&str, &str)]) -> Option<StatusCode> {
        refusal(&rules(), &request(method, headers)).map(|(status, _)| status)
    }

    #[test]
    fn hosts_are_ip_literals_localhost_or_allowed_names() {
        let rules = rules();
        for host in [
            "127.0.0.1:8080",
            "[::1]:8080",
            "10.0.0.7",
            "localhost:8080",
            "LOCALHOST",
            "app.localhost:3000",
            "notebook.lan:8080",
        ] {
            assert!(rules.host_allowed(host), "{host}");
        }
        for host in [
            "evil.example",
            "evil.example:8080",
            "localhost.evil.example",
            "",
        ] {
            assert!(!rules.host_allowed(host), "{host}");
        }
    }

    #[test]
    fn a_rebinding_page_cannot_read_and_a_foreign_page_cannot_write() {
        let json = ("content-type", "application/json");
        let host = ("host", "127.0.0.1:8080");
        assert_eq!(
            status("GET", &[("host", "evil.example:8080")]),
            Some(StatusCode::FORBIDDEN)
        );
        assert_eq!(status("GET", &[host]), None);
        assert_eq!(
            status("POST", &[host, json, ("origin", "http://evil.example")]),
            Some(StatusCode::FORBIDDEN)
        );
        assert_eq!(
            status("POST", &[host, json, ("origin", "null")]),
            Some(StatusCode::FORBIDDEN)
        );
        assert_eq!(
            status("DELETE", &[host, ("origin", "http://evil.example")]),
            Some(StatusCode::FORBIDDEN)
        );
        assert_eq!(
            status("POST", &[host, json, ("origin", "http://127.0.0.1:8080")]),
            None
        );
        assert_eq!(
            status(
                "POST",
                &[host, json, ("origin", "https://course.example.org")]
            ),
            None
        );
        assert_eq!(
            status("POST", &[host, json]),
            None,
            "no Origin: curl or the CLI"
        );
        assert_eq!(status("DELETE", &[host]), None);
    }

    #[test]
    fn bodies_must_be_json() {
        let host = ("host", "localhost:8080");
        assert_eq!(
            status("POST", &[host, ("content-type", "text/plain")]),
            Some(StatusCode::UNSUPPORTED_MEDIA_TYPE)
        );
        assert_eq!(
            status("POST", &[host]),
            Some(StatusCode::UNSUPPORTED_MEDIA_TYPE)
        );
        assert_eq!(
            status(
                "POST",
                &[host, ("content-type", "Application/JSON; charset=utf-8")]
            ),
            None
        );
    }
}

//! The real server on a loopback port: the compute API over HTTP, its errors, its
//! limits, and static files that cannot escape their folder.

use arlbook_tests::cli::Arlbook;
use arlbook_tests::http::Server;
use serde_json::{Value, json};

const INDEX: &str = "<!doctype html><title>arlbook test page</title>";

/// `arlbook serve` from the binary cargo built for this test run.
fn start_server() -> Server {
    Server::start(&Arlbook::new(env!("CARGO_BIN_EXE_arlbook")), INDEX)
}

fn json_body(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

#[test]
fn health_and_listing() {
    let server = start_server();
    let (status, body) = server.request("GET", "/api/health", b"");
    assert_eq!(status, 200);
    assert_eq!(json_body(&body)["status"], "ok");
    let (status, body) = server.request("GET", "/api/compute", b"");
    assert_eq!(status, 200);
    let entries = json_body(&body)["entries"].as_array().unwrap().len();
    assert_eq!(entries, arlbook_core::api::ENTRIES.len());
}

#[test]
fn compute_answers_the_article_number() {
    let server = start_server();
    let request = json!({"p": 0.5, "q": [0.75, 0.35], "estimates": 0});
    let (status, body) = server.request(
        "POST",
        "/api/compute/bandit-gradient",
        request.to_string().as_bytes(),
    );
    assert_eq!(status, 200, "{body}");
    assert!((json_body(&body)["exact"].as_f64().unwrap() - 0.1).abs() < 1e-12);
}

#[test]
fn every_example_is_served_and_computes() {
    let server = start_server();
    for entry in arlbook_core::api::ENTRIES {
        let (status, example) =
            server.request("GET", &format!("/api/compute/{}/example", entry.name), b"");
        assert_eq!(status, 200, "{}", entry.name);
        let (status, body) = server.request(
            "POST",
            &format!("/api/compute/{}", entry.name),
            example.as_bytes(),
        );
        assert_eq!(status, 200, "{}: {body}", entry.name);
        let expected = arlbook_core::api::compute(entry.name, json_body(&example)).unwrap();
        assert_eq!(json_body(&body), expected, "{}", entry.name);
    }
}

#[test]
fn bad_input_is_422_naming_the_field() {
    let server = start_server();
    let (status, body) = server.request(
        "POST",
        "/api/compute/binomial-se",
        br#"{"p": 2.0, "n": 10}"#,
    );
    assert_eq!(status, 422);
    assert_eq!(json_body(&body)["error"]["field"], "p");
    let (status, body) = server.request("POST", "/api/compute/binomial-se", b"{not json");
    assert_eq!(status, 422);
    assert_eq!(json_body(&body)["error"]["field"], "(request)");
}

#[test]
fn unknown_computation_is_404_with_error_json() {
    let server = start_server();
    let (status, body) = server.request("POST", "/api/compute/nope", b"{}");
    assert_eq!(status, 404);
    assert_eq!(json_body(&body)["error"]["field"], "name");
}

#[test]
fn oversized_body_is_refused() {
    let server = start_server();
    let big = vec![b' '; 2 << 20];
    let (status, _) = server.request("POST", "/api/compute/kl", &big);
    assert_eq!(status, 413);
}

#[test]
fn static_files_cannot_escape_their_folder() {
    let server = start_server();
    let (status, body) = server.request("GET", "/", b"");
    assert_eq!(status, 200);
    assert!(body.contains("arlbook test page"));
    for path in [
        "/../Cargo.toml",
        "/..%2fCargo.toml",
        "/%2e%2e/%2e%2e/Cargo.toml",
        "/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
        "/....//....//etc/passwd",
        "/..\\..\\Cargo.toml",
    ] {
        let (status, body) = server.request("GET", path, b"");
        assert!(
            !body.contains("[workspace]") && !body.contains("root:"),
            "{path} leaked a file outside the web folder (status {status})"
        );
    }
}

#[test]
fn concurrent_requests_all_succeed() {
    let server = start_server();
    let ok = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..200)
            .map(|i| {
                let server = &server;
                scope.spawn(move || {
                    let request = json!({"n": 10 + i, "c": 2, "k": 3});
                    let (status, _) = server.request(
                        "POST",
                        "/api/compute/pass-at-k",
                        request.to_string().as_bytes(),
                    );
                    status == 200
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(false))
            .filter(|ok| *ok)
            .count()
    });
    assert_eq!(ok, 200);
}

#[test]
fn app_routes_get_the_page_and_missing_files_a_404() {
    let server = start_server();
    for path in ["/", "/chapter/grpo", "/embed/bandit?p=0.3", "/explorer"] {
        let (status, body) = server.request("GET", path, b"");
        assert_eq!(status, 200, "{path}: {body}");
        assert_eq!(body, INDEX, "{path} is not the app's page");
    }
    let (status, body) = server.request("GET", "/no-such-bundle.js", b"");
    assert_eq!(status, 404, "{body}");
    assert!(json_body(&body)["error"].is_object(), "{body}");
}

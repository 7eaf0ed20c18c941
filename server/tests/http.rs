//! The real server on a loopback port: the compute API over HTTP, its errors, its
//! limits, and static files that cannot escape their folder.

use arlbook_tests::cli::Arlbook;
use arlbook_tests::http::Server;
use arlbook_tests::json::{has_null, numeric_leaves};
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

/// Checks one answer to a hostile request: a computed answer with finite numbers, or a
/// 4xx whose JSON error names a field (`expect_field`, when given, as its prefix).
fn check_hostile(name: &str, body: &str, status: u16, text: &str, expect_field: Option<&str>) {
    let value = json_body(text);
    if status == 200 {
        assert!(expect_field.is_none(), "{name} accepted {body}: {text}");
        assert!(
            !has_null(&value),
            "{name} answered a non-finite number to {body}: {text}"
        );
        return;
    }
    assert!(
        (400..500).contains(&status),
        "{name} {body}: {status} {text}"
    );
    let field = value["error"]["field"].as_str().unwrap_or_default();
    assert!(!field.is_empty(), "{name} {body}: no field named: {text}");
    if let Some(prefix) = expect_field {
        assert!(
            field.starts_with(prefix),
            "{name} {body}: field {field}, expected {prefix}"
        );
    }
}

#[test]
fn hostile_compute_requests_get_4xx_naming_the_field() {
    let server = start_server();
    let names: Vec<&str> = arlbook_core::api::ENTRIES.iter().map(|e| e.name).collect();
    let mut state = 0x9e37_79b9_u64;
    let mut next = move |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n.max(1) as u64) as usize
    };
    for name in &names {
        let path = format!("/api/compute/{name}");
        let (_, example) = server.request("GET", &format!("{path}/example"), b"");
        let example = json_body(&example);
        let Value::Object(fields) = &example else {
            panic!("{name}: example {example}");
        };
        // Each field with the wrong type, NaN spelled as a string, huge and tiny numbers.
        for (key, original) in fields {
            let wrong_type = if original.is_string() {
                json!(12345)
            } else {
                json!("x")
            };
            let mut cases = vec![(wrong_type, Some(key.as_str()))];
            if original.is_number() {
                cases.push((json!("NaN"), Some(key.as_str())));
                cases.push((json!(1e308), None));
                cases.push((json!(-1e308), None));
                cases.push((json!(u64::MAX), None));
            }
            cases.push((json!([[[]]]), None));
            for (replacement, expect_field) in cases {
                let mut body = example.clone();
                body[key] = replacement;
                let text = body.to_string();
                let (status, answer) = server.request("POST", &path, text.as_bytes());
                check_hostile(name, &text, status, &answer, expect_field);
            }
        }
        // Byte-level noise on the valid example.
        let valid = example.to_string().into_bytes();
        let noise = b"{}[]\":,0-9eE.nulltrue\\ \x00\xff";
        for _ in 0..20 {
            let mut body = valid.clone();
            for _ in 0..=next(3) {
                let at = next(body.len());
                match (body.is_empty(), next(3)) {
                    (false, 0) => body[at] = noise[next(noise.len())],
                    (false, 1) => body.truncate(at),
                    _ => body.insert(at, noise[next(noise.len())]),
                }
            }
            let (status, answer) = server.request("POST", &path, &body);
            check_hostile(name, &String::from_utf8_lossy(&body), status, &answer, None);
        }
    }
    // Work beyond the limit is refused before it starts, naming the field.
    let request = json!({"p": 0.5, "q": [0.75, 0.35], "group_size": 4,
                         "samples": 400_000_000u64, "estimates": 10, "seed": 1});
    let (status, body) = server.request(
        "POST",
        "/api/compute/bandit-gradient",
        request.to_string().as_bytes(),
    );
    assert_eq!(status, 422, "{body}");
    assert_eq!(json_body(&body)["error"]["field"], "samples");
}

/// Every entry's example with each numeric field set to the extremes of f64 and u64,
/// through the server and (one field per entry) the command line: an answer without
/// `null`, or a 4xx / exit 2 naming a field; never a 500, a panic or a hang.
#[test]
fn every_numeric_field_at_its_extremes_through_http_and_the_cli() {
    let server = start_server();
    let arlbook = Arlbook::new(env!("CARGO_BIN_EXE_arlbook"));
    let extremes = [json!(5e-324), json!(f64::MAX), json!(u64::MAX), json!(-1)];
    for entry in arlbook_core::api::ENTRIES {
        let example = arlbook_core::api::examples::example(entry.name).unwrap();
        for (i, leaf) in numeric_leaves(&example).iter().enumerate() {
            for extreme in &extremes {
                let mut request = example.clone();
                *request.pointer_mut(leaf).unwrap() = extreme.clone();
                let body = request.to_string();
                let path = format!("/api/compute/{}", entry.name);
                let (status, text) = server.request("POST", &path, body.as_bytes());
                check_hostile(entry.name, &body, status, &text, None);
                if i == 0 {
                    let (code, answer) = arlbook.compute(entry.name, &body);
                    assert!(
                        code == 0 && !has_null(&answer)
                            || code == 2 && answer["error"]["field"].is_string(),
                        "CLI {} {body}: exit {code}, {answer}",
                        entry.name
                    );
                }
            }
        }
    }
}

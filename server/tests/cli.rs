//! The `arlbook compute` command line against its contract: every name answers, the
//! answer equals the library's, and bad input prints the error JSON with exit status 2.

use arlbook_core::api;
use arlbook_tests::cli::Arlbook;
use serde_json::{Value, json};

/// The binary cargo built for this test run.
fn arlbook() -> Arlbook {
    Arlbook::new(env!("CARGO_BIN_EXE_arlbook"))
}

fn run(args: &[&str], stdin: &str) -> std::process::Output {
    arlbook().run(args, stdin)
}

fn compute(name: &str, request: &str) -> (i32, Value) {
    arlbook().compute(name, request)
}

fn assert_rejected(name: &str, request: &str, field: &str) {
    let (code, out) = compute(name, request);
    assert_eq!(
        code, 2,
        "{name} {request}: expected exit 2, got {code}: {out}"
    );
    let reported = out["error"]["field"].as_str().unwrap_or_default();
    assert!(
        reported.contains(field),
        "{name} {request}: error should name `{field}`, got {out}"
    );
    assert!(
        out["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty())
    );
}

#[test]
fn list_names_every_entry_with_a_summary() {
    let out = run(&["compute", "--list"], "");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for entry in api::ENTRIES {
        let line = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(entry.name))
            .unwrap_or_else(|| panic!("--list lacks {}", entry.name));
        assert!(
            line.len() > entry.name.len() + 10,
            "no summary for {}",
            entry.name
        );
    }
}

#[test]
fn contract_names_are_all_served() {
    for name in [
        "bandit-gradient",
        "importance-sampling",
        "clip-surrogate",
        "group-advantages",
        "policy-loss",
        "kl",
        "gae",
        "mixed-group",
        "shaping",
        "pass-at-k",
        "binomial-se",
        "rollout-budget",
        "lag-filter",
    ] {
        assert!(
            api::ENTRIES.iter().any(|e| e.name == name),
            "missing {name}"
        );
    }
}

#[test]
fn every_entry_round_trips_through_the_cli_with_the_library_answer() {
    for entry in api::ENTRIES {
        let example = run(&["compute", entry.name, "--example"], "");
        assert!(
            example.status.success(),
            "--example fails for {}",
            entry.name
        );
        let request: Value = serde_json::from_slice(&example.stdout).expect("example is JSON");
        let (code, out) = compute(entry.name, &request.to_string());
        assert_eq!(code, 0, "{}: {out}", entry.name);
        let direct = api::compute(entry.name, request).expect("library computes the example");
        assert_eq!(out, direct, "CLI and library disagree for {}", entry.name);
    }
}

#[test]
fn input_file_gives_the_same_answer_as_stdin() {
    let dir = std::env::temp_dir().join(format!("arlbook-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("request.json");
    std::fs::write(&path, r#"{"n": 10, "c": 2, "k": 3}"#).unwrap();
    let from_file = run(
        &["compute", "pass-at-k", "--input", path.to_str().unwrap()],
        "",
    );
    let (_, from_stdin) = compute("pass-at-k", r#"{"n": 10, "c": 2, "k": 3}"#);
    let _ = std::fs::remove_dir_all(&dir);
    let from_file: Value = serde_json::from_slice(&from_file.stdout).unwrap();
    assert_eq!(from_file, from_stdin);
    assert!((from_file["estimate"].as_f64().unwrap() - 8.0 / 15.0).abs() < 1e-12);
}

#[test]
fn nan_is_rejected_as_invalid_json() {
    assert_rejected("binomial-se", r#"{"p": NaN, "n": 10}"#, "(request)");
}

#[test]
fn probability_outside_unit_interval_names_p() {
    assert_rejected("binomial-se", r#"{"p": 1.5, "n": 10}"#, "p");
    assert_rejected("mixed-group", r#"{"p": -0.1, "group_size": 4}"#, "p");
}

#[test]
fn ragged_mismatch_names_the_row() {
    let request = json!({
        "logp": [[-1.0, -1.0], [-1.0]],
        "old_logp": [[-1.0, -1.0], [-1.0, -2.0]],
        "advantages": [1.0, -1.0]
    });
    assert_rejected("policy-loss", &request.to_string(), "old_logp[1]");
}

#[test]
fn empty_group_is_rejected() {
    assert_rejected(
        "group-advantages",
        r#"{"rewards": [[1.0, 0.0], []]}"#,
        "rewards[1]",
    );
}

#[test]
fn k_greater_than_n_names_k() {
    assert_rejected("pass-at-k", r#"{"n": 5, "c": 2, "k": 6}"#, "k");
}

#[test]
fn unknown_field_is_named() {
    assert_rejected(
        "binomial-se",
        r#"{"p": 0.5, "n": 10, "colour": "blue"}"#,
        "colour",
    );
}

#[test]
fn wrong_type_is_named() {
    assert_rejected("binomial-se", r#"{"p": "half", "n": 10}"#, "p");
}

#[test]
fn missing_field_is_named() {
    assert_rejected("binomial-se", r#"{"p": 0.5}"#, "n");
}

#[test]
fn too_much_sampling_work_names_the_field() {
    let request = json!({"p": 0.5, "q": [0.75, 0.35], "group_size": 4,
                         "samples": 400_000_000u64, "estimates": 10, "seed": 1});
    assert_rejected("bandit-gradient", &request.to_string(), "samples");
}

#[test]
fn unknown_name_exits_2() {
    assert_rejected("no-such-computation", "{}", "name");
}

#[test]
fn hostile_values_never_panic() {
    // Every top-level field of every example replaced by values of the wrong shape or
    // absurd size: the answer is either a result (exit 0) or the error JSON (exit 2).
    let hostile = [
        json!(null),
        json!(-1),
        json!(1e300),
        json!(-1e300),
        json!("x"),
        json!([]),
        json!([[]]),
        json!([1e308, -1e308]),
        json!({}),
        json!(u64::MAX),
    ];
    for entry in api::ENTRIES {
        let example = api::examples::example(entry.name).expect("example");
        let Value::Object(fields) = &example else {
            panic!("example of {} is not an object", entry.name)
        };
        for key in fields.keys() {
            for bad in &hostile {
                let mut request = example.clone();
                request[key] = bad.clone();
                // In-process first (fast): a panic here fails the test with its message.
                let _ = api::compute(entry.name, request);
            }
        }
        // And a sample through the real binary, checking the exit status contract.
        let mut request = example.clone();
        if let Some(key) = fields.keys().next() {
            request[key] = json!(-1e300);
        }
        let (code, _) = compute(entry.name, &request.to_string());
        assert!(code == 0 || code == 2, "{}: exit {code}", entry.name);
    }
}

#[test]
fn closed_stdout_pipe_does_not_panic() {
    // Regression: `arlbook compute ... | head` used to panic in println!.
    use std::io::Write;
    use std::process::Stdio;
    let mut child = arlbook()
        .command()
        .args(["compute", "importance-sampling"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let request = json!({"mu": [0.2, 0.8], "pi": [0.6, 0.4], "values": [0.75, 0.35],
                         "samples": 2, "estimates": 50_000, "seed": 1});
    child
        .stdin
        .take()
        .unwrap()
        .write_all(request.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(out.status.success(), "{:?} {stderr}", out.status);
}

#[test]
fn strict_bodies_and_extreme_ids_are_refused_not_panics() {
    // A key given twice is named, not silently replaced by its last value.
    let (code, body) = compute("pass-at-k", r#"{"n": 10, "c": 3, "k": 1, "k": 5}"#);
    assert_eq!(code, 2, "{body}");
    assert_eq!(body["error"]["field"], "k");
    // An id that would overflow the random stream's number is a usage error.
    let out = run(&["env", "run", "--sample-id", "18446744073709551615"], "");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--sample-id"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

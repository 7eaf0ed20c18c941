//! The job API with the real parts: `arlbook serve` on a loopback port, its SQLite
//! file, real `arlbook train` child processes, plain HTTP/1.1. Bad inputs on every
//! route, SIGKILL of the server mid-job and a restart that resumes, the queue and
//! cancellation, the OpenAPI document against the live routes, the token, traversal
//! and oversized bodies.

// The helpers below are part of the tests: an unwrap that fails is a failed test.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use arlbook_tests::cli::{Arlbook, workspace_root};
use arlbook_tests::http::Server;
use serde_json::{Value, json};

const INDEX: &str = "<!doctype html><title>arlbook jobs test</title>";

/// The trainer's TINY test config (server/tests/train.rs) as a job request, with a
/// longer SFT stage so a kill lands mid-run.
fn tiny(sft_steps: u64) -> Value {
    json!({
        "seed": 3,
        "backend": "cpu",
        "checkpoint_every": 2,
        "model": {"layers": 1, "width": 16, "heads": 2, "context": 400},
        "harness": {"max_turns": 6, "max_context_tokens": 400, "max_new_tokens": 24},
        "sft": {"steps": sft_steps, "batch_episodes": 4, "tasks": 24,
                "learning_rate": 1e-2, "warmup_steps": 1},
        "grpo": {"steps": 4, "tasks_per_batch": 2, "group_size": 3, "microbatch_rows": 4,
                 "dynamic_sampling": false, "learning_rate": 1e-3},
        "validation": {"every_steps": 2, "tasks": 3}
    })
}

/// The (stage, step) of every row a finished tiny run writes, in order.
fn expected_keys(sft_steps: u64) -> Vec<(String, u64)> {
    let mut keys: Vec<(String, u64)> = (1..=sft_steps).map(|s| ("sft".to_owned(), s)).collect();
    keys.push(("validation".to_owned(), 0));
    for s in 1..=4 {
        keys.push(("grpo".to_owned(), s));
        if s % 2 == 0 {
            keys.push(("validation".to_owned(), s));
        }
    }
    keys
}

fn keys(rows: &[Value]) -> Vec<(String, u64)> {
    rows.iter()
        .map(|r| {
            (
                r["stage"].as_str().unwrap().to_owned(),
                r["step"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("arlbook-jobs-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(dir.with_extension("web"));
    dir
}

fn cleanup(data: &Path) {
    let _ = std::fs::remove_dir_all(data);
    let _ = std::fs::remove_dir_all(data.with_extension("web"));
}

fn start(data: &Path, extra: &[&str]) -> Server {
    let configs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs");
    let configs = configs.to_str().unwrap().to_owned();
    let mut args = vec!["--configs", configs.as_str()];
    args.extend_from_slice(extra);
    Server::start_with(
        &Arlbook::new(env!("CARGO_BIN_EXE_arlbook")),
        INDEX,
        data,
        &args,
    )
}

fn json_body(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body:?}"))
}

fn submit(server: &Server, request: &Value) -> Value {
    let (status, body) = server.request("POST", "/api/jobs", request.to_string().as_bytes());
    assert_eq!(status, 201, "{body}");
    json_body(&body)
}

fn job(server: &Server, id: u64) -> Value {
    let (status, body) = server.request("GET", &format!("/api/jobs/{id}"), b"");
    assert_eq!(status, 200, "{body}");
    json_body(&body)
}

/// Polls job `id` until `done` holds (or panics after `limit`).
fn wait_for(server: &Server, id: u64, limit: Duration, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + limit;
    loop {
        let view = job(server, id);
        if done(&view) {
            return view;
        }
        assert!(
            Instant::now() < deadline,
            "job {id} never got there: {view}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn is_final(view: &Value) -> bool {
    matches!(
        view["state"].as_str(),
        Some("succeeded" | "failed" | "cancelled")
    )
}

fn file_rows(view: &Value) -> Vec<Value> {
    let path = Path::new(view["dir"].as_str().unwrap()).join("metrics.jsonl");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Reads a server-sent-event stream to its `end` event: (data rows, end payload).
fn read_events(server: &Server, path: &str) -> (Vec<Value>, Value) {
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(300)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\n\r\n",
        server.addr
    )
    .unwrap();
    let mut reader = BufReader::new(stream);
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    assert!(status.contains(" 200 "), "{status}");
    let (mut rows, mut event) = (Vec::new(), String::new());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            reader.read_line(&mut line).unwrap() > 0,
            "stream closed before `end`"
        );
        // Chunk-size lines of the chunked encoding are not SSE fields; skip them.
        let text = line.trim_end_matches(['\r', '\n']);
        if let Some(name) = text.strip_prefix("event: ") {
            name.clone_into(&mut event);
        } else if let Some(data) = text.strip_prefix("data: ") {
            let value = json_body(data);
            if event == "end" {
                return (rows, value);
            }
            rows.push(value);
        } else if text.is_empty() {
            event.clear();
        }
    }
}

#[test]
fn bad_job_requests_get_4xx_naming_the_field() {
    let data = scratch("bad");
    let server = start(&data, &[]);
    for (body, status, field) in [
        (json!({"grpo": {"group_size": 1}}), 422, "grpo.group_size"),
        (json!({"grpo": {"group_size": "8"}}), 422, "grpo.group_size"),
        (json!({"grpo": {"eps_low": "NaN"}}), 422, "grpo.eps_low"),
        (
            json!({"grpo": {"eps_high": "Infinity"}}),
            422,
            "grpo.eps_high",
        ),
        (
            json!({"grpo": {"group_size": 1_000_000_000_000_u64}}),
            422,
            "grpo.group_size",
        ),
        (
            json!({"sft": {"steps": 99_999_999_999_u64}}),
            422,
            "sft.steps",
        ),
        (
            json!({"sft": {"learning_rate": -1.0}}),
            422,
            "sft.learning_rate",
        ),
        (
            json!({"model": {"width": 30, "heads": 4}}),
            422,
            "model.heads",
        ),
        (
            json!({"grpo": {"reduction": "average"}}),
            422,
            "grpo.reduction",
        ),
        (
            json!({"grpo": {"unknown_knob": 1}}),
            422,
            "grpo.unknown_knob",
        ),
        (json!({"seed": -5}), 422, "seed"),
        (json!({"seed": "seven"}), 422, "seed"),
        (json!({"model": "big"}), 422, "model"),
        (
            json!({"validation": {"tasks": 1e300}}),
            422,
            "validation.tasks",
        ),
        (json!({"preset": "no-such-preset"}), 422, "preset"),
        (json!({"preset": "../../etc/passwd"}), 422, "preset"),
        (json!({"preset": ["cpu-small"]}), 422, "preset"),
        (json!("a string"), 422, "(request)"),
    ] {
        let (got, text) = server.request("POST", "/api/jobs", body.to_string().as_bytes());
        assert_eq!(got, status, "{body}: {text}");
        assert_eq!(json_body(&text)["error"]["field"], field, "{body}: {text}");
    }
    for raw in [
        &b"{not json"[..],
        b"",
        b"{\"seed\": 1e999}",
        b"\xff\xfe",
        b"[[[[[[[[",
    ] {
        let (got, text) = server.request("POST", "/api/jobs", raw);
        assert_eq!(got, 422, "{raw:?}: {text}");
        assert_eq!(json_body(&text)["error"]["field"], "(request)");
    }
    // Mutated copies of a valid request: never a 5xx, never a non-JSON error.
    let valid = tiny(2).to_string().into_bytes();
    let mut state = 0x2545_f491_u64;
    let mut next = move |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n.max(1) as u64) as usize
    };
    let noise = b"{}[]\":,0-9eE.nulltrue\\ \x00\xff";
    let mut accepted = Vec::new();
    for _ in 0..150 {
        let mut body = valid.clone();
        for _ in 0..=next(4) {
            let at = next(body.len());
            match (body.is_empty(), next(3)) {
                (false, 0) => body[at] = noise[next(noise.len())],
                (false, 1) => body.truncate(at),
                _ => body.insert(at, noise[next(noise.len())]),
            }
        }
        let (got, text) = server.request("POST", "/api/jobs", &body);
        let value = json_body(&text);
        if got == 201 {
            accepted.push(value["id"].as_u64().unwrap());
        } else {
            assert!((400..500).contains(&got), "{got}: {text}");
            assert!(value["error"]["field"].is_string(), "{text}");
        }
    }
    for id in accepted {
        server.request("DELETE", &format!("/api/jobs/{id}"), b"");
    }
    for (method, path) in [
        ("GET", "/api/jobs/0"),
        ("GET", "/api/jobs/abc"),
        ("GET", "/api/jobs/99999"),
        ("GET", "/api/jobs/-3"),
        ("GET", "/api/jobs/99999999999999999999999"),
        ("DELETE", "/api/jobs/99999"),
        ("DELETE", "/api/jobs/abc"),
        ("GET", "/api/jobs/99999/metrics"),
        ("GET", "/api/jobs/%00/metrics"),
    ] {
        let (got, text) = server.request(method, path, b"");
        assert_eq!(got, 404, "{method} {path}: {text}");
        assert_eq!(json_body(&text)["error"]["field"], "id", "{method} {path}");
    }
    drop(server);
    cleanup(&data);
}

#[test]
fn a_job_trains_and_streams_every_metrics_row_once() {
    let data = scratch("run");
    let server = start(&data, &[]);
    let created = submit(&server, &tiny(6));
    let id = created["id"].as_u64().unwrap();
    assert_eq!(created["config"]["sft"]["steps"], 6);
    let (rows, end) = read_events(&server, &format!("/api/jobs/{id}/metrics"));
    assert_eq!(end["state"], "succeeded", "{end}");
    assert_eq!(keys(&rows), expected_keys(6));
    let view = job(&server, id);
    assert_eq!(view["state"], "succeeded");
    assert_eq!(file_rows(&view), rows);
    assert_eq!(view["last_metrics"], *rows.last().unwrap());
    assert!(view["checkpoint"].as_str().unwrap().contains("grpo-000004"));
    assert!(view["finished_unix_ms"].as_i64() >= view["started_unix_ms"].as_i64());
    // A finished job replays its whole stream and cannot be cancelled.
    let (again, _) = read_events(&server, &format!("/api/jobs/{id}/metrics"));
    assert_eq!(again, rows);
    let (status, body) = server.request("DELETE", &format!("/api/jobs/{id}"), b"");
    assert_eq!(status, 409, "{body}");
    // The data folder holds exactly what `arlbook train --out` writes.
    let dir = PathBuf::from(view["dir"].as_str().unwrap());
    assert!(dir.join("config.toml").is_file());
    assert!(dir.join("checkpoints").join("latest").is_file());
    assert!(data.join("arlbook.db").is_file());
    drop(server);
    cleanup(&data);
}

/// Follows job `id` to its end: it succeeded after exactly one resume, and its stream
/// and its file hold every row once. Returns the streamed rows and the final view.
fn finished_after_one_resume(server: &Server, id: u64, sft_steps: u64) -> (Vec<Value>, Value) {
    let (rows, end) = read_events(server, &format!("/api/jobs/{id}/metrics"));
    assert_eq!(end["state"], "succeeded", "{end}");
    let view = job(server, id);
    assert_eq!(view["resumes"], 1, "{view}");
    assert_eq!(keys(&rows), expected_keys(sft_steps));
    assert_eq!(keys(&file_rows(&view)), expected_keys(sft_steps));
    (rows, view)
}

/// A server on `data` running a tiny job of `sft_steps` SFT steps, returned once the
/// job has a checkpoint but is far from done: the server, the job id and its view.
fn job_past_its_first_checkpoint(data: &Path, sft_steps: u64) -> (Server, u64, Value) {
    let server = start(data, &[]);
    let id = submit(&server, &tiny(sft_steps))["id"].as_u64().unwrap();
    wait_for(&server, id, Duration::from_secs(300), |v| {
        v["checkpoint"].is_string() || is_final(v)
    });
    let before = job(&server, id);
    assert_eq!(before["state"], "running", "{before}");
    (server, id, before)
}

#[test]
fn a_server_killed_mid_job_resumes_it_on_restart_with_every_row_once() {
    let data = scratch("kill");
    let sft_steps = 40;
    let (mut server, id, before) = job_past_its_first_checkpoint(&data, sft_steps);
    let rows_before = file_rows(&before).len();
    server.kill();
    let mut server = start(&data, &[]);
    let (status, body) = server.request("GET", "/api/jobs", b"");
    assert_eq!(status, 200);
    let listed = json_body(&body)["jobs"].as_array().unwrap().clone();
    assert_eq!(listed.len(), 1, "{body}");
    assert!(
        matches!(listed[0]["state"].as_str(), Some("interrupted" | "running")),
        "{body}"
    );
    let (rows, view) = finished_after_one_resume(&server, id, sft_steps);
    assert!(
        rows_before < rows.len(),
        "the kill landed after the run ended"
    );
    let log = std::fs::read_to_string(Path::new(view["dir"].as_str().unwrap()).join("train.log"))
        .unwrap();
    assert!(log.contains("resuming"), "{log}");
    server.kill();
    cleanup(&data);
}

#[test]
fn a_server_stopped_with_sigterm_marks_its_job_interrupted_and_resumes_it() {
    let data = scratch("term");
    let sft_steps = 40;
    let (mut server, id, before) = job_past_its_first_checkpoint(&data, sft_steps);
    let dir = before["dir"].as_str().unwrap().to_owned();
    // A process whose command line is `... train ... <dir> ...` (read from /proc).
    let trainer_running = || {
        std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .filter_map(|entry| std::fs::read(entry.path().join("cmdline")).ok())
            .map(|raw| String::from_utf8_lossy(&raw).replace('\0', " "))
            .any(|cmdline| cmdline.contains(" train ") && cmdline.contains(&dir))
    };
    assert!(trainer_running(), "no training process found for {dir}");
    let status = server
        .terminate(Duration::from_secs(30))
        .expect("the server did not stop within 30 s of SIGTERM");
    assert!(status.success(), "exit status {status}");
    // The training process went with it: nothing runs on the job's folder.
    let started = Instant::now();
    while trainer_running() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the training process outlived the server"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut server = start(&data, &[]);
    finished_after_one_resume(&server, id, sft_steps);
    server.kill();
    cleanup(&data);
}

#[test]
fn a_trainer_killed_by_a_signal_is_interrupted_and_resumed_from_its_checkpoint() {
    let data = scratch("trainer-kill");
    let sft_steps = 40;
    let (server, id, before) = job_past_its_first_checkpoint(&data, sft_steps);
    let pid = before["pid"].as_i64().unwrap();
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    // Interrupted with the signal in its error, then started again from the checkpoint.
    let resumed = wait_for(&server, id, Duration::from_secs(60), |v| {
        v["resumes"] == 1 || is_final(v)
    });
    assert!(
        resumed["error"].as_str().unwrap_or("").contains("signal 9"),
        "the signal is in the job's error: {resumed}"
    );
    finished_after_one_resume(&server, id, sft_steps);
    cleanup(&data);
}

#[test]
fn a_lost_database_never_hands_an_old_folder_to_a_new_job() {
    let data = scratch("lost-db");
    let (mut server, _, _) = job_past_its_first_checkpoint(&data, 40);
    server.kill();
    for file in ["arlbook.db", "arlbook.db-wal", "arlbook.db-shm"] {
        let _ = std::fs::remove_file(data.join(file));
    }
    let server = start(&data, &[]);
    // The new database starts again at id 1, with another config (6 SFT steps).
    let mut request = tiny(6);
    request["seed"] = json!(5);
    let id = submit(&server, &request)["id"].as_u64().unwrap();
    assert_eq!(id, 1);
    let (rows, end) = read_events(&server, "/api/jobs/1/metrics");
    assert_eq!(end["state"], "succeeded", "{end}");
    let view = job(&server, id);
    assert_eq!(view["resumes"], 0, "the new job resumed nothing: {view}");
    assert_eq!(keys(&rows), expected_keys(6), "only the new job's own rows");
    let orphans: Vec<_> = std::fs::read_dir(data.join("jobs"))
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("orphaned-1-"))
        .collect();
    assert_eq!(orphans.len(), 1, "the old job's folder is kept aside");
    assert!(orphans[0].path().join("checkpoints").is_dir());
    cleanup(&data);
}

#[test]
fn a_folder_of_another_job_is_not_resumed() {
    let data = scratch("foreign-folder");
    let (mut server, id, before) = job_past_its_first_checkpoint(&data, 40);
    server.kill();
    let dir = Path::new(before["dir"].as_str().unwrap()).to_owned();
    std::fs::write(dir.join("job.key"), "0123456789abcdef0123456789abcdef").unwrap();
    let server = start(&data, &[]);
    let view = wait_for(&server, id, Duration::from_secs(60), is_final);
    assert_eq!(view["state"], "failed", "{view}");
    assert!(
        view["error"]
            .as_str()
            .unwrap()
            .contains("belongs to another job"),
        "{view}"
    );
    drop(server);
    cleanup(&data);
}

#[test]
fn the_queue_starts_jobs_in_order_and_cancel_kills_the_process() {
    let data = scratch("queue");
    let server = start(&data, &["--max-jobs", "1"]);
    let long = tiny(100_000);
    let first = submit(&server, &long)["id"].as_u64().unwrap();
    let second = submit(&server, &long)["id"].as_u64().unwrap();
    let third = submit(&server, &long)["id"].as_u64().unwrap();
    wait_for(&server, first, Duration::from_secs(60), |v| {
        v["state"] == "running"
    });
    assert_eq!(job(&server, second)["state"], "queued");
    assert_eq!(job(&server, third)["state"], "queued");
    // 200 concurrent compute requests while a training process runs.
    let ok = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..200)
            .map(|i| {
                let server = &server;
                scope.spawn(move || {
                    let request = json!({"n": 10 + i, "c": 2, "k": 3}).to_string();
                    server
                        .request("POST", "/api/compute/pass-at-k", request.as_bytes())
                        .0
                        == 200
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
    let (status, body) = server.request("DELETE", &format!("/api/jobs/{third}"), b"");
    assert_eq!(status, 200, "{body}");
    assert_eq!(json_body(&body)["state"], "cancelled");
    let (status, body) = server.request("DELETE", &format!("/api/jobs/{first}"), b"");
    assert_eq!(status, 200, "{body}");
    assert_eq!(json_body(&body)["state"], "cancelled");
    // The next in line starts; the cancelled third never does.
    wait_for(&server, second, Duration::from_secs(60), |v| {
        v["state"] == "running"
    });
    assert_eq!(job(&server, third)["started_unix_ms"], Value::Null);
    let (status, _) = server.request("DELETE", &format!("/api/jobs/{second}"), b"");
    assert_eq!(status, 200);
    let (status, body) = server.request("DELETE", &format!("/api/jobs/{second}"), b"");
    assert_eq!(status, 409, "{body}");
    let (status, body) = server.request("GET", "/api/jobs", b"");
    assert_eq!(status, 200);
    let states: Vec<String> = json_body(&body)["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["state"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(states, ["cancelled", "cancelled", "cancelled"]);
    drop(server);
    cleanup(&data);
}

#[test]
fn every_openapi_operation_answers() {
    let data = scratch("openapi");
    let server = start(&data, &[]);
    let (status, body) = server.request("GET", "/api/openapi.json", b"");
    assert_eq!(status, 200);
    let doc = json_body(&body);
    assert_eq!(doc["openapi"], "3.0.3");
    // A job to address: queued with a preset, then cancelled so its stream ends.
    let id = submit(
        &server,
        &json!({"preset": "cpu-small", "sft": {"steps": 100}}),
    )["id"]
        .as_u64()
        .unwrap();
    let mut seen = 0;
    let paths = doc["paths"].as_object().unwrap();
    // DELETE before the metrics stream, so the stream ends.
    let order = ["post", "get", "delete"];
    for method in order {
        for (path, item) in paths {
            if item.get(method).is_none() {
                continue;
            }
            let concrete = path
                .replace("{id}", &id.to_string())
                .replace("{name}", "pass-at-k");
            let body = match (method, path.as_str()) {
                ("post", "/api/jobs") => tiny(2).to_string(),
                ("post", _) => json!({"n": 10, "c": 3, "k": 2}).to_string(),
                _ => String::new(),
            };
            if concrete.ends_with("/metrics") {
                continue; // streamed below, once the job is final
            }
            let (status, text) = server.request(&method.to_uppercase(), &concrete, body.as_bytes());
            assert!(
                status != 404 && status != 405 && status < 500,
                "{method} {path}: {status} {text}"
            );
            seen += 1;
        }
    }
    let (rows, end) = read_events(&server, &format!("/api/jobs/{id}/metrics"));
    assert_eq!(end["state"], "cancelled");
    assert!(rows.len() < 100);
    assert_eq!(seen + 1, 11, "every documented operation was called");
    // Leave nothing running.
    let (_, body) = server.request("GET", "/api/jobs", b"");
    for j in json_body(&body)["jobs"].as_array().unwrap() {
        server.request("DELETE", &format!("/api/jobs/{}", j["id"]), b"");
    }
    drop(server);
    cleanup(&data);
}

#[test]
fn a_token_guards_the_job_changing_routes() {
    let data = scratch("token");
    let server = start(&data, &["--token", "s3cret"]);
    let body = tiny(2).to_string();
    let refused: [&[(&str, &str)]; 3] = [
        &[],
        &[("Authorization", "Bearer wrong")],
        &[("Authorization", "s3cret")],
    ];
    for headers in refused {
        let (status, text) = server.request_with("POST", "/api/jobs", headers, body.as_bytes());
        assert_eq!(status, 401, "{headers:?}: {text}");
        assert_eq!(json_body(&text)["error"]["field"], "authorization");
    }
    let auth = [("Authorization", "Bearer s3cret")];
    let (status, text) = server.request_with("POST", "/api/jobs", &auth, body.as_bytes());
    assert_eq!(status, 201, "{text}");
    let id = json_body(&text)["id"].as_u64().unwrap();
    // Reading needs no token; cancelling does.
    assert_eq!(server.request("GET", "/api/jobs", b"").0, 200);
    assert_eq!(
        server.request("DELETE", &format!("/api/jobs/{id}"), b"").0,
        401
    );
    let (status, _) = server.request_with("DELETE", &format!("/api/jobs/{id}"), &auth, b"");
    assert_eq!(status, 200);
    drop(server);
    cleanup(&data);
    // Beyond loopback without --allow-remote the server refuses to start.
    let refused = Arlbook::new(env!("CARGO_BIN_EXE_arlbook")).run(
        &[
            "serve",
            "--addr",
            "0.0.0.0:0",
            "--data",
            "/nonexistent/never",
        ],
        "",
    );
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--allow-remote"));
}

#[test]
fn traversal_oversized_bodies_and_unknown_routes_get_json_errors() {
    let data = scratch("limits");
    let server = start(&data, &[]);
    for path in [
        "/..%2f..%2fetc/passwd",
        "/%2e%2e/",
        "/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        "/..%2f..%2f..%2f..%2fCargo.toml",
        "/%2e%2e%2f%2e%2e%2farlbook.db",
        "/..%5c..%5cCargo.toml",
        "/%252e%252e/%252e%252e/etc/passwd",
    ] {
        let (status, body) = server.request("GET", path, b"");
        assert!(
            !body.contains("root:") && !body.contains("[workspace]") && !body.contains("SQLite"),
            "{path} leaked a file outside the web folder (status {status})"
        );
    }
    let big = vec![b' '; 100 << 10];
    let (status, body) = server.request("POST", "/api/jobs", &big);
    assert_eq!(status, 413);
    assert!(json_body(&body)["error"]["message"].is_string(), "{body}");
    let huge = vec![b' '; 2 << 20];
    let (status, body) = server.request("POST", "/api/compute/kl", &huge);
    assert_eq!(status, 413);
    assert!(json_body(&body)["error"].is_object(), "{body}");
    let (status, body) = server.request("GET", "/api/nope", b"");
    assert_eq!(status, 404);
    assert!(json_body(&body)["error"].is_object(), "{body}");
    let (status, body) = server.request("PUT", "/api/jobs", b"{}");
    assert_eq!(status, 405);
    assert!(json_body(&body)["error"].is_object(), "{body}");
    drop(server);
    cleanup(&data);
}

#[test]
fn presets_are_listed_with_their_settings() {
    let data = scratch("presets");
    let server = start(&data, &[]);
    let (status, body) = server.request("GET", "/api/presets", b"");
    assert_eq!(status, 200, "{body}");
    let doc = json_body(&body);
    let presets = doc["presets"].as_array().unwrap();
    let small = presets
        .iter()
        .find(|p| p["name"] == "cpu-small")
        .unwrap_or_else(|| panic!("cpu-small missing from {body}"));
    assert!(!small["summary"].as_str().unwrap().is_empty(), "{body}");
    let on_disk: toml::Table = toml::from_str(
        &std::fs::read_to_string(workspace_root().join("configs/cpu-small.toml")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        small["config"]["model"]["width"].as_i64(),
        on_disk["model"]["width"].as_integer()
    );
    // A setting the file leaves out is listed with its default.
    assert!(
        !on_disk["sft"]
            .as_table()
            .unwrap()
            .contains_key("recovery_steps")
    );
    assert_eq!(
        small["config"]["sft"]["recovery_steps"].as_i64(),
        Some(0),
        "{body}"
    );
    drop(server);
    cleanup(&data);
}

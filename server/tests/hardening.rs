//! `arlbook serve` against a hostile web and careless clients, with the real server on
//! loopback and raw sockets: cross-site writes and DNS rebinding are refused, the job
//! queue has a cap, headers have a deadline, silent connections cannot lock the server
//! out (not with a small descriptor limit either).

// The helpers below are part of the tests: an unwrap that fails is a failed test.
#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use arlbook_tests::cli::Arlbook;
use arlbook_tests::http::Server;
use serde_json::Value;

const INDEX: &str = "<!doctype html><title>arlbook hardening test</title>";

fn arlbook() -> Arlbook {
    Arlbook::new(env!("CARGO_BIN_EXE_arlbook"))
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("arlbook-hardening-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Sends `head` (request line and headers, without the blank line) and `body` as
/// written; returns the status and the JSON body.
fn raw(addr: &str, head: &str, body: &str) -> (u16, Value) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let text = format!(
        "{head}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(text.as_bytes()).unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {answer:?}"));
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

fn field(body: &Value) -> &str {
    body["error"]["field"].as_str().unwrap_or("")
}

/// A job that trains for a long time (the trainer's tiny model, 100,000 SFT steps),
/// so it is still running while the test looks at the queue.
const JOB: &str = r#"{"backend": "cpu", "model": {"layers": 1, "width": 16, "heads": 2, "context": 400},
  "harness": {"max_turns": 6, "max_context_tokens": 400, "max_new_tokens": 24},
  "sft": {"steps": 100000, "batch_episodes": 4, "tasks": 24}}"#;

#[test]
fn cross_site_writes_and_rebinding_are_refused() {
    let server = Server::start(&arlbook(), INDEX);
    let addr = server.addr.clone();
    // A form post from another site: text/plain needs no preflight in a browser.
    let (status, body) = raw(
        &addr,
        &format!(
            "POST /api/jobs HTTP/1.1\r\nHost: {addr}\r\nOrigin: http://evil.example\r\nContent-Type: text/plain"
        ),
        JOB,
    );
    assert_eq!((status, field(&body)), (403, "origin"), "{body}");
    let (status, body) = raw(
        &addr,
        &format!("POST /api/jobs HTTP/1.1\r\nHost: {addr}\r\nContent-Type: text/plain"),
        JOB,
    );
    assert_eq!((status, field(&body)), (415, "content-type"), "{body}");
    let (status, body) = raw(
        &addr,
        &format!(
            "POST /api/compute/mixed-group HTTP/1.1\r\nHost: {addr}\r\nContent-Type: text/plain"
        ),
        r#"{"p": 0.5, "group_size": 4}"#,
    );
    assert_eq!((status, field(&body)), (415, "content-type"), "{body}");
    // A page on a rebound DNS name reaches the server under that name.
    let port = addr.rsplit(':').next().unwrap();
    let (status, body) = raw(
        &addr,
        &format!("GET /api/jobs HTTP/1.1\r\nHost: rebound.evil.example:{port}"),
        "",
    );
    assert_eq!((status, field(&body)), (403, "host"), "{body}");
    let (status, body) = raw(
        &addr,
        &format!("DELETE /api/jobs/1 HTTP/1.1\r\nHost: {addr}\r\nOrigin: null"),
        "",
    );
    assert_eq!((status, field(&body)), (403, "origin"), "{body}");
    // The server's own pages, localhost and plain clients still work.
    let (status, _) = raw(
        &addr,
        &format!(
            "POST /api/compute/pass-at-k HTTP/1.1\r\nHost: {addr}\r\nOrigin: http://{addr}\r\nContent-Type: application/json"
        ),
        r#"{"n": 10, "c": 3, "k": 1}"#,
    );
    assert_eq!(status, 200);
    let (status, _) = raw(
        &addr,
        &format!("GET /api/health HTTP/1.1\r\nHost: localhost:{port}"),
        "",
    );
    assert_eq!(status, 200);
    let (status, _) = raw(
        &addr,
        &format!("GET / HTTP/1.1\r\nHost: rebound.evil.example:{port}"),
        "",
    );
    assert_eq!(
        status, 200,
        "the notebook's public files are not behind the check"
    );
}

#[test]
fn the_job_queue_has_a_cap() {
    let data = scratch("queue");
    let server = Server::start_with(
        &arlbook(),
        INDEX,
        &data,
        &["--max-jobs", "1", "--max-queued", "1"],
    );
    let (status, first) = server.request("POST", "/api/jobs", JOB.as_bytes());
    assert_eq!(status, 201, "{first}");
    let id = serde_json::from_str::<Value>(&first).unwrap()["id"].clone();
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let (_, job) = server.request("GET", &format!("/api/jobs/{id}"), b"");
        if serde_json::from_str::<Value>(&job).unwrap()["state"] == "running" {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // The first runs; one more may wait, not two.
    let (status, second) = server.request("POST", "/api/jobs", JOB.as_bytes());
    assert_eq!(status, 201, "{second}");
    let (status, third) = server.request("POST", "/api/jobs", JOB.as_bytes());
    assert_eq!(status, 429, "{third}");
    let third: Value = serde_json::from_str(&third).unwrap();
    assert_eq!(field(&third), "(queue)");
    drop(server);
    let _ = std::fs::remove_dir_all(&data);
}

/// Whether the server has closed `stream` (a read gives end of file or an error).
fn closed(stream: &mut TcpStream) -> bool {
    stream
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let mut byte = [0_u8; 1];
    match stream.read(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    }
}

#[test]
fn dribbled_headers_are_cut_at_the_deadline() {
    let data = scratch("dribble");
    let server = Server::start_with(&arlbook(), INDEX, &data, &["--header-timeout", "2"]);
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    stream.write_all(b"GET /api/health HTTP/1.1\r\n").unwrap();
    let start = Instant::now();
    // One header line every 300 ms would go on for a minute; the deadline is 2 s.
    let mut cut = false;
    while start.elapsed() < Duration::from_secs(60) {
        if stream.write_all(b"X-Dribble: 1\r\n").is_err() || closed(&mut stream) {
            cut = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(
        cut,
        "a connection dribbling its headers stayed open for a minute"
    );
    assert!(
        start.elapsed() >= Duration::from_secs(1),
        "cut before the deadline"
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&data);
}

#[test]
fn silent_sockets_beyond_the_cap_and_the_descriptor_limit_do_not_lock_the_server_out() {
    let data = scratch("silent");
    let server = Server::start_with(
        &arlbook(),
        INDEX,
        &data,
        &["--header-timeout", "2", "--max-connections", "8"],
    );
    // More silent sockets than connections allowed: the health check waits for the
    // deadline to cut some, then is answered.
    let silent: Vec<TcpStream> = (0..20)
        .map(|_| TcpStream::connect(&server.addr).unwrap())
        .collect();
    let (status, _) = server.request("GET", "/api/health", b"");
    assert_eq!(status, 200);
    drop(silent);
    // A descriptor limit below the silent sockets (set on the running server): the
    // accept loop waits out the descriptor shortage instead of dying or spinning on it.
    let limited = std::process::Command::new("prlimit")
        .args(["--pid", &server.pid().to_string(), "--nofile=48:48"])
        .status();
    if limited.is_ok_and(|s| s.success()) {
        let silent: Vec<TcpStream> = (0..80)
            .map(|_| TcpStream::connect(&server.addr).unwrap())
            .collect();
        let (status, _) = server.request("GET", "/api/health", b"");
        assert_eq!(status, 200);
        drop(silent);
    } else {
        eprintln!("SKIPPED the descriptor-limit half: prlimit could not limit the server");
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&data);
}

#[test]
fn a_second_server_on_the_same_data_folder_exits_with_a_message() {
    let data = scratch("two-servers");
    let first = Server::start_with(&arlbook(), INDEX, &data, &[]);
    let second = arlbook()
        .command()
        .args(["serve", "--addr", "127.0.0.1:0", "--web"])
        .arg(data.with_extension("web"))
        .arg("--data")
        .arg(&data)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "the second server ran: {stderr}");
    assert!(
        stderr.contains("another arlbook serve") && stderr.contains(&first.pid().to_string()),
        "{stderr}"
    );
    let (status, _) = first.request("GET", "/api/health", b"");
    assert_eq!(status, 200, "the first server is unaffected");
    drop(first);
    let _ = std::fs::remove_dir_all(&data);
}

/// Sends `bytes` exactly as given and returns the status, the head and the JSON body.
fn raw_bytes(addr: &str, bytes: &[u8]) -> (u16, String, Value) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    // The server may answer and close before it has read everything.
    let _ = stream.write_all(bytes);
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {answer:?}"));
    (
        status,
        head.to_owned(),
        serde_json::from_str(body).unwrap_or(Value::Null),
    )
}

#[test]
fn requests_the_parser_refuses_get_json_errors() {
    let data = scratch("parser");
    let server = Server::start_with(&arlbook(), INDEX, &data, &[]);
    // Far over hyper's ~400 KiB head buffer: a head under about twice that can still be
    // read whole by one of its growing reads before the limit is checked.
    let long_header = format!(
        "GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Long: {}\r\n\r\n",
        "a".repeat(2_000_000)
    );
    let long_uri = format!(
        "GET /{} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        "a".repeat(70_000)
    );
    let mut many_headers = "GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n".to_owned();
    for i in 0..120 {
        for part in ["X-", &i.to_string(), ": 1\r\n"] {
            many_headers.push_str(part);
        }
    }
    many_headers.push_str("\r\n");
    let cases: [(&[u8], u16); 5] = [
        (b"GARBAGE\r\n\r\n", 400),
        (b"GET / HTTP/3.0\r\nHost: 127.0.0.1\r\n\r\n", 400),
        (long_header.as_bytes(), 431),
        (many_headers.as_bytes(), 431),
        (long_uri.as_bytes(), 414),
    ];
    for (request, expected) in cases {
        let shown = String::from_utf8_lossy(&request[..request.len().min(40)]).into_owned();
        let (status, head, body) = raw_bytes(&server.addr, request);
        assert_eq!(status, expected, "{shown:?}: {head}");
        assert!(
            head.contains("content-type: application/json"),
            "{shown:?}: {head}"
        );
        assert_eq!(field(&body), "(request)", "{shown:?}: {body}");
        assert!(body["error"]["message"].is_string(), "{shown:?}: {body}");
    }
    // A well-formed request after them is answered as usual.
    let (status, _) = server.request("GET", "/api/health", b"");
    assert_eq!(status, 200);
    drop(server);
    let _ = std::fs::remove_dir_all(&data);
}

fn health(server: &Server) -> Value {
    let (status, body) = server.request("GET", "/api/health", b"");
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

#[test]
fn a_computation_past_the_request_deadline_is_stopped() {
    let data = scratch("deadline");
    let server = Server::start_with(&arlbook(), INDEX, &data, &["--request-timeout", "1"]);
    // Eight requests at the work budget (about a second of one core each) at once on
    // a machine of a few cores: most pass the 1 s deadline while running.
    let request = r#"{"mu": [0.5, 0.5], "pi": [0.9, 0.1], "values": [1.0, 2.0],
        "samples": 1000000, "estimates": 50}"#;
    let statuses: Vec<u16> = std::thread::scope(|scope| {
        let calls: Vec<_> = (0..8)
            .map(|_| {
                scope.spawn(|| {
                    server
                        .request(
                            "POST",
                            "/api/compute/importance-sampling",
                            request.as_bytes(),
                        )
                        .0
                })
            })
            .collect();
        calls.into_iter().map(|c| c.join().unwrap()).collect()
    });
    let timed_out = statuses.iter().filter(|&&s| s == 408).count();
    assert!(
        timed_out > 0,
        "no request reached the deadline: {statuses:?}"
    );
    assert!(
        statuses.iter().all(|&s| s == 408 || s == 200),
        "{statuses:?}"
    );
    // Every computation ends, the ones past the deadline by being stopped.
    let start = Instant::now();
    let mut state = health(&server);
    while state["computations_running"] != 0 && start.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(100));
        state = health(&server);
    }
    assert_eq!(state["computations_running"], 0, "{state}");
    let cancelled = state["computations_cancelled"].as_u64().unwrap();
    assert!(
        cancelled >= 1 && cancelled as usize <= timed_out,
        "{cancelled} stopped for {timed_out} answered 408: {state}"
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&data);
}

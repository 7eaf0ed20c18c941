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

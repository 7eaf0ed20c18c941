//! A real `arlbook serve` on a loopback port, and a minimal HTTP/1.1 client.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use crate::cli::Arlbook;

/// A running server, killed when dropped.
pub struct Server {
    child: Child,
    /// `host:port` it listens on.
    pub addr: String,
    _dirs: tempdir::TempDirs,
}

mod tempdir {
    use std::path::PathBuf;

    /// Scratch folders removed on drop.
    pub struct TempDirs(pub Vec<PathBuf>);

    impl Drop for TempDirs {
        fn drop(&mut self) {
            for dir in &self.0 {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }
}

impl Server {
    /// Starts `arlbook serve` (the binary `arlbook`) on port 0 with a scratch web folder
    /// holding `index_html`.
    ///
    /// # Panics
    /// If the server does not start or print its URL.
    pub fn start(arlbook: &Arlbook, index_html: &str) -> Self {
        let base = std::env::temp_dir().join(format!(
            "arlbook-test-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let web = base.join("web");
        let data = base.join("data");
        std::fs::create_dir_all(&web).expect("creating the scratch web folder");
        std::fs::write(web.join("index.html"), index_html).expect("writing index.html");
        Self::spawn(arlbook, &web, &data, vec![base])
    }

    /// Starts `arlbook serve` on port 0 serving the built notebook in `web` (for the
    /// browser tests).
    ///
    /// # Panics
    /// If the server does not start or print its URL.
    pub fn serve_web(arlbook: &Arlbook, web: &std::path::Path) -> Self {
        let data = std::env::temp_dir().join(format!(
            "arlbook-test-data-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let configs = crate::cli::workspace_root().join("configs");
        let configs = configs.to_string_lossy();
        Self::spawn_with(
            arlbook,
            web,
            &data,
            vec![data.clone()],
            &["--configs", &configs],
        )
    }

    /// Starts `arlbook serve` on a loopback port with a scratch web folder holding
    /// `index_html`, the data folder `data` (kept on drop, so a second server can
    /// open it) and `extra` arguments.
    ///
    /// # Panics
    /// If the server does not start or print its URL.
    pub fn start_with(arlbook: &Arlbook, index_html: &str, data: &Path, extra: &[&str]) -> Self {
        let web = data.with_extension("web");
        std::fs::create_dir_all(&web).expect("creating the scratch web folder");
        std::fs::write(web.join("index.html"), index_html).expect("writing index.html");
        Self::spawn_with(arlbook, &web, data, vec![web.clone()], extra)
    }

    fn spawn(arlbook: &Arlbook, web: &Path, data: &Path, scratch: Vec<PathBuf>) -> Self {
        Self::spawn_with(arlbook, web, data, scratch, &[])
    }

    fn spawn_with(
        arlbook: &Arlbook,
        web: &Path,
        data: &Path,
        scratch: Vec<PathBuf>,
        extra: &[&str],
    ) -> Self {
        let mut child = arlbook
            .command()
            .args(["serve", "--addr", "127.0.0.1:0", "--web"])
            .arg(web)
            .arg("--data")
            .arg(data)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starting arlbook serve");
        let stdout = child.stdout.take().expect("server stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("reading the server's first line");
        let addr = line.split("http://").nth(1).map_or_else(
            || panic!("server printed no URL: {line:?}"),
            |rest| rest.trim().trim_end_matches('/').to_owned(),
        );
        Self {
            child,
            addr,
            _dirs: tempdir::TempDirs(scratch),
        }
    }

    /// The server process's id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Asks the server to stop with SIGTERM (as `systemctl stop` or Ctrl-C would) and
    /// waits up to `limit` for it to exit; returns its exit status, or `None` when it
    /// was still running at the limit (it is then killed).
    ///
    /// # Panics
    /// If `sh` cannot be run.
    pub fn terminate(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        // The shell's built-in `kill`: no dependency on procps being installed.
        let sent = std::process::Command::new("sh")
            .args(["-c", &format!("kill -TERM {}", self.child.id())])
            .status()
            .expect("running sh -c 'kill -TERM'");
        assert!(sent.success(), "kill -TERM failed");
        let started = std::time::Instant::now();
        while started.elapsed() < limit {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.kill();
        None
    }

    /// Kills the server with SIGKILL (no chance to clean up) and waits for it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends one request and returns (status, body).
    ///
    /// # Panics
    /// On a socket error or a malformed response.
    pub fn request(&self, method: &str, path: &str, body: &[u8]) -> (u16, String) {
        self.request_with(method, path, &[], body)
    }

    /// Sends one request with extra `headers` and returns (status, body).
    ///
    /// # Panics
    /// On a socket error or a malformed response.
    pub fn request_with(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> (u16, String) {
        request(&self.addr, method, path, headers, body)
    }
}

/// Sends one HTTP/1.1 request to `addr` (`host:port`) and returns (status, body).
///
/// # Panics
/// On a socket error or a malformed response.
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).expect("connecting to the server");
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .expect("setting a read timeout");
    let mut extra = String::new();
    for (name, value) in headers {
        for part in [name, ": ", value, "\r\n"] {
            extra.push_str(part);
        }
    }
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n",
        body.len()
    );
    stream
        .write_all(head.as_bytes())
        .expect("writing the request head");
    // The server may answer (413) before reading a large body; ignore a reset here.
    let _ = stream.write_all(body);
    let raw = read_response(&mut stream);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("malformed response: {text:?}"));
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, decode_chunked(body))
}

static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Reads one response: up to the end of its `Content-Length` body when the head gives
/// one (some servers, chromedriver among them, keep the socket open after answering
/// despite `Connection: close`), else until the peer closes.
fn read_response(stream: &mut TcpStream) -> Vec<u8> {
    let mut raw = Vec::new();
    let mut chunk = [0_u8; 16 << 10];
    loop {
        if let Some(head_end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&raw[..head_end]).to_ascii_lowercase();
            let length = head.lines().find_map(|line| {
                line.strip_prefix("content-length:")
                    .and_then(|v| v.trim().parse::<usize>().ok())
            });
            if length.is_some_and(|n| raw.len() >= head_end + 4 + n) {
                return raw;
            }
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return raw,
            Ok(n) => raw.extend_from_slice(&chunk[..n]),
        }
    }
}

/// Undoes `Transfer-Encoding: chunked` when the body looks chunked.
fn decode_chunked(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    loop {
        let Some((size_line, after)) = rest.split_once("\r\n") else {
            return body.to_owned();
        };
        let Ok(size) = usize::from_str_radix(size_line.trim(), 16) else {
            return body.to_owned();
        };
        if size == 0 {
            return out;
        }
        if after.len() < size {
            return body.to_owned();
        }
        out.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A plain static file server on a loopback port, with no API: the notebook as it is
/// opened from a folder or a static host (every `/api/...` answers 404). App routes
/// without a file get `index.html`. Runs until the process ends.
///
/// # Panics
/// If no loopback port can be bound.
pub fn serve_static(dir: &Path) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binding a loopback port");
    let addr = listener
        .local_addr()
        .expect("the bound address")
        .to_string();
    let dir = dir.to_path_buf();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let dir = dir.clone();
            std::thread::spawn(move || answer_static(&dir, stream));
        }
    });
    addr
}

fn answer_static(dir: &Path, mut stream: TcpStream) {
    let mut reader = BufReader::new(match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return,
    });
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    // Skip the headers.
    let mut line = String::new();
    while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
        line.clear();
    }
    let path = request_line.split_whitespace().nth(1).unwrap_or("/");
    let path = path.split(['?', '#']).next().unwrap_or("/");
    let safe = !path.contains("..");
    let file = dir.join(path.trim_start_matches('/'));
    let (status, body, kind) = if !safe || path.starts_with("/api/") {
        ("404 Not Found", b"not found".to_vec(), "text/plain")
    } else if file.is_file() {
        let kind = match file.extension().and_then(|e| e.to_str()) {
            Some("js") => "text/javascript",
            Some("wasm") => "application/wasm",
            Some("css") => "text/css",
            Some("html") => "text/html",
            _ => "application/octet-stream",
        };
        ("200 OK", std::fs::read(&file).unwrap_or_default(), kind)
    } else {
        let index = std::fs::read(dir.join("index.html")).unwrap_or_default();
        ("200 OK", index, "text/html")
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(&body);
}

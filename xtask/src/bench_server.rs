//! `cargo xtask bench server`: requests per second and latency percentiles of a small
//! compute call (`POST /api/compute/pass-at-k`) against `arlbook serve` on loopback,
//! with N concurrent keep-alive clients (1 to 500); then a mixed run, where a few
//! clients send requests near the per-request work budget while the others send the
//! small call, to show the small call's p99 while expensive work runs.
//!
//! The clients are plain threads speaking HTTP/1.1 over one `TcpStream` each, so the
//! numbers measure the server, not a client library. Each level warms up for
//! [`WARM_UP`], then every client sends requests back to back for [`MEASURE`]; the
//! latency of a request is from its first byte written to its last byte read.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::cmd::{cargo, run, workspace_root};

const WARM_UP: Duration = Duration::from_millis(500);
const MEASURE: Duration = Duration::from_secs(3);
const CLIENTS: [usize; 6] = [1, 4, 16, 64, 200, 500];
const CHEAP: (&str, &str) = ("pass-at-k", r#"{"n": 20, "c": 5, "k": 4}"#);
/// About 40 M of the 50 M draws a request may make.
const EXPENSIVE: (&str, &str) = (
    "importance-sampling",
    r#"{"mu": [0.2, 0.8], "pi": [0.6, 0.4], "values": [0.75, 0.35], "samples": 20000, "estimates": 2000, "seed": 7}"#,
);
/// The mixed run: cheap clients and expensive clients at once.
const MIXED: (usize, usize) = (16, 2);

/// The server process, killed on drop.
struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn binary() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace_root().join("target"), PathBuf::from);
    target.join("debug").join("arlbook")
}

fn start(scratch: &std::path::Path) -> anyhow::Result<(Served, String)> {
    let mut child = Command::new(binary())
        .args(["serve", "--addr", "127.0.0.1:0", "--web"])
        .arg(scratch.join("web"))
        .arg("--data")
        .arg(scratch.join("data"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", binary().display()))?;
    let stdout = child.stdout.take().context("the server's stdout")?;
    let served = Served(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    let Some(rest) = line.split("http://").nth(1) else {
        bail!("the server printed no URL: {line:?}");
    };
    Ok((served, rest.trim().trim_end_matches('/').to_owned()))
}

/// One request on an open keep-alive connection; returns the status.
fn call(reader: &mut BufReader<TcpStream>, request: &[u8]) -> anyhow::Result<u16> {
    reader.get_mut().write_all(request)?;
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("bad status line {line:?}"))?;
    let mut length = 0_usize;
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse()?;
        }
    }
    let mut body = vec![0_u8; length];
    reader.read_exact(&mut body)?;
    Ok(status)
}

/// One client: requests `(entry, body)` back to back until `end`; latencies after
/// `measure_from`.
fn client(
    addr: &str,
    (entry, body): (&str, &str),
    measure_from: Instant,
    end: Instant,
) -> anyhow::Result<Vec<Duration>> {
    let stream = TcpStream::connect(addr)?;
    stream.set_nodelay(true)?;
    let mut reader = BufReader::new(stream);
    let request = format!(
        "POST /api/compute/{entry} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut latencies = Vec::new();
    loop {
        let sent = Instant::now();
        if sent >= end {
            return Ok(latencies);
        }
        let status = call(&mut reader, request.as_bytes())?;
        if status != 200 {
            bail!("the server answered {status}");
        }
        if sent >= measure_from {
            latencies.push(sent.elapsed());
        }
    }
}

fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * fraction).round() as usize;
    sorted.get(index).copied().unwrap_or_default()
}

/// Every group's latencies, sorted, with its clients `(count, call)` running at once.
fn measure(addr: &str, groups: &[(usize, (&str, &str))]) -> anyhow::Result<Vec<Vec<Duration>>> {
    let measure_from = Instant::now() + WARM_UP;
    let end = measure_from + MEASURE;
    let results: Vec<Vec<anyhow::Result<Vec<Duration>>>> = std::thread::scope(|scope| {
        let handles: Vec<Vec<_>> = groups
            .iter()
            .map(|&(count, call)| {
                (0..count)
                    .map(|_| scope.spawn(move || client(addr, call, measure_from, end)))
                    .collect()
            })
            .collect();
        handles
            .into_iter()
            .map(|group| {
                group
                    .into_iter()
                    .map(|h| {
                        h.join()
                            .unwrap_or_else(|_| Err(anyhow::anyhow!("a client panicked")))
                    })
                    .collect()
            })
            .collect()
    });
    results
        .into_iter()
        .map(|group| {
            let mut latencies = Vec::new();
            for result in group {
                latencies.extend(result?);
            }
            latencies.sort();
            Ok(latencies)
        })
        .collect()
}

fn print_row(label: &str, latencies: &[Duration]) {
    println!(
        "| {label} | {} | {:.0} | {:.2} | {:.2} |",
        latencies.len(),
        latencies.len() as f64 / MEASURE.as_secs_f64(),
        percentile(latencies, 0.5).as_secs_f64() * 1e3,
        percentile(latencies, 0.99).as_secs_f64() * 1e3,
    );
}

/// Runs the benchmark and prints the table.
pub fn run_bench() -> anyhow::Result<()> {
    run(cargo().args(["build", "--quiet", "-p", "arlbook-server"]))?;
    let scratch = std::env::temp_dir().join(format!("arlbook-bench-server-{}", std::process::id()));
    std::fs::create_dir_all(scratch.join("web"))?;
    let (_served, addr) = start(&scratch)?;
    println!("arlbook serve (debug build, dependencies at opt-level 2) on {addr}");
    println!(
        "POST /api/compute/{} {}, keep-alive, {} s per level\n",
        CHEAP.0,
        CHEAP.1,
        MEASURE.as_secs()
    );
    println!("| clients | requests | requests/s | p50 (ms) | p99 (ms) |");
    println!("|---:|---:|---:|---:|---:|");
    for clients in CLIENTS {
        let levels = measure(&addr, &[(clients, CHEAP)])?;
        print_row(&clients.to_string(), &levels[0]);
    }
    let (cheap, expensive) = MIXED;
    println!(
        "\nmixed: {cheap} clients of the small call with {expensive} clients of \
         {} {} (about 40 M draws each)\n",
        EXPENSIVE.0, EXPENSIVE.1
    );
    println!("| calls | requests | requests/s | p50 (ms) | p99 (ms) |");
    println!("|---|---:|---:|---:|---:|");
    let levels = measure(&addr, &[(cheap, CHEAP), (expensive, EXPENSIVE)])?;
    print_row(&format!("small ({cheap} clients)"), &levels[0]);
    print_row(&format!("expensive ({expensive} clients)"), &levels[1]);
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(())
}

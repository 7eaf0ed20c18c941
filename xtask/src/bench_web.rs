//! `cargo xtask bench web`: the notebook as readers get it. Builds the release bundle
//! (profile `wasm-release`), prints each file's size raw and gzipped (`gzip -9`, what a
//! server or CDN would send), then times the redraw of every figure in headless
//! Chromium against that bundle: the `latency` group of the browser test
//! (`server/tests/e2e/reader.rs`), which prints p50/p95/max per figure on the CPU path
//! and with WebGPU (SwiftShader), from 60 changes a figure (`ARLBOOK_LATENCY_SAMPLES`
//! to change it). Measurements, not pass/fail thresholds.

use std::process::Command;

use anyhow::Context;

use crate::cmd::{cargo, run};
use crate::web::{self, WebOptions};

/// Control changes timed per figure and path.
const BENCH_SAMPLES: usize = 60;

/// The budget for the whole bundle, gzipped.
const TARGET_GZIP_BYTES: u64 = 1_500_000;

/// Bytes of `path` after `gzip -9`.
fn gzipped_len(path: &std::path::Path) -> anyhow::Result<u64> {
    let out = Command::new("gzip")
        .args(["-9", "-c"])
        .arg(path)
        .output()
        .with_context(|| format!("running gzip on {}", path.display()))?;
    anyhow::ensure!(out.status.success(), "gzip failed on {}", path.display());
    Ok(out.stdout.len() as u64)
}

/// Runs the benchmark.
pub fn run_bench() -> anyhow::Result<()> {
    let dist = web::build(&WebOptions {
        dev: false,
        lint: false,
    })?;
    let mut files: Vec<_> = std::fs::read_dir(&dist)
        .with_context(|| format!("reading {}", dist.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    println!("{:<24} {:>12} {:>12}", "file", "raw bytes", "gzip -9");
    let (mut raw_total, mut gzip_total) = (0, 0);
    for file in &files {
        let raw = std::fs::metadata(file)?.len();
        let gzip = gzipped_len(file)?;
        raw_total += raw;
        gzip_total += gzip;
        let name = file.file_name().unwrap_or_default().to_string_lossy();
        println!("{name:<24} {raw:>12} {gzip:>12}");
    }
    println!(
        "{:<24} {raw_total:>12} {gzip_total:>12}  ({:.2} MB gzipped; budget {:.1} MB: {})",
        "total",
        gzip_total as f64 / 1e6,
        TARGET_GZIP_BYTES as f64 / 1e6,
        if gzip_total <= TARGET_GZIP_BYTES {
            "within"
        } else {
            "over"
        }
    );

    let mut test = cargo();
    test.arg("test")
        .args(crate::cmd::PACKAGES)
        .args(["--test", "e2e", "--", "--nocapture"]);
    crate::cmd::lint_while_building(&mut test)?;
    crate::e2e::browser_test_env(&mut test, &dist)?;
    test.env("ARLBOOK_E2E_ONLY", "latency");
    // 60 changes a figure, so the p95 is the fourth-slowest rather than the browser
    // test's second-slowest of 20; a value set by the caller is kept.
    if std::env::var_os("ARLBOOK_LATENCY_SAMPLES").is_none() {
        test.env("ARLBOOK_LATENCY_SAMPLES", BENCH_SAMPLES.to_string());
    }
    run(&mut test)
}

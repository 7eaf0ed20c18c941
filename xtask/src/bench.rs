//! `cargo xtask bench core`: the CPU core against numpy, side by side in one run.
//! `cargo xtask bench gpu`: every WGSL kernel against its CPU reference.
//! (`train`, `server`, `web` and `device` live in their own modules; `device` is the
//! dry run of the GPU machine's script, in `device.rs`.)
//!
//! Both sides compute the same two workloads (see `xtask/bench/numpy_core.py` and
//! `core/examples/bench_core.rs`); the policy-loss inputs are written once by the Rust
//! side and read by numpy, so the two losses must agree. Prints the best time per call
//! of each, and the ratio numpy / Rust (above 1 means Rust is faster).

use std::collections::BTreeMap;
use std::process::Command;

use anyhow::{Context, bail};
use serde_json::Value;

use crate::cmd::{cargo, output, workspace_root};

const BANDIT_SAMPLES: &str = "10000000";
const REPEATS: &str = "10";

/// Dispatches `bench <suite>`.
pub fn run(args: &[String]) -> anyhow::Result<()> {
    match args.first().map(String::as_str) {
        Some("core") | None => bench_core(),
        Some("gpu") => bench_gpu(),
        Some("train") => crate::bench_train::run(),
        Some("server") => crate::bench_server::run_bench(),
        Some("web") => crate::bench_web::run_bench(),
        Some("cluster") => crate::bench_cluster::run_bench(),
        Some("device") => crate::device::dry_run(),
        Some(other) => {
            bail!(
                "unknown bench suite `{other}` (available: core, gpu, train, server, web, cluster, device)"
            )
        }
    }
}

fn ensure_numpy(python: &str) -> anyhow::Result<()> {
    let has_numpy = Command::new(python)
        .args(["-c", "import numpy"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_numpy {
        crate::cmd::run(Command::new(python).args(["-m", "pip", "install", "--quiet", "numpy"]))?;
    }
    Ok(())
}

fn parse_rows(text: &str) -> anyhow::Result<BTreeMap<String, Value>> {
    let mut rows = BTreeMap::new();
    for line in text.lines().filter(|l| l.trim_start().starts_with('{')) {
        let row: Value = serde_json::from_str(line).with_context(|| format!("parsing `{line}`"))?;
        let name = row["name"].as_str().unwrap_or_default().to_owned();
        rows.insert(name, row);
    }
    Ok(rows)
}

fn bench_core() -> anyhow::Result<()> {
    let root = workspace_root();
    let data = root.join("target").join("bench").join("policy_loss.bin");
    std::fs::create_dir_all(data.parent().unwrap_or(&root)).context("creating target/bench")?;
    let rust_out = output(cargo().args([
        "run",
        "--quiet",
        "--release",
        "-p",
        "arlbook-core",
        "--example",
        "bench_core",
        "--",
        &data.to_string_lossy(),
        BANDIT_SAMPLES,
        REPEATS,
    ]))?;
    let python = if crate::cmd::has_program("python3") {
        "python3"
    } else {
        "python"
    };
    ensure_numpy(python)?;
    let numpy_out = output(
        Command::new(python)
            .current_dir(&root)
            .arg(root.join("xtask").join("bench").join("numpy_core.py"))
            .arg(&data)
            .args([BANDIT_SAMPLES, REPEATS]),
    )?;
    let rust = parse_rows(&rust_out)?;
    let numpy = parse_rows(&numpy_out)?;

    println!(
        "{:<12} {:>10} {:>12} {:>12} {:>8}  {:>14} {:>14}",
        "workload", "size", "rust ms", "numpy ms", "ratio", "rust value", "numpy value"
    );
    for (name, r) in &rust {
        let Some(n) = numpy.get(name) else {
            bail!("numpy printed no row for `{name}`");
        };
        let rust_s = r["seconds"].as_f64().unwrap_or(f64::NAN);
        let numpy_s = n["seconds"].as_f64().unwrap_or(f64::NAN);
        println!(
            "{:<12} {:>10} {:>12.2} {:>12.2} {:>7.2}x  {:>14.9} {:>14.9}",
            name,
            r["size"],
            rust_s * 1e3,
            numpy_s * 1e3,
            numpy_s / rust_s,
            r["value"].as_f64().unwrap_or(f64::NAN),
            n["value"].as_f64().unwrap_or(f64::NAN),
        );
    }
    let loss_gap = (rust["policy-loss"]["value"].as_f64().unwrap_or(f64::NAN)
        - numpy["policy-loss"]["value"].as_f64().unwrap_or(f64::NAN))
    .abs();
    let gradient_gap = (rust["policy-loss"]["gradient_sum"]
        .as_f64()
        .unwrap_or(f64::NAN)
        - numpy["policy-loss"]["gradient_sum"]
            .as_f64()
            .unwrap_or(f64::NAN))
    .abs();
    println!(
        "policy-loss |rust - numpy|: loss {loss_gap:.3e}, sum |gradient| {gradient_gap:.3e} (same inputs)"
    );
    println!(
        "bandit: different generators (Philox vs PCG64), same estimator; both estimate the exact 0.1"
    );
    if loss_gap.is_nan() || loss_gap > 1e-9 || gradient_gap.is_nan() || gradient_gap > 1e-9 {
        bail!(
            "the Rust and numpy policy losses disagree (loss {loss_gap}, gradient {gradient_gap})"
        );
    }
    Ok(())
}

/// `bench gpu`: every kernel, CPU against GPU at three sizes (see
/// `core/examples/bench_gpu.rs`), on whatever adapter wgpu finds (lavapipe here).
fn bench_gpu() -> anyhow::Result<()> {
    crate::test::ensure_lavapipe()?;
    crate::cmd::run(cargo().args([
        "run",
        "--release",
        "-p",
        "arlbook-core",
        "--features",
        "gpu",
        "--example",
        "bench_gpu",
    ]))
}

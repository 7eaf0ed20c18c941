//! `cargo xtask bench train`: the trainer's GRPO workload in burn against the same
//! model and loss in PyTorch on this CPU, side by side in one run, with ratios.
//!
//! Rust side: `arlbook bench-train` (the dev profile, whose dependencies, burn
//! included, are built at `opt-level = 2`; the hot loops are burn's). Python side:
//! `xtask/bench/torch_policy.py` in a virtual environment under `target/bench/venv` with
//! PyTorch, installed on first use from the default package index (the Python Package
//! Index, or the index and local wheels pip is configured with), run on the CPU. Both
//! use two threads.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, bail};
use serde_json::Value;

use crate::cmd::{cargo, output, workspace_root};

/// The workload flags both sides take.
const SHAPE: [(&str, &str); 11] = [
    ("--layers", "2"),
    ("--width", "96"),
    ("--heads", "4"),
    ("--context", "640"),
    ("--rows", "64"),
    ("--prompt", "200"),
    ("--new-tokens", "32"),
    ("--microbatch-rows", "16"),
    ("--turns", "5"),
    ("--turn-tokens", "16"),
    ("--observation-tokens", "24"),
];

/// The bench's Python with PyTorch (installed on first use).
pub fn venv_python() -> anyhow::Result<PathBuf> {
    let venv = workspace_root().join("target").join("bench").join("venv");
    let python = venv.join("bin").join("python");
    if !python.exists() {
        crate::cmd::run(Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
    }
    let has_torch = Command::new(&python)
        .args(["-c", "import torch"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_torch {
        // Only the index pip is configured with: another index may be unreachable, and
        // pip would wait through its retries before falling back.
        eprintln!("installing PyTorch into {}", venv.display());
        crate::cmd::run(Command::new(&python).args(["-m", "pip", "install", "--quiet", "torch"]))?;
    }
    Ok(python)
}

fn field(row: &Value, key: &str) -> f64 {
    row[key].as_f64().unwrap_or(f64::NAN)
}

/// The last JSON line of a bench's output.
fn parse(text: &str) -> anyhow::Result<Value> {
    let line = text.lines().rev().find(|l| l.trim_start().starts_with('{'));
    let Some(line) = line else {
        bail!("no JSON line in:\n{text}");
    };
    serde_json::from_str(line).with_context(|| format!("parsing `{line}`"))
}

/// `arlbook bench-train` on the shared shape, with `extra` flags.
fn arlbook_bench(extra: &[&str]) -> anyhow::Result<Value> {
    let mut rust_cmd = cargo();
    rust_cmd.args([
        "run",
        "--quiet",
        "-p",
        "arlbook-server",
        "--",
        "bench-train",
    ]);
    for (flag, value) in SHAPE {
        rust_cmd.args([flag, value]);
    }
    rust_cmd.args(extra);
    parse(&output(rust_cmd.env("RAYON_NUM_THREADS", "2"))?)
}

/// Runs both sides and prints the comparison: arlbook as it trains on the CPU (the
/// fused passes, `server/train/src/policy/fused`), arlbook on burn's forward passes and
/// autodiff graph, and PyTorch.
pub fn run() -> anyhow::Result<()> {
    let rust = arlbook_bench(&[])?;
    let burn = arlbook_bench(&["--burn-only"])?;
    // The tokenizer's vocabulary, so both models have the same parameters.
    let vocab = rust["vocab"]
        .as_u64()
        .with_context(|| format!("arlbook bench-train reported no vocab: {rust}"))?;
    let python = venv_python()?;
    let mut torch_cmd = Command::new(python);
    torch_cmd.arg(
        workspace_root()
            .join("xtask")
            .join("bench")
            .join("torch_policy.py"),
    );
    for (flag, value) in SHAPE {
        torch_cmd.args([flag, value]);
    }
    torch_cmd.args(["--vocab", &vocab.to_string()]);
    let torch_out = output(torch_cmd.args(["--threads", "2"]))?;
    let torch = parse(&torch_out)?;
    if rust["parameters"] != torch["parameters"] {
        bail!(
            "the two models differ: arlbook has {} parameters, PyTorch {}",
            rust["parameters"],
            torch["parameters"]
        );
    }
    println!(
        "model: {} layers, width {}, {} heads; {} rows x ({} prompt + {} generated) tokens; microbatches of {}",
        SHAPE[0].1, SHAPE[1].1, SHAPE[2].1, SHAPE[4].1, SHAPE[5].1, SHAPE[6].1, SHAPE[7].1
    );
    println!(
        "multi-turn episodes: {} rows x {} turns of {} generated tokens, {}-token tool results between turns",
        SHAPE[4].1, SHAPE[8].1, SHAPE[9].1, SHAPE[10].1
    );
    println!(
        "parameters: arlbook {} / pytorch {}",
        rust["parameters"], torch["parameters"]
    );
    println!(
        "{:<28} {:>14} {:>14} {:>14} {:>10} {:>10}",
        "measure", "arlbook", "arlbook burn", "pytorch", "ratio", "burn ratio"
    );
    for (label, key, higher_is_better) in [
        ("rollout tokens/s", "rollout_tokens_per_s", true),
        ("update tokens/s", "update_tokens_per_s", true),
        ("GRPO step s", "grpo_step_s", false),
        ("multi-turn tokens/s", "multi_turn_tokens_per_s", true),
    ] {
        let (r, b, t) = (field(&rust, key), field(&burn, key), field(&torch, key));
        // Ratio as "arlbook speed relative to PyTorch": above 1 means arlbook is faster.
        let ratio = |x: f64| if higher_is_better { x / t } else { t / x };
        println!(
            "{label:<28} {r:>14.3} {b:>14.3} {t:>14.3} {:>9.2}x {:>9.2}x",
            ratio(r),
            ratio(b)
        );
    }
    let (r, b, t) = (
        field(&rust, "peak_resident_mib"),
        field(&burn, "peak_resident_mib"),
        field(&torch, "peak_resident_mib"),
    );
    println!(
        "{:<28} {r:>14.0} {b:>14.0} {t:>14.0} {:>10}",
        "peak resident MiB", "(lower)"
    );
    println!(
        "(ratio = arlbook speed / PyTorch speed; {}; arlbook: its CPU trainer's passes, \
         written by hand; arlbook burn: the same work on burn's forward passes and \
         autodiff; arlbook's and PyTorch's updates compute the head only at the {} \
         generated positions a row's loss reads (TRL's logits_to_keep), burn's at every \
         position; \
         multi-turn: arlbook keeps each episode's cache across turns, PyTorch re-prefills \
         the context every turn as a plain generate loop does)",
        torch["implementation"].as_str().unwrap_or("pytorch"),
        SHAPE[6].1
    );
    Ok(())
}

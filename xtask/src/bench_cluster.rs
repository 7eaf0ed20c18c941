//! `cargo xtask bench cluster`: GRPO's collection in process against one and two
//! `arlbook worker`s on a loopback `nats-server`, on this machine, in one run.
//!
//! The workload is the documented config's shape (`configs/cpu-small.toml`: 2 layers,
//! width 96, 12 groups of 6 per step, up to 8 turns of 40 tokens): 200 SFT steps once,
//! then from that checkpoint, in each arm, `STEPS` GRPO steps with validation off;
//! every arm trains the same steps on the same seed, so they collect the same episodes. Per arm, from the metrics rows: rollouts
//! per second of collection, seconds per step, the learner's idle share (the part of a
//! step it waits for rollouts, `collect_s / step_s`) and the bytes of one group's
//! results on the wire. On one machine the workers share its cores with each other and
//! with the learner: the ratios measure the broker's overhead, not the speed-up of
//! workers on machines of their own.

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, bail};
use serde_json::Value;

use crate::cluster::{Stopped, start_broker};
use crate::cmd::{cargo, run, workspace_root};

/// GRPO steps per arm.
const STEPS: usize = 4;

/// The workload: the documented model and batch, GRPO only, no validation.
const CONFIG: &str = r#"
seed = 7
backend = "cpu"
checkpoint_every = 1000

[model]
layers = 2
width = 96
heads = 4
context = 640

[harness]
max_turns = 8
max_context_tokens = 640
max_new_tokens = 40

[sft]
steps = 200
batch_episodes = 16
tasks = 800
learning_rate = 3e-3
warmup_steps = 20

[grpo]
steps = 4
tasks_per_batch = 12
group_size = 6
microbatch_rows = 24
dynamic_sampling = false

[validation]
every_steps = 0
"#;

/// What one arm measured.
struct Arm {
    name: String,
    rollouts: f64,
    collect_s: f64,
    step_s: f64,
    result_bytes: f64,
    groups: f64,
}

fn sum(rows: &[Value], key: &str) -> f64 {
    rows.iter().filter_map(|r| r[key].as_f64()).sum()
}

/// Trains GRPO from the SFT run `init` into `out` (with the broker `url`), returns its
/// GRPO rows.
fn train(
    binary: &Path,
    config: &Path,
    init: &Path,
    out: &Path,
    url: Option<&str>,
) -> anyhow::Result<Vec<Value>> {
    let _ = std::fs::remove_dir_all(out);
    let mut command = Command::new(binary);
    command
        .args(["train", "--stage", "grpo", "--init"])
        .arg(init)
        .arg("--config")
        .arg(config)
        .arg("--out")
        .arg(out)
        .stderr(Stdio::null());
    if let Some(url) = url {
        command.args(["--nats", url]);
    }
    run(&mut command)?;
    let text = std::fs::read_to_string(out.join("metrics.jsonl"))
        .with_context(|| format!("reading {}", out.join("metrics.jsonl").display()))?;
    let rows: Vec<Value> = text
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?;
    let grpo: Vec<Value> = rows.into_iter().filter(|r| r["stage"] == "grpo").collect();
    if grpo.len() != STEPS {
        bail!(
            "{}: {} GRPO rows, expected {STEPS}",
            out.display(),
            grpo.len()
        );
    }
    Ok(grpo)
}

fn arm(name: &str, rows: &[Value]) -> Arm {
    Arm {
        name: name.to_owned(),
        rollouts: sum(rows, "rollouts_sampled"),
        collect_s: sum(rows, "collect_s"),
        step_s: sum(rows, "step_s"),
        result_bytes: sum(rows, "result_bytes"),
        groups: sum(rows, "rollouts_sampled") / 6.0,
    }
}

/// Runs the bench and prints its table.
pub fn run_bench() -> anyhow::Result<()> {
    crate::test::ensure_nats_server()?;
    run(cargo().args(["build", "-p", "arlbook-server"]))?;
    let binary = workspace_root().join("target/debug/arlbook");
    let dir = workspace_root().join("target/bench/cluster");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let config = dir.join("config.toml");
    std::fs::write(&config, CONFIG)?;
    let sft = dir.join("sft");
    run(Command::new(&binary)
        .args(["train", "--stage", "sft", "--config"])
        .arg(&config)
        .arg("--out")
        .arg(&sft)
        .stderr(Stdio::null()))?;
    let reference = train(&binary, &config, &sft, &dir.join("local"), None)?;
    let mut arms = vec![arm("in process", &reference)];
    for workers in [1, 2] {
        let (_broker, url) = start_broker(&dir.join(format!("nats-{workers}")))?;
        let mut started = Vec::new();
        for i in 0..workers {
            started.push(Stopped(
                Command::new(&binary)
                    .args(["worker", "--nats", &url, "--id", &format!("w{i}")])
                    .stdin(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .context("starting a worker")?,
            ));
        }
        let rows = train(
            &binary,
            &config,
            &sft,
            &dir.join(format!("workers-{workers}")),
            Some(&url),
        )?;
        let same = rows
            .iter()
            .zip(&reference)
            .all(|(a, b)| a["generated_tokens"] == b["generated_tokens"]);
        if !same {
            bail!("{workers} worker(s) generated other tokens than the in-process run");
        }
        arms.push(arm(&format!("{workers} worker(s)"), &rows));
    }
    println!(
        "GRPO collection, {STEPS} steps of 12 groups x 6 rollouts (the documented shape, after 200 SFT steps), one machine ({} cores)\n",
        std::thread::available_parallelism().map_or(0, usize::from)
    );
    println!("| arm | rollouts/s | ratio | s/step | collection share | bytes/group |");
    println!("|---|---:|---:|---:|---:|---:|");
    let base = arms[0].rollouts / arms[0].collect_s;
    for a in &arms {
        let rate = a.rollouts / a.collect_s;
        let bytes = if a.result_bytes > 0.0 {
            format!("{:.0}", a.result_bytes / a.groups)
        } else {
            "-".to_owned()
        };
        println!(
            "| {} | {rate:.1} | {:.2} | {:.2} | {:.0}% | {bytes} |",
            a.name,
            rate / base,
            a.step_s / STEPS as f64,
            100.0 * a.collect_s / a.step_s,
        );
    }
    Ok(())
}

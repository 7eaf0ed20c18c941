//! `cargo xtask experiment`: the RL experiment, every arm for several seeds, and its
//! table.
//!
//! For each seed `S` (default 7, 8, 9) with the config (default
//! `configs/cpu-small.toml`, which must enable `[selection]`):
//! 1. `arlbook train --seed S --out OUT/seed-S`: SFT, the SFT checkpoint chosen on
//!    validation, the gate, GRPO, and GRPO's checkpoint chosen on validation.
//! 2. `arlbook train --seed S --stage rs --init <chosen SFT> --out OUT/seed-S-rs`: the
//!    rejection-sampling arm from the same checkpoint, with the same collector.
//! 3. `arlbook eval --arm sft=.. --arm grpo=.. --arm rs=.. --split test --recovery`:
//!    the three chosen checkpoints on the same test tasks and seeds, intervals over
//!    problem keys, per tier, and the recovery diagnostic (every arm from the same
//!    wrong first patch); saved as `OUT/seed-S-test.json`.
//!
//! A step whose output exists is not run again (an interrupted training run is
//! resumed), so the command can be repeated after a crash. The table (success per
//! arm and tier, the paired differences with 95% intervals, whether GRPO - SFT reaches
//! +10 points on tier A and +5 over all tasks with both intervals above 0, the gate, and
//! each arm's cost) is
//! printed and written to `OUT/results.md`, with pass@k and the failed episodes by
//! cause.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail};
use arlbook_report::summary::{Gate, RunSummary, StageCost};
use serde_json::Value;

use crate::cmd::{cargo, output, run, workspace_root};

/// The experiment's options.
#[derive(Debug)]
struct Options {
    config: PathBuf,
    seeds: Vec<u64>,
    out: PathBuf,
    tasks: usize,
    samples: usize,
    eval_seed: u64,
}

impl Options {
    fn parse(args: &[String]) -> anyhow::Result<Self> {
        let root = workspace_root();
        let mut options = Self {
            config: root.join("configs").join("cpu-small.toml"),
            seeds: vec![7, 8, 9],
            out: root.join("runs").join("experiment"),
            tasks: 200,
            samples: 4,
            eval_seed: 0,
        };
        let mut rest = args.iter();
        while let Some(flag) = rest.next() {
            let value = rest
                .next()
                .with_context(|| format!("{flag}: needs a value"))?;
            let number = |what: &str| -> anyhow::Result<u64> {
                value
                    .parse()
                    .with_context(|| format!("{what}: expected a whole number, got {value:?}"))
            };
            match flag.as_str() {
                "--config" => options.config = PathBuf::from(value),
                "--out" => options.out = PathBuf::from(value),
                "--seeds" => {
                    options.seeds = value
                        .split(',')
                        .map(|s| {
                            s.trim().parse().with_context(|| {
                                format!(
                                    "--seeds: expected numbers separated by commas, got {value:?}"
                                )
                            })
                        })
                        .collect::<anyhow::Result<_>>()?;
                }
                "--tasks" => options.tasks = usize::try_from(number("--tasks")?)?,
                "--samples" => options.samples = usize::try_from(number("--samples")?)?,
                "--eval-seed" => options.eval_seed = number("--eval-seed")?,
                other => bail!(
                    "experiment: unknown option {other:?} (expected --config, --seeds, --out, --tasks, --samples, --eval-seed)"
                ),
            }
        }
        if options.seeds.is_empty() {
            bail!("--seeds: give at least one seed");
        }
        Ok(options)
    }
}

fn read_json(path: &Path) -> anyhow::Result<Value> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_slice(&bytes).with_context(|| format!("parsing {}", path.display()))
}

/// Runs `arlbook train` into `out` unless it finished there, resuming a started run;
/// returns its summary and the seconds this call spent.
fn train(binary: &Path, out: &Path, fresh: &[&str]) -> anyhow::Result<(RunSummary, f64)> {
    let summary = out.join("summary.json");
    let t0 = Instant::now();
    if !summary.is_file() {
        let mut command = Command::new(binary);
        command.arg("train").arg("--out").arg(out);
        if out.join("checkpoints").join("latest").is_file() {
            command.arg("--resume");
        } else {
            command.args(fresh);
        }
        run(&mut command)?;
    }
    let bytes =
        std::fs::read(&summary).with_context(|| format!("reading {}", summary.display()))?;
    let parsed =
        serde_json::from_slice(&bytes).with_context(|| format!("parsing {}", summary.display()))?;
    Ok((parsed, t0.elapsed().as_secs_f64()))
}

fn chosen(summary: &RunSummary, arm: &str) -> anyhow::Result<String> {
    summary
        .selection
        .of(arm)
        .map(|selection| selection.chosen.display().to_string())
        .with_context(|| {
            format!("summary.json has no {arm} selection: the experiment's config must set [selection] enabled = true")
        })
}

/// One seed's results.
struct SeedResult {
    seed: u64,
    report: Value,
    gate: Option<Gate>,
    cost: [(String, Option<StageCost>); 3],
}

fn run_seed(options: &Options, binary: &Path, seed: u64) -> anyhow::Result<SeedResult> {
    let config = options.config.display().to_string();
    let seed_text = seed.to_string();
    let main = options.out.join(format!("seed-{seed}"));
    let (summary, _) = train(binary, &main, &["--config", &config, "--seed", &seed_text])?;
    let sft = chosen(&summary, "sft")?;
    let grpo = chosen(&summary, "grpo")?;
    let rs_out = options.out.join(format!("seed-{seed}-rs"));
    let (rs_summary, _) = train(
        binary,
        &rs_out,
        &[
            "--config", &config, "--seed", &seed_text, "--stage", "rs", "--init", &sft,
        ],
    )?;
    let rs = chosen(&rs_summary, "rs")?;
    let test = options.out.join(format!("seed-{seed}-test.json"));
    if !test.is_file() {
        let k = format!("1,{}", options.samples);
        let text = output(
            Command::new(binary)
                .args(["eval", "--split", "test", "--json", "--recovery"])
                .args(["--tasks", &options.tasks.to_string()])
                .args(["--samples", &options.samples.to_string()])
                .args(["--k", &k, "--seed", &options.eval_seed.to_string()])
                .args(["--arm", &format!("sft={sft}")])
                .args(["--arm", &format!("grpo={grpo}")])
                .args(["--arm", &format!("rs={rs}")]),
        )?;
        std::fs::write(&test, &text)?;
    }
    Ok(SeedResult {
        seed,
        report: read_json(&test)?,
        gate: summary.selection.gate.clone(),
        cost: [
            ("sft".to_owned(), summary.cost.get("sft").cloned()),
            ("grpo".to_owned(), summary.cost.get("grpo").cloned()),
            ("rs".to_owned(), rs_summary.cost.get("rs").cloned()),
        ],
    })
}

fn points(value: &Value) -> String {
    value
        .as_f64()
        .map_or_else(|| "-".to_owned(), |v| format!("{:.1}", 100.0 * v))
}

fn interval(value: &Value) -> String {
    format!("[{}, {}]", points(&value[0]), points(&value[1]))
}

/// The recovery diagnostic beside natural success, per seed and arm.
fn recovery_table(text: &mut String, results: &[SeedResult]) {
    let _ = writeln!(
        text,
        "| seed | arm | natural success | from the wrong first patch (recovery diagnostic) |"
    );
    let _ = writeln!(text, "|---:|---|---:|---:|");
    for r in results {
        for arm in r.report["arms"].as_array().into_iter().flatten() {
            let _ = writeln!(
                text,
                "| {} | {} | {} {} | {} {} |",
                r.seed,
                arm["name"].as_str().unwrap_or("?"),
                points(&arm["overall"]["success"]["mean"]),
                interval(&arm["overall"]["success"]["ci95"]),
                points(&arm["recovery"]["overall"]["success"]["mean"]),
                interval(&arm["recovery"]["overall"]["success"]["ci95"])
            );
        }
    }
}

/// The gate of every seed.
fn gate_table(text: &mut String, results: &[SeedResult]) {
    let _ = writeln!(
        text,
        "\n| seed | gate: validation pass@1 | pass@k | gap below selection.min_gap |"
    );
    let _ = writeln!(text, "|---:|---:|---:|---|");
    for r in results {
        let Some(gate) = &r.gate else {
            let _ = writeln!(text, "| {} | - | - | (no gate recorded) |", r.seed);
            continue;
        };
        let _ = writeln!(
            text,
            "| {} | {:.1} | {:.1} (k = {}) | {} |",
            r.seed,
            100.0 * gate.pass_at_1,
            100.0 * gate.pass_at_k,
            gate.samples,
            if gate.warning.is_some() {
                "yes: the gate warns"
            } else {
                "no"
            }
        );
    }
}

/// What each arm cost, per seed.
fn cost_table(text: &mut String, results: &[SeedResult]) {
    let _ = writeln!(
        text,
        "\n| seed | arm | steps | training keys | rollouts generated | rollouts used | generated tokens | step time (s) |"
    );
    let _ = writeln!(text, "|---:|---|---:|---:|---:|---:|---:|---:|");
    for r in results {
        for (arm, c) in &r.cost {
            let Some(c) = c else {
                let _ = writeln!(text, "| {} | {arm} | - | - | - | - | - | - |", r.seed);
                continue;
            };
            let _ = writeln!(
                text,
                "| {} | {arm} | {} | {} | {} | {} | {} | {:.0} |",
                r.seed,
                c.steps,
                c.training_keys,
                c.rollouts_generated,
                c.rollouts_used,
                c.generated_tokens,
                c.step_s
            );
        }
    }
}

/// An arm's or a pair's numbers over `subset`: `all`, or a tier (`A`, `B`).
fn pick_subset(value: &Value, subset: &str) -> Value {
    if subset == "all" {
        value["overall"].clone()
    } else {
        value["tiers"][subset].clone()
    }
}

/// pass@k at the largest k the evaluation measured, per seed, arm and subset.
fn pass_at_k_table(text: &mut String, results: &[SeedResult]) {
    let _ = writeln!(text, "| seed | arm | subset | pass@1 | pass@k |");
    let _ = writeln!(text, "|---:|---|---|---:|---:|");
    for r in results {
        for arm in r.report["arms"].as_array().into_iter().flatten() {
            for subset in ["all", "A", "B"] {
                let s = pick_subset(arm, subset);
                let last = s["pass_at_k"]
                    .as_array()
                    .and_then(|ks| ks.last())
                    .cloned()
                    .unwrap_or_default();
                let _ = writeln!(
                    text,
                    "| {} | {} | {subset} | {} | pass@{}: {} {} |",
                    r.seed,
                    arm["name"].as_str().unwrap_or("?"),
                    points(&s["success"]["mean"]),
                    last["k"],
                    points(&last["mean"]),
                    interval(&last["ci95"])
                );
            }
        }
    }
}

/// Failed test episodes by cause, per seed and arm (`arlbook eval`'s breakdown).
fn failure_table(text: &mut String, results: &[SeedResult]) {
    let causes = [
        "no_edit",
        "unknown_name",
        "wrong_line",
        "wrong_text",
        "turn_budget",
        "token_budget",
        "malformed_call",
        "env_fault",
    ];
    let _ = writeln!(
        text,
        "\n| seed | arm | failed / episodes | {} | finished after failing tests | \
         episodes with an edit refused (repaired) |",
        causes.join(" | ")
    );
    let _ = writeln!(
        text,
        "|---:|---|---:|{}---:|---:|",
        "---:|".repeat(causes.len())
    );
    for r in results {
        for arm in r.report["arms"].as_array().into_iter().flatten() {
            let f = &arm["failures"];
            let mut row = format!(
                "| {} | {} | {} / {} |",
                r.seed,
                arm["name"].as_str().unwrap_or("?"),
                f["failed"],
                f["episodes"]
            );
            for cause in causes {
                let _ = write!(row, " {} |", f["causes"][cause]);
            }
            let _ = writeln!(
                text,
                "{row} {} | {} ({}) |",
                f["finished_after_failing_tests"],
                f["refused_edit_episodes"],
                f["repaired_after_refusal"]
            );
        }
    }
    let _ = writeln!(text);
}

/// Success per bug operator, per seed: every arm's success and the first pair's
/// difference (GRPO - SFT) with its bootstrap interval.
fn bug_table(text: &mut String, results: &[SeedResult]) {
    let Some(first) = results.first() else {
        return;
    };
    let names: Vec<&str> = first.report["arms"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|arm| arm["name"].as_str().unwrap_or("?"))
        .collect();
    let pair_name = first.report["pairs"][0]["a"]
        .as_str()
        .zip(first.report["pairs"][0]["b"].as_str())
        .map_or_else(|| "-".to_owned(), |(a, b)| format!("{a} - {b}"));
    let _ = writeln!(
        text,
        "\nSuccess by bug operator (a skill the SFT checkpoint lacks is one no arm adds):\n\n\
         | seed | bug operator | tasks | {} | {pair_name} |",
        names.join(" | ")
    );
    let _ = writeln!(text, "|---:|---|---:|{}---:|", "---:|".repeat(names.len()));
    for r in results {
        let arms = r.report["arms"].as_array().cloned().unwrap_or_default();
        let Some(bugs) = arms.first().and_then(|a| a["bugs"].as_object()) else {
            continue;
        };
        for (bug, summary) in bugs {
            let mut row = format!("| {} | {bug} | {} |", r.seed, summary["tasks"]);
            for arm in &arms {
                let _ = write!(row, " {} |", points(&arm["bugs"][bug]["success"]["mean"]));
            }
            let pair = &r.report["pairs"][0]["bugs"][bug];
            let difference = pair["difference"]
                .as_f64()
                .map_or_else(|| "-".to_owned(), |d| format!("{:+.1}", 100.0 * d));
            let _ = writeln!(
                text,
                "{row} {difference} {} |",
                interval(&pair["ci95_bootstrap"])
            );
        }
    }
    let _ = writeln!(text);
}

/// The markdown tables of every seed.
fn table(results: &[SeedResult]) -> String {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "Test success in percent (pass@1 at T = 1), 95% intervals resampling problem keys.\n"
    );
    let _ = writeln!(
        text,
        "| seed | subset | SFT | GRPO | RS | GRPO - SFT | RS - SFT | GRPO - RS |"
    );
    let _ = writeln!(text, "|---:|---|---:|---:|---:|---:|---:|---:|");
    let mut reached = Vec::new();
    for r in results {
        let arms = r.report["arms"].as_array().cloned().unwrap_or_default();
        let pairs = r.report["pairs"].as_array().cloned().unwrap_or_default();
        for subset in ["all", "A", "B"] {
            let pick = |v: &Value| pick_subset(v, subset);
            let mut row = format!("| {} | {subset} |", r.seed);
            for arm in &arms {
                let s = pick(arm);
                let _ = write!(
                    row,
                    " {} {} |",
                    points(&s["success"]["mean"]),
                    interval(&s["success"]["ci95"])
                );
            }
            for pair in &pairs {
                let p = pick(pair);
                let _ = write!(
                    row,
                    " {} {} |",
                    p["difference"]
                        .as_f64()
                        .map_or_else(|| "-".to_owned(), |d| format!("{:+.1}", 100.0 * d)),
                    interval(&p["ci95_bootstrap"])
                );
            }
            let _ = writeln!(text, "{row}");
        }
        let reaches = |subset: &str, points: f64| {
            let p = pairs
                .first()
                .map(|p| pick_subset(p, subset))
                .unwrap_or_default();
            p["difference"]
                .as_f64()
                .is_some_and(|d| d >= points / 100.0)
                && p["ci95_bootstrap"][0].as_f64().is_some_and(|l| l > 0.0)
                && p["ci95_normal"][0].as_f64().is_some_and(|l| l > 0.0)
        };
        reached.push((r.seed, reaches("A", 10.0) && reaches("all", 5.0)));
    }
    let _ = writeln!(
        text,
        "\nTarget (GRPO - SFT at least +10 points on tier A and +5 over all tasks, each 95% interval above 0): {}\n",
        reached
            .iter()
            .map(|(s, ok)| format!("seed {s} {}", if *ok { "reached" } else { "not reached" }))
            .collect::<Vec<_>>()
            .join(", ")
    );
    pass_at_k_table(&mut text, results);
    bug_table(&mut text, results);
    failure_table(&mut text, results);
    recovery_table(&mut text, results);
    gate_table(&mut text, results);
    cost_table(&mut text, results);
    text
}

/// Runs the experiment.
pub fn run_experiment(args: &[String]) -> anyhow::Result<()> {
    let options = Options::parse(args)?;
    std::fs::create_dir_all(&options.out)
        .with_context(|| format!("creating {}", options.out.display()))?;
    run(cargo().args(["build", "-p", "arlbook-server"]))?;
    let binary = workspace_root()
        .join("target")
        .join("debug")
        .join("arlbook");
    let mut results = Vec::new();
    for &seed in &options.seeds {
        results.push(run_seed(&options, &binary, seed)?);
    }
    let text = table(&results);
    let path = options.out.join("results.md");
    std::fs::write(&path, &text).with_context(|| format!("writing {}", path.display()))?;
    println!("{text}");
    eprintln!("xtask: wrote {}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed(report: Value) -> SeedResult {
        SeedResult {
            seed: 7,
            report,
            gate: None,
            cost: [
                ("sft".to_owned(), None),
                ("grpo".to_owned(), None),
                ("rs".to_owned(), None),
            ],
        }
    }

    /// One row per seed and operator, each arm's success in points, then the first
    /// pair's difference; an operator without a paired difference shows `-`.
    #[test]
    fn the_bug_table_has_a_row_per_operator_with_each_arm_and_the_first_pair() {
        let arm = |name: &str, init: f64, ret: f64| {
            serde_json::json!({
                "name": name,
                "bugs": {
                    "wrong_init": {"tasks": 12, "success": {"mean": init}},
                    "wrong_return": {"tasks": 3, "success": {"mean": ret}},
                }
            })
        };
        let report = serde_json::json!({
            "arms": [arm("sft", 0.25, 0.5), arm("grpo", 0.5, 0.5)],
            "pairs": [{
                "a": "grpo", "b": "sft",
                "bugs": {"wrong_init": {"difference": 0.25, "ci95_bootstrap": [0.125, 0.375]}}
            }]
        });
        let mut text = String::new();
        bug_table(&mut text, &[seed(report)]);
        assert!(
            text.contains("| seed | bug operator | tasks | sft | grpo | grpo - sft |"),
            "{text}"
        );
        assert!(
            text.contains("| 7 | wrong_init | 12 | 25.0 | 50.0 | +25.0 [12.5, 37.5] |"),
            "{text}"
        );
        assert!(
            text.contains("| 7 | wrong_return | 3 | 50.0 | 50.0 | - [-, -] |"),
            "{text}"
        );
    }
}

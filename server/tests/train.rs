//! The trainer through the real binary: a tiny run end to end, SIGKILL and resume,
//! field-naming config errors, and evaluation of the run's checkpoints.

#![allow(clippy::unwrap_used, reason = "test helpers outside #[test] functions")]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_arlbook");

const TINY: &str = r#"
seed = 3
backend = "cpu"
checkpoint_every = 2

[model]
layers = 1
width = 16
heads = 2
context = 400

[harness]
max_turns = 6
max_context_tokens = 400
max_new_tokens = 24

[sft]
steps = 6
batch_episodes = 4
tasks = 24
learning_rate = 1e-2
warmup_steps = 1

[grpo]
steps = 4
tasks_per_batch = 2
group_size = 3
microbatch_rows = 4
dynamic_sampling = false
learning_rate = 1e-3

[validation]
every_steps = 2
tasks = 3
"#;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("arlbook-train-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write_config(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("config.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn train(config: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .args(["train", "--config"])
        .arg(config)
        .arg("--out")
        .arg(out)
        .args(extra)
        .output()
        .unwrap()
}

/// `arlbook train --resume --out OUT` (no `--stage`), which must succeed.
fn resume(out: &Path) {
    let resumed = Command::new(BIN)
        .args(["train", "--resume", "--out"])
        .arg(out)
        .output()
        .unwrap();
    assert!(
        resumed.status.success(),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
}

/// `arlbook eval ARGS --split test --samples 2 --k 1,2 --json --backend cpu`, parsed.
fn eval_on_test(args: &[String], tasks: usize) -> Value {
    let eval = Command::new(BIN)
        .arg("eval")
        .args(args)
        .args(["--split", "test", "--samples", "2", "--k", "1,2", "--json"])
        .args(["--backend", "cpu", "--tasks", &tasks.to_string()])
        .output()
        .unwrap();
    assert!(
        eval.status.success(),
        "{}",
        String::from_utf8_lossy(&eval.stderr)
    );
    serde_json::from_slice(&eval.stdout).unwrap()
}

fn rows(out: &Path) -> Vec<Value> {
    std::fs::read_to_string(out.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
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

fn expected_keys() -> Vec<(String, u64)> {
    let mut keys: Vec<(String, u64)> = (1..=6).map(|s| ("sft".to_owned(), s)).collect();
    keys.push(("validation".to_owned(), 0));
    for s in 1..=4 {
        keys.push(("grpo".to_owned(), s));
        if s % 2 == 0 {
            keys.push(("validation".to_owned(), s));
        }
    }
    keys
}

#[test]
fn a_tiny_run_trains_both_stages_and_logs_every_metric() {
    let dir = scratch("full");
    let config = write_config(&dir, TINY);
    let out = dir.join("run");
    let result = train(&config, &out, &[]);
    assert!(
        result.status.success(),
        "{}",
        String::from_utf8_lossy(&result.stderr)
    );
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(stderr.contains("pre-flight ok"), "{stderr}");
    let rows = rows(&out);
    assert_eq!(keys(&rows), expected_keys());
    let grpo: Vec<&Value> = rows.iter().filter(|r| r["stage"] == "grpo").collect();
    for key in [
        "reward",
        "success_rate",
        "effective_group_fraction",
        "discarded",
        "gen_len_mean",
        "gen_len_max",
        "truncation_rate",
        "entropy",
        "ratio_mean",
        "ratio_max",
        "clip_fraction_low",
        "clip_fraction_high",
        "kl",
        "loss",
        "grad_norm",
        "tokens_per_s",
        "wall_s",
        "loss_core_gap",
    ] {
        assert!(
            grpo[0].get(key).is_some(),
            "grpo row lacks {key}: {}",
            grpo[0]
        );
    }
    for row in &grpo {
        // The burn loss and the core loss on the same numbers agree on every step.
        assert!(row["loss_core_gap"].as_f64().unwrap() < 1e-4, "{row}");
    }
    // The first update starts on the collecting snapshot: ratios are 1.
    assert!(
        (grpo[0]["ratio_mean"].as_f64().unwrap() - 1.0).abs() < 1e-3,
        "{}",
        grpo[0]
    );
    let sft: Vec<f64> = rows
        .iter()
        .filter(|r| r["stage"] == "sft")
        .map(|r| r["loss"].as_f64().unwrap())
        .collect();
    assert!(
        sft.last().unwrap() < sft.first().unwrap(),
        "SFT loss should fall: {sft:?}"
    );

    // Evaluation of the final checkpoint against the SFT checkpoint.
    let sft_checkpoint = out.join("checkpoints").join("sft-000006");
    let report = eval_on_test(
        &[
            "--checkpoint".to_owned(),
            out.display().to_string(),
            "--baseline".to_owned(),
            sft_checkpoint.display().to_string(),
        ],
        4,
    );
    let arms = report["arms"].as_array().unwrap();
    assert_eq!(arms[0]["name"], "baseline");
    assert_eq!(arms[1]["name"], "model");
    let success = &arms[1]["overall"]["success"];
    let mean = success["mean"].as_f64().unwrap();
    let ci = success["ci95"].as_array().unwrap();
    assert!((0.0..=1.0).contains(&mean));
    assert!(ci[0].as_f64().unwrap() <= mean && mean <= ci[1].as_f64().unwrap());
    assert_eq!(arms[1]["overall"]["pass_at_k"].as_array().unwrap().len(), 2);
    assert_eq!(report["pairs"][0]["a"], "model");
    assert!(report["pairs"][0]["overall"]["se"].as_f64().is_some());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_library_knobs_train_under_policy_lag_with_the_ratio_against_the_proximal_policy() {
    // verl's rules, an entropy bonus, and TRL's token-truncated importance weights
    // against rollouts sampled one policy behind: every update scores its batch under
    // the policy it starts from, so with one pass and one minibatch every step's ratio
    // is 1 (without the correction the largest ratio here reaches about 1.06 from step
    // 2 on) while the weights carry the lag; burn's loss still equals the core's. The
    // tiny model's rewards are all 0, so how the weights scale the policy gradient is
    // checked by the loss's unit test (`burn_multipliers_equal_the_core_importance_weights`).
    let dir = scratch("knobs");
    let config = TINY.replace(
        "[grpo]\n",
        "[grpo]\nmax_policy_lag = 1\nimportance_correction = \"token_truncate\"\n\
         importance_cap = 2.0\nentropy_coef = 0.01\nconvention = \"verl\"\n",
    );
    let config = write_config(&dir, &config);
    let out = dir.join("run");
    let result = train(&config, &out, &[]);
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(result.status.success(), "{stderr}");
    assert!(stderr.contains("pre-flight ok"), "{stderr}");
    let rows = rows(&out);
    let grpo: Vec<&Value> = rows.iter().filter(|r| r["stage"] == "grpo").collect();
    assert_eq!(grpo.len(), 4);
    for row in &grpo {
        assert!(row["loss_core_gap"].as_f64().unwrap() < 1e-4, "{row}");
        let ratio = row["ratio_max"].as_f64().unwrap();
        assert!((ratio - 1.0).abs() < 1e-4, "{row}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_run_killed_with_sigkill_resumes_without_lost_or_duplicated_rows() {
    let dir = scratch("kill");
    let config = write_config(&dir, TINY);
    let out = dir.join("run");
    let mut child = Command::new(BIN)
        .args(["train", "--config"])
        .arg(&config)
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Kill it once GRPO has checkpointed at least once (or SFT has, on a fast machine).
    let pointer = out.join("checkpoints").join("latest");
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let name = std::fs::read_to_string(&pointer).unwrap_or_default();
        if name.starts_with("grpo-") || name == "sft-000004" {
            break;
        }
        assert!(Instant::now() < deadline, "no checkpoint appeared");
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL on Unix
    child.wait().unwrap();
    resume(&out);
    let resumed_rows = rows(&out);
    assert_eq!(keys(&resumed_rows), expected_keys());
    // Resuming continues exactly: every step's numbers equal an uninterrupted run's.
    let straight = dir.join("straight");
    let result = train(&config, &straight, &[]);
    assert!(result.status.success());
    let numbers = |rows: &[Value]| -> Vec<(String, u64, String)> {
        rows.iter()
            .map(|r| {
                let mut kept = serde_json::Map::new();
                for key in [
                    "loss",
                    "reward",
                    "grad_norm",
                    "ratio_mean",
                    "entropy",
                    "val_success",
                    "gen_len_mean",
                ] {
                    if let Some(v) = r.get(key) {
                        kept.insert(key.to_owned(), v.clone());
                    }
                }
                (
                    r["stage"].as_str().unwrap().to_owned(),
                    r["step"].as_u64().unwrap(),
                    Value::Object(kept).to_string(),
                )
            })
            .collect()
    };
    assert_eq!(numbers(&resumed_rows), numbers(&rows(&straight)));
    // Starting a fresh run over an existing one is refused rather than overwriting it.
    let again = train(&config, &out, &[]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("--resume"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `TINY` with checkpoint selection on validation and a rejection-sampling arm.
fn tiny_with_arms() -> String {
    format!(
        "{TINY}
[rs]
steps = 4
learning_rate = 1e-3
lr_schedule = \"cosine\"
warmup_steps = 1

[selection]
enabled = true
sft_steps = [4]
rl_steps = [2]
tasks = 4
samples = 2
temperature = 0.7
gate_tasks = 3
gate_samples = 2
min_gap = 0.5
"
    )
}

/// The cluster-robust standard error of the mean of `values` grouped by `keys`,
/// written out here independently of the binary's.
fn clustered_se(values: &[f64], keys: &[String]) -> f64 {
    let mut sums: std::collections::BTreeMap<&str, (f64, f64)> = std::collections::BTreeMap::new();
    for (v, k) in values.iter().zip(keys) {
        let entry = sums.entry(k.as_str()).or_default();
        entry.0 += v;
        entry.1 += 1.0;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let m = sums.len() as f64;
    let spread: f64 = sums.values().map(|(s, c)| (s - mean * c).powi(2)).sum();
    (m / (m - 1.0) * spread).sqrt() / n
}

#[test]
fn arms_start_from_the_checkpoint_chosen_on_validation_and_eval_clusters_by_key() {
    let dir = scratch("arms");
    let config = write_config(&dir, &tiny_with_arms());
    let out = dir.join("run");
    let result = train(&config, &out, &[]);
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(result.status.success(), "{stderr}");
    // The gate's gap threshold is set so high that it warns, and says why.
    assert!(
        stderr.contains("gate: validation pass@2 - pass@1"),
        "{stderr}"
    );
    let run_rows = rows(&out);
    let selections: Vec<&Value> = run_rows
        .iter()
        .filter(|r| r["stage"] == "selection")
        .collect();
    assert_eq!(selections.len(), 2, "{selections:?}");
    assert_eq!(selections[0]["arm"], "sft");
    let sft_candidates: Vec<u64> = selections[0]["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["step"].as_u64().unwrap())
        .collect();
    assert_eq!(sft_candidates, vec![4, 6]);
    assert_eq!(selections[1]["arm"], "grpo");
    assert!(run_rows.iter().any(|r| r["stage"] == "gate"));
    // summary.json reads as the type xtask and the server read it with.
    let summary: arlbook_report::summary::RunSummary =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let chosen = summary.selection.sft.as_ref().unwrap().chosen.clone();
    assert!(
        chosen.join("state.json").is_file(),
        "the candidates are kept"
    );
    assert_eq!(summary.selection.grpo.as_ref().unwrap().arm, "grpo");
    // Candidates are scored at selection.temperature, not at GRPO's.
    for choice in [&summary.selection.sft, &summary.selection.grpo] {
        assert!((choice.as_ref().unwrap().temperature - 0.7).abs() < 1e-12);
    }
    assert!(summary.selection.gate.as_ref().unwrap().warning.is_some());
    let grpo_cost = &summary.cost["grpo"];
    assert_eq!(grpo_cost.rollouts_generated, 4 * 6);
    assert!(grpo_cost.training_keys >= 1);
    assert!(summary.cost["sft"].training_keys >= 1);

    // The rejection-sampling arm from the same checkpoint, in its own folder.
    let rs = dir.join("rs");
    let result = train(
        &config,
        &rs,
        &["--stage", "rs", "--init", chosen.to_str().unwrap()],
    );
    assert!(
        result.status.success(),
        "{}",
        String::from_utf8_lossy(&result.stderr)
    );
    let rs_rows = rows(&rs);
    let steps: Vec<u64> = rs_rows
        .iter()
        .filter(|r| r["stage"] == "rs")
        .map(|r| r["step"].as_u64().unwrap())
        .collect();
    assert_eq!(steps, vec![1, 2, 3, 4]);
    for row in rs_rows.iter().filter(|r| r["stage"] == "rs") {
        // The same collector and batch size as GRPO, no filter: 2 tasks x 3 rollouts.
        assert_eq!(row["rollouts_sampled"], 6, "{row}");
        assert!(row["rollouts_used"].as_u64().unwrap() <= 6);
        // One warm-up step to the peak 1e-3, then a cosine over the other three to a
        // tenth of it: 1e-3, 1e-3, 1e-4 + 9e-4 (1 + cos(pi / 3)) / 2, ... (logged
        // also at a step whose batch has no success to train on).
        let step = row["step"].as_u64().unwrap();
        let progress = step.saturating_sub(2) as f64 / 3.0;
        let expected = 1e-4 + 9e-4 * 0.5 * (1.0 + (std::f64::consts::PI * progress).cos());
        let lr = row["lr"].as_f64().unwrap();
        assert!(
            (lr - expected).abs() < 1e-12,
            "step {step}: lr {lr}, expected {expected}"
        );
    }
    assert!(
        rs_rows
            .iter()
            .any(|r| r["stage"] == "selection" && r["arm"] == "rs")
    );
    // A plain `--resume` (the default stage, `all`) continues the RS arm a folder
    // holds: here as if the run had died right after its step-2 checkpoint.
    std::fs::write(rs.join("checkpoints").join("latest"), "rs-000002").unwrap();
    std::fs::remove_file(rs.join("summary.json")).unwrap();
    resume(&rs);
    let losses = |rows: &[Value]| -> Vec<(u64, String)> {
        rows.iter()
            .filter(|r| r["stage"] == "rs")
            .map(|r| (r["step"].as_u64().unwrap(), r["loss"].to_string()))
            .collect()
    };
    let resumed_rows = rows(&rs);
    assert_eq!(keys(&resumed_rows), keys(&rs_rows));
    assert_eq!(losses(&resumed_rows), losses(&rs_rows));
    assert!(rs.join("summary.json").is_file());
    three_arms_on_test(&chosen, &out, &rs);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Three arms on the same test tasks: pairs GRPO - SFT, RS - SFT and GRPO - RS, the
/// recovery diagnostic, and standard errors recomputed from the per-task output.
fn three_arms_on_test(sft: &Path, grpo: &Path, rs: &Path) {
    let report = eval_on_test(
        &[
            "--arm".to_owned(),
            format!("sft={}", sft.display()),
            "--arm".to_owned(),
            format!("grpo={}", grpo.display()),
            "--arm".to_owned(),
            format!("rs={}", rs.display()),
            "--recovery".to_owned(),
        ],
        8,
    );
    let pairs: Vec<(String, String)> = report["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["a"].as_str().unwrap().to_owned(),
                p["b"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let names = |a: &str, b: &str| (a.to_owned(), b.to_owned());
    assert_eq!(
        pairs,
        vec![
            names("grpo", "sft"),
            names("rs", "sft"),
            names("grpo", "rs")
        ]
    );
    // The standard errors cluster by problem key: recomputed from the per-task output.
    let tasks = report["task_list"].as_array().unwrap();
    let keys: Vec<String> = tasks
        .iter()
        .map(|t| t["key"].as_str().unwrap().to_owned())
        .collect();
    let successes = |arm: usize| -> Vec<f64> {
        report["arms"][arm]["successes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_f64().unwrap())
            .collect()
    };
    let diffs: Vec<f64> = successes(1)
        .iter()
        .zip(successes(0))
        .map(|(a, b)| (a - b) / 2.0)
        .collect();
    let se = report["pairs"][0]["overall"]["se"].as_f64().unwrap();
    assert!((se - clustered_se(&diffs, &keys)).abs() < 1e-12, "{se}");
    let tier_tasks: u64 = report["arms"][0]["tiers"]
        .as_object()
        .unwrap()
        .values()
        .map(|t| t["tasks"].as_u64().unwrap())
        .sum();
    assert_eq!(tier_tasks, 8);
    let recovery = &report["arms"][2]["recovery"];
    assert_eq!(recovery["successes"].as_array().unwrap().len(), 8);
    assert_eq!(recovery["overall"]["tasks"], 8);
}

#[test]
fn the_config_arm_rs_runs_sft_then_the_rejection_sampling_arm() {
    let dir = scratch("arm-rs");
    let config = write_config(&dir, &format!("arm = \"rs\"\n{TINY}\n[rs]\nsteps = 2\n"));
    let out = dir.join("run");
    let result = train(&config, &out, &[]);
    assert!(
        result.status.success(),
        "{}",
        String::from_utf8_lossy(&result.stderr)
    );
    let mut expected: Vec<(String, u64)> = (1..=6).map(|s| ("sft".to_owned(), s)).collect();
    expected.extend((1..=2).map(|s| ("rs".to_owned(), s)));
    assert_eq!(keys(&rows(&out)), expected);
    let latest = std::fs::read_to_string(out.join("checkpoints").join("latest")).unwrap();
    assert_eq!(latest, "rs-000002");
    // A GRPO stage cannot continue a folder that holds the RS arm.
    let refused = Command::new(BIN)
        .args(["train", "--resume", "--stage", "grpo", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("needs its own --out"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn config_errors_name_the_field_and_exit_nonzero() {
    let dir = scratch("bad");
    for (text, field) in [
        ("[grpo]\ngroup_size = 1\n", "grpo.group_size"),
        ("[model]\nwidth = 30\nheads = 4\n", "model.heads"),
        ("[grpo]\nreduction = \"average\"\n", "reduction"),
        ("[sft]\nlearning_rate = -1.0\n", "sft.learning_rate"),
        ("[grpo]\nunknown_knob = 1\n", "unknown_knob"),
        ("[selection]\nsft_steps = [0]\n", "selection.sft_steps"),
        ("[rs]\nlearning_rate = 2.0\n", "rs.learning_rate"),
        ("[rs]\nlr_schedule = \"linear\"\n", "lr_schedule"),
        ("arm = \"ppo\"\n", "arm"),
        ("[grpo]\nentropy_coef = -0.1\n", "grpo.entropy_coef"),
        ("[grpo]\nimportance_cap = 0.0\n", "grpo.importance_cap"),
        (
            "[grpo]\nimportance_correction = \"sometimes\"\n",
            "importance_correction",
        ),
        ("[grpo]\nconvention = \"openrlhf\"\n", "convention"),
    ] {
        let config = write_config(&dir, text);
        let result = train(&config, &dir.join("never"), &["--backend", "cpu"]);
        assert!(!result.status.success());
        let stderr = String::from_utf8_lossy(&result.stderr);
        assert!(stderr.contains(field), "{field}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    // An --init that cannot be used is refused before the run folder exists.
    let config = write_config(&dir, TINY);
    let never = dir.join("never-init");
    let result = train(&config, &never, &["--stage", "sft", "--init", "/nope"]);
    assert!(!result.status.success());
    assert!(String::from_utf8_lossy(&result.stderr).contains("--init"));
    assert!(!never.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

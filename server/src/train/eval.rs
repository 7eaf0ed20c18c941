//! Evaluation of checkpoints on a split: success (pass@1), unbiased pass@k and 95%
//! intervals by a problem-level bootstrap, and the paired difference between two
//! checkpoints on the same tasks with the same episode seeds.
//!
//! For task `i` with `n` samples and `c_i` successes, pass@k is the unbiased
//! `1 - C(n - c_i, k) / C(n, k)` (Chen et al. 2021) averaged over tasks; the interval
//! resamples tasks, not episodes, because episodes of one task are correlated
//! (`core::math::eval::bootstrap_mean_ci`). The paired difference uses per-task
//! success rates `a_i - b_i`: mean, standard error `sd / sqrt(T)`, the normal 95%
//! interval and the bootstrap interval (`core::math::eval::paired_difference`).

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use arlbook_core::agent::{EpisodeIds, Split, generate_task};
use arlbook_core::math::eval::{Z_95, bootstrap_mean_ci, paired_difference, pass_at_k};
use burn::prelude::*;
use serde::Serialize;

use super::checkpoint;
use super::config::TrainConfig;
use super::generate::roll_out;
use super::grpo::policy_info;
use super::rollout::EpisodeSpec;
use super::sampling::Sampler;
use super::trainer::load_model;

/// Bootstrap resamples for every interval.
const RESAMPLES: usize = 2000;
/// Seed offset that keeps evaluation episodes apart from training ones.
const EVAL_SEED: u64 = 0xE7A1_0000_0000;

/// What to evaluate.
#[derive(Debug, Clone)]
pub struct EvalPlan {
    /// The split.
    pub split: Split,
    /// Number of tasks (task seeds `0..tasks` of the split).
    pub tasks: usize,
    /// Samples per task `n`.
    pub samples: usize,
    /// The `k` values of pass@k (each at most `samples`).
    pub ks: Vec<usize>,
    /// Sampling temperature.
    pub temperature: f64,
    /// Seed of the episodes and the bootstrap.
    pub seed: u64,
    /// Episodes whose records are kept for display (the first ones).
    pub show: usize,
}

/// A mean with its 95% bootstrap interval.
#[derive(Debug, Clone, Serialize)]
pub struct Estimate {
    /// The mean over tasks.
    pub mean: f64,
    /// 95% percentile-bootstrap interval over tasks.
    pub ci95: [f64; 2],
}

/// pass@k at one `k`.
#[derive(Debug, Clone, Serialize)]
pub struct PassAtK {
    /// `k`.
    pub k: usize,
    /// Estimate.
    #[serde(flatten)]
    pub estimate: Estimate,
}

/// One checkpoint's results.
#[derive(Debug, Clone, Serialize)]
pub struct CheckpointResult {
    /// The checkpoint folder.
    pub checkpoint: PathBuf,
    /// Successes per task.
    pub successes: Vec<usize>,
    /// Success rate (pass@1).
    pub success: Estimate,
    /// pass@k.
    pub pass_at_k: Vec<PassAtK>,
    /// The first [`EvalPlan::show`] episodes, for display.
    #[serde(skip)]
    pub shown: Vec<arlbook_core::agent::EpisodeRecord>,
}

/// The paired comparison `a - b`.
#[derive(Debug, Clone, Serialize)]
pub struct Paired {
    /// Mean per-task difference in success rate.
    pub difference: f64,
    /// Its standard error.
    pub se: f64,
    /// `difference -+ 1.96 se`.
    pub ci95_normal: [f64; 2],
    /// Percentile bootstrap interval of the mean difference.
    pub ci95_bootstrap: [f64; 2],
    /// Whether both intervals exclude 0.
    pub significant: bool,
}

/// The report of `arlbook eval`.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Split name.
    pub split: String,
    /// Tasks.
    pub tasks: usize,
    /// Samples per task.
    pub samples: usize,
    /// Temperature.
    pub temperature: f64,
    /// The evaluated checkpoint.
    pub result: CheckpointResult,
    /// The baseline, when one was given.
    pub baseline: Option<CheckpointResult>,
    /// `result - baseline`, when a baseline was given.
    pub paired: Option<Paired>,
}

/// A checkpoint folder: the folder itself when it holds `state.json`, else the latest
/// checkpoint of the run folder.
pub fn resolve_checkpoint(path: &Path) -> Result<PathBuf> {
    if path.join("state.json").is_file() {
        return Ok(path.to_owned());
    }
    match checkpoint::latest(path)? {
        Some(folder) => Ok(folder),
        None => bail!(
            "checkpoint: {} is neither a checkpoint nor a run folder with one",
            path.display()
        ),
    }
}

#[allow(clippy::needless_pass_by_value, reason = "used as `map_err(fe)`")]
fn fe(e: arlbook_core::FieldError) -> anyhow::Error {
    anyhow::anyhow!("{}: {}", e.field, e.message)
}

/// Runs `plan` on one checkpoint.
pub fn evaluate(folder: &Path, plan: &EvalPlan, device: &Device) -> Result<CheckpointResult> {
    let state = checkpoint::read_state(folder)?;
    let config: TrainConfig = state.config;
    let model = load_model(&config, &folder.join("model.bpk"), device)?;
    let mut specs = Vec::with_capacity(plan.tasks * plan.samples);
    for i in 0..plan.tasks {
        let task = generate_task(plan.split, i as u64);
        for j in 0..plan.samples {
            specs.push(EpisodeSpec {
                task: task.clone(),
                ids: EpisodeIds {
                    group_id: i as u64,
                    sample_id: j as u64,
                },
                seed: EVAL_SEED ^ plan.seed ^ (i as u64) << 20,
            });
        }
    }
    let sampler = Sampler {
        temperature: plan.temperature,
        top_p: None,
    };
    let info = policy_info(&config, folder.display().to_string());
    let rollouts = roll_out(&model, device, &specs, &config.harness, &sampler, &info);
    let mut successes = vec![0usize; plan.tasks];
    for rollout in &rollouts {
        if rollout.record.success() {
            successes[rollout.record.group_id as usize] += 1;
        }
    }
    let n = plan.samples as u64;
    let rate: Vec<f64> = successes
        .iter()
        .map(|&c| c as f64 / plan.samples as f64)
        .collect();
    let success = estimate(&rate, plan.seed)?;
    let pass = plan
        .ks
        .iter()
        .map(|&k| {
            let values: Vec<f64> = successes
                .iter()
                .map(|&c| pass_at_k(n, c as u64, k as u64))
                .collect::<std::result::Result<_, _>>()
                .map_err(fe)?;
            Ok(PassAtK {
                k,
                estimate: estimate(&values, plan.seed)?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let shown = rollouts
        .into_iter()
        .take(plan.show)
        .map(|r| r.record)
        .collect();
    Ok(CheckpointResult {
        checkpoint: folder.to_owned(),
        successes,
        success,
        pass_at_k: pass,
        shown,
    })
}

fn estimate(values: &[f64], seed: u64) -> Result<Estimate> {
    let mean = values.iter().sum::<f64>() / values.len().max(1) as f64;
    let ci95 = bootstrap_mean_ci(values, RESAMPLES, 0.95, seed).map_err(fe)?;
    Ok(Estimate { mean, ci95 })
}

/// The paired comparison of two results on the same tasks.
pub fn compare(
    a: &CheckpointResult,
    b: &CheckpointResult,
    samples: usize,
    seed: u64,
) -> Result<Paired> {
    let rate = |r: &CheckpointResult| -> Vec<f64> {
        r.successes
            .iter()
            .map(|&c| c as f64 / samples as f64)
            .collect()
    };
    let (ra, rb) = (rate(a), rate(b));
    let paired = paired_difference(&ra, &rb).map_err(fe)?;
    let diffs: Vec<f64> = ra.iter().zip(&rb).map(|(x, y)| x - y).collect();
    let ci95_bootstrap = bootstrap_mean_ci(&diffs, RESAMPLES, 0.95, seed).map_err(fe)?;
    let ci95_normal = [
        paired.mean - Z_95 * paired.se,
        paired.mean + Z_95 * paired.se,
    ];
    let significant = (ci95_normal[0] > 0.0 || ci95_normal[1] < 0.0)
        && (ci95_bootstrap[0] > 0.0 || ci95_bootstrap[1] < 0.0);
    Ok(Paired {
        difference: paired.mean,
        se: paired.se,
        ci95_normal,
        ci95_bootstrap,
        significant,
    })
}

/// Checks a plan's numbers, naming the flag.
pub fn validate(plan: &EvalPlan) -> Result<()> {
    if plan.tasks < 2 {
        bail!("--tasks: must be at least 2 (intervals resample tasks)");
    }
    if plan.samples == 0 {
        bail!("--samples: must be at least 1");
    }
    if let Some(&k) = plan.ks.iter().find(|&&k| k == 0 || k > plan.samples) {
        bail!("--k: {k} must be in 1..=--samples ({})", plan.samples);
    }
    if !(plan.temperature.is_finite() && plan.temperature >= 0.0) {
        bail!("--temperature: must be finite and >= 0");
    }
    Ok(())
}

//! Evaluation of checkpoints on a split: success (pass@1), unbiased pass@k, 95%
//! intervals that resample problem keys, results per tier, and paired differences
//! between arms on the same tasks with the same episode seeds.
//!
//! For task `i` with `n` samples and `c_i` successes, pass@k is the unbiased
//! `1 - C(n - c_i, k) / C(n, k)` (Chen et al. 2021) averaged over tasks. Tasks that
//! share a problem key are one cluster: their outcomes are correlated (the same
//! program with other constants), so intervals come from the cluster bootstrap and
//! standard errors are cluster-robust (`core::math::eval::cluster_bootstrap_mean_ci`,
//! `clustered_mean_se`). The paired difference of arms `a - b` uses per-task success
//! rates `a_i - b_i`: mean, clustered standard error, the normal interval
//! `mean -+ 1.96 se` and the cluster-bootstrap interval. Each statistic is given over
//! all tasks and over each tier's tasks (validation and test keys are tier A or B).
//! Success and the paired differences are also given per bug operator (the injected
//! bug's kind, `wrong_return`, `off_by_one`, ...): a policy's skills are uneven across
//! them, and a gain that comes from some operators and not others shows there.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use arlbook_core::agent::{
    EpisodeIds, EpisodeRecord, FailureCause, Split, Task, diagnose, generate_task, has_refused_edit,
};
use arlbook_core::math::eval::{
    Z_95, cluster_bootstrap_mean_ci, clustered_mean_se, clusters_of, pass_at_k,
};
use burn::prelude::*;
use serde::Serialize;

use crate::config::TrainConfig;
use crate::measure::opening::roll_out_from_wrong_patch;
use crate::policy::generate::roll_out;
use crate::policy::rollout::{EpisodeSpec, Rollout};
use crate::policy::sampling::Sampler;
use crate::policy::sampling::policy_info;
use crate::run::checkpoint;
use crate::run::trainer::load_model;

/// Bootstrap resamples for every interval.
const RESAMPLES: usize = 2000;
/// Seed offset that keeps evaluation episodes apart from training ones.
const EVAL_SEED: u64 = 0xE7A1_0000_0000;

/// What to evaluate.
#[derive(Debug, Clone)]
pub struct EvalPlan {
    /// The split.
    pub split: Split,
    /// Number of tasks (task seeds `first_task..first_task + tasks` of the split).
    pub tasks: usize,
    /// The first task seed.
    pub first_task: u64,
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
    /// Also run the recovery diagnostic (every episode again, from the wrong first
    /// patch of [`crate::measure::opening`]).
    pub recovery: bool,
}

impl EvalPlan {
    /// The plan's tasks, in order.
    pub fn task_list(&self) -> Vec<Task> {
        (0..self.tasks)
            .map(|i| generate_task(self.split, self.first_task + i as u64))
            .collect()
    }
}

/// One task of the plan, as the report lists it (enough to recompute every statistic).
#[derive(Debug, Clone, Serialize)]
pub struct TaskInfo {
    /// The task's seed in its split.
    pub seed: u64,
    /// Its problem key (the cluster).
    pub key: String,
    /// Its tier (`A` or `B`; absent in the training split).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tier: Option<&'static str>,
}

/// A mean with its 95% interval.
#[derive(Debug, Clone, Serialize)]
pub struct Estimate {
    /// The mean over tasks.
    pub mean: f64,
    /// 95% cluster-bootstrap interval (problem keys resampled).
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

/// Success and pass@k over a set of tasks.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Tasks in the set.
    pub tasks: usize,
    /// Distinct problem keys among them (the clusters).
    pub keys: usize,
    /// Success rate (pass@1 at the plan's temperature).
    pub success: Estimate,
    /// pass@k.
    pub pass_at_k: Vec<PassAtK>,
}

/// One checkpoint's episodes: successes per task.
#[derive(Debug, Clone)]
pub struct CheckpointRun {
    /// The checkpoint folder.
    pub checkpoint: PathBuf,
    /// Successes per task, in plan order.
    pub successes: Vec<usize>,
    /// Successes per task from the wrong first patch, with [`EvalPlan::recovery`].
    pub recovered: Option<Vec<usize>>,
    /// The first [`EvalPlan::show`] episodes, for display.
    pub shown: Vec<EpisodeRecord>,
    /// The failed episodes by cause.
    pub failures: FailureBreakdown,
}

/// Failed episodes by cause (`arlbook_core::agent::failure`): every cause is listed,
/// zeros included, so the counts add up to `failed`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FailureBreakdown {
    /// Episodes run.
    pub episodes: usize,
    /// Episodes that failed.
    pub failed: usize,
    /// Failed episodes per cause (`no_edit`, `unknown_name`, `wrong_line`, ...).
    pub causes: BTreeMap<String, usize>,
    /// Failed episodes that ran the visible tests after their last edit, saw one
    /// fail, and called `finish` anyway (any cause).
    pub finished_after_failing_tests: usize,
    /// Episodes, failed or not, in which the harness refused at least one edit call
    /// (`write_code`, `replace` or `edit` answered with `error:`).
    pub refused_edit_episodes: usize,
    /// Of those, the episodes that still repaired the task.
    pub repaired_after_refusal: usize,
}

impl FailureBreakdown {
    /// The breakdown of `records`, each on `tasks[record.group_id]`.
    pub fn of<'a>(tasks: &[Task], records: impl IntoIterator<Item = &'a EpisodeRecord>) -> Self {
        let mut out = Self {
            causes: FailureCause::ALL
                .iter()
                .map(|cause| (cause.name().to_owned(), 0))
                .collect(),
            ..Self::default()
        };
        for record in records {
            out.episodes += 1;
            if has_refused_edit(record) {
                out.refused_edit_episodes += 1;
                out.repaired_after_refusal += usize::from(record.success());
            }
            if let Some(diagnosis) = diagnose(&tasks[record.group_id as usize], record) {
                out.failed += 1;
                *out.causes
                    .entry(diagnosis.cause.name().to_owned())
                    .or_default() += 1;
                out.finished_after_failing_tests +=
                    usize::from(diagnosis.finished_after_failing_tests);
            }
        }
        out
    }
}

/// One arm of a report.
#[derive(Debug, Clone, Serialize)]
pub struct ArmResult {
    /// The arm's name (`model`, `baseline`, or the name given with `--arm`).
    pub name: String,
    /// The checkpoint folder.
    pub checkpoint: PathBuf,
    /// Successes per task, in the order of [`Report::task_list`].
    pub successes: Vec<usize>,
    /// Over all tasks.
    pub overall: Summary,
    /// Per tier (`A`, `B`), for tiers with at least one task.
    pub tiers: BTreeMap<String, Summary>,
    /// Per bug operator (`wrong_init`, `wrong_return`, ...), for operators with at
    /// least one task.
    pub bugs: BTreeMap<String, Summary>,
    /// The recovery diagnostic, when asked for: success from the wrong first patch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovery: Option<Recovery>,
    /// The failed episodes by cause.
    pub failures: FailureBreakdown,
}

/// The recovery diagnostic's results of one arm.
#[derive(Debug, Clone, Serialize)]
pub struct Recovery {
    /// Successes per task, in the order of [`Report::task_list`].
    pub successes: Vec<usize>,
    /// Over all tasks.
    pub overall: Summary,
    /// Per tier.
    pub tiers: BTreeMap<String, Summary>,
}

/// The paired comparison `a - b` over a set of tasks.
#[derive(Debug, Clone, Serialize)]
pub struct Paired {
    /// Mean per-task difference in success rate.
    pub difference: f64,
    /// Its cluster-robust standard error.
    pub se: f64,
    /// `difference -+ 1.96 se`.
    pub ci95_normal: [f64; 2],
    /// Cluster-bootstrap interval of the mean difference.
    pub ci95_bootstrap: [f64; 2],
    /// Whether both intervals exclude 0.
    pub significant: bool,
    /// Tasks compared.
    pub tasks: usize,
    /// Problem keys among them.
    pub keys: usize,
}

/// Arm `a` against arm `b`.
#[derive(Debug, Clone, Serialize)]
pub struct PairResult {
    /// The first arm's name.
    pub a: String,
    /// The second arm's name.
    pub b: String,
    /// Over all tasks.
    pub overall: Paired,
    /// Per tier, for tiers with at least two keys.
    pub tiers: BTreeMap<String, Paired>,
    /// Per bug operator, for operators with at least two keys.
    pub bugs: BTreeMap<String, Paired>,
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
    /// Seed of the episodes and of the bootstrap.
    pub seed: u64,
    /// The tasks, in order: seed, key and tier.
    pub task_list: Vec<TaskInfo>,
    /// Every arm's results.
    pub arms: Vec<ArmResult>,
    /// Each later arm against the first, then each pair of later arms (earlier minus
    /// later).
    pub pairs: Vec<PairResult>,
}

/// Runs `plan`'s episodes on one checkpoint.
pub fn run_checkpoint(folder: &Path, plan: &EvalPlan, device: &Device) -> Result<CheckpointRun> {
    let state = checkpoint::read_state(folder)?;
    let config: TrainConfig = state.config;
    let model = load_model(&config, &folder.join("model.bpk"), device)?;
    let tasks = plan.task_list();
    let mut specs = Vec::with_capacity(plan.tasks * plan.samples);
    for (i, task) in tasks.iter().cloned().enumerate() {
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
    let count = |rollouts: &[Rollout]| {
        let mut successes = vec![0usize; plan.tasks];
        for rollout in rollouts {
            if rollout.record.success() {
                successes[rollout.record.group_id as usize] += 1;
            }
        }
        successes
    };
    let rollouts = roll_out(&model, device, &specs, &config.harness, &sampler, &info)?;
    let successes = count(&rollouts);
    let recovered = if plan.recovery {
        Some(count(&roll_out_from_wrong_patch(
            &model,
            device,
            &specs,
            &config.harness,
            &sampler,
            &info,
        )?))
    } else {
        None
    };
    let failures = FailureBreakdown::of(&tasks, rollouts.iter().map(|r| &r.record));
    let shown = rollouts
        .into_iter()
        .take(plan.show)
        .map(|r| r.record)
        .collect();
    Ok(CheckpointRun {
        checkpoint: folder.to_owned(),
        successes,
        recovered,
        shown,
        failures,
    })
}

/// Runs `plan` on one checkpoint and summarises it over all of the plan's tasks.
pub fn score(folder: &Path, plan: &EvalPlan, device: &Device) -> Result<Summary> {
    let run = run_checkpoint(folder, plan, device)?;
    let tasks = plan.task_list();
    let everything: Vec<usize> = (0..tasks.len()).collect();
    summarise(&run.successes, &tasks, &everything, plan)
}

/// Success and pass@k of `successes` on each of `sets` (tiers or bug operators).
fn summarise_each(
    successes: &[usize],
    tasks: &[Task],
    sets: &BTreeMap<String, Vec<usize>>,
    plan: &EvalPlan,
) -> Result<BTreeMap<String, Summary>> {
    sets.iter()
        .map(|(name, subset)| Ok((name.clone(), summarise(successes, tasks, subset, plan)?)))
        .collect()
}

/// The tasks of each tier present, by name.
fn tier_subsets(tasks: &[Task]) -> BTreeMap<String, Vec<usize>> {
    let mut tiers: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, task) in tasks.iter().enumerate() {
        if let Some(tier) = task.tier {
            tiers.entry(tier.name().to_owned()).or_default().push(i);
        }
    }
    tiers
}

/// The tasks of each bug operator present, by name.
fn bug_subsets(tasks: &[Task]) -> BTreeMap<String, Vec<usize>> {
    let mut bugs: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, task) in tasks.iter().enumerate() {
        bugs.entry(task.bug.name().to_owned()).or_default().push(i);
    }
    bugs
}

/// The paired comparison `a - b` on each of `sets` that has at least two problem keys
/// (a bootstrap over one cluster has no spread).
fn compare_each(
    a: &[usize],
    b: &[usize],
    tasks: &[Task],
    sets: &BTreeMap<String, Vec<usize>>,
    plan: &EvalPlan,
) -> Result<BTreeMap<String, Paired>> {
    let mut out = BTreeMap::new();
    for (name, subset) in sets {
        if key_clusters(tasks, subset).len() >= 2 {
            out.insert(name.clone(), compare(a, b, tasks, subset, plan)?);
        }
    }
    Ok(out)
}

/// The clusters (by problem key) of the tasks `subset`, as indices into `subset`.
fn key_clusters(tasks: &[Task], subset: &[usize]) -> Vec<Vec<usize>> {
    let keys: Vec<&str> = subset.iter().map(|&i| tasks[i].key.as_str()).collect();
    clusters_of(&keys)
}

fn estimate(values: &[f64], clusters: &[Vec<usize>], seed: u64) -> Result<Estimate> {
    let mean = values.iter().sum::<f64>() / values.len().max(1) as f64;
    let ci95 = cluster_bootstrap_mean_ci(values, clusters, RESAMPLES, 0.95, seed)?;
    Ok(Estimate { mean, ci95 })
}

/// Success and pass@k of `successes` over the tasks `subset`.
pub fn summarise(
    successes: &[usize],
    tasks: &[Task],
    subset: &[usize],
    plan: &EvalPlan,
) -> Result<Summary> {
    let clusters = key_clusters(tasks, subset);
    let n = plan.samples as u64;
    let rate: Vec<f64> = subset
        .iter()
        .map(|&i| successes[i] as f64 / plan.samples as f64)
        .collect();
    let pass = plan
        .ks
        .iter()
        .map(|&k| {
            let values: Vec<f64> = subset
                .iter()
                .map(|&i| pass_at_k(n, successes[i] as u64, k as u64))
                .collect::<std::result::Result<_, _>>()?;
            Ok(PassAtK {
                k,
                estimate: estimate(&values, &clusters, plan.seed)?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Summary {
        tasks: subset.len(),
        keys: clusters.len(),
        success: estimate(&rate, &clusters, plan.seed)?,
        pass_at_k: pass,
    })
}

/// The paired comparison `a - b` over the tasks `subset`.
pub fn compare(
    a: &[usize],
    b: &[usize],
    tasks: &[Task],
    subset: &[usize],
    plan: &EvalPlan,
) -> Result<Paired> {
    let clusters = key_clusters(tasks, subset);
    let samples = plan.samples as f64;
    let diffs: Vec<f64> = subset
        .iter()
        .map(|&i| (a[i] as f64 - b[i] as f64) / samples)
        .collect();
    let difference = diffs.iter().sum::<f64>() / diffs.len().max(1) as f64;
    let se = clustered_mean_se(&diffs, &clusters)?;
    let ci95_bootstrap = cluster_bootstrap_mean_ci(&diffs, &clusters, RESAMPLES, 0.95, plan.seed)?;
    let ci95_normal = [difference - Z_95 * se, difference + Z_95 * se];
    let significant = (ci95_normal[0] > 0.0 || ci95_normal[1] < 0.0)
        && (ci95_bootstrap[0] > 0.0 || ci95_bootstrap[1] < 0.0);
    Ok(Paired {
        difference,
        se,
        ci95_normal,
        ci95_bootstrap,
        significant,
        tasks: subset.len(),
        keys: clusters.len(),
    })
}

/// The pairs a report compares, as `(a, b)` for `a - b`: each later arm against the
/// first, then each later arm against each one after it.
pub fn pair_order(arms: usize) -> Vec<(usize, usize)> {
    let mut pairs: Vec<(usize, usize)> = (1..arms).map(|i| (i, 0)).collect();
    for i in 1..arms {
        pairs.extend((i + 1..arms).map(|j| (i, j)));
    }
    pairs
}

/// The report over `runs` (named arms, all on `plan`).
pub fn report(plan: &EvalPlan, runs: &[(String, CheckpointRun)]) -> Result<Report> {
    let tasks = plan.task_list();
    let everything: Vec<usize> = (0..tasks.len()).collect();
    let tier_sets = tier_subsets(&tasks);
    let bug_sets = bug_subsets(&tasks);
    let arms = runs
        .iter()
        .map(|(name, run)| {
            let recovery = match &run.recovered {
                Some(successes) => Some(Recovery {
                    successes: successes.clone(),
                    overall: summarise(successes, &tasks, &everything, plan)?,
                    tiers: summarise_each(successes, &tasks, &tier_sets, plan)?,
                }),
                None => None,
            };
            Ok(ArmResult {
                name: name.clone(),
                checkpoint: run.checkpoint.clone(),
                successes: run.successes.clone(),
                overall: summarise(&run.successes, &tasks, &everything, plan)?,
                tiers: summarise_each(&run.successes, &tasks, &tier_sets, plan)?,
                bugs: summarise_each(&run.successes, &tasks, &bug_sets, plan)?,
                recovery,
                failures: run.failures.clone(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let pairs = pair_order(runs.len())
        .into_iter()
        .map(|(i, j)| {
            let (a, b) = (&runs[i].1.successes, &runs[j].1.successes);
            Ok(PairResult {
                a: runs[i].0.clone(),
                b: runs[j].0.clone(),
                overall: compare(a, b, &tasks, &everything, plan)?,
                tiers: compare_each(a, b, &tasks, &tier_sets, plan)?,
                bugs: compare_each(a, b, &tasks, &bug_sets, plan)?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Report {
        split: plan.split.name().to_owned(),
        tasks: plan.tasks,
        samples: plan.samples,
        temperature: plan.temperature,
        seed: plan.seed,
        task_list: tasks
            .iter()
            .map(|t| TaskInfo {
                seed: t.seed,
                key: t.key.clone(),
                tier: t.tier.map(arlbook_core::agent::Tier::name),
            })
            .collect(),
        arms,
        pairs,
    })
}

/// Checks a plan's numbers, naming the flag.
pub fn validate(plan: &EvalPlan) -> Result<()> {
    if plan.tasks < 2 {
        bail!("--tasks: must be at least 2 (intervals resample tasks)");
    }
    if plan.tasks > MAX_TASKS {
        bail!("--tasks: must be at most {MAX_TASKS}");
    }
    if plan.first_task.checked_add(plan.tasks as u64).is_none() {
        bail!("--first-task: the task seeds would pass u64::MAX");
    }
    if plan.samples == 0 || plan.samples > MAX_SAMPLES {
        bail!("--samples: must be in 1..={MAX_SAMPLES}");
    }
    if let Some(&k) = plan.ks.iter().find(|&&k| k == 0 || k > plan.samples) {
        bail!("--k: {k} must be in 1..=--samples ({})", plan.samples);
    }
    if !(plan.temperature.is_finite() && plan.temperature >= 0.0) {
        bail!("--temperature: must be finite and >= 0");
    }
    Ok(())
}

/// The most tasks one evaluation may ask for.
const MAX_TASKS: usize = 1_000_000;
/// The most samples per task.
const MAX_SAMPLES: usize = 4096;

#[cfg(test)]
mod tests {
    use super::*;

    /// Emits fixed calls in order, each followed by the end token.
    struct Calls(Vec<&'static str>);

    impl arlbook_core::agent::Policy for Calls {
        fn info(&self) -> arlbook_core::agent::PolicyInfo {
            arlbook_core::agent::Teacher::new(&arlbook_core::agent::article_example()).info()
        }
        fn next_tokens(
            &mut self,
            _: &[u32],
            max_new: usize,
            _: &mut arlbook_core::rng::RandomStream,
        ) -> arlbook_core::agent::Generation {
            let text = if self.0.is_empty() {
                "finish()"
            } else {
                self.0.remove(0)
            };
            arlbook_core::agent::policy::scripted(text, max_new)
        }
    }

    /// Episodes with a refused edit are counted whatever their outcome, and those that
    /// still repaired the task are counted apart; an accepted edit is not a refusal.
    #[test]
    fn the_breakdown_counts_refused_edits_and_the_repairs_after_them() {
        let task = arlbook_core::agent::article_example();
        let harness = arlbook_core::agent::HarnessConfig {
            edit_tool: true,
            ..arlbook_core::agent::HarnessConfig::default()
        };
        let episode = |calls: Vec<&'static str>| {
            arlbook_core::agent::run_episode(
                &task,
                &mut Calls(calls),
                &harness,
                EpisodeIds::default(),
                0,
            )
        };
        let refused = "edit(\"best = 7\", \"best = 1\")";
        let right = "edit(\"best = 0\", \"best = xs[0]\")";
        let records = [
            episode(vec![refused, right]),
            episode(vec![refused]),
            episode(vec![right]),
            episode(vec!["write_code(9, \"x = 1\")"]),
        ];
        assert_eq!(
            records
                .iter()
                .map(EpisodeRecord::success)
                .collect::<Vec<_>>(),
            [true, false, true, false]
        );
        let tasks = [task.clone()];
        let breakdown = FailureBreakdown::of(&tasks, &records);
        assert_eq!((breakdown.episodes, breakdown.failed), (4, 2));
        assert_eq!(breakdown.refused_edit_episodes, 3);
        assert_eq!(breakdown.repaired_after_refusal, 1);
    }

    #[test]
    fn pairs_put_every_arm_against_the_first_then_earlier_against_later() {
        assert_eq!(pair_order(1), vec![]);
        assert_eq!(pair_order(2), vec![(1, 0)]);
        assert_eq!(pair_order(3), vec![(1, 0), (2, 0), (1, 2)]);
    }

    fn plan_of(split: Split, tasks: usize, samples: usize, first_task: u64, seed: u64) -> EvalPlan {
        EvalPlan {
            split,
            tasks,
            samples,
            ks: vec![1, samples],
            temperature: 1.0,
            first_task,
            seed,
            show: 0,
            recovery: false,
        }
    }

    /// The report of arm `b` then arm `a`, given their successes per task.
    fn report_of(plan: &EvalPlan, b: &[usize], a: &[usize]) -> Report {
        let run = |successes: &[usize]| CheckpointRun {
            checkpoint: PathBuf::from("x"),
            successes: successes.to_vec(),
            recovered: None,
            shown: Vec::new(),
            failures: FailureBreakdown::default(),
        };
        report(plan, &[("b".to_owned(), run(b)), ("a".to_owned(), run(a))]).unwrap()
    }

    #[test]
    fn reports_cover_each_tier_and_cluster_by_key() {
        let plan = plan_of(Split::Test, 60, 2, 0, 4);
        let tasks = plan.task_list();
        let a: Vec<usize> = (0..60).map(|i| i % 3).collect();
        let b: Vec<usize> = (0..60).map(|i| (i / 2) % 2).collect();
        let report = report_of(&plan, &b, &a);
        let arm = &report.arms[1];
        let tier_tasks: usize = arm.tiers.values().map(|s| s.tasks).sum();
        assert_eq!(tier_tasks, 60, "every test task has a tier");
        let mean = a.iter().map(|&c| c as f64 / 2.0).sum::<f64>() / 60.0;
        assert!((arm.overall.success.mean - mean).abs() < 1e-12);
        let distinct: std::collections::BTreeSet<&str> =
            tasks.iter().map(|t| t.key.as_str()).collect();
        assert_eq!(arm.overall.keys, distinct.len());
        let pair = &report.pairs[0];
        assert_eq!((pair.a.as_str(), pair.b.as_str()), ("a", "b"));
        let diff = a
            .iter()
            .zip(&b)
            .map(|(&x, &y)| (x as f64 - y as f64) / 2.0)
            .sum::<f64>()
            / 60.0;
        assert!((pair.overall.difference - diff).abs() < 1e-12);
        assert!(pair.overall.ci95_normal[0] < diff && diff < pair.overall.ci95_normal[1]);
    }

    /// Each task counts under its own bug operator once, and the per-operator success
    /// and paired difference are the plain means over that operator's tasks.
    #[test]
    fn reports_break_success_and_differences_down_by_bug_operator() {
        let plan = plan_of(Split::Validation, 120, 4, 30, 9);
        let tasks = plan.task_list();
        let a: Vec<usize> = (0..120).map(|i| (i * 7) % 5).collect();
        let b: Vec<usize> = (0..120).map(|i| (i * 3) % 5).collect();
        let report = report_of(&plan, &b, &a);
        let arm = &report.arms[1];
        let counted: usize = arm.bugs.values().map(|s| s.tasks).sum();
        assert_eq!(counted, 120, "every task has one bug operator");
        assert!(
            arm.bugs.len() >= 4,
            "120 tasks draw most operators: {:?}",
            arm.bugs.keys()
        );
        let pair = &report.pairs[0];
        for (bug, summary) in &arm.bugs {
            let of_bug: Vec<usize> = (0..120).filter(|&i| tasks[i].bug.name() == bug).collect();
            assert_eq!(summary.tasks, of_bug.len(), "{bug}");
            let mean = of_bug.iter().map(|&i| a[i] as f64 / 4.0).sum::<f64>() / of_bug.len() as f64;
            assert!((summary.success.mean - mean).abs() < 1e-12, "{bug}");
            let keys: std::collections::BTreeSet<&str> =
                of_bug.iter().map(|&i| tasks[i].key.as_str()).collect();
            assert_eq!(summary.keys, keys.len(), "{bug}");
            match pair.bugs.get(bug) {
                Some(paired) => {
                    let diff = of_bug
                        .iter()
                        .map(|&i| (a[i] as f64 - b[i] as f64) / 4.0)
                        .sum::<f64>()
                        / of_bug.len() as f64;
                    assert!((paired.difference - diff).abs() < 1e-12, "{bug}");
                    assert_eq!(paired.tasks, of_bug.len(), "{bug}");
                }
                None => assert!(keys.len() < 2, "{bug}: compared whenever two keys exist"),
            }
        }
    }
}

//! `arlbook train` and `arlbook eval`.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use arlbook_core::agent::Split;
use clap::Args;

use arlbook_train::config::{BackendChoice, PositionKind, TrainConfig};
use arlbook_train::device;
use arlbook_train::measure::eval::{self, EvalPlan, Report};
use arlbook_train::run::checkpoint;
use arlbook_train::run::pipeline::Stage;
use arlbook_train::run::selection;
use arlbook_train::run::trainer::Trainer;

/// Arguments of `arlbook train`.
#[derive(Debug, Args)]
pub struct TrainArgs {
    /// The training configuration (TOML; see configs/).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Output folder: metrics.jsonl, checkpoints/, config.toml, summary.json.
    #[arg(long, default_value = "runs/latest")]
    pub out: PathBuf,
    /// Which stages to run.
    #[arg(long, default_value = "all", value_parser = names_parser!(Stage))]
    pub stage: Stage,
    /// Continue the run in --out from its latest checkpoint (the config stored there
    /// is used).
    #[arg(long)]
    pub resume: bool,
    /// Start the RL stage from the weights of this checkpoint (with --stage grpo or rs).
    #[arg(long)]
    pub init: Option<PathBuf>,
    /// Override the config's seed (a fresh run only).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Override the config's backend: auto, cpu or gpu.
    #[arg(long, value_parser = names_parser!(BackendChoice))]
    pub backend: Option<BackendChoice>,
    /// Exit as soon as standard input closes. `arlbook serve` runs its jobs this way,
    /// so a server that dies (even by SIGKILL) takes its training processes with it
    /// and a restarted server never has two writers in one job folder.
    #[arg(long, hide = true)]
    pub exit_on_stdin_eof: bool,
    /// The broker whose workers collect GRPO's rollouts.
    #[command(flatten)]
    pub broker: crate::cluster_cmd::BrokerArgs,
}

/// Ends the process when standard input reaches end-of-file (the parent is gone).
fn exit_when_stdin_closes() {
    std::thread::spawn(|| {
        let mut sink = [0_u8; 64];
        let mut stdin = std::io::stdin().lock();
        // Anything the parent writes is ignored; only the end of the stream matters.
        while matches!(std::io::Read::read(&mut stdin, &mut sink), Ok(n) if n > 0) {}
        eprintln!("standard input closed: the server is gone, stopping");
        std::process::exit(3);
    });
}

/// Runs `arlbook train`.
pub fn run_train(args: &TrainArgs) -> Result<ExitCode> {
    if args.exit_on_stdin_eof {
        exit_when_stdin_closes();
    }
    if args.resume && (args.seed.is_some() || args.init.is_some() || args.config.is_some()) {
        anyhow::bail!(
            "--resume: continues with the stored config; drop --config, --seed and --init"
        );
    }
    let mut trainer = if args.resume {
        let folder = checkpoint::latest(&args.out)?
            .with_context(|| format!("--resume: {} holds no checkpoint", args.out.display()))?;
        let state = checkpoint::read_state(&folder)?;
        let backend = args.backend.unwrap_or(state.config.backend);
        let (plain, name) = device::choose(backend)?;
        eprintln!(
            "resuming {} from {} on {name}",
            args.out.display(),
            folder.display()
        );
        Trainer::resume(&args.out, plain)?
    } else {
        let mut config = match &args.config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("--config: reading {}", path.display()))?;
                TrainConfig::from_toml(&text)
                    .with_context(|| format!("--config {}", path.display()))?
            }
            None => TrainConfig::default(),
        };
        if let Some(backend) = args.backend {
            config.backend = backend;
        }
        if let Some(seed) = args.seed {
            config.seed = seed;
        }
        // An --init that cannot be used is refused before the run folder is made.
        let init = match &args.init {
            Some(path) => {
                let rl = args
                    .stage
                    .rl_stage(&config, 0)
                    .context("--init: starts an RL stage; use it with --stage grpo, rs or all")?;
                let folder = selection::named_checkpoint(path)?;
                if checkpoint::read_state(&folder)?.config.model != config.model {
                    anyhow::bail!("--init: the checkpoint's [model] differs from this config's");
                }
                Some((rl, folder))
            }
            None => None,
        };
        let (plain, name) = device::choose(config.backend)?;
        let mut trainer = Trainer::fresh(config, &args.out, plain)?;
        eprintln!(
            "training in {} on {name}: {} parameters",
            args.out.display(),
            trainer.parameter_count()
        );
        if let Some((rl, folder)) = init {
            trainer.init_from(&folder, rl)?;
            eprintln!("initialised from {}", folder.display());
        }
        trainer
    };
    crate::cluster_cmd::attach_learner(&args.broker, &mut trainer, &args.out)?;
    trainer.run(args.stage)?;
    eprintln!(
        "done: metrics in {}",
        args.out.join("metrics.jsonl").display()
    );
    if let Some(peak) = arlbook_train::resident::peak_resident_mib() {
        eprintln!("peak resident memory: {peak:.0} MiB");
    }
    Ok(ExitCode::SUCCESS)
}

/// Arguments of `arlbook train-plot`.
#[derive(Debug, Args)]
pub struct PlotArgs {
    /// The run folder (holding metrics.jsonl).
    #[arg(long)]
    pub run: PathBuf,
    /// The SVG to write.
    #[arg(long)]
    pub out: PathBuf,
}

/// Runs `arlbook train-plot`.
pub fn run_plot(args: &PlotArgs) -> Result<ExitCode> {
    arlbook_train::measure::plot::write(&args.run, &args.out)?;
    eprintln!("wrote {}", args.out.display());
    Ok(ExitCode::SUCCESS)
}

/// Arguments of `arlbook eval`.
#[derive(Debug, Args)]
pub struct EvalArgs {
    /// A checkpoint folder, or a run folder (the checkpoint chosen on validation in the
    /// stage of its latest checkpoint, else that latest one); the arm `model`.
    #[arg(long)]
    pub checkpoint: Option<PathBuf>,
    /// Compare against this checkpoint on the same tasks and seeds; the arm `baseline`.
    #[arg(long)]
    pub baseline: Option<PathBuf>,
    /// A named arm, `NAME=PATH` (repeatable). Arms are `baseline`, `model`, then these;
    /// every later arm is compared with the first, and each later pair with each other.
    #[arg(long, value_name = "NAME=PATH")]
    pub arm: Vec<String>,
    /// train, validation or test.
    #[arg(long, default_value = "test")]
    pub split: String,
    /// Tasks (task seeds first-task..first-task + tasks of the split).
    #[arg(long, default_value_t = 100)]
    pub tasks: usize,
    /// The first task seed (other tasks than the default 0..tasks).
    #[arg(long, default_value_t = 0)]
    pub first_task: u64,
    /// Samples per task `n`.
    #[arg(long, default_value_t = 8)]
    pub samples: usize,
    /// The k values of pass@k, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,4,8")]
    pub k: Vec<usize>,
    /// Sampling temperature (0 = greedy).
    #[arg(long, default_value_t = 1.0)]
    pub temperature: f64,
    /// Seed of the episodes and the bootstrap.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// auto, cpu or gpu.
    #[arg(long, default_value = "auto", value_parser = names_parser!(BackendChoice))]
    pub backend: BackendChoice,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also run the recovery diagnostic: every episode again from the same wrong first
    /// patch and failing test run; its success is reported beside the natural one.
    #[arg(long)]
    pub recovery: bool,
    /// Print the transcripts of the first N episodes of the first arm before the report
    /// (not with --json).
    #[arg(long, default_value_t = 0)]
    pub show: usize,
}

/// The arms of an `eval` invocation, named, in order.
fn eval_arms(args: &EvalArgs) -> Result<Vec<(String, PathBuf)>> {
    let mut arms = Vec::new();
    if let Some(path) = &args.baseline {
        arms.push(("baseline".to_owned(), path.clone()));
    }
    if let Some(path) = &args.checkpoint {
        arms.push(("model".to_owned(), path.clone()));
    }
    for spec in &args.arm {
        let Some((name, path)) = spec.split_once('=') else {
            anyhow::bail!("--arm: expected NAME=PATH, got {spec:?}");
        };
        if name.is_empty() || path.is_empty() {
            anyhow::bail!("--arm: expected NAME=PATH with both parts, got {spec:?}");
        }
        if arms.iter().any(|(n, _)| n == name) {
            anyhow::bail!("--arm: the name {name:?} is used twice");
        }
        arms.push((name.to_owned(), PathBuf::from(path)));
    }
    if arms.is_empty() {
        anyhow::bail!("--checkpoint: give a checkpoint (or arms with --arm NAME=PATH)");
    }
    if args.baseline.is_some() && arms.len() == 1 {
        anyhow::bail!("--baseline: needs --checkpoint (or an --arm) to compare with");
    }
    Ok(arms)
}

/// Runs `arlbook eval`.
pub fn run_eval(args: &EvalArgs) -> Result<ExitCode> {
    let split = Split::parse(&args.split).with_context(|| {
        format!(
            "--split: expected train, validation or test, got {:?}",
            args.split
        )
    })?;
    let mut ks = args.k.clone();
    ks.retain(|&k| k <= args.samples);
    if ks.is_empty() {
        ks.push(1);
    }
    let plan = EvalPlan {
        split,
        tasks: args.tasks,
        first_task: args.first_task,
        samples: args.samples,
        ks,
        temperature: args.temperature,
        seed: args.seed,
        show: args.show,
        recovery: args.recovery,
    };
    eval::validate(&plan)?;
    let arms = eval_arms(args)?;
    let folders = arms
        .iter()
        .map(|(name, path)| Ok((name.clone(), selection::named_checkpoint(path)?)))
        .collect::<Result<Vec<_>>>()?;
    let (device, device_name) = device::choose(args.backend)?;
    let mut runs = Vec::with_capacity(folders.len());
    for (name, folder) in folders {
        eprintln!(
            "evaluating {name} ({}) on {} {} tasks x {} samples ({device_name})",
            folder.display(),
            args.tasks,
            args.split,
            args.samples
        );
        runs.push((name, eval::run_checkpoint(&folder, &plan, &device)?));
    }
    let shown = runs.first().map_or(&[][..], |(_, r)| r.shown.as_slice());
    for record in shown.iter().filter(|_| !args.json) {
        let task = arlbook_core::agent::generate_task(split, args.first_task + record.group_id);
        crate::env_cmd::print_transcript(&task, record);
    }
    let report = eval::report(&plan, &runs)?;
    if args.json {
        crate::output::outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    Ok(ExitCode::SUCCESS)
}

fn summary_text(summary: &eval::Summary) -> String {
    let mut text = format!(
        "success {:.3} [{:.3}, {:.3}]",
        summary.success.mean, summary.success.ci95[0], summary.success.ci95[1]
    );
    for p in &summary.pass_at_k {
        let _ = write!(
            text,
            "  pass@{} {:.3} [{:.3}, {:.3}]",
            p.k, p.estimate.mean, p.estimate.ci95[0], p.estimate.ci95[1]
        );
    }
    let _ = write!(text, "  ({} tasks, {} keys)", summary.tasks, summary.keys);
    text
}

fn paired_text(p: &eval::Paired) -> String {
    format!(
        "{:+.3} (se {:.3}); 95% normal [{:+.3}, {:+.3}], bootstrap [{:+.3}, {:+.3}]{}",
        p.difference,
        p.se,
        p.ci95_normal[0],
        p.ci95_normal[1],
        p.ci95_bootstrap[0],
        p.ci95_bootstrap[1],
        if p.significant { "  (significant)" } else { "" }
    )
}

/// `failed 412 of 600: wrong_text 180, wrong_line 121, ...; 57 finished after failing
/// tests; 96 had an edit refused, 0 of them repaired`, causes with at least one
/// episode, most frequent first.
fn failures_text(failures: &eval::FailureBreakdown) -> String {
    let mut causes: Vec<(&String, &usize)> =
        failures.causes.iter().filter(|(_, n)| **n > 0).collect();
    causes.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let listed: Vec<String> = causes.iter().map(|(c, n)| format!("{c} {n}")).collect();
    format!(
        "failed {} of {}{}{}; {} finished after failing tests; {} had an edit refused, \
         {} of them repaired",
        failures.failed,
        failures.episodes,
        if listed.is_empty() { "" } else { ": " },
        listed.join(", "),
        failures.finished_after_failing_tests,
        failures.refused_edit_episodes,
        failures.repaired_after_refusal
    )
}

fn print_report(report: &Report) {
    crate::output::outln!(
        "{} split, {} tasks x {} samples, temperature {}; intervals resample problem keys",
        report.split,
        report.tasks,
        report.samples,
        report.temperature
    );
    for arm in &report.arms {
        crate::output::outln!("{:<9} all     {}", arm.name, summary_text(&arm.overall));
        for (tier, summary) in &arm.tiers {
            crate::output::outln!("{:<9} tier {tier:<2} {}", "", summary_text(summary));
        }
        if let Some(recovery) = &arm.recovery {
            crate::output::outln!(
                "{:<9} from the wrong first patch: {}",
                "",
                summary_text(&recovery.overall)
            );
            for (tier, summary) in &recovery.tiers {
                crate::output::outln!("{:<9}   tier {tier:<2} {}", "", summary_text(summary));
            }
        }
        crate::output::outln!("{:<9} {}", "", failures_text(&arm.failures));
    }
    for pair in &report.pairs {
        crate::output::outln!("{} - {}", pair.a, pair.b);
        crate::output::outln!("  all     {}", paired_text(&pair.overall));
        for (tier, paired) in &pair.tiers {
            crate::output::outln!("  tier {tier:<2} {}", paired_text(paired));
        }
    }
    for line in bug_table(report) {
        crate::output::outln!("{line}");
    }
}

/// Success per bug operator, one row each: its tasks, every arm's success, then each
/// pair's difference with its bootstrap interval (`-` where the operator has fewer
/// than two keys to resample).
fn bug_table(report: &Report) -> Vec<String> {
    let Some(first) = report.arms.first() else {
        return Vec::new();
    };
    let mut header = format!("{:<20} {:>5}", "by bug operator", "tasks");
    for arm in &report.arms {
        let _ = write!(header, " {:>9}", arm.name);
    }
    for pair in &report.pairs {
        let _ = write!(header, " {:>26}", format!("{} - {}", pair.a, pair.b));
    }
    let mut lines = vec![header];
    for (bug, summary) in &first.bugs {
        let mut row = format!("{bug:<20} {:>5}", summary.tasks);
        for arm in &report.arms {
            let cell = arm
                .bugs
                .get(bug)
                .map_or_else(|| "-".to_owned(), |s| format!("{:.3}", s.success.mean));
            let _ = write!(row, " {cell:>9}");
        }
        for pair in &report.pairs {
            let cell = pair.bugs.get(bug).map_or_else(
                || "-".to_owned(),
                |p| {
                    format!(
                        "{:+.3} [{:+.3}, {:+.3}]",
                        p.difference, p.ci95_bootstrap[0], p.ci95_bootstrap[1]
                    )
                },
            );
            let _ = write!(row, " {cell:>26}");
        }
        lines.push(row);
    }
    lines
}

/// Arguments of `arlbook bench-train` (run by `cargo xtask bench train`).
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Transformer blocks.
    #[arg(long, default_value_t = 2)]
    pub layers: usize,
    /// Model width.
    #[arg(long, default_value_t = 96)]
    pub width: usize,
    /// Attention heads.
    #[arg(long, default_value_t = 4)]
    pub heads: usize,
    /// Positions.
    #[arg(long, default_value_t = 640)]
    pub context: usize,
    /// learned (a position table) or rotary (queries and keys turned by position).
    #[arg(long, default_value = "learned", value_parser = names_parser!(PositionKind))]
    pub positions: PositionKind,
    /// Sequences per GRPO step.
    #[arg(long, default_value_t = 64)]
    pub rows: usize,
    /// Context tokens before generation.
    #[arg(long, default_value_t = 200)]
    pub prompt: usize,
    /// Generated tokens per row.
    #[arg(long, default_value_t = 32)]
    pub new_tokens: usize,
    /// Rows per forward pass in the update.
    #[arg(long, default_value_t = 16)]
    pub microbatch_rows: usize,
    /// Timed repetitions after one warm-up.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Turns per episode of the multi-turn workload.
    #[arg(long, default_value_t = 5)]
    pub turns: usize,
    /// Generated tokens per turn of the multi-turn workload.
    #[arg(long, default_value_t = 16)]
    pub turn_tokens: usize,
    /// Tokens of each tool result between two turns.
    #[arg(long, default_value_t = 24)]
    pub observation_tokens: usize,
    /// Threads of the update's microbatches (default: as the trainer, one per core on
    /// the CPU backend, one on a GPU).
    #[arg(long)]
    pub update_threads: Option<usize>,
    /// auto, cpu or gpu.
    #[arg(long, default_value = "cpu", value_parser = names_parser!(BackendChoice))]
    pub backend: BackendChoice,
    /// burn's forward passes and autodiff graph on the CPU backend too (the trainer's
    /// CPU path is the fused one, `server/train/src/policy/fused`): the two side by side.
    #[arg(long)]
    pub burn_only: bool,
}

/// Runs the synthetic GRPO workload and prints its timing as JSON.
pub fn run_bench(args: &BenchArgs) -> Result<ExitCode> {
    let model = arlbook_train::config::ModelConfig {
        layers: args.layers,
        width: args.width,
        heads: args.heads,
        context: args.context,
        positions: args.positions,
    };
    if args.prompt + args.new_tokens > args.context {
        anyhow::bail!("--prompt + --new-tokens must be at most --context");
    }
    if args.heads == 0
        || !args.width.is_multiple_of(args.heads)
        || args.rows == 0
        || args.microbatch_rows == 0
    {
        anyhow::bail!("--heads must divide --width; --rows and --microbatch-rows must be positive");
    }
    if args.turns == 0 || args.turn_tokens == 0 || args.prompt == 0 {
        anyhow::bail!("--turns, --turn-tokens and --prompt must be positive");
    }
    let workload = arlbook_train::bench::Workload {
        rows: args.rows,
        prompt: args.prompt,
        new_tokens: args.new_tokens,
        microbatch_rows: args.microbatch_rows,
        repeats: args.repeats.max(1),
        turns: args.turns,
        turn_tokens: args.turn_tokens,
        observation_tokens: args.observation_tokens,
        update_threads: args.update_threads,
        burn_only: args.burn_only,
    };
    if workload.episode_tokens() > args.context {
        anyhow::bail!(
            "--prompt + --turns x --turn-tokens + (--turns - 1) x --observation-tokens is {}, more than --context {}",
            workload.episode_tokens(),
            args.context
        );
    }
    let (device, _) = device::choose(args.backend)?;
    let timing = arlbook_train::bench::run(&model, &workload, &device)?;
    crate::output::outln!("{}", serde_json::to_string(&timing)?);
    Ok(ExitCode::SUCCESS)
}

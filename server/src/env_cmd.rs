//! `arlbook env`: sample tasks of the code-repair environment, run episodes and
//! measure policies on a split.
//!
//! - `env sample --split test --seed 7` prints a task (its code and tests).
//! - `env run --policy teacher --seed 7 [--json]` prints one episode as a two-column
//!   transcript (what the model emitted, what the harness returned) or its full record.
//! - `env stats --split train --n 1000` prints what the tasks cover (distinct problem
//!   keys and skeletons, tiers, bug operators) and, for the teacher and the random
//!   policy (or the one `--policy` names), success rate, mean turns and tokens, and the
//!   end reasons.

use crate::output::outln;
use anyhow::bail;
use arlbook_core::agent::env::listing;
use arlbook_core::agent::{
    EpisodeIds, EpisodeRecord, EpisodeStats, HarnessConfig, Policy, SpanRole, Split, Task,
    TaskStats, Teacher, Tier, UniformRandom, article_example, generate_task, run_episode,
};
use clap::{Args, Subcommand, ValueEnum};

/// Arguments of `arlbook env`.
#[derive(Debug, Args)]
pub struct EnvArgs {
    #[command(subcommand)]
    command: EnvCommand,
}

#[derive(Debug, Subcommand)]
enum EnvCommand {
    /// Print one task: spec, buggy code, visible and hidden tests.
    Sample(SampleArgs),
    /// Run one episode and print its transcript (or its record with --json).
    Run(RunArgs),
    /// Run many episodes and print summary statistics.
    Stats(StatsArgs),
}

/// Which task to draw.
#[derive(Debug, Args)]
struct TaskArgs {
    /// The split to draw from: train, validation or test.
    #[arg(long, default_value = "train", value_parser = parse_split)]
    split: Split,
    /// The task seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Use the article's findMax example instead of a generated task.
    #[arg(long)]
    example: bool,
}

impl TaskArgs {
    fn task(&self) -> Task {
        if self.example {
            article_example()
        } else {
            generate_task(self.split, self.seed)
        }
    }
}

#[derive(Debug, Args)]
struct SampleArgs {
    #[command(flatten)]
    task: TaskArgs,
    /// Print the task as JSON.
    #[arg(long)]
    json: bool,
}

/// Harness settings on the command line.
#[derive(Debug, Args)]
#[allow(
    clippy::struct_excessive_bools,
    reason = "independent on/off flags, one per harness setting"
)]
struct HarnessArgs {
    /// Most model calls per episode.
    #[arg(long, default_value_t = 12)]
    max_turns: usize,
    /// Most tokens of context a model call may see.
    #[arg(long, default_value_t = 1280)]
    max_tokens: usize,
    /// Probability that an executor run crashes (an injected environment fault).
    #[arg(long, default_value_t = 0.0)]
    fault_prob: f64,
    /// Give the agent the `replace(line, "old", "new")` tool (the teacher then repairs
    /// a line with the smallest replacement).
    #[arg(long)]
    replace_tool: bool,
    /// Give the agent the `edit("old", "new")` tool, addressed by a text unique in the
    /// file (the teacher then repairs a line with the smallest such edit).
    #[arg(long)]
    edit_tool: bool,
    /// Refuse edits that name a variable the starting listing does not contain.
    #[arg(long)]
    name_check: bool,
    /// Follow a refused edit's error with the current listing.
    #[arg(long)]
    listing_on_refusal: bool,
}

impl HarnessArgs {
    fn config(&self) -> anyhow::Result<HarnessConfig> {
        if !(0.0..=1.0).contains(&self.fault_prob) {
            bail!("--fault-prob must be in [0, 1], got {}", self.fault_prob);
        }
        Ok(HarnessConfig {
            max_turns: self.max_turns,
            max_context_tokens: self.max_tokens,
            fault_probability: self.fault_prob,
            replace_tool: self.replace_tool,
            edit_tool: self.edit_tool,
            name_check: self.name_check,
            listing_on_refusal: self.listing_on_refusal,
            ..HarnessConfig::default()
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum PolicyKind {
    /// The scripted teacher (knows the reference code).
    Teacher,
    /// Uniformly random tokens.
    Random,
}

impl PolicyKind {
    fn name(self) -> &'static str {
        match self {
            PolicyKind::Teacher => "teacher",
            PolicyKind::Random => "random",
        }
    }
}

#[derive(Debug, Args)]
struct RunArgs {
    #[command(flatten)]
    task: TaskArgs,
    /// The policy that acts.
    #[arg(long, value_enum, default_value_t = PolicyKind::Teacher)]
    policy: PolicyKind,
    #[command(flatten)]
    harness: HarnessArgs,
    /// Sample id within the group (changes the policy's and the faults' random stream);
    /// at most 2^32.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(..=1 << 32))]
    sample_id: u64,
    /// Print the full record as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct StatsArgs {
    /// The split to draw from: train, validation or test.
    #[arg(long, default_value = "train", value_parser = parse_split)]
    split: Split,
    /// Number of episodes (task seeds seed..seed+n).
    #[arg(long, default_value_t = 1000)]
    n: u64,
    /// First task seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Run only this policy (default: the teacher and the random policy).
    #[arg(long, value_enum)]
    policy: Option<PolicyKind>,
    #[command(flatten)]
    harness: HarnessArgs,
    /// Print the statistics as JSON.
    #[arg(long)]
    json: bool,
}

fn parse_split(text: &str) -> Result<Split, String> {
    Split::parse(text).ok_or_else(|| format!("unknown split '{text}' (train, validation, test)"))
}

/// Runs `arlbook env ...`.
pub fn run(args: &EnvArgs) -> anyhow::Result<std::process::ExitCode> {
    match &args.command {
        EnvCommand::Sample(a) => sample(a)?,
        EnvCommand::Run(a) => run_one(a)?,
        EnvCommand::Stats(a) => stats(a)?,
    }
    Ok(std::process::ExitCode::SUCCESS)
}

fn sample(args: &SampleArgs) -> anyhow::Result<()> {
    let task = args.task.task();
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&task)?);
        return Ok(());
    }
    outln!(
        "task {}  key {}  tier {}",
        task.id,
        task.key,
        tier_name(&task)
    );
    outln!("spec: {}", task.spec);
    outln!("bug on line {} ({})\n", task.bug_line, task.bug.name());
    outln!("{}\n", listing(&task.buggy_code));
    for (label, cases) in [
        ("visible", &task.visible_tests),
        ("hidden", &task.hidden_tests),
    ] {
        outln!("{label} tests:");
        for case in cases {
            let input: Vec<String> = case.input.iter().map(i64::to_string).collect();
            outln!(
                "  {}([{}]) -> {}",
                task.function,
                input.join(", "),
                case.expected
            );
        }
    }
    Ok(())
}

fn episode(
    task: &Task,
    kind: PolicyKind,
    config: &HarnessConfig,
    ids: EpisodeIds,
    seed: u64,
) -> EpisodeRecord {
    let mut teacher;
    let mut random = UniformRandom;
    let policy: &mut dyn Policy = match kind {
        PolicyKind::Teacher => {
            teacher = Teacher::for_harness(task, config);
            &mut teacher
        }
        PolicyKind::Random => &mut random,
    };
    run_episode(task, policy, config, ids, seed)
}

fn run_one(args: &RunArgs) -> anyhow::Result<()> {
    let task = args.task.task();
    let config = args.harness.config()?;
    let ids = EpisodeIds {
        group_id: args.task.seed,
        sample_id: args.sample_id,
    };
    let record = episode(&task, args.policy, &config, ids, args.task.seed);
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&record)?);
    } else {
        print_transcript(&task, &record);
    }
    Ok(())
}

const MODEL_WIDTH: usize = 44;

/// Shows control characters and cuts long model output so the columns stay aligned.
fn model_cell(text: &str) -> String {
    let flat = text.replace('\n', "\\n");
    if flat.chars().count() > MODEL_WIDTH {
        let cut: String = flat.chars().take(MODEL_WIDTH - 3).collect();
        format!("{cut}...")
    } else {
        flat
    }
}

pub(crate) fn print_transcript(task: &Task, record: &EpisodeRecord) {
    outln!(
        "task {}  key {}  tier {}  policy {}",
        task.id,
        task.key,
        tier_name(task),
        record.policy.name
    );
    outln!(
        "request: fix {} so that all tests pass ({})\n",
        task.function,
        task.spec
    );
    outln!(
        "{:>4} | {:<MODEL_WIDTH$} | harness (tool result)",
        "turn",
        "model (action)"
    );
    outln!(
        "{}-+-{}-+-{}",
        "-".repeat(4),
        "-".repeat(MODEL_WIDTH),
        "-".repeat(40)
    );
    for (turn, call) in record.calls.iter().enumerate() {
        let mut rows = call.observation_text.lines();
        let first = rows.next().unwrap_or(if call.call.is_some() {
            "(episode ends)"
        } else {
            ""
        });
        outln!(
            "{:>4} | {:<MODEL_WIDTH$} | {first}",
            turn + 1,
            model_cell(&call.action_text)
        );
        for row in rows {
            outln!("{:>4} | {:<MODEL_WIDTH$} | {row}", "", "");
        }
    }
    let count = |role: SpanRole| -> usize {
        record
            .spans
            .iter()
            .filter(|s| s.role == role)
            .map(|s| s.end - s.start)
            .sum()
    };
    outln!(
        "\nend: {} (terminated {}, truncated {}, env fault {})  reward {}",
        record.end_reason.name(),
        record.terminated,
        record.truncated,
        record.env_fault,
        record.reward
    );
    outln!(
        "tokens: {} in all = prompt {} + generated {} + observation {}",
        record.tokens.len(),
        count(SpanRole::Prompt),
        count(SpanRole::Action),
        count(SpanRole::Observation)
    );
}

/// The number of keys of a split and of its two tiers.
fn split_keys(split: Split) -> (usize, usize, usize) {
    let catalogue = arlbook_core::agent::catalogue();
    let keys = catalogue.keys_of(split);
    let tier = |t: Tier| {
        keys.iter()
            .filter(|k| catalogue.split_of(k).and_then(|p| p.1) == Some(t))
            .count()
    };
    (keys.len(), tier(Tier::A), tier(Tier::B))
}

fn tier_name(task: &Task) -> &'static str {
    task.tier.map_or("-", |t| t.name())
}

fn stats(args: &StatsArgs) -> anyhow::Result<()> {
    let config = args.harness.config()?;
    let policies = match args.policy {
        Some(kind) => vec![kind],
        None => vec![PolicyKind::Teacher, PolicyKind::Random],
    };
    let mut tasks = TaskStats::default();
    let mut per_policy = vec![EpisodeStats::default(); policies.len()];
    for seed in args.seed..args.seed.saturating_add(args.n) {
        let task = generate_task(args.split, seed);
        tasks.add(&task);
        let ids = EpisodeIds {
            group_id: seed,
            sample_id: 0,
        };
        for (kind, stats) in policies.iter().zip(&mut per_policy) {
            stats.add(&episode(&task, *kind, &config, ids, seed));
        }
    }
    if args.json {
        let mut value = serde_json::to_value(&tasks)?;
        let mut by_policy = serde_json::Map::new();
        for (kind, stats) in policies.iter().zip(&per_policy) {
            let mut entry = serde_json::to_value(stats)?;
            if let Some(object) = entry.as_object_mut() {
                object.insert("success_rate".into(), stats.success_rate().into());
                object.insert("mean_turns".into(), stats.mean_turns().into());
                object.insert("mean_tokens".into(), stats.mean_tokens().into());
                object.insert(
                    "mean_generated_tokens".into(),
                    stats.mean_generated_tokens().into(),
                );
            }
            by_policy.insert(kind.name().into(), entry);
        }
        if let Some(object) = value.as_object_mut() {
            let (keys, tier_a, tier_b) = split_keys(args.split);
            object.insert("split".into(), args.split.name().into());
            object.insert(
                "split_keys".into(),
                serde_json::json!({"keys": keys, "A": tier_a, "B": tier_b}),
            );
            object.insert("policies".into(), by_policy.into());
        }
        outln!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    let counts = |map: &std::collections::BTreeMap<String, usize>| {
        map.iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    outln!(
        "split {}  tasks {}  distinct keys {}  distinct skeletons {}  distinct bug lines {}",
        args.split.name(),
        tasks.tasks,
        tasks.keys.len(),
        tasks.skeletons.len(),
        tasks.bug_lines.len()
    );
    let (keys, tier_a, tier_b) = split_keys(args.split);
    if args.split == Split::Train {
        outln!("the split has {keys} keys");
    } else {
        outln!("the split has {keys} keys (tier A {tier_a}, tier B {tier_b})");
    }
    if !tasks.tiers.is_empty() {
        outln!("tiers drawn: {}", counts(&tasks.tiers));
    }
    outln!("bug operators: {}", counts(&tasks.bugs));
    outln!("loop forms: {}", counts(&tasks.layouts));
    for (kind, stats) in policies.iter().zip(&per_policy) {
        outln!(
            "\npolicy {}: success rate {:.4} ({} / {}); without env faults {:.4}",
            kind.name(),
            stats.success_rate(),
            stats.successes,
            stats.episodes,
            stats.success_rate_without_faults()
        );
        outln!(
            "  mean turns {:.2}  mean tokens {:.1} (max {})  mean generated tokens {:.1}",
            stats.mean_turns(),
            stats.mean_tokens(),
            stats.max_tokens,
            stats.mean_generated_tokens()
        );
        outln!(
            "  terminated {}  truncated {}  env faults {}",
            stats.terminated,
            stats.truncated,
            stats.env_faults
        );
        for (reason, count) in &stats.end_reasons {
            outln!("    {reason}: {count}");
        }
    }
    Ok(())
}

//! The `arlbook` binary: serve the notebook and the API, run the compute API, export
//! figures, drive the agent environment, and train and evaluate a policy from the
//! command line.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// A clap parser for a trainer enum with `NAMES` and `FromStr`: the same help
/// (possible values) and errors as a derived `ValueEnum`.
macro_rules! names_parser {
    ($ty:ty) => {
        clap::builder::TypedValueParser::try_map(
            clap::builder::PossibleValuesParser::new(<$ty>::NAMES),
            |name: String| name.parse::<$ty>(),
        )
    };
}

mod cluster_cmd;
mod compute_cmd;
mod env_cmd;
mod figure_cmd;
mod jobs;
mod memory;
mod output;
mod serve;
mod strict_json;

mod train_cmd;

/// arlbook: an interactive notebook on reinforcement learning for LLM agents.
#[derive(Debug, Parser)]
#[command(name = "arlbook", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one computation of the compute API: JSON in (stdin or --input), JSON out.
    Compute(compute_cmd::ComputeArgs),
    /// Export one notebook figure as SVG or PNG, at the state of a page URL.
    Figure(figure_cmd::FigureArgs),
    /// Serve the notebook and the compute API over HTTP.
    Serve(serve::ServeArgs),
    /// The code-repair agent environment: sample tasks, run episodes, measure policies.
    Env(env_cmd::EnvArgs),
    /// Train the transformer policy: SFT on teacher demonstrations, then GRPO.
    Train(train_cmd::TrainArgs),
    /// Run GRPO rollouts for the learner on a NATS broker (`train --nats URL`).
    Worker(cluster_cmd::WorkerArgs),
    /// Evaluate a checkpoint: success, pass@k with 95% intervals, paired comparison.
    Eval(train_cmd::EvalArgs),
    /// Plot a training run's metrics (SFT loss, GRPO and validation success) as SVG.
    TrainPlot(train_cmd::PlotArgs),
    /// The trainer's synthetic GRPO workload, timed (used by `cargo xtask bench train`).
    #[command(hide = true)]
    BenchTrain(train_cmd::BenchArgs),
}

/// burn materialises restored optimizer state on its default device, which with the
/// wgpu backend compiled in is the GPU. Make the CPU backend the default unless the
/// user chose otherwise; the trainer passes its own device everywhere else.
#[allow(unsafe_code)]
fn default_burn_device_to_cpu() {
    if std::env::var_os("BURN_DEVICE").is_none() {
        // SAFETY: called first thing in `main`, before any thread exists, so nothing
        // can read the environment concurrently.
        unsafe { std::env::set_var("BURN_DEVICE", "flex") };
    }
}

impl Command {
    /// Whether the command trains or evaluates a policy, the work for which freed
    /// memory is kept for reuse (`memory::keep_freed_memory`).
    fn runs_a_policy(&self) -> bool {
        matches!(
            self,
            Self::Train(_) | Self::Worker(_) | Self::Eval(_) | Self::BenchTrain(_)
        )
    }
}

fn main() -> ExitCode {
    default_burn_device_to_cpu();
    let cli = Cli::parse();
    if cli.command.runs_a_policy() {
        memory::keep_freed_memory();
    }
    let outcome = match cli.command {
        Command::Compute(args) => compute_cmd::run(&args),
        Command::Figure(args) => figure_cmd::run(&args),
        Command::Serve(args) => serve::run(&args).map(|()| ExitCode::SUCCESS),
        Command::Env(args) => env_cmd::run(&args),
        Command::Train(args) => train_cmd::run_train(&args),
        Command::Worker(args) => cluster_cmd::run_worker(&args),
        Command::Eval(args) => train_cmd::run_eval(&args),
        Command::TrainPlot(args) => train_cmd::run_plot(&args),
        Command::BenchTrain(args) => train_cmd::run_bench(&args),
    };
    match outcome {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

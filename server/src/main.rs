//! The `arlbook` binary: serve the notebook and the API, run the compute API, export
//! figures and drive the agent environment from the command line.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod compute_cmd;
mod env_cmd;
mod figure_cmd;
mod output;
mod serve;

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Compute(args) => compute_cmd::run(&args),
        Command::Figure(args) => figure_cmd::run(&args),
        Command::Serve(args) => serve::run(&args).map(|()| ExitCode::SUCCESS),
        Command::Env(args) => env_cmd::run(&args),
    };
    match outcome {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

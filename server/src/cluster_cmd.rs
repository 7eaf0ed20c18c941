//! `arlbook worker`, and the broker flags `arlbook train` shares with it.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use arlbook_cluster::broker::Broker;
use arlbook_cluster::learner::Learner;
use arlbook_cluster::names;
use arlbook_cluster::worker::{self, WorkerOptions};
use arlbook_train::config::BackendChoice;
use arlbook_train::device;
use arlbook_train::run::trainer::Trainer;
use clap::Args;

/// Where the broker is (both roles).
#[derive(Debug, Clone, Args)]
pub struct BrokerArgs {
    /// The broker's URL.
    #[arg(
        long,
        value_name = "URL",
        help = "A NATS server with JetStream, e.g. nats://127.0.0.1:4222. With `train`: \
                GRPO's rollouts are collected by `arlbook worker`s on that broker \
                (overrides [cluster] url). Off loopback, credentials are required: a \
                token in ARLBOOK_NATS_TOKEN or --nats-nkey"
    )]
    pub nats: Option<String>,
    /// A file holding the nkey seed to authenticate with.
    #[arg(long, value_name = "FILE")]
    pub nats_nkey: Option<PathBuf>,
}

impl BrokerArgs {
    /// The broker of `--nats`, else of `config_url` when not empty.
    pub fn broker(&self, config_url: &str) -> Option<Broker> {
        let url = self
            .nats
            .clone()
            .or_else(|| (!config_url.is_empty()).then(|| config_url.to_owned()))?;
        Some(Broker::from_env(&url, self.nats_nkey.clone()))
    }
}

/// Arguments of `arlbook worker`.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    #[command(flatten)]
    pub broker: BrokerArgs,
    /// This worker's name in results and metrics (default: host name and process id).
    #[arg(long)]
    pub id: Option<String>,
    /// The device the rollouts run on: auto, cpu or gpu.
    #[arg(long, default_value = "auto", value_parser = names_parser!(BackendChoice))]
    pub backend: BackendChoice,
    /// Stop after this many jobs (default: run until stopped).
    #[arg(long)]
    pub max_jobs: Option<usize>,
    /// Hold each result this many milliseconds before publishing it (fault tests).
    #[arg(long, default_value_t = 0, hide = true)]
    pub hold_result_ms: u64,
}

/// Runs `arlbook worker`.
pub fn run_worker(args: &WorkerArgs) -> Result<ExitCode> {
    let Some(broker) = args.broker.broker("") else {
        anyhow::bail!("--nats: a worker needs the broker's URL");
    };
    broker.check()?;
    let (device, name) = device::choose(args.backend)?;
    let id = args.id.clone().unwrap_or_else(default_id);
    eprintln!("worker {id}: rollouts on {name}");
    worker::run(WorkerOptions {
        broker,
        id,
        device,
        max_jobs: args.max_jobs,
        hold_result_ms: args.hold_result_ms,
    })?;
    Ok(ExitCode::SUCCESS)
}

fn default_id() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "worker".to_owned());
    format!("{host}-{}", std::process::id())
}

/// Makes `trainer` a learner on the broker of `args` (or of its config), when one is
/// named: its GRPO batches are then collected by workers.
pub fn attach_learner(args: &BrokerArgs, trainer: &mut Trainer, out: &Path) -> Result<()> {
    let Some(broker) = args.broker(&trainer.config.cluster.url) else {
        return Ok(());
    };
    let run = if trainer.config.cluster.run.is_empty() {
        names::run_from_folder(out)?
    } else {
        trainer.config.cluster.run.clone()
    };
    let learner = Learner::start(&broker, &run, &trainer.config)?;
    eprintln!(
        "learner of run {run} (incarnation {}) on {}: GRPO's rollouts come from workers",
        learner.incarnation(),
        broker.url
    );
    trainer.remote = Some(Box::new(learner));
    Ok(())
}

//! Project automation for arlbook: serve, build-web, test, check, e2e, bench,
//! experiment, cluster and device-bundle, run as `cargo xtask <task>`.
//!
//! Everything a new machine needs is installed from here (the wasm32 target, Python
//! packages for benchmarks), so the README's two commands work on a fresh clone:
//! `cargo xtask serve` and `cargo xtask test`. `check` mirrors the static part of CI.

use std::process::ExitCode;

mod bench;
mod bench_cluster;
mod bench_server;
mod bench_train;
mod bench_web;
mod cluster;
mod cmd;
mod crate_docs;
mod device;
mod e2e;
mod experiment;
mod serve;
mod test;
mod web;

const USAGE: &str = "\
usage: cargo xtask <task> [options]

tasks:
  serve [--addr HOST:PORT] [--data DIR] [--dev]
                  build the web bundle, start `arlbook serve`, print the URL
  build-web [--dev]
                  build the notebook (wasm32 + wasm-bindgen) into web/dist
  test            everything CI runs: fmt, clippy, wasm32 checks, all tests,
                  then the browser tests
  e2e             the browser tests only: build the bundle, headless Chromium
  check           the static part of `test`: fmt, clippy, wasm32 checks
  bench core      CPU core vs numpy, side by side, with ratios
  bench gpu       every WGSL kernel vs its CPU reference, at three sizes
  bench train     the trainer's GRPO workload vs the same model in PyTorch (CPU)
  bench server    requests/s and p50/p99 latency of a compute call, N keep-alive clients
  bench web       the release bundle's size (raw, gzip) and every figure's redraw latency
  bench cluster   GRPO rollouts/s in process vs 1 and 2 workers on a loopback
                  nats-server, the learner's idle share, bytes per group
  bench device    a dry run of xtask/device/gpu-check.sh here (lavapipe, tiny sizes)
  experiment [--seeds 7,8,9] [--config FILE] [--out DIR] [--tasks N] [--samples N]
                  the RL experiment: SFT, GRPO and rejection-sampling arms per seed,
                  checkpoints chosen on validation, one test evaluation, the table
  cluster [--workers N] [--store DIR] -- TRAIN-ARGS
                  nats-server on loopback, N `arlbook worker`s and the learner
                  (`arlbook train TRAIN-ARGS --nats URL`), stopped together
  device-bundle [--dev]
                  build what xtask/device/gpu-check.sh needs on a GPU machine
                  (a release arlbook and the Vulkan loader) into target/device
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("serve") => serve::run(&args[1..]),
        Some("build-web") => web::build(&web::WebOptions::parse(&args[1..])).map(|_| ()),
        Some("test") => test::run_all(),
        Some("check") => test::run_static_checks(),
        Some("e2e") => e2e::run_browser_tests(),
        Some("bench") => bench::run(&args[1..]),
        Some("device-bundle") => device::bundle(&args[1..]),
        Some("cluster") => cluster::run_cluster(&args[1..]),
        Some("experiment") => experiment::run_experiment(&args[1..]),
        Some("help" | "--help" | "-h") | None => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Some(other) => Err(anyhow::anyhow!("unknown task `{other}`\n\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("xtask: {err:#}");
            ExitCode::FAILURE
        }
    }
}

//! `cargo xtask bench gpu`: every kernel against its CPU reference at three sizes
//! (small, the figure's default, large), plus the fixed cost of an empty round trip.
//!
//! Prints one row per (kernel, size): best time per call on the CPU and the GPU, elements
//! per second on each, the GPU time split into dispatch (upload, encode, submit), compute
//! (submit to queue idle) and readback (map and copy), and the bytes moved per second.

use std::time::{Duration, Instant};

use arlbook_core::Ragged;
use arlbook_core::gpu::{self, GpuContext};
use arlbook_core::math::advantage::{self, AdvantageOptions};
use arlbook_core::math::bandit::{self, Baseline, TwoArmed};
use arlbook_core::math::clip::{self, ClipWidths};
use arlbook_core::math::importance::{self, Problem};
use arlbook_core::math::lag::{self, DurationDistribution, LagConfig};
use arlbook_core::math::policy_loss::{
    PolicyLossConfig, PolicyLossInput, TokenAdvantages, policy_loss,
};
use arlbook_core::math::sampling;
use arlbook_core::rng::RandomStream;

/// Best wall time of `f` over repeats (at least 3, until 0.3 s have passed, at most 30).
fn best<T>(mut f: impl FnMut() -> T) -> Duration {
    let started = Instant::now();
    let mut best = Duration::MAX;
    for i in 0..30 {
        let t = Instant::now();
        std::hint::black_box(f());
        best = best.min(t.elapsed());
        if i >= 2 && started.elapsed() > Duration::from_millis(300) {
            break;
        }
    }
    best
}

struct Row<'a> {
    kernel: &'a str,
    size: String,
    elements: f64,
    bytes: f64,
}

fn report<C, G>(
    ctx: &GpuContext,
    row: &Row<'_>,
    mut cpu: impl FnMut() -> C,
    mut gpu_call: impl FnMut() -> G,
) {
    let cpu_time = best(&mut cpu).as_secs_f64();
    gpu_call(); // compile the pipeline and fill the buffer pool
    let mut split = gpu::Timings::default();
    let mut best_gpu = f64::INFINITY;
    for _ in 0..5 {
        let t = Instant::now();
        std::hint::black_box(gpu_call());
        let elapsed = t.elapsed().as_secs_f64();
        if elapsed < best_gpu {
            best_gpu = elapsed;
            split = ctx.last_timings().unwrap_or_default();
        }
    }
    println!(
        "| {:<16} | {:>14} | {:>10.3} | {:>10.3} | {:>9.2e} | {:>9.2e} | {:>8.3} | {:>8.3} | {:>8.3} | {:>7.3} |",
        row.kernel,
        row.size,
        cpu_time * 1e3,
        best_gpu * 1e3,
        row.elements / cpu_time,
        row.elements / best_gpu,
        split.dispatch * 1e3,
        split.compute * 1e3,
        split.readback * 1e3,
        row.bytes / best_gpu / 1e9,
    );
}

fn ragged(rows: usize, len: usize, seed: u64, low: f64, high: f64) -> Ragged<f64> {
    let mut s = RandomStream::new(seed, 0);
    let mut out = Ragged::default();
    for _ in 0..rows {
        let row: Vec<f64> = (0..len).map(|_| low + (high - low) * s.uniform()).collect();
        out.push_row(&row);
    }
    out
}

#[allow(clippy::too_many_lines)]
fn main() {
    let ctx = match GpuContext::new_blocking() {
        Ok(ctx) => ctx,
        Err(e) => {
            eprintln!("bench_gpu: {e}");
            std::process::exit(1);
        }
    };
    ctx.warm_up();
    println!("adapter: {}", ctx.adapter_name());
    let empty = best(|| gpu::block_on(gpu::empty_round_trip(&ctx)));
    println!(
        "fixed overhead (empty submit + 16-byte readback): {:.3} ms\n",
        empty.as_secs_f64() * 1e3
    );
    println!(
        "| kernel           | size           |     cpu ms |     gpu ms |   cpu el/s |   gpu el/s | dispatch |  compute | readback |    GB/s |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");

    for words in [65_536u32, 1 << 20, 1 << 24] {
        let row = Row {
            kernel: "rng_stream",
            size: format!("{words} words"),
            elements: f64::from(words),
            bytes: f64::from(words) * 4.0,
        };
        report(
            &ctx,
            &row,
            || {
                let mut s = RandomStream::new(1, 0);
                (0..words).fold(0u32, |acc, _| acc ^ s.next_u32())
            },
            || gpu::block_on(gpu::rng::stream_words(&ctx, 1, 0, 0, words / 4)),
        );
    }

    let arm = TwoArmed::new(0.5, 0.75, 0.35).unwrap_or_else(|e| panic!("{e}"));
    for (estimates, samples) in [(100usize, 24usize), (1000, 24), (10_000, 1000)] {
        let row = Row {
            kernel: "bandit_mc",
            size: format!("{estimates}x{samples}"),
            elements: (2 * estimates * samples) as f64,
            bytes: (estimates * 16) as f64,
        };
        report(
            &ctx,
            &row,
            || bandit::sample_estimates(&arm, Baseline::LeaveOneOut, 4, samples, estimates, 1),
            || {
                gpu::block_on(gpu::bandit::sample_estimates(
                    &ctx,
                    &arm,
                    Baseline::LeaveOneOut,
                    4,
                    samples,
                    estimates,
                    1,
                ))
            },
        );
    }

    let problem = Problem::new(vec![0.2, 0.8], vec![0.6, 0.4], vec![0.75, 0.35])
        .unwrap_or_else(|e| panic!("{e}"));
    for (estimates, samples) in [(100usize, 24usize), (1000, 24), (10_000, 1000)] {
        let row = Row {
            kernel: "importance_mc",
            size: format!("{estimates}x{samples}"),
            elements: (estimates * samples) as f64,
            bytes: (estimates * 8) as f64,
        };
        report(
            &ctx,
            &row,
            || importance::sample_replicates(&problem, samples, estimates, 1),
            || {
                gpu::block_on(gpu::importance::sample_replicates(
                    &ctx, &problem, samples, estimates, 1,
                ))
            },
        );
    }

    for replicates in [100usize, 2000, 100_000] {
        let row = Row {
            kernel: "mixed_group",
            size: format!("{replicates} runs"),
            elements: replicates as f64,
            bytes: (replicates * 12) as f64,
        };
        report(
            &ctx,
            &row,
            || sampling::simulate_replicates(0.125, 4, 4, 1000, replicates, 1),
            || {
                gpu::block_on(gpu::sampling::simulate_replicates(
                    &ctx, 0.125, 4, 4, 1000, replicates, 1,
                ))
            },
        );
    }

    let config = LagConfig {
        workers: 8,
        duration: DurationDistribution::Exponential { mean: 1.0 },
        batch_size: 8,
        max_lag: 1,
        updates: 50,
    };
    for replicates in [1usize, 100, 10_000] {
        let row = Row {
            kernel: "lag_sim",
            size: format!("{replicates} runs"),
            elements: (replicates * 400) as f64,
            bytes: (replicates * 80) as f64,
        };
        report(
            &ctx,
            &row,
            || lag::simulate_replicates(&config, replicates, 1),
            || gpu::block_on(gpu::lag::simulate_pooled(&ctx, &config, replicates, 1)),
        );
    }

    let widths = ClipWidths {
        eps_low: 0.2,
        eps_high: 0.28,
        dual_clip: Some(3.0),
    };
    for n in [100usize, 10_000, 1 << 20] {
        let ratio = ragged(1, n, 2, 0.0, 3.0);
        let adv = ragged(1, n, 3, -2.0, 2.0);
        let row = Row {
            kernel: "clip_surrogate",
            size: format!("{n}"),
            elements: n as f64,
            bytes: (n * 16) as f64,
        };
        report(
            &ctx,
            &row,
            || clip::clipped_surrogate(ratio.flat(), adv.flat(), &widths),
            || {
                gpu::block_on(gpu::clip::clipped_surrogate(
                    &ctx,
                    ratio.flat(),
                    adv.flat(),
                    &widths,
                ))
            },
        );
    }

    let options = AdvantageOptions::default();
    for (groups, size) in [(16usize, 8usize), (512, 16), (65_536, 16)] {
        let rewards = ragged(groups, size, 4, 0.0, 1.0);
        let row = Row {
            kernel: "group_advantage",
            size: format!("{groups}x{size}"),
            elements: (groups * size) as f64,
            bytes: (groups * size * 8 + groups * 20) as f64,
        };
        report(
            &ctx,
            &row,
            || advantage::group_advantages(&rewards, &options),
            || gpu::block_on(gpu::advantage::group_advantages(&ctx, &rewards, &options)),
        );
    }

    let config = PolicyLossConfig {
        beta: 0.04,
        ..PolicyLossConfig::default()
    };
    for (rows, len) in [(8usize, 64usize), (64, 512), (512, 4096)] {
        let logp = ragged(rows, len, 5, -5.0, -0.01);
        let old = ragged(rows, len, 6, -5.0, -0.01).map(|v| v.min(0.0));
        let reference = ragged(rows, len, 7, -5.0, -0.01);
        let adv: Vec<f64> = (0..rows)
            .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 })
            .collect();
        let input = PolicyLossInput {
            logp: &logp,
            old_logp: &old,
            ref_logp: Some(&reference),
            advantages: TokenAdvantages::PerSequence(&adv),
        };
        let tokens = rows * len;
        let row = Row {
            kernel: "policy_loss",
            size: format!("{rows}x{len}"),
            elements: tokens as f64,
            bytes: (tokens * 32) as f64,
        };
        report(
            &ctx,
            &row,
            || policy_loss(&input, &config),
            || gpu::block_on(gpu::policy_loss::policy_loss(&ctx, &input, &config)),
        );
    }
}

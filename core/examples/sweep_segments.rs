//! Where the segmented GPU kernels should switch strategy, measured on this adapter.
//!
//! 1. Group advantages over 2^20 rewards cut into groups of `G`: one thread per group
//!    (serial) against one 64-lane workgroup per group (wide).
//! 2. The policy loss over 2^20 tokens in sequences of `L`, for several chunk lengths
//!    (tokens one thread sums before the per-sequence pass).
//!
//! Prints the best of a few calls, in milliseconds. Run with
//! `cargo run --release -p arlbook-core --features gpu --example sweep_segments`.

use std::time::Instant;

use arlbook_core::Ragged;
use arlbook_core::gpu::{self, GpuContext};
use arlbook_core::math::advantage::AdvantageOptions;
use arlbook_core::math::policy_loss::{PolicyLossConfig, PolicyLossInput, TokenAdvantages};
use arlbook_core::rng::RandomStream;

const TOTAL: usize = 1 << 20;

fn best_ms<T>(mut f: impl FnMut() -> T) -> f64 {
    std::hint::black_box(f());
    (0..3)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(f());
            t.elapsed().as_secs_f64() * 1e3
        })
        .fold(f64::INFINITY, f64::min)
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

fn main() {
    let ctx = match GpuContext::new_blocking() {
        Ok(ctx) => ctx,
        Err(e) => {
            eprintln!("sweep_segments: {e}");
            std::process::exit(1);
        }
    };
    ctx.warm_up();
    println!("adapter: {}\n", ctx.adapter_name());
    println!("group advantages, {TOTAL} rewards, ms per call");
    println!("| group size | serial | wide |");
    println!("|---:|---:|---:|");
    let options = AdvantageOptions::default();
    for size in [4usize, 16, 64, 256, 1024, 4096, 16_384, 65_536] {
        let rewards = ragged(TOTAL / size, size, 4, 0.0, 1.0);
        let run = |serial_max: usize| {
            best_ms(|| {
                gpu::block_on(gpu::advantage::group_advantages_split(
                    &ctx, &rewards, &options, serial_max,
                ))
            })
        };
        println!("| {size} | {:.1} | {:.1} |", run(usize::MAX), run(0));
    }

    let chunks = [16usize, 64, 256, 1024];
    println!("\npolicy loss, {TOTAL} tokens, ms per call by chunk length");
    print!("| sequence length |");
    for chunk in chunks {
        print!(" {chunk} |");
    }
    println!("\n|---:|{}", "---:|".repeat(chunks.len()));
    let config = PolicyLossConfig {
        beta: 0.04,
        ..PolicyLossConfig::default()
    };
    for len in [64usize, 512, 4096, 65_536] {
        let rows = TOTAL / len;
        let logp = ragged(rows, len, 5, -5.0, -0.01);
        let old = ragged(rows, len, 6, -5.0, -0.01);
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
        print!("| {len} |");
        for chunk in chunks {
            let ms = best_ms(|| {
                gpu::block_on(gpu::policy_loss::policy_loss_chunked(
                    &ctx, &input, &config, None, chunk,
                ))
            });
            // The kernel part alone: host packing and unpacking do not depend on it.
            let compute = ctx.last_timings().unwrap_or_default().compute * 1e3;
            print!(" {ms:.0} ({compute:.0}) |");
        }
        println!();
    }
}

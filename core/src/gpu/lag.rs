//! The policy-lag event simulation on the GPU (`lag_sim.wgsl`).
//!
//! Same event loop, same random words as [`crate::math::lag::simulate`], with event
//! times in `f32`. For `fixed` durations whose sums are exact in `f32` the run is
//! identical to the CPU's; for random durations the order of two events closer than
//! `f32` resolution (or a transcendental rounded differently) may differ, so the GPU
//! gives a run of the same process that agrees with the CPU in distribution, and in
//! most replicates exactly.

use super::runner::{Job, Slot, bits, floats, groups_for, run, words};
use super::{GpuContext, GpuError};
use crate::math::lag::{DurationDistribution, LagConfig, LagReport};

/// The pooled report and each replicate's kept fraction.
pub async fn simulate_pooled(
    ctx: &GpuContext,
    config: &LagConfig,
    replicates: usize,
    seed: u64,
) -> Result<(LagReport, Vec<f64>), GpuError> {
    let too_large = |what: &str| GpuError::TooLarge(format!("{what} exceeds u32"));
    let updates = u32::try_from(config.updates).map_err(|_| too_large("updates"))?;
    let batch = u32::try_from(config.batch_size).map_err(|_| too_large("batch_size"))?;
    let cells = replicates
        .checked_mul(config.workers)
        .filter(|&c| c < u32::MAX as usize / 2)
        .ok_or_else(|| too_large("workers x replicates"))?;
    let (kind, a, b) = match config.duration {
        DurationDistribution::Fixed { duration } => (0, duration, 0.0),
        DurationDistribution::Uniform { min, max } => (1, min, max),
        DurationDistribution::Exponential { mean } => (2, mean, 0.0),
        DurationDistribution::Lognormal { log_mean, log_std } => (3, log_mean, log_std),
    };
    let params = [
        seed as u32,
        (seed >> 32) as u32,
        replicates as u32,
        config.workers as u32,
        batch,
        config.max_lag.min(u64::from(u32::MAX)) as u32,
        updates,
        kind,
        bits(a),
        bits(b),
        updates,
    ];
    let out = run(
        ctx,
        &Job {
            kernel: &arlbook_shaders::LAG_SIM,
            params: &params,
            slots: vec![
                Slot::Output {
                    bytes: (cells + replicates) as u64 * 4,
                    read_back: true,
                },
                Slot::Output {
                    bytes: (cells + replicates) as u64 * 4,
                    read_back: true,
                },
                Slot::Output {
                    bytes: u64::from(updates) * 4,
                    read_back: true,
                },
            ],
            dispatches: vec![(0, groups_for(replicates))],
        },
    )
    .await?;
    let elapsed = &floats(&out[0])[cells..];
    let kept = &words(&out[1])[cells..];
    let mut histogram: Vec<u64> = words(&out[2]).into_iter().map(u64::from).collect();
    while histogram.len() > 1 && histogram.last() == Some(&0) {
        histogram.pop();
    }
    let per_replicate = config.completions() as u64;
    let completed = per_replicate * replicates as u64;
    let kept_total: u64 = kept.iter().map(|&k| u64::from(k)).sum();
    let report = LagReport {
        completed,
        kept: kept_total,
        discarded: completed - kept_total,
        lag_sum: histogram
            .iter()
            .enumerate()
            .map(|(lag, &n)| lag as u64 * n)
            .sum(),
        lag_histogram: histogram,
        elapsed: elapsed.iter().map(|&t| f64::from(t)).sum(),
    };
    let fractions = kept
        .iter()
        .map(|&k| {
            if per_replicate == 0 {
                0.0
            } else {
                f64::from(k) / per_replicate as f64
            }
        })
        .collect();
    Ok((report, fractions))
}

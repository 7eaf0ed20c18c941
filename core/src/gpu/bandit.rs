//! Sampled bandit policy-gradient estimates on the GPU (`bandit_mc.wgsl`).
//!
//! The kernel returns exact integer counts per replicate; the estimate is finished here
//! in `f64`, so it equals [`crate::math::bandit::sample_estimates`] up to `f64`
//! rounding (the CPU sums per-sample `f64` scores, this path multiplies counts).

use super::runner::{Job, Slot, bits, groups_for, run, words};
use super::{GpuContext, GpuError};
use crate::math::bandit::{Baseline, TwoArmed};

fn to_u32(field: &str, value: usize) -> Result<u32, GpuError> {
    u32::try_from(value).map_err(|_| GpuError::TooLarge(format!("{field} = {value} exceeds u32")))
}

/// `estimates` estimates; replicate `r` uses stream `r`, as on the CPU. The caller has
/// checked the grouping (`samples` a positive multiple of `group_size`).
pub async fn sample_estimates(
    ctx: &GpuContext,
    bandit: &TwoArmed,
    baseline: Baseline,
    group_size: usize,
    samples: usize,
    estimates: usize,
    seed: u64,
) -> Result<Vec<f64>, GpuError> {
    if estimates == 0 {
        return Ok(Vec::new());
    }
    let params = [
        seed as u32,
        (seed >> 32) as u32,
        to_u32("estimates", estimates)?,
        to_u32("samples", samples)?,
        to_u32("group_size", group_size)?,
        bits(bandit.p),
        bits(bandit.q_a),
        bits(bandit.q_b),
    ];
    let out = run(
        ctx,
        &Job {
            kernel: &arlbook_shaders::BANDIT_MC,
            params: &params,
            slots: vec![Slot::Output {
                bytes: estimates as u64 * 16,
                read_back: true,
            }],
            dispatches: vec![(0, groups_for(estimates))],
        },
    )
    .await?;
    let counts = words(&out[0]);
    let n = samples as f64;
    let g = group_size as f64;
    let p = bandit.p;
    Ok(counts
        .chunks_exact(4)
        .map(|c| {
            let (sum_ar, sum_r) = (f64::from(c[0]), f64::from(c[1]));
            let centred = (u64::from(c[2]) | (u64::from(c[3]) << 32)) as i64 as f64;
            match baseline {
                Baseline::None => (sum_ar - p * sum_r) / n,
                Baseline::LeaveOneOut if group_size == 1 => (sum_ar - p * sum_r) / n,
                Baseline::GroupMean => centred / g / n,
                Baseline::LeaveOneOut => centred / (g - 1.0) / n,
            }
        })
        .collect())
}

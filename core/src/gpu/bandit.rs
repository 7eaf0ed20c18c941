//! Sampled bandit policy-gradient estimates on the GPU (`bandit_mc.wgsl`).
//!
//! The kernel returns exact integer counts per replicate, the same counts the CPU sampler
//! keeps; both finish them with [`estimate_from_counts`], so the estimates equal
//! [`crate::math::bandit::sample_estimates`] exactly.

use super::runner::{Job, Slot, bits, groups_for, run, words};
use super::{GpuContext, GpuError};
use crate::math::bandit::{Baseline, SampleCounts, TwoArmed, estimate_from_counts};

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
    Ok(counts
        .chunks_exact(4)
        .map(|c| {
            let counts = SampleCounts {
                rewarded_a: u64::from(c[0]),
                rewarded: u64::from(c[1]),
                centred: i128::from((u64::from(c[2]) | (u64::from(c[3]) << 32)) as i64),
            };
            estimate_from_counts(bandit.p, baseline, group_size, samples, &counts)
        })
        .collect())
}

//! Dynamic-sampling runs on the GPU (`mixed_group.wgsl`): integer results, identical
//! to [`crate::math::sampling::simulate_replicates`] for the same seed.

use super::runner::{Job, Slot, bits, groups_for, run, words};
use super::{GpuContext, GpuError};
use crate::math::sampling::DynamicSamplingRun;

/// `replicates` runs; replicate `r` uses stream `r`.
pub async fn simulate_replicates(
    ctx: &GpuContext,
    p: f64,
    group_size: u64,
    mixed_groups: u64,
    max_groups: u64,
    replicates: usize,
    seed: u64,
) -> Result<Vec<DynamicSamplingRun>, GpuError> {
    if replicates == 0 {
        return Ok(Vec::new());
    }
    let narrow = |name: &str, v: u64| {
        u32::try_from(v).map_err(|_| GpuError::TooLarge(format!("{name} = {v} exceeds u32")))
    };
    let params = [
        seed as u32,
        (seed >> 32) as u32,
        narrow("replicates", replicates as u64)?,
        narrow("group_size", group_size)?,
        narrow("mixed_groups", mixed_groups)?,
        narrow("max_groups", max_groups)?,
        bits(p),
    ];
    let out = run(
        ctx,
        &Job {
            kernel: &arlbook_shaders::MIXED_GROUP,
            params: &params,
            slots: vec![Slot::Output {
                bytes: replicates as u64 * 12,
                read_back: true,
            }],
            dispatches: vec![(0, groups_for(replicates))],
        },
    )
    .await?;
    Ok(words(&out[0])
        .chunks_exact(3)
        .map(|w| DynamicSamplingRun {
            groups_drawn: u64::from(w[0]),
            mixed_found: u64::from(w[1]),
            capped: w[2] != 0,
        })
        .collect())
}

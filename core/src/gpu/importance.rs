//! Importance-sampling replicates on the GPU (`importance_mc.wgsl`).
//!
//! The kernel counts how often each action was drawn in each replicate (the draws are
//! the CPU's, bit for bit); the sums `sum w`, `sum w^2`, `sum w f` are formed here in
//! `f64` from the counts, so each estimate equals the CPU's up to `f64` rounding.

use super::runner::{Job, Slot, groups_for, run, words};
use super::{GpuContext, GpuError};
use crate::math::importance::{Problem, Replicate};

/// Most actions the kernel's linear search handles efficiently.
pub const MAX_ACTIONS: usize = 4096;

/// `replicates` replicates of `samples` draws; replicate `r` uses stream `r`.
pub async fn sample_replicates(
    ctx: &GpuContext,
    problem: &Problem,
    samples: usize,
    replicates: usize,
    seed: u64,
) -> Result<Vec<Replicate>, GpuError> {
    let actions = problem.mu.len();
    if replicates == 0 {
        return Ok(Vec::new());
    }
    if actions > MAX_ACTIONS || samples > u32::MAX as usize {
        return Err(GpuError::TooLarge(format!(
            "{actions} actions x {samples} samples (the kernel takes at most {MAX_ACTIONS} actions)"
        )));
    }
    // The same f32 running sum as RandomStream::categorical.
    let mut running = 0.0f32;
    let cumulative: Vec<f32> = problem
        .mu
        .iter()
        .map(|&m| {
            running += m as f32;
            running
        })
        .collect();
    let params = [
        seed as u32,
        (seed >> 32) as u32,
        replicates as u32,
        samples as u32,
        actions as u32,
    ];
    let out = run(
        ctx,
        &Job {
            kernel: &arlbook_shaders::IMPORTANCE_MC,
            params: &params,
            slots: vec![
                Slot::Input(bytemuck::cast_slice(&cumulative)),
                Slot::Output {
                    bytes: (replicates * actions) as u64 * 4,
                    read_back: true,
                },
            ],
            dispatches: vec![(0, groups_for(replicates))],
        },
    )
    .await?;
    let counts = words(&out[0]);
    let w = problem.weights();
    Ok(counts
        .chunks_exact(actions)
        .map(|n| {
            let (mut sum_w, mut sum_w2, mut sum_wf) = (0.0, 0.0, 0.0);
            for (a, &count) in n.iter().enumerate() {
                let count = f64::from(count);
                sum_w += count * w[a];
                sum_w2 += count * w[a] * w[a];
                sum_wf += count * w[a] * problem.values[a];
            }
            let (self_normalized, ess) = if sum_w > 0.0 {
                (sum_wf / sum_w, sum_w * sum_w / sum_w2)
            } else {
                (0.0, 0.0)
            };
            Replicate {
                ordinary: sum_wf / samples as f64,
                self_normalized,
                ess,
            }
        })
        .collect())
}

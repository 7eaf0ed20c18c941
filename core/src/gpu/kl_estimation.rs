//! KL estimator replicates on the GPU (`kl_mc.wgsl`).
//!
//! The kernel draws the same actions as the CPU (same Philox words, same `f32`
//! thresholds) and sums each action's k1, k2, k3 values, rounded to `f32`, with
//! compensated `f32` sums; the host divides by `N` in `f64`. Each estimate therefore
//! agrees with the CPU's within about `1e-6` of the mean `|k|` of its draws (the
//! rounding of the per-action values to `f32` and of the compensated sum); the share of
//! negative k1 estimates is the same unless an estimate lies that close to 0.
//! Unlike the importance kernel, the output is three words per replicate whatever the
//! number of actions, so 100 000 replicates of 4096 actions fit one launch.

use super::runner::{Job, Slot, floats, groups_for, run};
use super::{GpuContext, GpuError};
use crate::math::kl_estimation::{MAX_ACTIONS, Problem};

/// `replicates` estimates `[k1, k2, k3]` of `samples` draws; replicate `r` uses stream `r`.
pub async fn sample_replicates(
    ctx: &GpuContext,
    problem: &Problem,
    samples: usize,
    replicates: usize,
    seed: u64,
) -> Result<Vec<[f64; 3]>, GpuError> {
    let actions = problem.policy.len();
    if replicates == 0 {
        return Ok(Vec::new());
    }
    if actions > MAX_ACTIONS || samples > u32::MAX as usize || replicates > u32::MAX as usize {
        return Err(GpuError::TooLarge(format!(
            "{actions} actions x {samples} samples (the kernel takes at most {MAX_ACTIONS} actions)"
        )));
    }
    let values: Vec<f32> = problem
        .values
        .iter()
        .flat_map(|v| v.map(|x| x as f32))
        .collect();
    if values.iter().any(|v| !v.is_finite()) {
        return Err(GpuError::TooLarge(
            "a KL value outside the f32 range".to_owned(),
        ));
    }
    let params = [
        seed as u32,
        (seed >> 32) as u32,
        replicates as u32,
        samples as u32,
        actions as u32,
        problem.last_possible as u32,
    ];
    let out = run(
        ctx,
        &Job {
            kernel: &arlbook_shaders::KL_MC,
            params: &params,
            slots: vec![
                Slot::Input(bytemuck::cast_slice(&problem.cumulative)),
                Slot::Input(bytemuck::cast_slice(&values)),
                Slot::Output {
                    bytes: (replicates * 3) as u64 * 4,
                    read_back: true,
                },
            ],
            dispatches: vec![(0, groups_for(replicates))],
        },
    )
    .await?;
    let n = samples as f64;
    Ok(floats(&out[0])
        .chunks_exact(3)
        .map(|s| [0, 1, 2].map(|i| f64::from(s[i]) / n))
        .collect())
}

//! Group-relative advantages on the GPU (`group_advantage.wgsl`), in `f32`: per-group
//! statistics, batch statistics and the advantages in one submission.

use super::runner::{Job, Slot, floats, groups_for, run};
use super::{GpuContext, GpuError};
use crate::Ragged;
use crate::math::advantage::{AdvantageOptions, Baseline, GroupAdvantages, Scale, StdKind};

/// Statistics per group written by the kernel (mean, std, sum, all-equal).
const STATS: usize = 4;

/// Advantages for validated `rewards` (see
/// [`crate::math::advantage::validate_rewards`]). A non-finite result (the `f32` range
/// exceeded) is [`GpuError::TooLarge`].
pub async fn group_advantages(
    ctx: &GpuContext,
    rewards: &Ragged<f64>,
    options: &AdvantageOptions,
) -> Result<GroupAdvantages, GpuError> {
    let groups = rewards.rows();
    let total = rewards.total_len();
    let too_large = || GpuError::TooLarge(format!("{total} rewards in {groups} groups"));
    let groups_u32 = u32::try_from(groups).map_err(|_| too_large())?;
    let total_u32 = u32::try_from(total).map_err(|_| too_large())?;
    let offsets: Vec<u32> = std::iter::once(0)
        .chain(rewards.iter_rows().scan(0u32, |end, row| {
            *end += row.len() as u32;
            Some(*end)
        }))
        .collect();
    let values: Vec<f32> = rewards.flat().iter().map(|&r| r as f32).collect();
    let params = [
        groups_u32,
        total_u32,
        u32::from(options.baseline == Baseline::LeaveOneOut),
        match options.scale {
            Scale::Group => 0,
            Scale::Batch => 1,
            Scale::None => 2,
        },
        u32::from(options.std == StdKind::Sample),
        (options.eps as f32).to_bits(),
    ];
    let out = run(
        ctx,
        &Job {
            kernel: &arlbook_shaders::GROUP_ADVANTAGE,
            params: &params,
            slots: vec![
                Slot::Input(bytemuck::cast_slice(&offsets)),
                Slot::Input(bytemuck::cast_slice(&values)),
                Slot::Output {
                    bytes: (groups * STATS + 1) as u64 * 4,
                    read_back: true,
                },
                Slot::Output {
                    bytes: total as u64 * 4,
                    read_back: true,
                },
            ],
            dispatches: vec![(0, groups_u32), (1, 1), (2, groups_for(total))],
        },
    )
    .await?;
    let stats = floats(&out[0]);
    let flat = floats(&out[1]);
    if flat.iter().any(|v| !v.is_finite()) {
        return Err(GpuError::TooLarge(
            "an advantage leaves the f32 range (std + eps too small)".into(),
        ));
    }
    let batch_std = f64::from(stats[groups * STATS]);
    let mut advantages = Ragged::default();
    for window in offsets.windows(2) {
        let row: Vec<f64> = flat[window[0] as usize..window[1] as usize]
            .iter()
            .map(|&a| f64::from(a))
            .collect();
        advantages.push_row(&row);
    }
    let group_std: Vec<f64> = (0..groups)
        .map(|g| f64::from(stats[g * STATS + 1]))
        .collect();
    Ok(GroupAdvantages {
        advantages,
        group_mean: (0..groups).map(|g| f64::from(stats[g * STATS])).collect(),
        divisor: group_std
            .iter()
            .map(|&std| match options.scale {
                Scale::Group => std + options.eps,
                Scale::Batch => batch_std + options.eps,
                Scale::None => 1.0,
            })
            .collect(),
        group_std,
    })
}

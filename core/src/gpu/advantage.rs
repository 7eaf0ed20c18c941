//! Group-relative advantages on the GPU (`group_advantage.wgsl`), in `f32`: batch
//! statistics (when scaling by the batch std), then per-group statistics and the
//! advantages, in one submission.
//!
//! ## Short and long groups
//! A group of at most [`SERIAL_MAX_GROUP`] rewards is handled by one thread, which
//! walks its rewards sequentially (sum, centred squares, advantages) with no barrier; a
//! longer group gets a 64-lane workgroup that reduces with shared memory and barriers.
//! Both kinds may occur in one call: the host lists the long groups after the offsets.
//!
//! The threshold comes from a sweep on lavapipe (`core/examples/sweep_segments.rs`,
//! numbers in `core/examples/bench-gpu.md`). There every barrier costs microseconds: a workgroup
//! per group took 3.9 s for 65 536 groups of 16 where one thread per group takes 57 ms,
//! and the serial path stayed ahead at every size measured, up to groups of 65 536
//! rewards, because lavapipe runs a whole workgroup on one CPU core anyway. So lavapipe
//! alone would drop the workgroup path. It is kept above 4096 rewards for discrete
//! GPUs, where a lone thread walking a huge group leaves the device idle; that bound is
//! a judgement, not a measurement. GRPO groups hold 4 to 64 rewards and always take the
//! serial path.

use super::runner::{Job, Slot, floats, groups_for, run};
use super::{GpuContext, GpuError};
use crate::Ragged;
use crate::math::advantage::{AdvantageOptions, Baseline, GroupAdvantages, Scale, StdKind};

/// Statistics per group written by the kernel (mean, std, sum, all-equal).
const STATS: usize = 4;

/// The longest group that one thread handles alone; longer groups get a workgroup.
pub const SERIAL_MAX_GROUP: usize = 4096;

/// Advantages for validated `rewards` (see
/// [`crate::math::advantage::validate_rewards`]). A non-finite result (the `f32` range
/// exceeded) is [`GpuError::TooLarge`].
pub async fn group_advantages(
    ctx: &GpuContext,
    rewards: &Ragged<f64>,
    options: &AdvantageOptions,
) -> Result<GroupAdvantages, GpuError> {
    group_advantages_split(ctx, rewards, options, SERIAL_MAX_GROUP).await
}

/// [`group_advantages`] with an explicit threshold: groups of at most `serial_max`
/// rewards take the one-thread path, longer ones a workgroup (`0`: every group takes a
/// workgroup; `usize::MAX`: none does). For measuring the crossover.
pub async fn group_advantages_split(
    ctx: &GpuContext,
    rewards: &Ragged<f64>,
    options: &AdvantageOptions,
    serial_max: usize,
) -> Result<GroupAdvantages, GpuError> {
    let groups = rewards.rows();
    let total = rewards.total_len();
    let too_large = || GpuError::TooLarge(format!("{total} rewards in {groups} groups"));
    let groups_u32 = u32::try_from(groups).map_err(|_| too_large())?;
    let total_u32 = u32::try_from(total).map_err(|_| too_large())?;
    // Offsets, then the indices of the long groups.
    let mut index: Vec<u32> = std::iter::once(0)
        .chain(rewards.iter_rows().scan(0u32, |end, row| {
            *end += row.len() as u32;
            Some(*end)
        }))
        .collect();
    let long_groups: Vec<u32> = rewards
        .iter_rows()
        .enumerate()
        .filter(|(_, row)| row.len() > serial_max)
        .map(|(g, _)| g as u32)
        .collect();
    let wide = long_groups.len() as u32;
    index.extend(&long_groups);
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
        u32::try_from(serial_max).unwrap_or(u32::MAX),
        wide,
    ];
    // Entry points: 0 batch_stats, 1 group_serial, 2 group_wide.
    let mut dispatches = Vec::with_capacity(3);
    if options.scale == Scale::Batch {
        dispatches.push((0, 1));
    }
    if long_groups.len() < groups {
        dispatches.push((1, groups_for(groups)));
    }
    if wide > 0 {
        dispatches.push((2, wide));
    }
    let out = run(
        ctx,
        &Job {
            kernel: &arlbook_shaders::GROUP_ADVANTAGE,
            params: &params,
            slots: vec![
                Slot::Input(bytemuck::cast_slice(&index)),
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
            dispatches,
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
    for window in index[..=groups].windows(2) {
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

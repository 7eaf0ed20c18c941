//! The clipped surrogate on the GPU (`clip_surrogate.wgsl`), in `f32`.
//!
//! The side of the clip is decided in `f32`, so an element within `f32` rounding of a
//! kink (`1 - eps_low`, `1 + eps_high`, `c`) may fall on the other side than on the CPU;
//! there both branches give the same objective up to that rounding.

use super::runner::{Job, Slot, bits, floats, groups_for, run, words};
use super::{GpuContext, GpuError};
use crate::math::clip::{ClipSide, ClipWidths, SurrogatePoint};

/// The surrogate at every `(ratio[i], advantage[i])`; inputs already validated.
pub async fn clipped_surrogate(
    ctx: &GpuContext,
    ratio: &[f64],
    advantage: &[f64],
    widths: &ClipWidths,
) -> Result<Vec<SurrogatePoint>, GpuError> {
    let n = ratio.len();
    if n == 0 {
        return Ok(Vec::new());
    }
    let inputs: Vec<f32> = ratio.iter().chain(advantage).map(|&v| v as f32).collect();
    let params = [
        u32::try_from(n).map_err(|_| GpuError::TooLarge(format!("{n} elements")))?,
        bits(widths.eps_low),
        bits(widths.eps_high),
        u32::from(widths.dual_clip.is_some()),
        bits(widths.dual_clip.unwrap_or(0.0)),
    ];
    let out = run(
        ctx,
        &Job {
            kernel: &arlbook_shaders::CLIP_SURROGATE,
            params: &params,
            slots: vec![
                Slot::Input(bytemuck::cast_slice(&inputs)),
                Slot::Output {
                    bytes: n as u64 * 8,
                    read_back: true,
                },
                Slot::Output {
                    bytes: n as u64 * 4,
                    read_back: true,
                },
            ],
            dispatches: vec![(0, groups_for(n))],
        },
    )
    .await?;
    let values = floats(&out[0]);
    let sides = words(&out[1]);
    Ok((0..n)
        .map(|i| SurrogatePoint {
            objective: f64::from(values[i]),
            d_objective_d_ratio: f64::from(values[n + i]),
            side: match sides[i] {
                1 => ClipSide::ClippedLow,
                2 => ClipSide::ClippedHigh,
                3 => ClipSide::DualClipped,
                _ => ClipSide::Unclipped,
            },
        })
        .collect())
}

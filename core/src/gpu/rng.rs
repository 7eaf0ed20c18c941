//! The raw words of a Philox stream, computed by the WGSL port (`rng_stream.wgsl`).

use super::runner::{Job, Slot, groups_for, run, words};
use super::{GpuContext, GpuError};

/// Words `4 first_block ..` of `RandomStream::new(seed, stream)`, `4 blocks` of them.
pub async fn stream_words(
    ctx: &GpuContext,
    seed: u64,
    stream: u64,
    first_block: u32,
    blocks: u32,
) -> Result<Vec<u32>, GpuError> {
    let params = [
        seed as u32,
        (seed >> 32) as u32,
        stream as u32,
        (stream >> 32) as u32,
        blocks,
        first_block,
    ];
    let out = run(
        ctx,
        &Job {
            kernel: &arlbook_shaders::RNG_STREAM,
            params: &params,
            slots: vec![Slot::Output {
                bytes: u64::from(blocks) * 16,
                read_back: true,
            }],
            dispatches: vec![(0, groups_for(blocks as usize))],
        },
    )
    .await?;
    Ok(words(&out[0]))
}

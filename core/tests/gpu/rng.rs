//! The WGSL Philox stream against `core::rng`.

use arlbook_core::gpu::{self, rng::stream_words};
use arlbook_core::rng::RandomStream;

use crate::support::context;

fn cpu_words(seed: u64, stream: u64, count: usize) -> Vec<u32> {
    let mut s = RandomStream::new(seed, stream);
    (0..count).map(|_| s.next_u32()).collect()
}

#[test]
fn first_million_words_are_identical_on_cpu_and_gpu() {
    let Some(ctx) = context() else { return };
    let seed = 0x0123_4567_89ab_cdef;
    let stream = 7;
    let gpu_words = gpu::block_on(stream_words(ctx, seed, stream, 0, 250_000)).unwrap();
    let cpu = cpu_words(seed, stream, 1_000_000);
    assert_eq!(gpu_words.len(), cpu.len());
    if let Some(i) = (0..cpu.len()).find(|&i| gpu_words[i] != cpu[i]) {
        panic!(
            "word {i} differs: gpu {:#x}, cpu {:#x}",
            gpu_words[i], cpu[i]
        );
    }
}

#[test]
fn streams_with_high_bits_and_late_blocks_match() {
    let Some(ctx) = context() else { return };
    let seed = u64::MAX - 5;
    let stream = (3u64 << 32) | 0xb;
    let gpu_words = gpu::block_on(stream_words(ctx, seed, stream, 1000, 64)).unwrap();
    let cpu = cpu_words(seed, stream, 4 * 1064);
    assert_eq!(gpu_words, cpu[4000..]);
}

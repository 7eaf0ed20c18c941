//! Philox4x32-10, the counter-based generator behind every sampled number.
//!
//! A counter-based generator maps `(key, counter)` to random bits with a pure function,
//! so replicate `r` of a Monte Carlo experiment can be computed by any thread, on any
//! device, in any order, and still give the same samples. Salmon, Moraes, Dror and Shaw,
//! "Parallel random numbers: as easy as 1, 2, 3" (SC 2011), §3 (Philox), with the
//! round constants of the Random123 reference implementation.
//!
//! ## Design
//! - The key is the user's 64-bit `seed`; the 128-bit counter is
//!   `[block_lo, block_hi, stream_lo, stream_hi]`: a stream id (for example the replicate
//!   index) in the high half and a block index in the low half. Each block yields four
//!   `u32` words, consumed in order.
//! - Only 32-bit integer operations are used (the 32x32→64 multiply is split into
//!   16-bit halves in WGSL), so the WGSL port in `shaders/wgsl/rng.wgsl` is bit-identical.
//! - Uniforms use the top 24 bits: `u = (x >> 8) · 2⁻²⁴`, exactly representable in `f32`
//!   and `f64`. Bernoulli draws compare `u` with `p` rounded to `f32`, so a sampled
//!   decision is the same on the CPU and on a GPU that only has `f32`.

const MUL_0: u32 = 0xD251_1F53;
const MUL_1: u32 = 0xCD9E_8D57;
const WEYL_0: u32 = 0x9E37_79B9;
const WEYL_1: u32 = 0xBB67_AE85;
const ROUNDS: usize = 10;
/// `2⁻²⁴`: the spacing of the 24-bit uniform grid.
pub const UNIFORM_STEP: f32 = 1.0 / 16_777_216.0;

/// The 24-bit uniform in `[0, 1)` that a random word maps to (exact in `f32`).
#[inline]
pub fn uniform_from_word(word: u32) -> f32 {
    (word >> 8) as f32 * UNIFORM_STEP
}

/// The Philox4x32-10 bijection for one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Philox4x32 {
    key: [u32; 2],
}

#[inline]
fn mul_hi_lo(a: u32, b: u32) -> (u32, u32) {
    let product = u64::from(a) * u64::from(b);
    ((product >> 32) as u32, product as u32)
}

impl Philox4x32 {
    /// A generator keyed by `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            key: [seed as u32, (seed >> 32) as u32],
        }
    }

    /// A generator with an explicit two-word key (for known-answer tests).
    pub fn with_key(key: [u32; 2]) -> Self {
        Self { key }
    }

    /// The four output words for one counter value.
    #[inline]
    pub fn block(&self, counter: [u32; 4]) -> [u32; 4] {
        let mut c = counter;
        let mut k = self.key;
        for round in 0..ROUNDS {
            if round > 0 {
                k[0] = k[0].wrapping_add(WEYL_0);
                k[1] = k[1].wrapping_add(WEYL_1);
            }
            let (hi0, lo0) = mul_hi_lo(MUL_0, c[0]);
            let (hi1, lo1) = mul_hi_lo(MUL_1, c[2]);
            c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0];
        }
        c
    }

    /// Blocks `first_block, first_block + 1, ...` of stream `stream`, one per slot of
    /// `out`: the words `RandomStream::new(seed, stream)` yields from word
    /// `4 first_block` on. Filling a batch in one loop lets the processor overlap the
    /// multiplies of consecutive (independent) blocks, and lets a caller start anywhere
    /// in a stream, so threads can share one long stream.
    ///
    /// Written as plain scalar blocks on purpose: a lane-by-lane version (eight counters
    /// side by side) was both slower on x86-64 without AVX2 (no 32x32->64 vector multiply
    /// worth having) and miscompiled by the SLP vectoriser of rustc 1.95 / LLVM at
    /// `-O` (wrong high words in some lanes), which only a release-build check catches.
    pub fn fill_blocks(&self, stream: u64, first_block: u64, out: &mut [[u32; 4]]) {
        let mut block_index = first_block;
        for slot in out {
            *slot = self.block(RandomStream::counter(stream, block_index));
            block_index = block_index.wrapping_add(1);
        }
    }
}

/// A sequential stream of random words: stream `stream` of the generator keyed by
/// `seed`. Two streams with different ids never share a counter value.
#[derive(Debug, Clone)]
pub struct RandomStream {
    generator: Philox4x32,
    stream: u64,
    block_index: u64,
    buffer: [u32; 4],
    used: usize,
}

impl RandomStream {
    /// Stream `stream` of the generator keyed by `seed`.
    pub fn new(seed: u64, stream: u64) -> Self {
        Self {
            generator: Philox4x32::new(seed),
            stream,
            block_index: 0,
            buffer: [0; 4],
            used: 4,
        }
    }

    /// The counter for block `block_index` of stream `stream`.
    pub fn counter(stream: u64, block_index: u64) -> [u32; 4] {
        [
            block_index as u32,
            (block_index >> 32) as u32,
            stream as u32,
            (stream >> 32) as u32,
        ]
    }

    /// The next 32 random bits.
    #[inline]
    pub fn next_u32(&mut self) -> u32 {
        if self.used == 4 {
            self.buffer = self
                .generator
                .block(Self::counter(self.stream, self.block_index));
            self.block_index = self.block_index.wrapping_add(1);
            self.used = 0;
        }
        let word = self.buffer[self.used];
        self.used += 1;
        word
    }

    /// The next four words: identical to four calls of [`Self::next_u32`], but one
    /// block at a time when the stream sits on a block boundary (the hot path of
    /// samplers that draw words in fours or pairs).
    #[inline]
    pub fn next_block(&mut self) -> [u32; 4] {
        if self.used == 4 {
            let block = self
                .generator
                .block(Self::counter(self.stream, self.block_index));
            self.block_index = self.block_index.wrapping_add(1);
            block
        } else {
            [
                self.next_u32(),
                self.next_u32(),
                self.next_u32(),
                self.next_u32(),
            ]
        }
    }

    /// A uniform draw on the 24-bit grid in `[0, 1)`, as `f32` (exact).
    #[inline]
    pub fn uniform_f32(&mut self) -> f32 {
        uniform_from_word(self.next_u32())
    }

    /// The same uniform draw as [`Self::uniform_f32`], widened to `f64` (exact).
    #[inline]
    pub fn uniform(&mut self) -> f64 {
        f64::from(self.uniform_f32())
    }

    /// A uniform draw in `(0, 1]`, for logarithms: `1 - u`.
    #[inline]
    pub fn uniform_open_low(&mut self) -> f64 {
        1.0 - self.uniform()
    }

    /// A Bernoulli draw: true with probability `p` (rounded to `f32`, see module docs).
    #[inline]
    pub fn bernoulli(&mut self, p: f64) -> bool {
        self.uniform_f32() < p as f32
    }

    /// A Bernoulli draw with a threshold already rounded to `f32`.
    #[inline]
    pub fn bernoulli_f32(&mut self, p: f32) -> bool {
        self.uniform_f32() < p
    }

    /// An index drawn from the categorical distribution `probs` (which should sum to 1;
    /// the last index absorbs rounding). The cumulative sum runs in `f32`, the same on
    /// every device.
    pub fn categorical(&mut self, probs: &[f64]) -> usize {
        let u = self.uniform_f32();
        let mut cumulative = 0.0f32;
        for (i, &p) in probs.iter().enumerate() {
            cumulative += p as f32;
            if u < cumulative {
                return i;
            }
        }
        probs.len().saturating_sub(1)
    }

    /// A uniform integer in `[0, n)` (`n > 0`), by the multiply-shift method.
    #[inline]
    pub fn below(&mut self, n: u32) -> u32 {
        ((u64::from(self.next_u32()) * u64::from(n)) >> 32) as u32
    }

    /// An exponential draw with the given mean: `-mean · ln(1 - u)`.
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -mean * self.uniform_open_low().ln()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Known-answer vectors of the Random123 distribution (kat_vectors, philox4x32 R=10).
    #[test]
    fn philox_matches_random123_known_answers() {
        let zero = Philox4x32::with_key([0, 0]).block([0, 0, 0, 0]);
        assert_eq!(zero, [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]);
        let ones = Philox4x32::with_key([u32::MAX, u32::MAX]).block([u32::MAX; 4]);
        assert_eq!(ones, [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]);
        let pi = Philox4x32::with_key([0xa409_3822, 0x299f_31d0]).block([
            0x243f_6a88,
            0x85a3_08d3,
            0x1319_8a2e,
            0x0370_7344,
        ]);
        assert_eq!(pi, [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]);
    }

    #[test]
    fn streams_are_reproducible_and_distinct() {
        let a: Vec<u32> = {
            let mut s = RandomStream::new(7, 3);
            (0..10).map(|_| s.next_u32()).collect()
        };
        let b: Vec<u32> = {
            let mut s = RandomStream::new(7, 3);
            (0..10).map(|_| s.next_u32()).collect()
        };
        let c: Vec<u32> = {
            let mut s = RandomStream::new(7, 4);
            (0..10).map(|_| s.next_u32()).collect()
        };
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn blocks_equal_four_words_at_any_alignment() {
        for skip in 0..6 {
            let mut words = RandomStream::new(9, 2);
            let mut blocks = RandomStream::new(9, 2);
            for _ in 0..skip {
                words.next_u32();
                blocks.next_u32();
            }
            for _ in 0..5 {
                let expected = [
                    words.next_u32(),
                    words.next_u32(),
                    words.next_u32(),
                    words.next_u32(),
                ];
                assert_eq!(blocks.next_block(), expected, "skip {skip}");
            }
        }
    }

    #[test]
    fn filled_blocks_equal_single_blocks_across_the_low_word_carry() {
        let generator = Philox4x32::new(0x1234_5678_9abc_def0);
        for first in [0u64, 5, u64::from(u32::MAX) - 9] {
            let mut out = vec![[0u32; 4]; 29];
            generator.fill_blocks(77, first, &mut out);
            for (i, block) in out.iter().enumerate() {
                let counter = RandomStream::counter(77, first + i as u64);
                assert_eq!(*block, generator.block(counter), "first {first} i {i}");
            }
        }
    }

    #[test]
    fn uniforms_have_the_right_mean_and_range() {
        let mut s = RandomStream::new(1, 0);
        let n = 200_000;
        let mut sum = 0.0;
        for _ in 0..n {
            let u = s.uniform();
            assert!((0.0..1.0).contains(&u));
            sum += u;
        }
        let mean = sum / f64::from(n);
        // Standard error of the mean is sqrt(1/12 / n) ≈ 0.00065; allow 5 of them.
        assert!((mean - 0.5).abs() < 0.0033, "mean {mean}");
    }

    #[test]
    fn bernoulli_frequency_tracks_p() {
        let mut s = RandomStream::new(11, 0);
        let n = 100_000;
        let hits = (0..n).filter(|_| s.bernoulli(0.3)).count();
        let freq = hits as f64 / f64::from(n);
        assert!((freq - 0.3).abs() < 0.01, "freq {freq}");
        assert!(!RandomStream::new(1, 1).bernoulli(0.0));
        assert!(RandomStream::new(1, 1).bernoulli(1.0));
    }
}

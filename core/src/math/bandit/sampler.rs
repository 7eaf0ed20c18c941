//! The sampled estimator's inner loop: exact integer counts per replicate, drawn in
//! fixed chunks that threads share.
//!
//! ## Why counts
//! With 0/1 rewards and the score `s = 1{a = A} - p`, a group's three sums reduce to
//! counts: `n_A` actions A, `n_R` rewards and `n_AR` rewarded A actions give
//! `sum R s = n_AR - p n_R` and `sum R s - (sum R / G) sum s = (G n_AR - n_A n_R) / G`.
//! So a replicate only needs `sum n_AR`, `sum n_R` and `sum (G n_AR - n_A n_R)` over its
//! groups, all integers (the WGSL kernel `bandit_mc.wgsl` keeps the same three).
//! Integer sums are exact and associative: however the draws are cut up and whichever
//! thread adds which piece, the totals, and so the `f64` estimate finished from them,
//! are identical, and equal to the GPU's.
//!
//! ## Chunks and threads
//! Sample `i` of replicate `r` uses words `2i` (action) and `2i + 1` (reward) of
//! `RandomStream::new(seed, r)`; Philox is counter-based, so any piece of that stream can
//! be computed on its own. A replicate is cut into chunks of a fixed number of whole
//! groups (an even number of samples, so every chunk starts on a block boundary); the
//! chunk size depends only on `group_size`, never on the thread count. The list of all
//! (replicate, chunk) pairs is split into contiguous ranges, one per thread, and the
//! partial counts are added back per replicate. On wasm32 (no threads) and for small jobs
//! everything runs on the calling thread through the same chunk function.
//!
//! ## Decisions in integers
//! `uniform_from_word(w) < t` with `t` an `f32` in `[0, 1]` compares `m = w >> 8` (an
//! integer below `2^24`) times `2^-24` with `t`; scaling by `2^24` is exact, so it is
//! `m < t 2^24`, i.e. `m < ceil(t 2^24)`. The sampler compares integers with that
//! precomputed bound: the same decisions as the `f32` comparison, cheaper per sample.

use std::ops::Range;

use super::TwoArmed;
use crate::rng::Philox4x32;

/// About this many samples per chunk (rounded to an even number of whole groups).
const CHUNK_TARGET_SAMPLES: usize = 1 << 16;
/// Blocks generated per batch inside a chunk (two samples each).
const BATCH_BLOCKS: usize = 256;
/// Below this many samples in all, one thread does everything.
const PARALLEL_MIN_SAMPLES: usize = 1 << 17;

/// The integer totals of one replicate (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SampleCounts {
    /// `sum n_AR`: rewarded samples that chose A.
    pub rewarded_a: u64,
    /// `sum n_R`: rewarded samples.
    pub rewarded: u64,
    /// `sum_groups (G n_AR - n_A n_R)`: `G` times the group-centred sum of `R s`.
    pub centred: i128,
}

/// Running totals while drawing: the cross term is kept unsigned until the end.
#[derive(Debug, Clone, Copy, Default)]
struct Totals {
    rewarded_a: u64,
    rewarded: u64,
    /// `sum_groups n_A n_R`.
    cross: u64,
}

impl Totals {
    fn add(&mut self, other: Totals) {
        self.rewarded_a += other.rewarded_a;
        self.rewarded += other.rewarded;
        self.cross += other.cross;
    }

    fn finish(self, group_size: usize) -> SampleCounts {
        SampleCounts {
            rewarded_a: self.rewarded_a,
            rewarded: self.rewarded,
            centred: group_size as i128 * i128::from(self.rewarded_a) - i128::from(self.cross),
        }
    }
}

/// `ceil(t 2^24)` for `t` rounded to `f32`: `w >> 8 < bound` iff
/// `uniform_from_word(w) < t as f32` (see the module docs).
pub(super) fn word_bound(probability: f64) -> u32 {
    (f64::from(probability as f32) * 16_777_216.0).ceil() as u32
}

/// The three decision bounds of a bandit.
#[derive(Debug, Clone, Copy)]
struct Bounds {
    action: u32,
    reward_a: u32,
    reward_b: u32,
}

/// Samples per chunk for this group size: an even number of whole groups.
fn chunk_samples(group_size: usize) -> usize {
    let groups = (CHUNK_TARGET_SAMPLES / group_size)
        .max(2)
        .next_multiple_of(2);
    groups * group_size
}

/// Counts of `samples` samples (whole groups) of `stream`, from sample `first_sample`
/// (even, so the chunk starts on a block boundary).
fn count_chunk(
    generator: Philox4x32,
    stream: u64,
    first_sample: usize,
    samples: usize,
    group_size: usize,
    bounds: Bounds,
) -> Totals {
    let mut blocks = [[0u32; 4]; BATCH_BLOCKS];
    let mut next_block = first_sample as u64 / 2;
    let mut left = samples;
    let mut totals = Totals::default();
    let (mut n_a, mut n_r, mut in_group) = (0u64, 0u64, 0usize);
    while left > 0 {
        let batch = left.min(2 * BATCH_BLOCKS);
        let used = &mut blocks[..batch.div_ceil(2)];
        generator.fill_blocks(stream, next_block, used);
        next_block += used.len() as u64;
        for pair in used.as_flattened().chunks_exact(2).take(batch) {
            let chose_a = (pair[0] >> 8) < bounds.action;
            let bound = if chose_a {
                bounds.reward_a
            } else {
                bounds.reward_b
            };
            let rewarded = u64::from((pair[1] >> 8) < bound);
            let chose_a = u64::from(chose_a);
            totals.rewarded_a += chose_a & rewarded;
            totals.rewarded += rewarded;
            n_a += chose_a;
            n_r += rewarded;
            in_group += 1;
            if in_group == group_size {
                totals.cross += n_a * n_r;
                (n_a, n_r, in_group) = (0, 0, 0);
            }
        }
        left -= batch;
    }
    totals
}

/// How many threads for `draws` samples in `items` chunks.
fn thread_count(draws: usize, items: usize) -> usize {
    crate::parallel::threads_for(draws, PARALLEL_MIN_SAMPLES).min(items)
}

/// The problem of one call, shared by the threads.
struct Job {
    generator: Philox4x32,
    replicates: usize,
    samples: usize,
    group_size: usize,
    chunk: usize,
    chunks_per_replicate: usize,
    bounds: Bounds,
}

impl Job {
    fn new(
        bandit: &TwoArmed,
        group_size: usize,
        samples: usize,
        replicates: usize,
        seed: u64,
    ) -> Self {
        let chunk = chunk_samples(group_size);
        Self {
            generator: Philox4x32::new(seed),
            replicates,
            samples,
            group_size,
            chunk,
            chunks_per_replicate: samples.div_ceil(chunk),
            bounds: Bounds {
                action: word_bound(bandit.p),
                reward_a: word_bound(bandit.q_a),
                reward_b: word_bound(bandit.q_b),
            },
        }
    }

    /// Totals of the (replicate, chunk) items in `items`, one entry per replicate they
    /// touch (the first entry belongs to replicate `items.start / chunks_per_replicate`).
    fn run(&self, items: Range<usize>) -> Vec<Totals> {
        let mut out: Vec<Totals> = Vec::new();
        let mut current = usize::MAX;
        for item in items {
            // A chunk is at most a few million draws: check between chunks.
            if crate::cancel::requested() {
                break;
            }
            let replicate = item / self.chunks_per_replicate;
            let first_sample = (item % self.chunks_per_replicate) * self.chunk;
            let samples = self.chunk.min(self.samples - first_sample);
            let totals = count_chunk(
                self.generator,
                replicate as u64,
                first_sample,
                samples,
                self.group_size,
                self.bounds,
            );
            if replicate == current {
                if let Some(last) = out.last_mut() {
                    last.add(totals);
                }
            } else {
                out.push(totals);
                current = replicate;
            }
        }
        out
    }
}

/// Counts of `estimates` replicates of `samples` draws in groups of `group_size`;
/// replicate `r` draws stream `r` of the generator keyed by `seed`. The caller has checked
/// the grouping (`samples` a positive multiple of `group_size`).
pub(super) fn replicate_counts(
    bandit: &TwoArmed,
    group_size: usize,
    samples: usize,
    estimates: usize,
    seed: u64,
) -> Vec<SampleCounts> {
    let job = Job::new(bandit, group_size, samples, estimates, seed);

    let items = job.replicates * job.chunks_per_replicate;
    let threads = thread_count(estimates.saturating_mul(samples), items);
    job.counts_on(threads)
}

impl Job {
    /// Every replicate's counts, the items split over `threads` threads.
    fn counts_on(&self, threads: usize) -> Vec<SampleCounts> {
        let items = self.replicates * self.chunks_per_replicate;
        let parts: Vec<(usize, Vec<Totals>)> = if threads <= 1 {
            vec![(0, self.run(0..items))]
        } else {
            let jobs: Vec<_> = (0..threads)
                .map(|t| {
                    let range = items * t / threads..items * (t + 1) / threads;
                    let first_replicate = range.start / self.chunks_per_replicate;
                    move || (first_replicate, self.run(range))
                })
                .collect();
            crate::parallel::run_all(jobs)
        };
        // A replicate cut between two threads appears in both parts: add the pieces.
        let mut totals = vec![Totals::default(); self.replicates];
        for (first_replicate, part) in parts {
            for (slot, piece) in totals[first_replicate..].iter_mut().zip(part) {
                slot.add(piece);
            }
        }
        totals
            .into_iter()
            .map(|t| t.finish(self.group_size))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{RandomStream, UNIFORM_STEP, uniform_from_word};

    /// Counts drawn one word at a time from a sequential stream, deciding in `f32` as
    /// `RandomStream::bernoulli_f32` does: the reference the chunked sampler must match.
    fn sequential_counts(
        bandit: &TwoArmed,
        group_size: usize,
        samples: usize,
        stream: u64,
        seed: u64,
    ) -> SampleCounts {
        let mut s = RandomStream::new(seed, stream);
        let mut totals = Totals::default();
        let (mut n_a, mut n_r) = (0u64, 0u64);
        for i in 0..samples {
            let chose_a = s.bernoulli_f32(bandit.p as f32);
            let q = if chose_a { bandit.q_a } else { bandit.q_b };
            let rewarded = s.bernoulli_f32(q as f32);
            totals.rewarded_a += u64::from(chose_a && rewarded);
            totals.rewarded += u64::from(rewarded);
            n_a += u64::from(chose_a);
            n_r += u64::from(rewarded);
            if (i + 1) % group_size == 0 {
                totals.cross += n_a * n_r;
                (n_a, n_r) = (0, 0);
            }
        }
        totals.finish(group_size)
    }

    #[test]
    fn integer_bounds_decide_like_the_f32_comparison() {
        let probabilities = [
            0.0,
            1.0,
            0.5,
            0.3,
            0.35,
            0.75,
            1e-9,
            1.0 - 1e-9,
            0.123_456_789,
        ];
        for p in probabilities {
            let bound = word_bound(p);
            let threshold = p as f32;
            let m_star = bound.saturating_sub(1);
            // Every word around the boundary, and the ends of the range.
            for m in [
                0,
                1,
                m_star.saturating_sub(1),
                m_star,
                bound,
                bound + 1,
                (1 << 24) - 1,
            ] {
                let m = m.min((1 << 24) - 1);
                for low_bits in [0u32, 0xff] {
                    let word = (m << 8) | low_bits;
                    assert_eq!(
                        (word >> 8) < bound,
                        uniform_from_word(word) < threshold,
                        "p {p} m {m}"
                    );
                }
            }
            assert!(f64::from(bound) * f64::from(UNIFORM_STEP) >= f64::from(threshold));
        }
    }

    #[test]
    fn chunked_counts_equal_the_sequential_stream_for_any_thread_count() {
        let bandit = TwoArmed::new(0.3, 0.9, 0.35).unwrap();
        // Several chunks per replicate, group sizes odd and even, a group size larger
        // than a chunk's target, and replicates shorter than one chunk.
        let cases = [
            (4, 3 * CHUNK_TARGET_SAMPLES + 8, 3),
            (7, 7 * 20_000, 2),
            (3, 9, 11),
            (100_001, 200_002, 2),
            (1, 5, 4),
        ];
        for (group_size, samples, replicates) in cases {
            let job = Job::new(&bandit, group_size, samples, replicates, 17);
            let expected: Vec<SampleCounts> = (0..replicates)
                .map(|r| sequential_counts(&bandit, group_size, samples, r as u64, 17))
                .collect();
            for threads in [1, 2, 3, 5] {
                assert_eq!(
                    job.counts_on(threads),
                    expected,
                    "G {group_size} N {samples} threads {threads}"
                );
            }
        }
    }

    #[test]
    fn chunks_hold_an_even_number_of_whole_groups() {
        for group_size in [1, 2, 3, 4, 7, 1000, 65_537, 1 << 20] {
            let chunk = chunk_samples(group_size);
            assert_eq!(chunk % group_size, 0);
            assert_eq!(chunk % 2, 0);
            assert!(chunk >= 2 * group_size);
        }
    }
}

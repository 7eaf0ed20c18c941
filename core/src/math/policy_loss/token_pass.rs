//! The per-token pass of the policy loss: every token's loss term, KL term and gradient,
//! and the clip counts.
//!
//! Each token's outputs depend only on that token, so on native targets a large batch is
//! split at row boundaries across threads, each filling its own slice of the output
//! buffers. The results are bit-identical to the sequential pass whatever the thread
//! count; the reductions that follow (sums over tokens) stay sequential for the same
//! reason. In the browser (wasm32, no threads) the pass is always sequential.

use std::ops::Range;

use super::{PolicyLossConfig, PolicyLossInput, TokenAdvantages, token_term};
use crate::math::kl::{KlPoint, kl_point};

/// Below this many tokens a second thread costs more than it saves.
const PARALLEL_MIN_TOKENS: usize = 1 << 16;

/// Per-token outputs of the pass, flat (row after row), and the clip counts.
pub(super) struct TokenPass {
    pub pg: Vec<f64>,
    pub kl: Vec<f64>,
    pub gradient: Vec<f64>,
    pub clipped_low: usize,
    pub clipped_high: usize,
    pub dual_clipped: usize,
}

#[derive(Default, Clone, Copy)]
struct ClipCounts {
    low: usize,
    high: usize,
    dual: usize,
}

/// Output slices of one chunk of rows, starting at token `offsets[rows.start]`.
struct ChunkOut<'a> {
    pg: &'a mut [f64],
    kl: &'a mut [f64],
    gradient: &'a mut [f64],
}

fn fill_rows(
    input: &PolicyLossInput<'_>,
    config: &PolicyLossConfig,
    ratio: &[f64],
    row_weights: &[f64],
    rows: Range<usize>,
    out: &mut ChunkOut<'_>,
) -> ClipCounts {
    let offsets = input.logp.offsets();
    let base = offsets[rows.start];
    let (ratio_low, ratio_high) = (config.clip.ratio_low(), config.clip.ratio_high());
    let no_kl = KlPoint {
        value: 0.0,
        d_value_d_logp: 0.0,
    };
    let mut counts = ClipCounts::default();
    for i in rows {
        let weight = row_weights[i];
        // Token indices into the flat inputs; several arrays share them.
        #[allow(clippy::needless_range_loop)]
        for t in offsets[i]..offsets[i + 1] {
            let logp = input.logp.flat()[t];
            let q = ratio[t];
            let advantage = match input.advantages {
                TokenAdvantages::PerSequence(a) => a[i],
                TokenAdvantages::PerToken(a) => a.flat()[t],
            };
            let term = token_term(q, advantage, logp, config);
            let kl_term = input.logp_ref.map_or(no_kl, |r| {
                kl_point(logp, r.flat()[t], config.kl_estimator, config.kl_clamp)
            });
            let local = t - base;
            out.pg[local] = term.loss;
            out.kl[local] = kl_term.value;
            out.gradient[local] =
                weight * (term.d_loss_d_logp + config.beta * kl_term.d_value_d_logp);
            counts.low += usize::from(advantage < 0.0 && q < ratio_low);
            counts.high += usize::from(advantage > 0.0 && q > ratio_high);
            counts.dual +=
                usize::from(advantage < 0.0 && config.clip.dual_clip.is_some_and(|c| q > c));
        }
    }
    counts
}

/// How many threads to use for `tokens` tokens.
fn thread_count(tokens: usize) -> usize {
    if cfg!(target_arch = "wasm32") || tokens < PARALLEL_MIN_TOKENS {
        return 1;
    }
    std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
}

/// Row ranges with about `total / parts` tokens each, cut at row boundaries.
fn row_chunks(offsets: &[usize], parts: usize) -> Vec<Range<usize>> {
    let rows = offsets.len() - 1;
    let total = offsets[rows];
    let mut chunks = Vec::with_capacity(parts);
    let mut start = 0;
    for part in 1..=parts {
        let target = total * part / parts;
        let end = if part == parts {
            rows
        } else {
            offsets.partition_point(|&o| o < target).clamp(start, rows)
        };
        if end > start {
            chunks.push(start..end);
            start = end;
        }
    }
    chunks
}

/// Runs the pass over every token.
pub(super) fn run(
    input: &PolicyLossInput<'_>,
    config: &PolicyLossConfig,
    ratio: &[f64],
    row_weights: &[f64],
) -> TokenPass {
    let tokens = ratio.len();
    let mut pg = vec![0.0; tokens];
    let mut kl = vec![0.0; tokens];
    let mut gradient = vec![0.0; tokens];
    let offsets = input.logp.offsets();
    let chunks = row_chunks(offsets, thread_count(tokens));
    let counts: Vec<ClipCounts> =
        if chunks.len() <= 1 {
            let mut out = ChunkOut {
                pg: &mut pg,
                kl: &mut kl,
                gradient: &mut gradient,
            };
            let all_rows = 0..offsets.len() - 1;
            vec![fill_rows(
                input,
                config,
                ratio,
                row_weights,
                all_rows,
                &mut out,
            )]
        } else {
            std::thread::scope(|scope| {
                let (mut pg_rest, mut kl_rest, mut gradient_rest) =
                    (&mut pg[..], &mut kl[..], &mut gradient[..]);
                let mut handles = Vec::with_capacity(chunks.len());
                for rows in chunks {
                    let len = offsets[rows.end] - offsets[rows.start];
                    let (pg_chunk, pg_tail) = std::mem::take(&mut pg_rest).split_at_mut(len);
                    let (kl_chunk, kl_tail) = std::mem::take(&mut kl_rest).split_at_mut(len);
                    let (gradient_chunk, gradient_tail) =
                        std::mem::take(&mut gradient_rest).split_at_mut(len);
                    (pg_rest, kl_rest, gradient_rest) = (pg_tail, kl_tail, gradient_tail);
                    let mut out = ChunkOut {
                        pg: pg_chunk,
                        kl: kl_chunk,
                        gradient: gradient_chunk,
                    };
                    handles.push(scope.spawn(move || {
                        fill_rows(input, config, ratio, row_weights, rows, &mut out)
                    }));
                }
                handles
                    .into_iter()
                    .map(|h| {
                        h.join()
                            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                    })
                    .collect()
            })
        };
    TokenPass {
        pg,
        kl,
        gradient,
        clipped_low: counts.iter().map(|c| c.low).sum(),
        clipped_high: counts.iter().map(|c| c.high).sum(),
        dual_clipped: counts.iter().map(|c| c.dual).sum(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Ragged;
    use crate::rng::RandomStream;

    #[test]
    fn parallel_pass_equals_the_sequential_pass_bit_for_bit() {
        let mut rng = RandomStream::new(5, 0);
        let lengths: Vec<usize> = (0..300).map(|_| 1 + rng.below(600) as usize).collect();
        let total: usize = lengths.iter().sum();
        assert!(total >= PARALLEL_MIN_TOKENS);
        let mut draw =
            |scale: f64| -> Vec<f64> { (0..total).map(|_| -0.2 - scale * rng.uniform()).collect() };
        let logp = Ragged::from_flat(draw(3.0), &lengths).unwrap();
        let logp_old = Ragged::from_flat(draw(3.0), &lengths).unwrap();
        let logp_ref = Ragged::from_flat(draw(3.0), &lengths).unwrap();
        let advantages: Vec<f64> = (0..lengths.len()).map(|i| (i as f64).sin()).collect();
        let input = PolicyLossInput {
            logp: &logp,
            logp_old: &logp_old,
            logp_ref: Some(&logp_ref),
            advantages: TokenAdvantages::PerSequence(&advantages),
        };
        let config = PolicyLossConfig {
            beta: 0.1,
            ..PolicyLossConfig::default()
        };
        let ratio: Vec<f64> = logp
            .flat()
            .iter()
            .zip(logp_old.flat())
            .map(|(a, b)| (a - b).exp())
            .collect();
        let weights = vec![1.0 / total as f64; lengths.len()];
        let split = run(&input, &config, &ratio, &weights);
        let (mut pg, mut kl, mut gradient) = (vec![0.0; total], vec![0.0; total], vec![0.0; total]);
        let mut out = ChunkOut {
            pg: &mut pg,
            kl: &mut kl,
            gradient: &mut gradient,
        };
        let counts = fill_rows(
            &input,
            &config,
            &ratio,
            &weights,
            0..lengths.len(),
            &mut out,
        );
        assert_eq!(split.pg, pg);
        assert_eq!(split.kl, kl);
        assert_eq!(split.gradient, gradient);
        assert_eq!(split.clipped_low, counts.low);
        assert_eq!(split.clipped_high, counts.high);
    }

    #[test]
    fn chunks_cover_every_row_once_and_balance_tokens() {
        let offsets = [0, 5, 5, 9, 20, 21, 40];
        for parts in 1..8 {
            let chunks = row_chunks(&offsets, parts);
            let mut next = 0;
            for c in &chunks {
                assert_eq!(c.start, next);
                assert!(c.end > c.start);
                next = c.end;
            }
            assert_eq!(next, offsets.len() - 1, "parts {parts}");
        }
    }
}

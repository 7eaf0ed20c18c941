//! The per-token pass of the policy loss: every token's ratio, reduction weight, loss
//! term, KL term and gradient, each row's sums, and the clip counts.
//!
//! Each token's outputs depend only on that token, so on native targets a large batch is
//! split at row boundaries across threads, each filling its own slice of the output
//! buffers (and touching those pages first, so the page faults are shared too). Every
//! sum is formed per row, in token order, inside the pass; the caller then adds the row
//! sums in row order. No sum ever spans a thread boundary, so the results are
//! bit-identical whatever the thread count (and to the single-threaded pass). In the
//! browser (wasm32, no threads) the pass is always sequential.

use std::ops::Range;

use super::{Objective, PolicyLossConfig, PolicyLossInput, TokenAdvantages, token_term};
use crate::math::fast_exp::{exp_in_place, exp_m1_in_place};
use crate::math::kl::{KlEstimator, KlPoint, kl_point};

/// Below this many tokens a second thread costs more than it saves.
const PARALLEL_MIN_TOKENS: usize = 1 << 16;

/// Where each token's ratio comes from.
#[derive(Clone, Copy)]
pub(super) enum RatioSource<'a> {
    /// `exp(logp - old_logp)` per token, the log-ratio clamped to `[-limit, limit]`
    /// (verl's clamp; infinite for none).
    PerToken(f64),
    /// One ratio per row (GSPO's sequence ratio), repeated on its tokens.
    PerRow(&'a [f64]),
}

/// Per-token outputs of the pass, flat (row after row), per-row sums and the counts.
pub(super) struct TokenPass {
    pub ratio: Vec<f64>,
    pub token_weights: Vec<f64>,
    pub pg: Vec<f64>,
    pub kl: Vec<f64>,
    pub gradient: Vec<f64>,
    /// `sum_k l_ik`, `sum_k kl_ik` and `sum_k q_ik` per row, each in token order.
    pub pg_row_sums: Vec<f64>,
    pub kl_row_sums: Vec<f64>,
    pub ratio_row_sums: Vec<f64>,
    pub ratio_max: f64,
    /// Every `logp`, `old_logp` and `ref_logp` value is finite and `<= 0`.
    pub log_probs_valid: bool,
    /// Every ratio is finite.
    pub ratios_finite: bool,
    /// Every KL term and gradient is finite.
    pub outputs_finite: bool,
    pub clipped_low: usize,
    pub clipped_high: usize,
    pub dual_clipped: usize,
}

/// What a chunk reports besides its slices.
#[derive(Clone, Copy)]
struct ChunkSummary {
    low: usize,
    high: usize,
    dual: usize,
    ratio_max: f64,
    log_probs_valid: bool,
    ratios_finite: bool,
    outputs_finite: bool,
}

/// Every value finite and `<= 0` (NaN fails `<=`), without branches.
fn valid_log_probs(values: &[f64]) -> bool {
    values
        .iter()
        .fold(true, |ok, &v| ok & (f64::MIN..=0.0).contains(&v))
}

/// Output slices of one chunk of rows: per-token slices start at token
/// `offsets[rows.start]`, per-row slices at row `rows.start`.
struct ChunkOut<'a> {
    ratio: &'a mut [f64],
    token_weights: &'a mut [f64],
    pg: &'a mut [f64],
    kl: &'a mut [f64],
    gradient: &'a mut [f64],
    pg_row_sums: &'a mut [f64],
    kl_row_sums: &'a mut [f64],
    ratio_row_sums: &'a mut [f64],
}

impl<'a> ChunkOut<'a> {
    /// Splits off the first `rows` rows holding `tokens` tokens.
    fn split_off_front(&mut self, rows: usize, tokens: usize) -> ChunkOut<'a> {
        // Moves the front off a borrowed slice, leaving the rest in place.
        #[allow(clippy::mut_mut)]
        fn front<'b>(slice: &mut &'b mut [f64], n: usize) -> &'b mut [f64] {
            let (head, tail) = std::mem::take(slice).split_at_mut(n);
            *slice = tail;
            head
        }
        ChunkOut {
            ratio: front(&mut self.ratio, tokens),
            token_weights: front(&mut self.token_weights, tokens),
            pg: front(&mut self.pg, tokens),
            kl: front(&mut self.kl, tokens),
            gradient: front(&mut self.gradient, tokens),
            pg_row_sums: front(&mut self.pg_row_sums, rows),
            kl_row_sums: front(&mut self.kl_row_sums, rows),
            ratio_row_sums: front(&mut self.ratio_row_sums, rows),
        }
    }
}

/// One row's constants on the common path: PPO clip without a dual clip, one advantage
/// per sequence, and k3 without clamps (or no KL term).
struct PpoRow {
    advantage: f64,
    weight: f64,
    ratio_low: f64,
    ratio_high: f64,
    beta: f64,
}

/// One row's per-token outputs; `kl` holds `e^y - 1` on entry when there is a reference.
struct RowOut<'a> {
    pg: &'a mut [f64],
    kl: &'a mut [f64],
    gradient: &'a mut [f64],
}

impl PpoRow {
    /// The numbers `token_term` and `kl_point` give, written as selects instead of
    /// branches (a ratio beyond the clip is data, not control flow), so the loop has no
    /// unpredictable jumps and can vectorise. Returns the low and high clip counts and
    /// whether every KL term and gradient is finite.
    // `&` on bools on purpose: both sides are cheap and a jump would be mispredicted.
    #[allow(clippy::needless_bitwise_bool)]
    fn fill(
        &self,
        ratio: &[f64],
        logp: &[f64],
        reference: Option<&[f64]>,
        out: &mut RowOut<'_>,
    ) -> (usize, usize, bool) {
        let PpoRow {
            advantage,
            weight,
            ratio_low,
            ratio_high,
            beta,
        } = *self;
        let (positive, negative) = (advantage > 0.0, advantage < 0.0);
        let (objective_high, objective_low) = (ratio_high * advantage, ratio_low * advantage);
        let (mut low, mut high, mut finite) = (0usize, 0usize, true);
        // `surrogate_point`: the clipped side's objective is the bound times A and its
        // slope 0; the loss is minus the objective, d loss / d logp = -slope * q.
        let mut token = |q: f64| {
            let clipped_high = positive & (q > ratio_high);
            let clipped_low = negative & (q < ratio_low);
            high += usize::from(clipped_high);
            low += usize::from(clipped_low);
            let objective = if clipped_high {
                objective_high
            } else if clipped_low {
                objective_low
            } else {
                q * advantage
            };
            let slope = if clipped_high | clipped_low {
                0.0
            } else {
                advantage
            };
            (-objective, -slope * q)
        };
        match reference {
            Some(reference) => {
                let inputs = ratio.iter().zip(logp).zip(reference);
                let outputs = out
                    .pg
                    .iter_mut()
                    .zip(out.kl.iter_mut())
                    .zip(out.gradient.iter_mut());
                for (((&q, &lp), &lr), ((pg, kl), gradient)) in inputs.zip(outputs) {
                    let (loss, d_loss) = token(q);
                    let y = -(lp - lr);
                    let exp_m1 = *kl;
                    let value = exp_m1 - y;
                    let g = weight * (d_loss + beta * -exp_m1);
                    *pg = loss;
                    *kl = value;
                    *gradient = g;
                    finite &= value.is_finite() & g.is_finite();
                }
            }
            None => {
                let outputs = out
                    .pg
                    .iter_mut()
                    .zip(out.kl.iter_mut())
                    .zip(out.gradient.iter_mut());
                for (&q, ((pg, kl), gradient)) in ratio.iter().zip(outputs) {
                    let (loss, d_loss) = token(q);
                    let g = weight * (d_loss + beta * 0.0);
                    *pg = loss;
                    *kl = 0.0;
                    *gradient = g;
                    finite &= g.is_finite();
                }
            }
        }
        (low, high, finite)
    }
}

/// The shared, read-only inputs of every chunk.
struct Shared<'a> {
    input: &'a PolicyLossInput<'a>,
    config: &'a PolicyLossConfig,
    ratios: RatioSource<'a>,
    row_weights: &'a [f64],
}

// One loop over rows with its fast and general token paths side by side; splitting it
// would mostly move the shared locals into parameters.
#[allow(clippy::too_many_lines)]
fn fill_rows(shared: &Shared<'_>, rows: Range<usize>, out: &mut ChunkOut<'_>) -> ChunkSummary {
    let Shared {
        input,
        config,
        ratios,
        row_weights,
    } = *shared;
    let offsets = input.logp.offsets();
    let (logp_all, old_logp_all) = (input.logp.flat(), input.old_logp.flat());
    let base = offsets[rows.start];
    let first_row = rows.start;
    let (ratio_low, ratio_high) = (config.clip.ratio_low(), config.clip.ratio_high());
    let no_kl = KlPoint {
        value: 0.0,
        d_value_d_logp: 0.0,
    };
    let mut summary = ChunkSummary {
        low: 0,
        high: 0,
        dual: 0,
        ratio_max: f64::NEG_INFINITY,
        log_probs_valid: true,
        ratios_finite: true,
        outputs_finite: true,
    };
    for i in rows {
        let weight = row_weights[i];
        let tokens = offsets[i]..offsets[i + 1];
        let local = tokens.start - base..tokens.end - base;
        // Checking the row here brings it into cache for the loops below.
        summary.log_probs_valid &= valid_log_probs(&logp_all[tokens.clone()])
            & valid_log_probs(&old_logp_all[tokens.clone()])
            & input
                .ref_logp
                .is_none_or(|r| valid_log_probs(&r.flat()[tokens.clone()]));
        // Ratios, weights and the k3 exponentials first, in loops simple enough to
        // vectorise; the branchy per-token loop below then only reads them.
        let ratio = &mut out.ratio[local.clone()];
        match ratios {
            RatioSource::PerToken(limit) => {
                let (logp, old) = (&logp_all[tokens.clone()], &old_logp_all[tokens.clone()]);
                for ((q, &a), &b) in ratio.iter_mut().zip(logp).zip(old) {
                    *q = a - b;
                }
                if limit.is_finite() {
                    for q in ratio.iter_mut() {
                        *q = q.clamp(-limit, limit);
                    }
                }
                exp_in_place(ratio);
            }
            RatioSource::PerRow(per_row) => ratio.fill(per_row[i]),
        }
        out.token_weights[local.clone()].fill(weight);
        let ratio = &out.ratio[local.clone()];
        summary.ratios_finite &= ratio.iter().fold(true, |ok, q| ok & q.is_finite());
        summary.ratio_max = ratio.iter().copied().fold(summary.ratio_max, f64::max);
        // `kl[t]` holds e^y - 1 for y = -(logp - ref_logp) until the token loop replaces
        // it by the k3 value (the numbers `kl_point` computes, without the clamps).
        let fast_k3 = match input.ref_logp {
            Some(reference) if config.kl_estimator == KlEstimator::K3 && !config.kl_clamp => {
                let kl = &mut out.kl[local.clone()];
                let reference = &reference.flat()[tokens.clone()];
                for ((y, &a), &b) in kl.iter_mut().zip(&logp_all[tokens.clone()]).zip(reference) {
                    *y = -(a - b);
                }
                exp_m1_in_place(kl);
                Some(reference)
            }
            _ => None,
        };
        let mut outputs_finite = true;
        let fast_ppo = config.objective == Objective::Ppo && config.clip.dual_clip.is_none();
        if let (true, TokenAdvantages::PerSequence(advantages)) = (fast_ppo, input.advantages) {
            let row = PpoRow {
                advantage: advantages[i],
                weight,
                ratio_low,
                ratio_high,
                beta: config.beta,
            };
            let reference = match (fast_k3, input.ref_logp) {
                (Some(reference), _) => Some(Some(reference)),
                (None, None) => Some(None),
                (None, Some(_)) => None,
            };
            if let Some(reference) = reference {
                let mut row_out = RowOut {
                    pg: &mut out.pg[local.clone()],
                    kl: &mut out.kl[local.clone()],
                    gradient: &mut out.gradient[local.clone()],
                };
                let (low, high, finite) =
                    row.fill(ratio, &logp_all[tokens.clone()], reference, &mut row_out);
                summary.low += low;
                summary.high += high;
                summary.outputs_finite &= finite;
                let r = i - first_row;
                out.pg_row_sums[r] = out.pg[local.clone()].iter().sum();
                out.kl_row_sums[r] = out.kl[local.clone()].iter().sum();
                out.ratio_row_sums[r] = out.ratio[local].iter().sum();
                continue;
            }
        }
        // Token indices into the flat inputs; several arrays share them.
        #[allow(clippy::needless_range_loop)]
        for t in tokens {
            let logp = logp_all[t];
            let q = ratio[t - offsets[i]];
            let advantage = match input.advantages {
                TokenAdvantages::PerSequence(a) => a[i],
                TokenAdvantages::PerToken(a) => a.flat()[t],
            };
            let term = token_term(q, advantage, logp, config);
            let local = t - base;
            let kl_term = match fast_k3 {
                Some(reference) => {
                    let y = -(logp - reference[t - offsets[i]]);
                    let exp_m1 = out.kl[local];
                    KlPoint {
                        value: exp_m1 - y,
                        d_value_d_logp: -exp_m1,
                    }
                }
                None => input.ref_logp.map_or(no_kl, |r| {
                    kl_point(logp, r.flat()[t], config.kl_estimator, config.kl_clamp)
                }),
            };
            let gradient = weight * (term.d_loss_d_logp + config.beta * kl_term.d_value_d_logp);
            out.pg[local] = term.loss;
            out.kl[local] = kl_term.value;
            out.gradient[local] = gradient;
            outputs_finite &= kl_term.value.is_finite() & gradient.is_finite();
            summary.low += usize::from(advantage < 0.0 && q < ratio_low);
            summary.high += usize::from(advantage > 0.0 && q > ratio_high);
            summary.dual +=
                usize::from(advantage < 0.0 && config.clip.dual_clip.is_some_and(|c| q > c));
        }
        summary.outputs_finite &= outputs_finite;
        let row = i - first_row;
        out.pg_row_sums[row] = out.pg[local.clone()].iter().sum();
        out.kl_row_sums[row] = out.kl[local.clone()].iter().sum();
        out.ratio_row_sums[row] = out.ratio[local].iter().sum();
    }
    summary
}

/// How many threads to use for `tokens` tokens.
pub(super) fn thread_count(tokens: usize) -> usize {
    crate::parallel::threads_for(tokens, PARALLEL_MIN_TOKENS)
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

/// The five per-token output buffers, zeroed. Zeroing reused heap memory is a `memset`
/// as long as the pass's own arithmetic, so with several threads two of them clear
/// buffers at the same time.
fn zeroed_buffers(tokens: usize, threads: usize) -> [Vec<f64>; 5] {
    if threads < 2 {
        return std::array::from_fn(|_| vec![0.0; tokens]);
    }
    let ([c, d, e], [a, b]) = crate::parallel::join(
        || std::array::from_fn(|_| vec![0.0; tokens]),
        || [vec![0.0; tokens], vec![0.0; tokens]],
    );
    [a, b, c, d, e]
}

/// Runs the pass over every token.
pub(super) fn run(
    input: &PolicyLossInput<'_>,
    config: &PolicyLossConfig,
    ratios: RatioSource<'_>,
    row_weights: &[f64],
) -> TokenPass {
    let offsets = input.logp.offsets();
    let (rows, tokens) = (offsets.len() - 1, input.logp.total_len());
    let chunks = row_chunks(offsets, thread_count(tokens));
    let [ratio, token_weights, pg, kl, gradient] = zeroed_buffers(tokens, chunks.len());
    let mut pass = TokenPass {
        ratio,
        token_weights,
        pg,
        kl,
        gradient,
        pg_row_sums: vec![0.0; rows],
        kl_row_sums: vec![0.0; rows],
        ratio_row_sums: vec![0.0; rows],
        ratio_max: f64::NEG_INFINITY,
        log_probs_valid: true,
        ratios_finite: true,
        outputs_finite: true,
        clipped_low: 0,
        clipped_high: 0,
        dual_clipped: 0,
    };
    let shared = Shared {
        input,
        config,
        ratios,
        row_weights,
    };
    let mut out = ChunkOut {
        ratio: &mut pass.ratio,
        token_weights: &mut pass.token_weights,
        pg: &mut pass.pg,
        kl: &mut pass.kl,
        gradient: &mut pass.gradient,
        pg_row_sums: &mut pass.pg_row_sums,
        kl_row_sums: &mut pass.kl_row_sums,
        ratio_row_sums: &mut pass.ratio_row_sums,
    };
    let summaries: Vec<ChunkSummary> = if chunks.len() <= 1 {
        vec![fill_rows(&shared, 0..rows, &mut out)]
    } else {
        let shared = &shared;
        let jobs: Vec<_> = chunks
            .into_iter()
            .map(|range| {
                let len = offsets[range.end] - offsets[range.start];
                let mut chunk = out.split_off_front(range.len(), len);
                move || fill_rows(shared, range, &mut chunk)
            })
            .collect();
        crate::parallel::run_all(jobs)
    };
    for s in summaries {
        pass.clipped_low += s.low;
        pass.clipped_high += s.high;
        pass.dual_clipped += s.dual;
        pass.ratio_max = pass.ratio_max.max(s.ratio_max);
        pass.log_probs_valid &= s.log_probs_valid;
        pass.ratios_finite &= s.ratios_finite;
        pass.outputs_finite &= s.outputs_finite;
    }
    pass
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
        let old_logp = Ragged::from_flat(draw(3.0), &lengths).unwrap();
        let ref_logp = Ragged::from_flat(draw(3.0), &lengths).unwrap();
        let advantages: Vec<f64> = (0..lengths.len()).map(|i| (i as f64).sin()).collect();
        let input = PolicyLossInput {
            logp: &logp,
            old_logp: &old_logp,
            ref_logp: Some(&ref_logp),
            advantages: TokenAdvantages::PerSequence(&advantages),
        };
        let config = PolicyLossConfig {
            beta: 0.1,
            ..PolicyLossConfig::default()
        };
        let weights = vec![1.0 / total as f64; lengths.len()];
        let split = run(
            &input,
            &config,
            RatioSource::PerToken(f64::INFINITY),
            &weights,
        );
        let shared = Shared {
            input: &input,
            config: &config,
            ratios: RatioSource::PerToken(f64::INFINITY),
            row_weights: &weights,
        };
        let zeros = |n: usize| vec![0.0; n];
        let (mut ratio, mut token_weights, mut pg, mut kl, mut gradient) = (
            zeros(total),
            zeros(total),
            zeros(total),
            zeros(total),
            zeros(total),
        );
        let rows = lengths.len();
        let (mut pg_rows, mut kl_rows, mut ratio_rows) = (zeros(rows), zeros(rows), zeros(rows));
        let mut out = ChunkOut {
            ratio: &mut ratio,
            token_weights: &mut token_weights,
            pg: &mut pg,
            kl: &mut kl,
            gradient: &mut gradient,
            pg_row_sums: &mut pg_rows,
            kl_row_sums: &mut kl_rows,
            ratio_row_sums: &mut ratio_rows,
        };
        let summary = fill_rows(&shared, 0..rows, &mut out);
        assert!(row_chunks(logp.offsets(), 2).len() > 1);
        assert_eq!(split.ratio, ratio);
        assert_eq!(split.token_weights, token_weights);
        assert_eq!(split.pg, pg);
        assert_eq!(split.kl, kl);
        assert_eq!(split.gradient, gradient);
        assert_eq!(split.pg_row_sums, pg_rows);
        assert_eq!(split.kl_row_sums, kl_rows);
        assert_eq!(split.ratio_row_sums, ratio_rows);
        assert_eq!(split.ratio_max, summary.ratio_max);
        assert_eq!(split.clipped_low, summary.low);
        assert_eq!(split.clipped_high, summary.high);
        // Token by token, the same bits as the plain scalar formulas.
        for (i, rows) in logp.offsets().windows(2).enumerate() {
            for t in rows[0]..rows[1] {
                let (lp, old, reference) = (logp.flat()[t], old_logp.flat()[t], ref_logp.flat()[t]);
                let q = crate::math::fast_exp::exp(lp - old);
                let term = token_term(q, advantages[i], lp, &config);
                let kl_term = kl_point(lp, reference, KlEstimator::K3, false);
                assert_eq!(split.ratio[t].to_bits(), q.to_bits());
                assert_eq!(split.pg[t].to_bits(), term.loss.to_bits());
                assert_eq!(split.kl[t].to_bits(), kl_term.value.to_bits());
                let g = weights[i] * (term.d_loss_d_logp + config.beta * kl_term.d_value_d_logp);
                assert_eq!(split.gradient[t].to_bits(), g.to_bits());
            }
        }
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

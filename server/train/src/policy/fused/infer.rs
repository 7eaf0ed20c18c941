//! Generation on the CPU without burn: the policy's forward pass over new tokens with a
//! key/value cache on the host, the rollouts' counterpart of [`super::network`].
//!
//! Each row keeps its own cache: per block, the keys and values of every token it has
//! seen, `[len, d]`, and its length is its next position. So a row needs no padding
//! and no mask for other rows' lengths: [`advance`] takes any number of new tokens per
//! row (a whole context for a prefill, a tool result for an extension, one token for a
//! decode step, none for a row that has stopped), runs the dense layers once over all
//! rows' new tokens together, attends each row's new queries over its own keys (the
//! cached ones and the new ones up to the query's own), appends the new keys and values,
//! and returns the logits at each row's last new token.
//!
//! Positions are `PolicyModel`'s: a row's tokens take positions `0, 1, ...` from its
//! first token, clamped to the model's last position. With rotary positions the keys are
//! cached turned by their positions' angles. The logits are those of
//! `PolicyModel::prefill`, `extend` and `decode_step` within `f32` rounding (tested
//! in `super::tests`).

use super::gemm::{Into, View, ViewMut, matmul};
use super::network::{add_into, dense};
use super::vecmath::softmax_in_place;
use super::weights::Weights;
use super::{gelu, norm};

/// Queries per block of the attention products when a row gets many new tokens.
const BLOCK: usize = 64;

/// One row's keys and values, per block `[len, d]` row-major.
#[derive(Debug, Clone, Default)]
pub struct RowCache {
    keys: Vec<Vec<f32>>,
    values: Vec<Vec<f32>>,
    len: usize,
}

impl RowCache {
    /// Tokens this row holds (its next position).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The caches of a batch of rows.
#[derive(Debug, Clone, Default)]
pub struct Cache {
    rows: Vec<RowCache>,
}

impl Cache {
    /// `rows` empty rows for a model of `layers` blocks.
    pub fn new(rows: usize, layers: usize) -> Self {
        Self {
            rows: vec![
                RowCache {
                    keys: vec![Vec::new(); layers],
                    values: vec![Vec::new(); layers],
                    len: 0,
                };
                rows
            ],
        }
    }

    /// Rows held.
    pub fn rows(&self) -> usize {
        self.rows.len()
    }

    /// Tokens row `row` holds.
    pub fn len_of(&self, row: usize) -> usize {
        self.rows[row].len
    }

    /// The rows `rows` (indices into this cache, in the order wanted) as a new cache.
    #[must_use]
    pub fn select(&self, rows: &[usize]) -> Self {
        Self {
            rows: rows.iter().map(|&r| self.rows[r].clone()).collect(),
        }
    }
}

/// A row's new queries (head `h`) over its keys: query `j` sees keys `0..=old + j`.
/// `q` is `new x dh` inside the new tokens' `qkv`, `keys`/`values` the row's cache.
struct RowAttention<'a> {
    q: View<'a>,
    keys: View<'a>,
    values: View<'a>,
    old: usize,
    scale: f32,
}

/// New tokens per row below which a row's attention is loops over its keys rather
/// than matrix products (a decode step feeds one token; a product would first copy the
/// whole key cache into its packed layout).
const FEW_QUERIES: usize = 4;

impl RowAttention<'_> {
    /// Writes the attended values into `out` (`new x dh`, row stride `stride`, from
    /// `offset`), with `scores` as scratch.
    fn run(&self, out: &mut [f32], offset: usize, stride: usize, scores: &mut Vec<f32>) {
        if self.q.shape().0 < FEW_QUERIES {
            self.run_few(out, offset, stride, scores);
        } else {
            self.run_blocks(out, offset, stride, scores);
        }
    }

    /// [`RowAttention::run`] for a few queries: a dot product per key, the softmax, and
    /// the weighted sum of the values.
    fn run_few(&self, out: &mut [f32], offset: usize, stride: usize, scores: &mut Vec<f32>) {
        let (new, dh) = self.q.shape();
        for r in 0..new {
            let limit = self.old + r + 1;
            let query = self.q.row(r);
            scores.clear();
            scores.extend((0..limit).map(|j| {
                let key = self.keys.row(j);
                self.scale * query.iter().zip(key).map(|(a, b)| a * b).sum::<f32>()
            }));
            softmax_in_place(scores);
            let row = &mut out[offset + r * stride..offset + r * stride + dh];
            row.fill(0.0);
            for (j, &weight) in scores.iter().enumerate() {
                for (o, &v) in row.iter_mut().zip(self.values.row(j)) {
                    *o += weight * v;
                }
            }
        }
    }

    /// [`RowAttention::run`] for many queries: products in query blocks.
    fn run_blocks(&self, out: &mut [f32], offset: usize, stride: usize, scores: &mut Vec<f32>) {
        let (new, dh) = self.q.shape();
        for start in (0..new).step_by(BLOCK) {
            let end = (start + BLOCK).min(new);
            let seen = self.old + end;
            scores.clear();
            scores.resize((end - start) * seen, 0.0);
            matmul(
                ViewMut::rows(scores, end - start, seen),
                self.q.row_range(start, end),
                self.keys.row_range(0, seen).t(),
                self.scale,
                Into::Overwrite,
            );
            for (r, row) in scores.chunks_exact_mut(seen).enumerate() {
                let limit = self.old + start + r + 1;
                let (visible, hidden) = row.split_at_mut(limit);
                softmax_in_place(visible);
                hidden.fill(0.0);
            }
            matmul(
                ViewMut::strided(out, offset + start * stride, end - start, dh, stride),
                View::rows(scores, end - start, seen),
                self.values.row_range(0, seen),
                1.0,
                Into::Overwrite,
            );
        }
    }
}

/// Feeds `tokens[i]` to row `i` of `cache` (an empty slice leaves the row as it is) and
/// returns the logits `[rows, V]` at each row's last new token (zeros for a row fed
/// nothing).
///
/// # Panics
/// When `tokens` has not one entry per cached row, or a token id is outside the
/// vocabulary.
pub fn advance(weights: &Weights, cache: &mut Cache, tokens: &[&[u32]]) -> Vec<f32> {
    assert_eq!(
        tokens.len(),
        cache.rows(),
        "advance: one token list per cached row"
    );
    let (d, vocab, heads) = (weights.width(), weights.vocab(), weights.heads);
    let dh = d / heads;
    let last_position = weights.context() - 1;
    // Every row's new tokens, one after another.
    let spans: Vec<(usize, usize)> = tokens
        .iter()
        .scan(0, |at, t| {
            let span = (*at, *at + t.len());
            *at += t.len();
            Some(span)
        })
        .collect();
    let total = spans.last().map_or(0, |&(_, end)| end);
    let mut logits = vec![0.0f32; tokens.len() * vocab];
    if total == 0 {
        return logits;
    }
    let mut x = vec![0.0f32; total * d];
    // Each new token's position.
    let mut positions = vec![0; total];
    for ((row, new), &(start, _)) in cache.rows.iter().zip(tokens).zip(&spans) {
        for (j, &id) in new.iter().enumerate() {
            let position = (row.len + j).min(last_position);
            positions[start + j] = position;
            let out = &mut x[(start + j) * d..(start + j + 1) * d];
            out.copy_from_slice(&weights.tokens.values[id as usize * d..(id as usize + 1) * d]);
            if let Some(table) = &weights.positions {
                add_into(out, &table.values[position * d..(position + 1) * d]);
            }
        }
    }
    let mut h = vec![0.0f32; total * d];
    let mut scores = Vec::new();
    for (layer, block) in weights.blocks.iter().enumerate() {
        norm::forward(
            &x,
            d,
            &block.norm_attention.gamma.values,
            &block.norm_attention.beta.values,
            &mut h,
        );
        let mut qkv = dense(&block.qkv, &h, total);
        if let Some(table) = &weights.rotary {
            table.turn_rows(&mut qkv, 3 * d, positions.iter().copied(), false);
        }
        let mut context = vec![0.0f32; total * d];
        for (row, &(start, end)) in cache.rows.iter_mut().zip(&spans) {
            if start == end {
                continue;
            }
            let old = row.len;
            for p in start..end {
                let at = p * 3 * d;
                row.keys[layer].extend_from_slice(&qkv[at + d..at + 2 * d]);
                row.values[layer].extend_from_slice(&qkv[at + 2 * d..at + 3 * d]);
            }
            let seen = old + end - start;
            for head in 0..heads {
                let attention = RowAttention {
                    q: View::strided(&qkv, start * 3 * d + head * dh, end - start, dh, 3 * d, 1),
                    keys: View::strided(&row.keys[layer], head * dh, seen, dh, d, 1),
                    values: View::strided(&row.values[layer], head * dh, seen, dh, d, 1),
                    old,
                    scale: 1.0 / (dh as f32).sqrt(),
                };
                attention.run(&mut context, start * d + head * dh, d, &mut scores);
            }
        }
        let attended = dense(&block.out, &context, total);
        add_into(&mut x, &attended);
        norm::forward(
            &x,
            d,
            &block.norm_mlp.gamma.values,
            &block.norm_mlp.beta.values,
            &mut h,
        );
        let up = dense(&block.up, &h, total);
        let mut activated = vec![0.0f32; up.len()];
        gelu::forward(&up, &mut activated);
        add_into(&mut x, &dense(&block.down, &activated, total));
    }
    for (row, new) in cache.rows.iter_mut().zip(tokens) {
        row.len += new.len();
    }
    // The head at each fed row's last new token.
    let fed: Vec<usize> = (0..tokens.len())
        .filter(|&i| !tokens[i].is_empty())
        .collect();
    let last: Vec<f32> = fed
        .iter()
        .flat_map(|&i| x[(spans[i].1 - 1) * d..spans[i].1 * d].iter().copied())
        .collect();
    let mut normed = vec![0.0f32; last.len()];
    norm::forward(
        &last,
        d,
        &weights.norm.gamma.values,
        &weights.norm.beta.values,
        &mut normed,
    );
    let head = dense(&weights.head, &normed, fed.len());
    for (k, &i) in fed.iter().enumerate() {
        logits[i * vocab..(i + 1) * vocab].copy_from_slice(&head[k * vocab..(k + 1) * vocab]);
    }
    logits
}

//! Causal multi-head self-attention over a right-padded batch, forward and backward,
//! on the fused `qkv` rows of the block's projection (`[q | k | v]`, each `d` wide,
//! head `h` in columns `h dh .. (h + 1) dh` of each):
//!
//! ```text
//! S_ij = q_i . k_j / sqrt(dh)   (j <= i)      P_i = softmax_j S_ij      c_i = sum_j P_ij v_j
//! dP_ij = dc_i . v_j      dS_ij = P_ij (dP_ij - sum_l P_il dP_il)
//! dq_i = sum_j dS_ij k_j / sqrt(dh)   dk_j = sum_i dS_ij q_i / sqrt(dh)   dv_j = sum_i P_ij dc_i
//! ```
//!
//! This is the model's `attend` with the causal mask of the training forward: a masked
//! score there is `-1e9`, whose exponential is 0 in `f32`, so leaving the masked keys
//! out gives the same probabilities. Queries go in blocks of [`BLOCK`] rows, and a
//! block's products stop at its last query's key, so the keys after the diagonal cost
//! about half a block's work instead of half the matrix.

use super::gemm::{Into, View, ViewMut, matmul};
use super::vecmath::softmax_in_place;

/// Query rows per block of the causal products.
const BLOCK: usize = 64;

/// The sizes of one microbatch's attention.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Rows (sequences).
    pub rows: usize,
    /// Positions per row.
    pub seq: usize,
    /// Heads.
    pub heads: usize,
    /// Width of a head.
    pub head_dim: usize,
}

impl Shape {
    fn width(&self) -> usize {
        self.heads * self.head_dim
    }

    /// Floats of the probabilities `[rows, heads, seq, seq]`.
    pub fn probs_len(&self) -> usize {
        self.rows * self.heads * self.seq * self.seq
    }

    fn scale(&self) -> f32 {
        1.0 / (self.head_dim as f32).sqrt()
    }

    /// Query, key and value of row `n`, head `h` as `seq x head_dim` views of `qkv`.
    fn heads_of<'a>(&self, qkv: &'a [f32], n: usize, h: usize) -> [View<'a>; 3] {
        let d = self.width();
        let base = n * self.seq * 3 * d + h * self.head_dim;
        [0, d, 2 * d].map(|part| View::strided(qkv, base + part, self.seq, self.head_dim, 3 * d, 1))
    }
}

/// The query blocks `(start, end)` of a sequence.
fn blocks(seq: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..seq)
        .step_by(BLOCK)
        .map(move |start| (start, (start + BLOCK).min(seq)))
}

/// Writes each head's probabilities into `probs` (`[rows, heads, seq, seq]`, zero
/// after the diagonal) and the attended values into `context` (`[rows seq, d]`).
pub fn forward(shape: Shape, qkv: &[f32], probs: &mut [f32], context: &mut [f32]) {
    let (s, d, dh) = (shape.seq, shape.width(), shape.head_dim);
    for n in 0..shape.rows {
        for h in 0..shape.heads {
            let [q, k, v] = shape.heads_of(qkv, n, h);
            let p_start = (n * shape.heads + h) * s * s;
            let p = &mut probs[p_start..p_start + s * s];
            for (start, end) in blocks(s) {
                matmul(
                    ViewMut::strided(p, start * s, end - start, end, s),
                    q.row_range(start, end),
                    k.row_range(0, end).t(),
                    shape.scale(),
                    Into::Overwrite,
                );
                for i in start..end {
                    softmax_causal(&mut p[i * s..(i + 1) * s], i);
                }
                matmul(
                    ViewMut::strided(context, n * s * d + start * d + h * dh, end - start, dh, d),
                    View::rows(p, s, s).row_range(start, end).col_range(0, end),
                    v.row_range(0, end),
                    1.0,
                    Into::Overwrite,
                );
            }
        }
    }
}

/// `row[..=i]` in place by its softmax, the rest of the row zero.
fn softmax_causal(row: &mut [f32], i: usize) {
    let (seen, after) = row.split_at_mut(i + 1);
    softmax_in_place(seen);
    after.fill(0.0);
}

/// The gradient of `qkv` (overwritten) from the context's gradient `d_context`, with the
/// probabilities the forward pass kept.
pub fn backward(shape: Shape, qkv: &[f32], probs: &[f32], d_context: &[f32], d_qkv: &mut [f32]) {
    let (s, d, dh) = (shape.seq, shape.width(), shape.head_dim);
    d_qkv.fill(0.0);
    let mut d_scores = vec![0.0f32; BLOCK * s];
    for n in 0..shape.rows {
        for h in 0..shape.heads {
            let [q, k, v] = shape.heads_of(qkv, n, h);
            let p_start = (n * shape.heads + h) * s * s;
            let p = View::rows(&probs[p_start..p_start + s * s], s, s);
            let dc = View::strided(d_context, n * s * d + h * dh, s, dh, d, 1);
            let base = n * s * 3 * d + h * dh;
            for (start, end) in blocks(s) {
                let rows = end - start;
                let p_block = p.row_range(start, end).col_range(0, end);
                // dP for the block's queries over the keys they see.
                matmul(
                    ViewMut::strided(&mut d_scores, 0, rows, end, end),
                    dc.row_range(start, end),
                    v.row_range(0, end).t(),
                    1.0,
                    Into::Overwrite,
                );
                let p_values = &probs[p_start..p_start + s * s];
                for r in 0..rows {
                    let i = start + r;
                    let p_row = &p_values[i * s..i * s + end];
                    let ds = &mut d_scores[r * end..(r + 1) * end];
                    let dot: f32 = p_row.iter().zip(ds.iter()).map(|(a, b)| a * b).sum();
                    for (x, &pv) in ds.iter_mut().zip(p_row) {
                        *x = pv * (*x - dot);
                    }
                }
                let ds = View::rows(&d_scores, rows, end);
                // dv_j += sum_i P_ij dc_i
                matmul(
                    ViewMut::strided(d_qkv, base + 2 * d, end, dh, 3 * d),
                    p_block.t(),
                    dc.row_range(start, end),
                    1.0,
                    Into::Add,
                );
                // dq_i = sum_j dS_ij k_j / sqrt(dh)
                matmul(
                    ViewMut::strided(d_qkv, base + start * 3 * d, rows, dh, 3 * d),
                    ds,
                    k.row_range(0, end),
                    shape.scale(),
                    Into::Overwrite,
                );
                // dk_j += sum_i dS_ij q_i / sqrt(dh)
                matmul(
                    ViewMut::strided(d_qkv, base + d, end, dh, 3 * d),
                    ds.t(),
                    q.row_range(start, end),
                    shape.scale(),
                    Into::Add,
                );
            }
        }
    }
}

//! The policy's training forward and its backward pass over one microbatch, written
//! out by hand (see the module docs of [`super`] for why). The forward is
//! `PolicyModel::forward` followed by `loss::token_logprobs` and the entropy, with one
//! difference in what is computed, not in the numbers: the head and the softmax over
//! the vocabulary run only at the *scored* positions (those the loss reads), which is
//! where every caller reads them.
//!
//! ```text
//! x = E_tok[id] + E_pos[position]          (E_pos only with a learned table)
//! per block:  x = x + Wo attn(turn(LN1(x) Wqkv));   x = x + Wdown gelu(LN2(x) Wup)
//! z = LN(x) Whead  (scored positions),  logp and H from z (`super::head`)
//! ```
//!
//! `turn` is the identity with a learned table and the rotary turn of each position's
//! queries and keys otherwise (`crate::policy::rotary`); its backward is the turn back.
//!
//! The backward pass takes `dL/dlogp` and `dL/dH` per position and returns every
//! parameter's gradient, in the order the forward's steps are undone.

use super::attention::{self, Shape};
use super::gemm::{Into, View, ViewMut, matmul};
use super::weights::{Dense, Weights};
use super::{gelu, head, norm};

/// One microbatch as the fused path reads it: `rows x seq` right-padded token ids
/// (positions `0..seq`), each position's target and whether the loss reads it.
#[derive(Debug, Clone, Copy)]
pub struct Batch<'a> {
    /// Rows.
    pub rows: usize,
    /// Positions per row.
    pub seq: usize,
    /// Input token ids, `rows x seq`.
    pub inputs: &'a [u32],
    /// Next-token targets, `rows x seq`.
    pub targets: &'a [u32],
    /// Whether the loss reads each position, `rows x seq`.
    pub scored: &'a [bool],
    /// Whether the nucleus kept each token at each position, `rows x seq x V`, when
    /// sampling used `top_p`.
    pub kept: Option<&'a [bool]>,
    /// The sampling temperature the log-probabilities are taken at.
    pub temperature: f32,
}

/// The log-probability of each position's target and the entropy there, `rows x seq`
/// (0 at positions that are not scored).
#[derive(Debug, Clone)]
pub struct Scores {
    /// `log pi(target)`.
    pub logp: Vec<f32>,
    /// The entropy in nats.
    pub entropy: Vec<f32>,
}

/// What one block's backward pass needs of its forward.
#[derive(Debug)]
struct BlockTape {
    norm_attention: norm::Saved,
    /// `LN1(x)`, `[rows seq, d]`.
    h_attention: Vec<f32>,
    /// `[rows seq, 3d]`, the queries and keys turned with rotary positions.
    qkv: Vec<f32>,
    /// `[rows, heads, seq, seq]`.
    probs: Vec<f32>,
    /// Attended values before the output projection, `[rows seq, d]`.
    context: Vec<f32>,
    norm_mlp: norm::Saved,
    /// `LN2(x)`, `[rows seq, d]`.
    h_mlp: Vec<f32>,
    /// The MLP's pre-activation, `[rows seq, 4d]`.
    up: Vec<f32>,
    /// `gelu(up)`.
    activated: Vec<f32>,
}

/// Everything the backward pass needs of a forward pass.
#[derive(Debug)]
pub struct Tape {
    rows: usize,
    seq: usize,
    inputs: Vec<u32>,
    temperature: f32,
    blocks: Vec<BlockTape>,
    norm: norm::Saved,
    /// `LN(x)` at the scored positions, `[K, d]`.
    h_scored: Vec<f32>,
    /// The scored positions (flat indices), in order.
    scored: Vec<usize>,
    heads: Vec<head::Saved>,
}

/// `out = x W + b` for the `rows x d_in` matrix `x`.
pub(super) fn dense(layer: &Dense, x: &[f32], rows: usize) -> Vec<f32> {
    let (d_in, d_out) = (layer.weight.shape[0], layer.d_out());
    let mut out: Vec<f32> = layer.bias.values.repeat(rows);
    matmul(
        ViewMut::rows(&mut out, rows, d_out),
        View::rows(x, rows, d_in),
        View::rows(&layer.weight.values, d_in, d_out),
        1.0,
        Into::Add,
    );
    out
}

/// The backward pass of [`dense`]: adds `x^T dy` to the weight's gradient and the
/// column sums of `dy` to the bias's; returns `dx = dy W^T`.
fn dense_backward(layer: &Dense, grad: &mut Dense, x: &[f32], dy: &[f32], rows: usize) -> Vec<f32> {
    let (d_in, d_out) = (layer.weight.shape[0], layer.d_out());
    matmul(
        ViewMut::rows(&mut grad.weight.values, d_in, d_out),
        View::rows(x, rows, d_in).t(),
        View::rows(dy, rows, d_out),
        1.0,
        Into::Add,
    );
    for row in dy.chunks_exact(d_out) {
        for (b, &g) in grad.bias.values.iter_mut().zip(row) {
            *b += g;
        }
    }
    let mut dx = vec![0.0; rows * d_in];
    matmul(
        ViewMut::rows(&mut dx, rows, d_in),
        View::rows(dy, rows, d_out),
        View::rows(&layer.weight.values, d_in, d_out).t(),
        1.0,
        Into::Overwrite,
    );
    dx
}

pub(super) fn add_into(acc: &mut [f32], x: &[f32]) {
    for (a, b) in acc.iter_mut().zip(x) {
        *a += b;
    }
}

/// The forward pass over `batch`: the scores, and the tape for [`backward`].
///
/// # Panics
/// When the batch's arrays disagree with its shape, a token id is outside the
/// vocabulary or a row is longer than the model's positions.
pub fn forward(weights: &Weights, batch: &Batch<'_>) -> (Scores, Tape) {
    let (rows, seq, d) = (batch.rows, batch.seq, weights.width());
    let vocab = weights.vocab();
    let positions = rows * seq;
    assert!(
        batch.inputs.len() == positions
            && batch.targets.len() == positions
            && batch.scored.len() == positions
            && batch.kept.is_none_or(|k| k.len() == positions * vocab),
        "fused forward: arrays of the wrong length for {rows} x {seq}"
    );
    assert!(
        seq <= weights.context(),
        "fused forward: {seq} positions, the model has {}",
        weights.context()
    );
    let mut x = vec![0.0f32; positions * d];
    for (p, (&id, out)) in batch.inputs.iter().zip(x.chunks_exact_mut(d)).enumerate() {
        out.copy_from_slice(&weights.tokens.values[id as usize * d..(id as usize + 1) * d]);
        if let Some(table) = &weights.positions {
            add_into(out, &table.values[(p % seq) * d..(p % seq + 1) * d]);
        }
    }
    let shape = Shape {
        rows,
        seq,
        heads: weights.heads,
        head_dim: d / weights.heads,
    };
    let mut blocks = Vec::with_capacity(weights.blocks.len());
    for block in &weights.blocks {
        let mut h_attention = vec![0.0; positions * d];
        let norm_attention = norm::forward(
            &x,
            d,
            &block.norm_attention.gamma.values,
            &block.norm_attention.beta.values,
            &mut h_attention,
        );
        let mut qkv = dense(&block.qkv, &h_attention, positions);
        turn_rows(weights, &mut qkv, seq, false);
        let mut probs = vec![0.0; shape.probs_len()];
        let mut context = vec![0.0; positions * d];
        attention::forward(shape, &qkv, &mut probs, &mut context);
        add_into(&mut x, &dense(&block.out, &context, positions));
        let mut h_mlp = vec![0.0; positions * d];
        let norm_mlp = norm::forward(
            &x,
            d,
            &block.norm_mlp.gamma.values,
            &block.norm_mlp.beta.values,
            &mut h_mlp,
        );
        let up = dense(&block.up, &h_mlp, positions);
        let mut activated = vec![0.0; up.len()];
        gelu::forward(&up, &mut activated);
        add_into(&mut x, &dense(&block.down, &activated, positions));
        blocks.push(BlockTape {
            norm_attention,
            h_attention,
            qkv,
            probs,
            context,
            norm_mlp,
            h_mlp,
            up,
            activated,
        });
    }
    let mut h = vec![0.0; positions * d];
    let final_norm = norm::forward(
        &x,
        d,
        &weights.norm.gamma.values,
        &weights.norm.beta.values,
        &mut h,
    );
    let scored: Vec<usize> = (0..positions).filter(|&p| batch.scored[p]).collect();
    let h_scored: Vec<f32> = scored
        .iter()
        .flat_map(|&p| h[p * d..(p + 1) * d].iter().copied())
        .collect();
    let logits = dense(&weights.head, &h_scored, scored.len());
    let mut scores = Scores {
        logp: vec![0.0; positions],
        entropy: vec![0.0; positions],
    };
    let mut heads = Vec::with_capacity(scored.len());
    for (k, &p) in scored.iter().enumerate() {
        let kept = batch.kept.map(|m| &m[p * vocab..(p + 1) * vocab]);
        let (logp, saved) = head::forward(
            &logits[k * vocab..(k + 1) * vocab],
            batch.targets[p] as usize,
            batch.temperature,
            kept,
        );
        scores.logp[p] = logp;
        scores.entropy[p] = saved.entropy;
        heads.push(saved);
    }
    let tape = Tape {
        rows,
        seq,
        inputs: batch.inputs.to_vec(),
        temperature: batch.temperature,
        blocks,
        norm: final_norm,
        h_scored,
        scored,
        heads,
    };
    (scores, tape)
}

/// Every parameter's gradient from `d_logp` and `d_entropy` (`rows x seq`, the loss's
/// gradients with respect to [`Scores`]; only scored positions are read).
pub fn backward(
    weights: &Weights,
    tape: &Tape,
    d_logp: &[f32],
    d_entropy: Option<&[f32]>,
) -> Weights {
    let mut grads = weights.zeros_like();
    let (rows, seq, d) = (tape.rows, tape.seq, weights.width());
    let vocab = weights.vocab();
    let positions = rows * seq;
    // The head, at the scored positions.
    let mut dz = vec![0.0f32; tape.scored.len() * vocab];
    for ((saved, &p), dz) in tape
        .heads
        .iter()
        .zip(&tape.scored)
        .zip(dz.chunks_exact_mut(vocab))
    {
        let de = d_entropy.map_or(0.0, |de| de[p]);
        head::backward(saved, tape.temperature, d_logp[p], de, dz);
    }
    let dh_scored = dense_backward(
        &weights.head,
        &mut grads.head,
        &tape.h_scored,
        &dz,
        tape.scored.len(),
    );
    let mut dh = vec![0.0f32; positions * d];
    for (&p, row) in tape.scored.iter().zip(dh_scored.chunks_exact(d)) {
        dh[p * d..(p + 1) * d].copy_from_slice(row);
    }
    let mut dx = vec![0.0f32; positions * d];
    norm::backward(
        &tape.norm,
        &weights.norm.gamma.values,
        &dh,
        &mut dx,
        &mut grads.norm.gamma.values,
        &mut grads.norm.beta.values,
    );
    let shape = Shape {
        rows,
        seq,
        heads: weights.heads,
        head_dim: d / weights.heads,
    };
    for ((block, grad), saved) in weights
        .blocks
        .iter()
        .zip(grads.blocks.iter_mut())
        .zip(&tape.blocks)
        .rev()
    {
        // x = x + down(gelu(up(LN2(x))))
        let d_activated = dense_backward(
            &block.down,
            &mut grad.down,
            &saved.activated,
            &dx,
            positions,
        );
        let mut d_up = vec![0.0; d_activated.len()];
        gelu::backward(&saved.up, &d_activated, &mut d_up);
        let dh_mlp = dense_backward(&block.up, &mut grad.up, &saved.h_mlp, &d_up, positions);
        norm::backward(
            &saved.norm_mlp,
            &block.norm_mlp.gamma.values,
            &dh_mlp,
            &mut dx,
            &mut grad.norm_mlp.gamma.values,
            &mut grad.norm_mlp.beta.values,
        );
        // x = x + out(attention(LN1(x) Wqkv))
        let d_context = dense_backward(&block.out, &mut grad.out, &saved.context, &dx, positions);
        let mut d_qkv = vec![0.0; saved.qkv.len()];
        attention::backward(shape, &saved.qkv, &saved.probs, &d_context, &mut d_qkv);
        turn_rows(weights, &mut d_qkv, seq, true);
        let dh_attention = dense_backward(
            &block.qkv,
            &mut grad.qkv,
            &saved.h_attention,
            &d_qkv,
            positions,
        );
        norm::backward(
            &saved.norm_attention,
            &block.norm_attention.gamma.values,
            &dh_attention,
            &mut dx,
            &mut grad.norm_attention.gamma.values,
            &mut grad.norm_attention.beta.values,
        );
    }
    for (p, (&id, row)) in tape.inputs.iter().zip(dx.chunks_exact(d)).enumerate() {
        add_into(
            &mut grads.tokens.values[id as usize * d..(id as usize + 1) * d],
            row,
        );
        if let Some(table) = &mut grads.positions {
            add_into(&mut table.values[(p % seq) * d..(p % seq + 1) * d], row);
        }
    }
    grads
}

/// With rotary positions, turns the queries and keys of every `[q | k | v]` row of
/// `qkv` (`[rows seq, 3d]`, positions `0..seq` in each row) by its position's angles,
/// or back when `inverse` (a gradient's way back); nothing with a learned table.
fn turn_rows(weights: &Weights, qkv: &mut [f32], seq: usize, inverse: bool) {
    if let Some(table) = &weights.rotary {
        table.turn_rows(qkv, 3 * weights.width(), (0..).map(|p| p % seq), inverse);
    }
}

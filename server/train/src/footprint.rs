//! What a config asks of the machine, estimated before anything is allocated, so a
//! config whose settings are each in range but whose product is absurd (48 layers of
//! width 4096 at context 8192) is refused with the numbers instead of growing until the
//! machine runs out of memory.
//!
//! Parameters `P = V d + C d + L (12 d^2 + 13 d) + 2 d + d V + V` (token and position
//! embeddings, the `C d` only with a learned position table, per block the fused QKV, output, 4x MLP and two layer norms, the final
//! norm and the head; `V` the vocabulary, `C` the context, `L` layers, `d` width).
//! Training memory in f32: `4 P` for weights, gradients and AdamW's two moments, `P`
//! more for a KL reference, plus one microbatch's activations,
//! `rows x C x (L (16 d + 2 h C) + 3 V)` floats (block activations kept for backward,
//! attention scores and their gradient per head, logits with their softmax and
//! gradient), `rows` the larger of `grpo.microbatch_rows` and SFT's microbatch of
//! episodes. An upper-bound estimate (only the parameter count is checked against
//! burn's, in `model`'s tests); the budget is `memory_budget_mb`. The module depends
//! on nothing of the crate: `config` describes itself as a [`Shape`].

/// What the estimate needs to know of a config.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shape {
    /// Vocabulary size.
    pub vocab: usize,
    /// `model.context`.
    pub context: usize,
    /// `model.layers`.
    pub layers: usize,
    /// `model.width`.
    pub width: usize,
    /// `model.heads`.
    pub heads: usize,
    /// Whether the model has a learned position table (`model.positions = "learned"`).
    pub position_table: bool,
    /// Rows of the largest microbatch (GRPO's `microbatch_rows` or SFT's episodes).
    pub rows: usize,
    /// Whether a KL reference (a second copy of the weights) is kept.
    pub reference: bool,
    /// Rollouts a GRPO step may sample: `tasks_per_batch x group_size x (refills + 1)`.
    pub rollouts: usize,
    /// `harness.max_context_tokens`.
    pub episode_tokens: usize,
}

/// The estimate for one config.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Footprint {
    /// Trainable parameters.
    pub parameters: f64,
    /// Bytes of training memory (see the module docs).
    pub training_bytes: f64,
    /// Tokens a GRPO step may generate at most: every refill round's rollouts at the
    /// context limit.
    pub tokens_per_step: f64,
}

/// Bytes in a MiB.
const MIB: f64 = 1_048_576.0;

/// The most tokens one GRPO step may ask for.
pub const MAX_TOKENS_PER_STEP: f64 = 1e9;

/// The estimate for `shape`.
pub fn estimate(shape: &Shape) -> Footprint {
    let (v, c, l, d, h) = (
        shape.vocab as f64,
        shape.context as f64,
        shape.layers as f64,
        shape.width as f64,
        shape.heads as f64,
    );
    let table = if shape.position_table { c * d } else { 0.0 };
    let parameters = v * d + table + l * (12.0 * d * d + 13.0 * d) + 2.0 * d + d * v + v;
    let copies = if shape.reference { 5.0 } else { 4.0 };
    let activations = shape.rows as f64 * c * (l * (16.0 * d + 2.0 * h * c) + 3.0 * v);
    Footprint {
        parameters,
        training_bytes: 4.0 * (copies * parameters + activations),
        tokens_per_step: shape.rollouts as f64 * shape.episode_tokens as f64,
    }
}

/// The first budget `shape` exceeds with `budget_mb` MiB of memory, as
/// `(field, message)`.
pub fn over_budget(shape: &Shape, budget_mb: usize) -> Option<(&'static str, String)> {
    let f = estimate(shape);
    let budget = budget_mb as f64 * MIB;
    if f.training_bytes > budget {
        return Some((
            "model",
            format!(
                "layers x width x context ask for about {:.3e} parameters and {:.0} MB of \
                 training memory (weights, gradients, AdamW moments and one microbatch's \
                 activations), over memory_budget_mb = {budget_mb}; make the model smaller \
                 or raise the budget",
                f.parameters,
                f.training_bytes / MIB,
            ),
        ));
    }
    if f.tokens_per_step > MAX_TOKENS_PER_STEP {
        return Some((
            "grpo.tasks_per_batch",
            format!(
                "tasks_per_batch x group_size x (max_refill_rounds + 1) x max_context_tokens \
                 = {:.3e} tokens a step may generate, over {MAX_TOKENS_PER_STEP:.0e}",
                f.tokens_per_step
            ),
        ));
    }
    None
}

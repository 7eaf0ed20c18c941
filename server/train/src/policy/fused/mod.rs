//! The policy's training forward and backward pass on the CPU, fused and written by
//! hand: what the update and SFT run on the CPU backend instead of burn's autodiff
//! graph. burn stays the model's home (its parameters, the optimizer, checkpoints,
//! rollouts, the GPU backend) and the reference these passes are checked against.
//!
//! Why: a profile of the update on the CPU backend (`perf record` of `arlbook
//! bench-train`, two cores) found the matrix products' inner kernels doing about a
//! third of the work; the rest went to packing operands for many small products,
//! copies between layouts (`memmove` 8%), clearing freshly mapped pages for each
//! new tensor (6%), scalar `exp`/`erf` calls, and one graph node per element-wise op.
//! Here each layer is a few large products over the whole microbatch (`[rows x seq,
//! d]` against the weights), the element-wise work of a layer is one loop (layer
//! norm, GELU, softmax), causal attention skips the keys after each query block, and
//! the head and the vocabulary softmax run only at the positions the loss reads.
//!
//! - [`network`]: the forward pass with its tape, and the backward pass from the
//!   loss's gradients with respect to the log-probabilities and entropies.
//! - [`infer`]: generation's forward passes (prefill, extension, decode step) over a
//!   key/value cache kept per row on the host, which the rollouts run on.
//! - [`score`]: a microbatch scored through either path (burn's graph, or this one),
//!   with the gradients of any burn loss built on the scores.
//! - The pieces, each checked against burn's own graph (value and gradient) in
//!   `tests`: [`norm`] (layer norm), [`gelu`], [`attention`] (causal multi-head),
//!   [`head`] (log-softmax with gather, entropy), and [`gemm`], the one call into
//!   the matrix-product kernels.
//! - [`weights`]: the parameters as arrays with their burn ids, and gradients back
//!   into burn's `GradientsParams`.
//!
//! Numbers agree with burn's path within `f32` rounding (the tests' tolerances), not
//! bit for bit: sums are taken in another order.

pub mod attention;
pub mod gelu;
pub mod gemm;
pub mod head;
pub mod infer;
pub mod network;
pub mod norm;
pub mod score;
pub mod vecmath;
pub mod weights;

#[cfg(test)]
mod tests;

pub use network::{Batch, Scores, Tape};
pub use weights::Weights;

//! The wgpu compute path (feature `gpu`): the same computations as [`crate::math`], run
//! by the WGSL kernels of `arlbook-shaders`.
//!
//! [`GpuContext`] owns the device, a cache of compiled pipelines (one per kernel file,
//! built on first use) and a pool of buffers reused across calls. Each runner below
//! makes exactly one queue submission and one readback.
//!
//! ## Reuse across calls
//! - Pipelines: the context keeps one shader module, bind group layout and compute
//!   pipeline per entry point for each kernel file, in a map keyed by the kernel's name;
//!   the first call (or [`GpuContext::warm_up`]) compiles them and every later call
//!   clones an `Arc` ([`GpuContext::kernels_compiled`] counts them).
//! - Buffers: every run takes its uniform, storage and staging buffers from a pool
//!   keyed by usage and size class and returns them when the readback is done; the
//!   next call of the same shape (or of a slightly smaller one in the same class)
//!   uploads into them with `write_buffer` and allocates nothing
//!   ([`GpuContext::buffers_created`] counts allocations). Outputs are cleared on the
//!   device before each run. Only the bind group, which names the buffers, is made per
//!   call; it is cheap.
//!
//! ## Design
//! - The CPU path in `f64` is the reference. Sampling kernels draw the same Philox words
//!   as the CPU (see `shaders/wgsl/rng.wgsl`) and make the same decisions, because every
//!   decision compares a 24-bit uniform with a threshold rounded to `f32` on both sides.
//!   Where they can, they return integer counts and the host finishes in `f64`, so
//!   their estimates equal the CPU's up to `f64` rounding.
//! - Element-wise and segmented kernels compute in `f32`: inputs are rounded to `f32`,
//!   results agree with the CPU within a relative `1e-4` of the quantity's scale (the
//!   conformance suite in `core/tests/gpu_*.rs` states the exact bounds).
//! - Context creation is asynchronous (the browser); [`GpuContext::new_blocking`] and
//!   the `*_blocking` helpers wrap it with `pollster` on native targets.
//! - A request too large for one kernel launch (device limits) is a [`GpuError`]; the
//!   API layer then computes on the CPU and says so.

mod context;
mod runner;

pub mod advantage;
pub mod bandit;
pub mod clip;
pub mod importance;
pub mod kl_estimation;
pub mod lag;
pub mod policy_loss;
pub mod rng;
pub mod sampling;

pub use context::{GpuContext, GpuError};
pub use runner::{Timings, empty_round_trip};

/// Runs a future to completion on the current thread (native only).
#[cfg(not(target_arch = "wasm32"))]
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    pollster::block_on(future)
}

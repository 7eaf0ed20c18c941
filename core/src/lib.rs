//! The math, the agent environment and the compute API of arlbook, on the CPU and
//! (feature `gpu`) through wgpu.
//!
//! Everything a figure, the CLI, the HTTP server or the trainer shows is computed here.
//! [`math`] holds one module per idea as pure functions over slices; [`api`] wraps them
//! in serde request/response types dispatched by name; [`rng`] is the one counter-based
//! generator every sampling routine draws from, so a seed means the same samples
//! everywhere.
//!
//! ## Design
//! - The CPU path in `f64` is the reference; every other path is checked against it.
//! - Bad input is never a panic: every fallible function returns [`FieldError`], which
//!   names the input field and the constraint it broke.

pub mod agent;
pub mod api;
pub mod cancel;
pub mod error;
pub mod font;
#[cfg(feature = "gpu")]
pub mod gpu;
pub mod math;
pub mod metrics;
pub mod parallel;
pub mod ragged;
pub mod rng;

pub use error::FieldError;
pub use ragged::Ragged;

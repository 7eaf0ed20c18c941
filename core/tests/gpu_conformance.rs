//! The GPU conformance suite: every kernel against its CPU reference, on lavapipe in CI.
//!
//! ## Tolerances
//! - RNG: the first million words of a stream are identical (bit for bit).
//! - Monte Carlo kernels (bandit, importance sampling, dynamic sampling): the same seed
//!   gives the same draws and the same decisions, because every decision compares a
//!   24-bit uniform with a threshold rounded to `f32` on both sides. The kernels return
//!   integer counts, so the integer results (groups drawn, capped runs) are identical
//!   and the estimates agree to `f64` rounding (relative `1e-12`): only the order in
//!   which the host adds the `f64` terms differs from the CPU's.
//! - KL estimators: the same draws, but the kernel sums the per-action values in `f32`
//!   (compensated): each estimate within `1e-5` of the largest `|k(a)|`, and the sign of
//!   each k1 estimate the same unless it lies that close to 0.
//! - Policy lag: identical for `fixed` durations on exactly representable times; with
//!   random durations event times are `f32` on the GPU, so most replicates agree
//!   exactly and the pooled kept fraction agrees within Monte Carlo error.
//! - `f32` kernels (clip surrogate, group advantages, policy loss): each value `g`
//!   against the CPU's `c` satisfies `|g - c| <= 1e-4 |c| + 1e-5 S`, where `S` is the
//!   largest magnitude in the same output (reduced losses use the sum of the weighted
//!   magnitudes of their terms), so entries that cancel to almost 0 are compared at the
//!   scale of the quantity. Clip sides and fractions are identical on inputs that keep
//!   `1e-5` away from a kink.
//!
//! Without an adapter the tests skip with a printed reason, except when the `CI`
//! environment variable is set: there a missing adapter fails.

// A test crate: an unwrap that fails is a failing test, in helpers as in tests.
#![allow(clippy::unwrap_used)]

#[path = "gpu/support.rs"]
mod support;

#[path = "common/fixture_check.rs"]
mod fixture_check;

#[path = "gpu/rng.rs"]
mod rng;

#[path = "gpu/sampling.rs"]
mod sampling;

#[path = "gpu/elementwise.rs"]
mod elementwise;

#[path = "gpu/policy.rs"]
mod policy;

#[path = "gpu/api.rs"]
mod api;

#[path = "gpu/reuse.rs"]
mod reuse;

//! The math of the notebook: one module per idea, pure functions over slices.
//!
//! Every function validates its input and returns [`crate::FieldError`] naming the
//! offending field; none panics on user input. Each module's `//!` gives the formula
//! and where it comes from.

pub mod bandit;
pub mod budget;
pub mod distill;
pub mod eval;
pub mod importance;
pub mod lag;
pub mod sampling;
pub mod shaping;

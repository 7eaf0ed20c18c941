//! The math of the notebook: one module per idea, pure functions over slices.
//!
//! Every function validates its input and returns [`crate::FieldError`] naming the
//! offending field; none panics on user input. Each module's `//!` gives the formula
//! and where it comes from.

pub mod advantage;
pub mod bandit;
pub mod budget;
pub mod clip;
pub mod convention;
pub mod distill;
pub mod dpo;
pub mod entropy;
pub mod eval;
pub mod fast_exp;
pub mod gae;
pub mod gae_batch;
pub mod grpo_toy;
pub mod importance;
pub mod kl;
pub mod kl_estimation;
pub mod kl_regularized;
pub mod lag;
pub mod policy_loss;
pub mod reduction;
pub mod sampler_correction;
pub mod sampling;
pub mod shaping;
pub mod trl_rewards;

//! The trainer of arlbook: a small transformer policy in burn learns the code-repair
//! environment by SFT, then GRPO or rejection sampling, with checkpoints, metrics and
//! evaluation.
//!
//! - [`config`]: the TOML configuration and its validation; [`footprint`]: what a
//!   config asks of the machine, checked against its budget before anything runs.
//! - [`model`], [`generate`], [`sampling`], [`rollout`]: the transformer with a KV
//!   cache, batched lockstep rollouts and token sampling with recorded log-probs.
//! - [`batching`], [`loss`], [`optimizer`]: tensors of a microbatch, the policy loss
//!   (the core's, in burn), AdamW with global-norm clipping and the schedule;
//!   [`replicas`]: microbatches' forward and backward passes on every core;
//!   [`fused`]: the training forward and backward written by hand for the CPU
//!   backend (checked against burn's graph).
//! - [`trainer`]: the run state (device, model, optimizer, reference, lag pipeline,
//!   position, metrics file): fresh, resumed or initialised from a checkpoint.
//! - [`sft`], [`grpo`], [`rejection`]: the stages (SFT; GRPO; rejection-sampling SFT)
//!   on that state; [`pipeline`] runs a `train` invocation's stages in order.
//! - [`selection`]: checkpoints chosen on validation, and the gate before RL;
//!   [`probe`]: where an SFT policy fails (validation failures by cause, teacher-forced
//!   accuracy by action part), measured during SFT.
//! - [`checkpoint`], [`metrics`], [`progress`]: resumable state, the JSON-lines file of
//!   `core::metrics::MetricsRow`s, the progress line.
//! - [`eval`]: success, pass@k and paired comparisons of checkpoints, and [`opening`]
//!   the recovery diagnostic's forced wrong first patch; [`plot`]: a
//!   picture of a run; [`bench`]: the synthetic workload of `cargo xtask bench train`;
//!   [`device`]: the burn device for a backend choice; [`resident`]: the process's
//!   peak resident memory for the run and bench reports.
//!
//! The stages depend on [`trainer`], [`pipeline`] on the stages: the module graph has
//! no cycle.

pub mod batching;
pub mod bench;
pub mod checkpoint;
pub mod config;
pub mod device;
pub mod eval;
pub mod footprint;
pub mod fused;
pub mod generate;
pub mod grpo;
pub mod loss;
pub mod metrics;
pub mod model;
pub mod opening;
pub mod optimizer;
pub mod pipeline;
pub mod plot;
pub mod probe;
pub mod progress;
pub mod recovery;
pub mod rejection;
pub mod replicas;
pub mod resident;
pub mod rollout;
pub mod sampling;
pub mod selection;
pub mod sft;
pub mod trainer;
pub mod validation;

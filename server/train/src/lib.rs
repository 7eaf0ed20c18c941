//! The trainer of arlbook: a small transformer policy in burn learns the code-repair
//! environment by SFT, then GRPO or rejection sampling, with checkpoints, metrics and
//! evaluation.
//!
//! The modules are grouped by role:
//! - [`policy`]: what the learner and the rollout workers share: the transformer
//!   ([`policy::model`]) and its fused CPU passes ([`policy::fused`]), sampling,
//!   batched generation and the lockstep episode driver ([`policy::generate`],
//!   [`policy::sampling`], [`policy::rollout`]).
//! - [`learner`]: the learner's side: the stages ([`learner::sft`] with
//!   [`learner::recovery`], [`learner::grpo`], [`learner::rejection`]) and the update's
//!   parts ([`learner::batching`], [`learner::loss`], [`learner::optimizer`],
//!   [`learner::replicas`]). GRPO's collection goes to rollout workers through
//!   [`learner::grpo::remote`] when a broker is set (the crate `arlbook-cluster`
//!   holds the worker side).
//! - [`run`]: the run: its state ([`run::trainer`]), the stages in order
//!   ([`run::pipeline`]), checkpoints chosen on validation ([`run::selection`]),
//!   [`run::checkpoint`]s, the [`run::metrics`] file and the [`run::progress`] line.
//! - [`measure`]: validation, the SFT probe, checkpoint evaluation, the recovery
//!   diagnostic's opening, the run plot.
//! - At the top: [`config`] (the TOML configuration and its validation),
//!   [`footprint`] (what a config asks of the machine), [`device`] (the burn device
//!   for a backend choice), [`resident`] (peak resident memory) and [`bench`](mod@bench) (the
//!   synthetic workload of `cargo xtask bench train`).
//!
//! The stages depend on [`run::trainer`], [`run::pipeline`] on the stages: the module
//! graph has no cycle.

pub mod bench;
pub mod config;
pub mod device;
pub mod footprint;
pub mod learner;
pub mod measure;
pub mod policy;
pub mod resident;
pub mod run;

//! Past one machine: rollout workers and a GRPO learner of arlbook over NATS
//! JetStream, with nothing lost when a process or the broker dies.
//!
//! - [`broker`]: where the broker is, credentials, and the rule that a broker off
//!   loopback needs them; retries for requests that fail while it restarts.
//! - [`names`]: the streams, buckets and keys of a run.
//! - [`wire`]: jobs, results and version records, and their encodings.
//! - [`learner`]: the trainer's [`arlbook_train::learner::grpo::remote::RemoteRollouts`] over
//!   the broker (`arlbook train --nats URL`).
//! - [`worker`]: `arlbook worker --nats URL`.
//!
//! The learner assigns every job its policy version, and a worker runs it with exactly
//! that version's weights, so the lag between sampling and training is the trainer's
//! `max_policy_lag` and nothing else; with the same config and seed, a run with any
//! number of workers trains on the rollouts an in-process run would have collected.

pub mod broker;
pub mod learner;
pub mod names;
pub mod wire;
pub mod worker;

/// A number no earlier call in this process returned (for scratch file names).
pub(crate) fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

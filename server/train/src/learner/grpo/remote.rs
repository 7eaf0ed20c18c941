//! Collection by other processes: the seam between GRPO's learner and rollout workers.
//!
//! In process, a collection round runs its episodes with [`crate::policy::generate::roll_out`]
//! on the learner's own snapshot of the policy. With a [`RemoteRollouts`] service
//! installed on the trainer (`arlbook train --nats URL`, the crate `arlbook-cluster`),
//! the learner first makes the policy of version `v` available
//! ([`RemoteRollouts::publish`]), then hands each round's groups to the service, which
//! returns every group's rollouts as the workers ran them with that version's weights.
//! A group's episodes are a function of its specs and the weights alone (each episode
//! samples from its own stream; a row's logits do not depend on the other rows of its
//! batch), so a round run by workers yields the rollouts the learner would have run,
//! token for token. What the service measured (per-worker throughput, queue depth,
//! redeliveries, stale results dropped) goes into the step's metrics row.

use std::collections::BTreeMap;

use anyhow::Result;
use arlbook_core::metrics::MetricsRow;
use burn::prelude::*;

use crate::policy::model::PolicyModel;
use crate::policy::rollout::{EpisodeSpec, Rollout};

/// Where a round's rollouts come from.
pub enum Source<'a> {
    /// This process, with `model` on `device`.
    Local {
        /// A snapshot of the policy (inference mode).
        model: &'a PolicyModel,
        /// Its device.
        device: &'a Device,
    },
    /// Workers behind a service.
    Remote(&'a mut dyn RemoteRollouts),
}

impl std::fmt::Debug for Source<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Source::Local { .. } => "Source::Local",
            Source::Remote(_) => "Source::Remote",
        })
    }
}

/// One collection round handed to workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoundId {
    /// The batch index (the GRPO step it will train).
    pub batch: usize,
    /// The dynamic-sampling round within the batch.
    pub round: usize,
    /// The policy version whose weights run the episodes.
    pub version: usize,
}

/// A service that runs collection rounds on other processes.
pub trait RemoteRollouts: Send + Sync {
    /// Makes `model`'s weights available as policy version `version`.
    fn publish(&mut self, model: &PolicyModel, version: usize) -> Result<()>;

    /// Runs `groups` (each a group's episode specs) with the weights of
    /// `round.version`; returns the rollouts of every group, in the order of `groups`
    /// and of each group's specs.
    fn round(&mut self, round: RoundId, groups: &[&[EpisodeSpec]]) -> Result<Vec<Rollout>>;

    /// What was measured since the last call (then reset).
    fn take_stats(&mut self) -> ClusterStats;
}

/// What a remote collection measured over one GRPO step.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClusterStats {
    /// Rollouts per second of each worker (its rollouts over its seconds of work).
    pub worker_rollouts_per_s: BTreeMap<String, f64>,
    /// The most jobs waiting in the work queue, seen after publishing a round.
    pub queue_depth: usize,
    /// Results whose job had been delivered more than once (a worker died or was
    /// too slow to acknowledge it).
    pub redeliveries: usize,
    /// Results of a job already answered (a redelivered job finished twice), dropped.
    pub duplicates: usize,
    /// Jobs and results of an earlier learner of this run (before a restart), drained
    /// and dropped.
    pub stale_dropped: usize,
    /// Results refused because their records did not check, dropped.
    pub refused: usize,
    /// Jobs published again after their group did not come back in time.
    pub resent: usize,
    /// Bytes of the results taken (the encoded groups as they crossed the wire).
    pub result_bytes: usize,
}

impl ClusterStats {
    /// Writes the measurements into `row`.
    pub fn fill(&self, row: &mut MetricsRow) {
        row.worker_rollouts_per_s = Some(self.worker_rollouts_per_s.clone());
        row.queue_depth = Some(self.queue_depth);
        row.redeliveries = Some(self.redeliveries);
        row.duplicate_results = Some(self.duplicates);
        row.stale_dropped = Some(self.stale_dropped);
        row.refused_results = Some(self.refused);
        row.jobs_resent = Some(self.resent);
        row.result_bytes = Some(self.result_bytes);
    }
}

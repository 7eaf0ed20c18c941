//! What crosses the broker, and how.
//!
//! A [`Job`] is one group of one collection round: the run, the learner's
//! incarnation, the batch, round and group, the policy version, and each episode's
//! task, ids and seed. Its [`JobResult`] is the group's rollouts (token ids in and out,
//! behaviour log-probabilities, spans, rewards, nucleus keep sets, entropies) with the
//! worker's id, the delivery count and the seconds it took. Both are MessagePack
//! (`rmp-serde`, structs as arrays): floats as 8 raw bytes, integers in 1 to 9 bytes,
//! no field names. A [`VersionRecord`] (JSON in the key/value bucket) names a
//! version's weights object with its SHA-256, which a worker checks before it loads them.

use anyhow::{Context, Result};
use arlbook_core::agent::{EpisodeIds, Task};
use arlbook_train::policy::rollout::{EpisodeSpec, Rollout};
use arlbook_train::run::checkpoint::StoredRollout;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// One episode of a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireEpisode {
    /// The task.
    pub task: Task,
    /// Group id.
    pub group_id: u64,
    /// Sample id (its policy stream).
    pub sample_id: u64,
    /// The episode seed.
    pub seed: u64,
}

impl From<&EpisodeSpec> for WireEpisode {
    fn from(spec: &EpisodeSpec) -> Self {
        Self {
            task: spec.task.clone(),
            group_id: spec.ids.group_id,
            sample_id: spec.ids.sample_id,
            seed: spec.seed,
        }
    }
}

impl From<WireEpisode> for EpisodeSpec {
    fn from(episode: WireEpisode) -> Self {
        Self {
            task: episode.task,
            ids: EpisodeIds {
                group_id: episode.group_id,
                sample_id: episode.sample_id,
            },
            seed: episode.seed,
        }
    }
}

/// A rollout job: one group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// The run.
    pub run: String,
    /// The learner incarnation that published it (a restarted learner has a larger one).
    pub incarnation: u64,
    /// The batch (the GRPO step it will train).
    pub batch: u64,
    /// The dynamic-sampling round.
    pub round: u64,
    /// The group within the round.
    pub group: u64,
    /// The policy version whose weights run it.
    pub version: u64,
    /// The group's episodes.
    pub episodes: Vec<WireEpisode>,
}

/// A job's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobResult {
    /// The job's incarnation.
    pub incarnation: u64,
    /// The job's batch.
    pub batch: u64,
    /// The job's round.
    pub round: u64,
    /// The job's group.
    pub group: u64,
    /// The version that ran it.
    pub version: u64,
    /// The worker.
    pub worker: String,
    /// How many times the broker had delivered the job (1: the first time).
    pub delivered: u64,
    /// Seconds the worker spent on it.
    pub seconds: f64,
    /// The group's rollouts, in the order of the job's episodes.
    pub rollouts: Vec<StoredRollout>,
}

impl JobResult {
    /// The rollouts as the trainer holds them.
    pub fn into_rollouts(self) -> Vec<Rollout> {
        self.rollouts.into_iter().map(Rollout::from).collect()
    }
}

/// Where a policy version's weights are and what they hash to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionRecord {
    /// The learner incarnation.
    pub incarnation: u64,
    /// The policy version (GRPO steps completed).
    pub version: u64,
    /// The object holding the weights.
    pub object: String,
    /// SHA-256 of the object's bytes, lowercase hex.
    pub sha256: String,
    /// Its size in bytes.
    pub bytes: u64,
}

/// MessagePack of `value`.
pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    rmp_serde::to_vec(value).context("encoding a message")
}

/// `T` from MessagePack.
pub fn decode<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> Result<T> {
    rmp_serde::from_slice(bytes).context("decoding a message")
}

/// SHA-256 of `bytes`, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().fold(String::with_capacity(64), |mut hex, b| {
        use std::fmt::Write as _;
        let _ = write!(hex, "{b:02x}");
        hex
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_matches_the_standard_vector() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn a_job_round_trips() {
        let task = arlbook_core::agent::generate_task(arlbook_core::agent::Split::Train, 5);
        let job = Job {
            run: "r".into(),
            incarnation: 1,
            batch: 2,
            round: 0,
            group: 3,
            version: 2,
            episodes: vec![WireEpisode {
                task,
                group_id: 203,
                sample_id: 1,
                seed: 99,
            }],
        };
        let bytes = encode(&job).unwrap();
        assert_eq!(decode::<Job>(&bytes).unwrap(), job);
    }
}

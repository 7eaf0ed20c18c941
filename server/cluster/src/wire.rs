//! What crosses the broker, and how.
//!
//! A [`Job`] is one group of one collection round: the run, the learner's
//! incarnation, the batch, round and group, the policy version, and each episode's
//! task, ids and seed. Its [`JobResult`] is the group's rollouts (token ids in and out,
//! behaviour log-probabilities, spans, rewards, nucleus keep sets, entropies) with the
//! worker's id, the delivery count and the seconds it took. Both are MessagePack
//! (`rmp-serde`, structs as arrays): floats as 8 raw bytes, integers in 1 to 9 bytes,
//! no field names. A rollout crosses without the token ids its model calls repeat
//! (each call's context, generated and observation ids are slices of the episode's
//! `tokens`, so the context alone would send the episode once per call): the learner
//! cuts them out of `tokens` again along the spans and checks the record with
//! [`EpisodeRecord::check_consistency`] before it trains on it. A [`VersionRecord`] (JSON in the key/value bucket) names a
//! version's weights object with its SHA-256, which a worker checks before it loads them.

use anyhow::{Context, Result, anyhow};
use arlbook_core::agent::{EpisodeIds, EpisodeRecord, SpanRole, Task};
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
    /// The group's rollouts, in the order of the job's episodes, without the ids their
    /// calls repeat ([`compact`]).
    rollouts: Vec<StoredRollout>,
}

impl JobResult {
    /// The answer to `job`, its rollouts compacted for the wire.
    pub fn new(
        job: &Job,
        worker: &str,
        delivered: u64,
        seconds: f64,
        rollouts: &[Rollout],
    ) -> Self {
        Self {
            incarnation: job.incarnation,
            batch: job.batch,
            round: job.round,
            group: job.group,
            version: job.version,
            worker: worker.to_owned(),
            delivered,
            seconds,
            rollouts: rollouts
                .iter()
                .map(|r| {
                    let mut stored = StoredRollout::from(r);
                    compact(&mut stored.record);
                    stored
                })
                .collect(),
        }
    }

    /// How many rollouts it carries.
    pub fn len(&self) -> usize {
        self.rollouts.len()
    }

    /// Whether it carries none.
    pub fn is_empty(&self) -> bool {
        self.rollouts.is_empty()
    }

    /// The rollouts as the trainer holds them, each call's ids restored from the
    /// episode's tokens and the record checked; an error names the first rollout that
    /// does not check.
    pub fn into_rollouts(self) -> Result<Vec<Rollout>> {
        self.rollouts
            .into_iter()
            .enumerate()
            .map(|(i, mut stored)| {
                restore(&mut stored.record)
                    .and_then(|()| {
                        stored
                            .record
                            .check_consistency()
                            .map_err(|e| anyhow!("{e}"))
                    })
                    .with_context(|| format!("rollout {i} of the result"))?;
                Ok(Rollout::from(stored))
            })
            .collect()
    }
}

/// Drops from `record` the ids each call repeats from `record.tokens`.
pub fn compact(record: &mut EpisodeRecord) {
    for call in &mut record.calls {
        call.context_ids = Vec::new();
        call.generated_ids = Vec::new();
        call.observation_ids = Vec::new();
    }
}

/// Cuts each call's ids out of `record.tokens` again: call `k`'s generated ids are
/// the `k`-th action span, its context everything before it, and its observation the
/// observation span right after it (none after `finish`).
pub fn restore(record: &mut EpisodeRecord) -> Result<()> {
    let actions: Vec<usize> = (0..record.spans.len())
        .filter(|&i| record.spans[i].role == SpanRole::Action)
        .collect();
    if actions.len() != record.calls.len() {
        anyhow::bail!(
            "{} action spans for {} calls",
            actions.len(),
            record.calls.len()
        );
    }
    let tokens = &record.tokens;
    let slice = |start: usize, end: usize| {
        tokens
            .get(start..end)
            .map(<[u32]>::to_vec)
            .ok_or_else(|| anyhow!("span {start}..{end} outside {} tokens", tokens.len()))
    };
    for (call, &i) in record.calls.iter_mut().zip(&actions) {
        let span = record.spans[i];
        call.context_ids = slice(0, span.start)?;
        call.generated_ids = slice(span.start, span.end)?;
        call.observation_ids = match record.spans.get(i + 1) {
            Some(next) if next.role == SpanRole::Observation => slice(next.start, next.end)?,
            _ => Vec::new(),
        };
    }
    Ok(())
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

    /// Episodes of every ending: the teacher's (finish, with and without injected
    /// executor faults) and the uniform random policy's (malformed calls, budgets).
    fn episodes() -> Vec<EpisodeRecord> {
        use arlbook_core::agent::{HarnessConfig, Split, Teacher, UniformRandom, run_episode};
        let mut records = Vec::new();
        for seed in 0..6 {
            let task = arlbook_core::agent::generate_task(Split::Train, seed);
            let ids = EpisodeIds {
                group_id: seed,
                sample_id: 0,
            };
            let faulty = HarnessConfig {
                fault_probability: 0.5,
                ..HarnessConfig::default()
            };
            for harness in [HarnessConfig::default(), faulty] {
                records.push(run_episode(
                    &task,
                    &mut Teacher::new(&task),
                    &harness,
                    ids,
                    seed,
                ));
                records.push(run_episode(&task, &mut UniformRandom, &harness, ids, seed));
            }
        }
        records
    }

    #[test]
    fn a_result_crosses_without_repeated_ids_and_arrives_whole() {
        let records = episodes();
        let ends: std::collections::BTreeSet<_> = records
            .iter()
            .map(|r| format!("{:?}", r.end_reason))
            .collect();
        assert!(ends.len() >= 3, "too few kinds of ending: {ends:?}");
        let rollouts: Vec<Rollout> = records
            .iter()
            .map(|record| Rollout {
                record: record.clone(),
                keep: Vec::new(),
                entropy: vec![0.25; record.generated_tokens()],
            })
            .collect();
        let job = Job {
            run: "r".into(),
            incarnation: 0,
            batch: 1,
            round: 0,
            group: 2,
            version: 1,
            episodes: Vec::new(),
        };
        let result = JobResult::new(&job, "w", 1, 0.5, &rollouts);
        let compact = encode(&result).unwrap();
        let whole = encode(&rollouts.iter().map(StoredRollout::from).collect::<Vec<_>>()).unwrap();
        assert!(
            result
                .rollouts
                .iter()
                .flat_map(|r| &r.record.calls)
                .all(|c| {
                    c.context_ids.is_empty()
                        && c.generated_ids.is_empty()
                        && c.observation_ids.is_empty()
                })
        );
        assert!(
            compact.len() < whole.len(),
            "{} bytes compact against {} whole",
            compact.len(),
            whole.len()
        );
        let back = decode::<JobResult>(&compact)
            .unwrap()
            .into_rollouts()
            .unwrap();
        assert_eq!(back.len(), rollouts.len());
        for (got, sent) in back.iter().zip(&rollouts) {
            assert_eq!(got.record, sent.record);
            assert_eq!(got.entropy, sent.entropy);
        }
    }

    #[test]
    fn a_result_whose_spans_do_not_match_its_calls_is_refused() {
        let rollouts: Vec<Rollout> = episodes()
            .into_iter()
            .take(1)
            .map(|record| Rollout {
                entropy: vec![0.0; record.generated_tokens()],
                record,
                keep: Vec::new(),
            })
            .collect();
        let job = Job {
            run: "r".into(),
            incarnation: 0,
            batch: 0,
            round: 0,
            group: 0,
            version: 0,
            episodes: Vec::new(),
        };
        let mut result = JobResult::new(&job, "w", 1, 0.5, &rollouts);
        result.rollouts[0].record.spans.pop();
        let err = result.into_rollouts().unwrap_err();
        assert!(format!("{err:#}").contains("rollout 0"), "{err:#}");
    }
}

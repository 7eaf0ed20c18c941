//! The learner's side: GRPO's collection rounds handed to workers over JetStream.
//!
//! [`Learner::start`] prepares the run on the broker (streams, buckets, the workers'
//! consumer with `cluster.ack_wait_s` and `cluster.max_deliver`), takes the next
//! incarnation number, drains what an earlier learner of the run left (jobs and
//! results, counted as `stale_dropped` in the first row), stores the config and names
//! the run as the one workers follow. Then, as the trainer's [`RemoteRollouts`]:
//! - [`RemoteRollouts::publish`] puts a version's weights in the object store and its
//!   [`VersionRecord`] (object, SHA-256, size) in the bucket, under its own key and
//!   under `current`; versions older than the lag pipeline can use are deleted.
//! - [`RemoteRollouts::round`] publishes one [`Job`] per group, each with a message id
//!   made of its ids (a publish retried after a broker restart is not queued twice),
//!   and gathers the [`JobResult`]s: the first answer of each group is kept, a second
//!   one (a redelivered job that finished twice) is dropped and counted, results of an
//!   earlier incarnation are dropped and counted. Groups still missing after
//!   `cluster.resend_after_s` without any answer are published again under a new id.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use arlbook_train::config::{ClusterConfig, TrainConfig};
use arlbook_train::learner::grpo::remote::{ClusterStats, RemoteRollouts, RoundId};
use arlbook_train::policy::model::PolicyModel;
use arlbook_train::policy::rollout::{EpisodeSpec, Rollout};
use async_nats::jetstream::{self, consumer, kv, object_store, stream};
use burn::prelude::*;
use futures_util::StreamExt;

use crate::broker::{Broker, retry};
use crate::names::{self, RunNames};
use crate::wire::{self, Job, JobResult, VersionRecord, WireEpisode};

/// How long the learner waits without any result before saying so.
const WAITING_NOTE: Duration = Duration::from_secs(30);

/// How long one fetch of results waits for messages.
const FETCH_WAIT: Duration = Duration::from_millis(500);

/// The learner's connection to a run on the broker.
pub struct Learner {
    runtime: tokio::runtime::Runtime,
    names: RunNames,
    settings: ClusterConfig,
    /// Versions the lag pipeline may still collect with.
    keep_versions: u64,
    /// The run's streams, buckets and consumer, and this learner's incarnation.
    on: OnBroker,
    stats: ClusterStats,
    /// Per worker: rollouts and seconds since the last `take_stats`.
    work: BTreeMap<String, (usize, f64)>,
}

impl std::fmt::Debug for Learner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Learner")
            .field("run", &self.names.run)
            .field("incarnation", &self.on.incarnation)
            .finish_non_exhaustive()
    }
}

/// A work-queue stream with file storage and a two-minute duplicate window.
fn queue_stream(name: String, subject: String) -> stream::Config {
    stream::Config {
        name,
        subjects: vec![subject],
        retention: stream::RetentionPolicy::WorkQueue,
        storage: stream::StorageType::File,
        duplicate_window: Duration::from_secs(120),
        ..Default::default()
    }
}

/// The bucket `name`, created with file storage if it does not exist.
///
/// The bucket's stream is made here with the layout `create_key_value` gives it
/// (`KV_<name>`, subjects `$KV.<name>.>`, one value per key, roll-ups, direct gets):
/// that call first reads the account's JetStream limits in a form nats-server 2.9
/// (Debian's) does not send.
pub(crate) async fn bucket(js: &jetstream::Context, name: &str) -> Result<kv::Store> {
    if let Ok(store) = js.get_key_value(name).await {
        return Ok(store);
    }
    js.get_or_create_stream(stream::Config {
        name: format!("KV_{name}"),
        subjects: vec![format!("$KV.{name}.>")],
        max_messages_per_subject: 1,
        storage: stream::StorageType::File,
        allow_rollup: true,
        deny_delete: true,
        allow_direct: true,
        discard: stream::DiscardPolicy::New,
        num_replicas: 1,
        ..Default::default()
    })
    .await
    .with_context(|| format!("creating the bucket {name}"))?;
    js.get_key_value(name)
        .await
        .with_context(|| format!("opening the bucket {name}"))
}

impl Learner {
    /// Connects to `broker` and prepares run `run` of `config` (see the module docs).
    pub fn start(broker: &Broker, run: &str, config: &TrainConfig) -> Result<Self> {
        let names = RunNames::new(run)?;
        let runtime = crate::broker::client_runtime()?;
        let settings = config.cluster.clone();
        let keep_versions = config.grpo.max_policy_lag as u64 + 2;
        let (on, drained) = runtime.block_on(prepare(broker, &names, config))?;
        Ok(Self {
            runtime,
            names,
            settings,
            keep_versions,
            on,
            stats: ClusterStats {
                stale_dropped: drained,
                ..ClusterStats::default()
            },
            work: BTreeMap::new(),
        })
    }

    /// This learner's incarnation (0 for the run's first learner).
    pub fn incarnation(&self) -> u64 {
        self.on.incarnation
    }

    /// Publishes the job of `group` (attempt `attempt`) and waits for the broker's
    /// acknowledgement.
    async fn publish_job(&self, job: &Job, attempt: u64) -> Result<()> {
        let payload = bytes_of(wire::encode(job)?);
        let id = names::job_id(job.incarnation, job.batch, job.round, job.group, attempt);
        let subject = self.names.jobs_subject();
        retry("publishing a rollout job", || {
            let (payload, id, subject) = (payload.clone(), id.clone(), subject.clone());
            async move {
                let publish = jetstream::message::PublishMessage::build()
                    .payload(payload)
                    .message_id(id);
                let ack = self.on.js.send_publish(subject, publish).await?;
                ack.await?;
                Ok(())
            }
        })
        .await;
        Ok(())
    }

    async fn run_round(&mut self, round: RoundId, jobs: Vec<Job>) -> Result<Vec<Rollout>> {
        for job in &jobs {
            self.publish_job(job, 0).await?;
        }
        let depth = retry("reading the job queue's depth", || async {
            Ok(self.on.jobs.get_info().await?.state.messages)
        })
        .await;
        self.stats.queue_depth = self.stats.queue_depth.max(depth as usize);
        let mut slots: Vec<Option<Vec<Rollout>>> = vec![None; jobs.len()];
        let mut missing = jobs.len();
        let mut attempt = 0;
        let mut last_answer = Instant::now();
        let mut last_note = Instant::now();
        let resend_after = Duration::from_secs_f64(self.settings.resend_after_s);
        while missing > 0 {
            let messages = retry("fetching rollout results", || async {
                let batch = self
                    .on
                    .results
                    .fetch()
                    .max_messages(64)
                    .expires(FETCH_WAIT)
                    .messages()
                    .await?;
                let messages: Vec<_> = batch.collect().await;
                Ok(messages)
            })
            .await;
            for message in messages {
                let Ok(message) = message else { continue };
                let result: JobResult = match wire::decode(&message.payload) {
                    Ok(result) => result,
                    Err(e) => {
                        eprintln!("a result that does not decode was dropped: {e:#}");
                        let _ = message.ack().await;
                        continue;
                    }
                };
                if self.take_result(round, result, &mut slots) {
                    self.stats.result_bytes += message.payload.len();
                    missing -= 1;
                    last_answer = Instant::now();
                }
                // An ack lost to a broker restart makes the result come again: it is
                // then a duplicate, dropped and counted.
                let _ = message.ack().await;
            }
            if missing > 0
                && last_answer.elapsed() >= WAITING_NOTE
                && last_note.elapsed() >= WAITING_NOTE
            {
                eprintln!(
                    "waiting for rollout workers: {} of {} group(s) of batch {} round {} back \
                     (start some with `arlbook worker --nats URL`)",
                    jobs.len() - missing,
                    jobs.len(),
                    round.batch,
                    round.round
                );
                last_note = Instant::now();
            }
            if missing > 0 && last_answer.elapsed() >= resend_after {
                attempt += 1;
                for (job, slot) in jobs.iter().zip(&slots) {
                    if slot.is_none() {
                        self.publish_job(job, attempt).await?;
                        self.stats.resent += 1;
                    }
                }
                eprintln!(
                    "{missing} group(s) of batch {} round {} did not come back in {:.0} s: published again",
                    round.batch, round.round, self.settings.resend_after_s
                );
                last_answer = Instant::now();
            }
        }
        Ok(slots.into_iter().flatten().flatten().collect())
    }

    /// Files one result into `slots` (the groups of `round`); returns whether it
    /// filled an empty slot. Anything else is counted and dropped.
    fn take_result(
        &mut self,
        round: RoundId,
        result: JobResult,
        slots: &mut [Option<Vec<Rollout>>],
    ) -> bool {
        if result.incarnation != self.on.incarnation {
            self.stats.stale_dropped += 1;
            return false;
        }
        let ours = result.batch == round.batch as u64
            && result.round == round.round as u64
            && result.version == round.version as u64;
        let slot = usize::try_from(result.group)
            .ok()
            .filter(|_| ours)
            .and_then(|g| slots.get_mut(g));
        match slot {
            Some(slot) if slot.is_none() => {
                let (worker, delivered, seconds) =
                    (result.worker.clone(), result.delivered, result.seconds);
                let rollouts = match result.into_rollouts() {
                    Ok(rollouts) => rollouts,
                    Err(e) => {
                        // Left empty: the job is published again after
                        // `cluster.resend_after_s`.
                        eprintln!("learner: a result from worker {worker} is refused: {e:#}");
                        self.stats.refused += 1;
                        return false;
                    }
                };
                if delivered > 1 {
                    self.stats.redeliveries += 1;
                }
                let work = self.work.entry(worker).or_default();
                work.0 += rollouts.len();
                work.1 += seconds;
                *slot = Some(rollouts);
                true
            }
            _ => {
                self.stats.duplicates += 1;
                false
            }
        }
    }
}

/// A run on the broker as its learner holds it.
struct OnBroker {
    js: jetstream::Context,
    kv: kv::Store,
    weights: object_store::ObjectStore,
    jobs: stream::Stream,
    results: consumer::PullConsumer,
    incarnation: u64,
}

/// Sets the run up on the broker (see the module docs); returns it with the count of
/// jobs and results an earlier learner left, which it drained.
async fn prepare(
    broker: &Broker,
    names: &RunNames,
    config: &TrainConfig,
) -> Result<(OnBroker, usize)> {
    let client = broker
        .connect(&format!("arlbook-learner-{}", names.run))
        .await?;
    let js = jetstream::new(client);
    let jobs = js
        .get_or_create_stream(queue_stream(names.jobs_stream(), names.jobs_subject()))
        .await
        .with_context(|| format!("creating the stream {}", names.jobs_stream()))?;
    let results_stream = js
        .get_or_create_stream(queue_stream(
            names.results_stream(),
            names.results_subject(),
        ))
        .await
        .with_context(|| format!("creating the stream {}", names.results_stream()))?;
    let kv = bucket(&js, &names.bucket()).await?;
    let weights = match js.get_object_store(names.weights()).await {
        Ok(store) => store,
        Err(_) => js
            .create_object_store(object_store::Config {
                bucket: names.weights(),
                storage: stream::StorageType::File,
                ..Default::default()
            })
            .await
            .with_context(|| format!("creating the object store {}", names.weights()))?,
    };
    // The next incarnation; what an earlier one left is drained and counted.
    let incarnation = match kv.get(names::INCARNATION_KEY).await? {
        Some(bytes) => {
            std::str::from_utf8(&bytes)
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .ok_or_else(|| anyhow!("the bucket's learner key is not a number"))?
                + 1
        }
        None => 0,
    };
    let mut drained = 0;
    for stream in [&jobs, &results_stream] {
        drained += stream.purge().await?.purged as usize;
    }
    // The workers' consumer is made anew with this config's delivery settings.
    let _ = jobs.delete_consumer(names::WORKERS).await;
    jobs.create_consumer(consumer::pull::Config {
        durable_name: Some(names::WORKERS.to_owned()),
        ack_policy: consumer::AckPolicy::Explicit,
        ack_wait: Duration::from_secs_f64(config.cluster.ack_wait_s),
        max_deliver: config.cluster.max_deliver,
        ..Default::default()
    })
    .await
    .context("creating the workers' consumer")?;
    let results = results_stream
        .get_or_create_consumer(
            names::LEARNER,
            consumer::pull::Config {
                durable_name: Some(names::LEARNER.to_owned()),
                ack_policy: consumer::AckPolicy::Explicit,
                ack_wait: Duration::from_secs(60),
                ..Default::default()
            },
        )
        .await
        .context("creating the learner's consumer")?;
    kv.put(names::CONFIG_KEY, toml::to_string(config)?.into())
        .await?;
    kv.put(names::INCARNATION_KEY, incarnation.to_string().into())
        .await?;
    let runs = bucket(&js, names::RUNS_BUCKET).await?;
    runs.put(names::CURRENT_RUN, names.run.clone().into())
        .await?;
    let on = OnBroker {
        js,
        kv,
        weights,
        jobs,
        results,
        incarnation,
    };
    Ok((on, drained))
}

fn bytes_of(v: Vec<u8>) -> bytes::Bytes {
    bytes::Bytes::from(v)
}

/// The bytes of `model`'s weights as `arlbook` checkpoints hold them (`model.bpk`).
pub fn weight_bytes(model: &PolicyModel) -> Result<Vec<u8>> {
    let file = crate::WeightsFile::fresh()?;
    model
        .clone()
        .save_file(file.path())
        .map_err(|e| anyhow!("saving the weights: {e}"))?;
    Ok(std::fs::read(file.path())?)
}

impl RemoteRollouts for Learner {
    fn publish(&mut self, model: &PolicyModel, version: usize) -> Result<()> {
        let bytes = weight_bytes(model)?;
        let version = version as u64;
        let object = names::version_key(self.on.incarnation, version);
        let record = VersionRecord {
            incarnation: self.on.incarnation,
            version,
            object: object.clone(),
            sha256: wire::sha256_hex(&bytes),
            bytes: bytes.len() as u64,
        };
        let json = bytes_of(serde_json::to_vec(&record)?);
        let (weights, kv) = (&self.on.weights, &self.on.kv);
        self.runtime.block_on(async {
            retry("storing the weights", || async {
                weights.put(object.as_str(), &mut bytes.as_slice()).await?;
                Ok(())
            })
            .await;
            retry("storing the version record", || async {
                kv.put(object.as_str(), json.clone()).await?;
                kv.put(names::NEWEST_VERSION_KEY, json.clone()).await?;
                Ok(())
            })
            .await;
            if let Some(old) = version.checked_sub(self.keep_versions) {
                let _ = weights
                    .delete(names::version_key(self.on.incarnation, old))
                    .await;
            }
        });
        Ok(())
    }

    fn round(&mut self, round: RoundId, groups: &[&[EpisodeSpec]]) -> Result<Vec<Rollout>> {
        let jobs: Vec<Job> = groups
            .iter()
            .enumerate()
            .map(|(group, specs)| Job {
                run: self.names.run.clone(),
                incarnation: self.on.incarnation,
                batch: round.batch as u64,
                round: round.round as u64,
                group: group as u64,
                version: round.version as u64,
                episodes: specs.iter().map(WireEpisode::from).collect(),
            })
            .collect();
        let runtime = tokio::runtime::Handle::try_current();
        if runtime.is_ok() {
            anyhow::bail!("the learner's rounds must not run inside an async runtime");
        }
        let handle = self.runtime.handle().clone();
        handle.block_on(self.run_round(round, jobs))
    }

    fn take_stats(&mut self) -> ClusterStats {
        let mut stats = std::mem::take(&mut self.stats);
        stats.worker_rollouts_per_s = std::mem::take(&mut self.work)
            .into_iter()
            .map(|(worker, (rollouts, seconds))| (worker, rollouts as f64 / seconds.max(1e-9)))
            .collect();
        stats
    }
}

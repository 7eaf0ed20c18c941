//! The worker's side: `arlbook worker --nats URL`.
//!
//! A worker follows the run named under `current` in the bucket `arlbook_runs`, reads
//! its config from the run's bucket and takes rollout jobs one at a time from the
//! shared `workers` consumer. It watches three keys (key/value watches, so a change
//! reaches it as it happens, with no reads per job): the run to follow, and in the
//! run's bucket the learner's incarnation (`learner`) and the newest policy version's
//! record (`current`), whose weights it fetches as soon as they are announced, before
//! the jobs that need them arrive. For each job it:
//! 1. drops (acknowledges without running) a job of an earlier learner incarnation;
//! 2. makes sure it holds the job's policy version: takes the [`VersionRecord`] (the
//!    announced one, or for an older version the bucket's), fetches the object, and
//!    refuses weights whose SHA-256 differs from the record (the job goes back to the
//!    queue, the weights are not used);
//! 3. runs the group's episodes with [`roll_out`], sending progress acknowledgements
//!    every third of `cluster.ack_wait_s` so that a long job is not redelivered while
//!    it runs;
//! 4. publishes the [`JobResult`] (waiting for the broker's acknowledgement), then
//!    acknowledges the job.
//!
//! A worker killed anywhere in 3 or 4 leaves its job unacknowledged, and the broker
//! hands it to another worker after `ack_wait_s`; a result published twice is dropped
//! by the learner. Workers may join or leave at any time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use arlbook_train::config::TrainConfig;
use arlbook_train::policy::generate::roll_out;
use arlbook_train::policy::model::PolicyModel;
use arlbook_train::policy::rollout::EpisodeSpec;
use arlbook_train::policy::sampling::{policy_info, sampler};
use async_nats::jetstream::{self, AckKind, consumer, kv, object_store};
use burn::prelude::*;
use futures_util::StreamExt;
use tokio::io::AsyncReadExt;
use tokio::sync::watch;

use crate::WeightsFile;
use crate::broker::{Broker, retry};
use crate::learner::bucket;
use crate::names::{self, RunNames};
use crate::wire::{self, Job, JobResult, VersionRecord};

/// How a worker runs.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// The broker.
    pub broker: Broker,
    /// Its name in results and metrics.
    pub id: String,
    /// The device its rollouts run on.
    pub device: Device,
    /// Stop after this many jobs (for benchmarks); `None`: run until killed.
    pub max_jobs: Option<usize>,
    /// Milliseconds to hold each result before publishing it, its job kept alive:
    /// the fault tests' window for killing a worker in the middle of a job.
    pub hold_result_ms: u64,
}

/// One key of a key/value bucket as a watch last saw it (`None`: absent or deleted).
struct Following {
    latest: watch::Receiver<Option<bytes::Bytes>>,
    task: tokio::task::JoinHandle<()>,
}

impl Following {
    /// Starts watching `key` of `store`, its current value first.
    fn start(store: &kv::Store, key: &'static str) -> Self {
        let (send, latest) = watch::channel(None);
        let store = store.clone();
        let task = tokio::spawn(async move {
            let Ok(mut entries) = store.watch_with_history(key).await else {
                return;
            };
            loop {
                tokio::select! {
                    entry = entries.next() => match entry {
                        Some(Ok(entry)) => {
                            let value = (entry.operation == kv::Operation::Put)
                                .then_some(entry.value);
                            send.send_replace(value);
                        }
                        // Ended, or broken (the broker restarted under it): the
                        // caller sees `ended` and watches again.
                        Some(Err(_)) | None => return,
                    },
                    () = send.closed() => return,
                }
            }
        });
        Self { latest, task }
    }

    /// The value last seen.
    fn latest(&self) -> Option<bytes::Bytes> {
        self.latest.borrow().clone()
    }

    /// Whether the watch has ended (the bucket went away, or the connection for
    /// good): the caller watches again.
    fn ended(&self) -> bool {
        self.latest.has_changed().is_err()
    }
}

impl Drop for Following {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The run a worker is bound to.
struct Bound {
    names: RunNames,
    config: TrainConfig,
    kv: kv::Store,
    weights: object_store::ObjectStore,
    jobs: consumer::PullConsumer,
    /// For publishing results.
    js: jetstream::Context,
    /// The run's `learner` key: the incarnation of its current learner.
    learner: Following,
    /// The run's `current` key: the newest policy version's record.
    current: Following,
    /// The policy it holds: (incarnation, version), the model, and the file its
    /// weights are read from (burn reads a record's tensors when first used, so the
    /// file stays until the next version replaces it).
    policy: Option<((u64, u64), Arc<PolicyModel>, WeightsFile)>,
    /// The announced version whose weights it failed to take (not fetched again).
    refused: Option<(u64, u64)>,
}

impl Bound {
    /// The incarnation of the run's current learner, as last announced.
    fn learner_incarnation(&self) -> Option<u64> {
        let bytes = self.learner.latest()?;
        std::str::from_utf8(&bytes).ok()?.trim().parse().ok()
    }

    /// The newest version's record, as last announced.
    fn announced(&self) -> Option<VersionRecord> {
        serde_json::from_slice(&self.current.latest()?).ok()
    }
}

/// Runs a worker until it is killed (or has done `max_jobs`).
pub fn run(options: WorkerOptions) -> Result<()> {
    crate::broker::client_runtime()?.block_on(work(options))
}

async fn work(options: WorkerOptions) -> Result<()> {
    let client = options
        .broker
        .connect(&format!("arlbook-worker-{}", options.id))
        .await?;
    let js = jetstream::new(client);
    let runs = retry("opening the run list", || bucket(&js, names::RUNS_BUCKET)).await;
    let mut following = Following::start(&runs, names::CURRENT_RUN);
    let mut bound: Option<Bound> = None;
    let mut done = 0;
    let mut waiting_reported = false;
    while options.max_jobs.is_none_or(|most| done < most) {
        if following.ended() {
            following = Following::start(&runs, names::CURRENT_RUN);
        }
        let Some(current) = following
            .latest()
            .map(|run| String::from_utf8_lossy(&run).into_owned())
        else {
            if !waiting_reported {
                eprintln!("worker {}: waiting for a run", options.id);
                waiting_reported = true;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        if bound
            .as_ref()
            .is_none_or(|b| b.names.run != current || b.learner.ended() || b.current.ended())
        {
            match bind(&js, &current).await {
                Ok(b) => {
                    eprintln!("worker {}: following run {current}", options.id);
                    bound = Some(b);
                }
                Err(e) => {
                    eprintln!("worker {}: run {current} is not ready: {e:#}", options.id);
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    continue;
                }
            }
        }
        let Some(b) = bound.as_mut() else { continue };
        prefetch(&options, b).await;
        let fetched = async {
            let batch = b
                .jobs
                .fetch()
                .max_messages(1)
                .expires(Duration::from_secs(1))
                .messages()
                .await?;
            anyhow::Ok(batch.collect::<Vec<_>>().await)
        }
        .await;
        let Ok(messages) = fetched else {
            // The consumer was made anew by a restarted learner, or the broker is
            // restarting: bind again.
            bound = None;
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        for message in messages.into_iter().flatten() {
            if handle(&options, b, message).await? {
                done += 1;
            }
        }
    }
    Ok(())
}

/// Binds to run `run`: its config, bucket, weights and the workers' consumer.
async fn bind(js: &jetstream::Context, run: &str) -> Result<Bound> {
    let names = RunNames::new(run)?;
    let kv = js.get_key_value(names.bucket()).await?;
    let text = kv
        .get(names::CONFIG_KEY)
        .await?
        .ok_or_else(|| anyhow!("no config yet"))?;
    let config = TrainConfig::from_toml(std::str::from_utf8(&text)?)?;
    let weights = js.get_object_store(names.weights()).await?;
    let stream = js.get_stream(names.jobs_stream()).await?;
    let jobs: consumer::PullConsumer = stream
        .get_consumer(names::WORKERS)
        .await
        .map_err(|e| anyhow!("the workers' consumer: {e}"))?;
    Ok(Bound {
        learner: Following::start(&kv, names::INCARNATION_KEY),
        current: Following::start(&kv, names::NEWEST_VERSION_KEY),
        names,
        config,
        kv,
        weights,
        jobs,
        js: js.clone(),
        policy: None,
        refused: None,
    })
}

/// Takes the announced version's weights if the worker does not hold them yet, so
/// that its first job of a new version does not wait for them.
async fn prefetch(options: &WorkerOptions, b: &mut Bound) {
    let Some(record) = b.announced() else { return };
    let key = (record.incarnation, record.version);
    let held = b.policy.as_ref().map(|(held, _, _)| *held);
    let of_this_learner = b.learner_incarnation() == Some(record.incarnation);
    if held == Some(key) || b.refused == Some(key) || !of_this_learner {
        return;
    }
    if let Err(e) = policy(b, record.incarnation, record.version, &options.device).await {
        eprintln!("worker {}: {e:#}", options.id);
        b.refused = Some(key);
    }
}

/// Handles one delivered job; returns whether it ran it.
async fn handle(
    options: &WorkerOptions,
    b: &mut Bound,
    message: jetstream::Message,
) -> Result<bool> {
    let started = Instant::now();
    let delivered = message
        .info()
        .map_or(1, |info| info.delivered.max(1) as u64);
    let job: Job = match wire::decode(&message.payload) {
        Ok(job) => job,
        Err(e) => {
            eprintln!("worker {}: a job that does not decode: {e:#}", options.id);
            let _ = message.ack_with(AckKind::Term).await;
            return Ok(false);
        }
    };
    let learner = b.learner_incarnation();
    if job.run != b.names.run || learner.is_some_and(|now| job.incarnation < now) {
        // A job of a learner that has since restarted: drained.
        let _ = message.ack().await;
        return Ok(false);
    }
    let model = match policy(b, job.incarnation, job.version, &options.device).await {
        Ok(model) => model,
        Err(e) => {
            eprintln!("worker {}: {e:#}", options.id);
            let _ = message
                .ack_with(AckKind::Nak(Some(Duration::from_secs(1))))
                .await;
            return Ok(false);
        }
    };
    let message = Arc::new(message);
    let keep_alive = {
        let message = Arc::clone(&message);
        let every = Duration::from_secs_f64(b.config.cluster.ack_wait_s / 3.0);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let _ = message.ack_with(AckKind::Progress).await;
            }
        })
    };
    let (config, device) = (b.config.clone(), options.device.clone());
    let version = job.version;
    let specs: Vec<EpisodeSpec> = job
        .episodes
        .iter()
        .cloned()
        .map(EpisodeSpec::from)
        .collect();
    let rolled = tokio::task::spawn_blocking(move || {
        let info = policy_info(&config, format!("grpo-{version}"));
        roll_out(
            &model,
            &device,
            &specs,
            &config.harness,
            &sampler(&config),
            &info,
        )
    })
    .await;
    let rollouts = match rolled.context("a rollout thread panicked").and_then(|r| r) {
        Ok(rollouts) => rollouts,
        Err(e) => {
            keep_alive.abort();
            let _ = message.ack_with(AckKind::Nak(None)).await;
            return Err(e.context(format!("running job {}", job_name(&job))));
        }
    };
    if options.hold_result_ms > 0 {
        eprintln!(
            "worker {}: holding the result of {}",
            options.id,
            job_name(&job)
        );
        tokio::time::sleep(Duration::from_millis(options.hold_result_ms)).await;
    }
    let result = JobResult::new(
        &job,
        &options.id,
        delivered,
        started.elapsed().as_secs_f64(),
        &rollouts,
    );
    let payload = bytes::Bytes::from(wire::encode(&result)?);
    let subject = b.names.results_subject();
    retry("publishing a result", || {
        let (payload, subject) = (payload.clone(), subject.clone());
        let js = b.js.clone();
        async move {
            js.publish(subject, payload).await?.await?;
            Ok(())
        }
    })
    .await;
    keep_alive.abort();
    // A job whose ack is lost runs again elsewhere; its second result is dropped.
    let _ = message.double_ack().await;
    eprintln!(
        "worker {}: {} (delivery {delivered}) in {:.2} s",
        options.id,
        job_name(&job),
        started.elapsed().as_secs_f64()
    );
    Ok(true)
}

/// `batch B round R group G version V`.
fn job_name(job: &Job) -> String {
    format!(
        "batch {} round {} group {} version {}",
        job.batch, job.round, job.group, job.version
    )
}

/// The model of version `version` of incarnation `incarnation`: the one held, or
/// fetched, checked against its record's hash, and loaded.
async fn policy(
    b: &mut Bound,
    incarnation: u64,
    version: u64,
    device: &Device,
) -> Result<Arc<PolicyModel>> {
    if let Some((held, model, _)) = &b.policy
        && *held == (incarnation, version)
    {
        return Ok(Arc::clone(model));
    }
    let announced = b
        .announced()
        .filter(|r| (r.incarnation, r.version) == (incarnation, version));
    let record = match announced {
        Some(record) => record,
        None => {
            let key = names::version_key(incarnation, version);
            let record =
                b.kv.get(key.as_str())
                    .await?
                    .ok_or_else(|| anyhow!("no record of policy version {version} yet"))?;
            serde_json::from_slice::<VersionRecord>(&record)?
        }
    };
    let mut object = b.weights.get(record.object.as_str()).await?;
    let mut bytes = Vec::with_capacity(record.bytes as usize);
    object.read_to_end(&mut bytes).await?;
    let hash = wire::sha256_hex(&bytes);
    if hash != record.sha256 {
        bail!(
            "refusing the weights of version {version}: their SHA-256 is {hash}, the record says {}",
            record.sha256
        );
    }
    let file = WeightsFile::write(&bytes)?;
    let model = Arc::new(arlbook_train::run::trainer::load_model(
        &b.config,
        &file.path(),
        device,
    )?);
    b.policy = Some(((incarnation, version), Arc::clone(&model), file));
    Ok(model)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::learner::Learner;
    use arlbook_tests::nats::NatsServer;
    use arlbook_tests::scratch::Scratch;
    use arlbook_train::config::ModelConfig;
    use arlbook_train::learner::grpo::remote::RemoteRollouts;

    fn test_runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// A learner and a worker reach the run on a broker that wants credentials
    /// (`with`), and a client without them (`without`) is served nothing.
    fn served_only_with_credentials(run: &str, with: &Broker, without: &Broker) {
        let learner = Learner::start(with, run, &TrainConfig::default()).unwrap();
        assert_eq!(learner.incarnation(), 0);
        test_runtime().block_on(async {
            let js = jetstream::new(with.connect("test").await.unwrap());
            let bound = bind(&js, run).await.unwrap();
            assert_eq!(bound.config, TrainConfig::default());
            let js = jetstream::new(without.connect("intruder").await.unwrap());
            let refused = tokio::time::timeout(Duration::from_secs(3), bind(&js, run)).await;
            assert!(!matches!(refused, Ok(Ok(_))), "served without credentials");
        });
    }

    #[test]
    fn a_broker_that_wants_a_token_serves_a_learner_and_a_worker_that_have_it() {
        let dir = Scratch::new("token");
        let nats = NatsServer::start_with_token(&dir.join("js"), "s3cret-token");
        let with = Broker {
            url: nats.url(),
            token: Some("s3cret-token".into()),
            nkey_file: None,
        };
        let without = Broker {
            token: None,
            ..with.clone()
        };
        served_only_with_credentials("token", &with, &without);
    }

    #[test]
    fn a_broker_that_wants_an_nkey_serves_a_learner_and_a_worker_that_sign_with_it() {
        let dir = Scratch::new("nkey");
        let user = nkeys::KeyPair::new_user();
        let nats = NatsServer::start_with_nkey(&dir.join("js"), &user.public_key());
        let seed_file = dir.join("user.nk");
        std::fs::write(&seed_file, format!("{}\n", user.seed().unwrap())).unwrap();
        let with = Broker {
            url: nats.url(),
            token: None,
            nkey_file: Some(seed_file),
        };
        // Another user's key is refused as no key is.
        let stranger = dir.join("stranger.nk");
        std::fs::write(&stranger, nkeys::KeyPair::new_user().seed().unwrap()).unwrap();
        let other = Broker {
            nkey_file: Some(stranger),
            ..with.clone()
        };
        served_only_with_credentials("nkey", &with, &other);
        let none = Broker {
            nkey_file: None,
            ..with.clone()
        };
        test_runtime().block_on(async {
            let js = jetstream::new(none.connect("intruder").await.unwrap());
            let refused = tokio::time::timeout(Duration::from_secs(3), bind(&js, "nkey")).await;
            assert!(!matches!(refused, Ok(Ok(_))), "served without a key");
        });
    }

    #[test]
    fn weights_whose_hash_differs_from_their_record_are_refused() {
        let dir = Scratch::new("hash");
        let nats = NatsServer::start(&dir.join("js"));
        let broker = Broker {
            url: nats.url(),
            ..Broker::default()
        };
        let config = TrainConfig {
            model: ModelConfig {
                layers: 1,
                width: 16,
                heads: 2,
                context: 640,
                ..ModelConfig::default()
            },
            ..TrainConfig::default()
        };
        let device = Device::flex();
        let model = PolicyModel::new(&config.model, arlbook_train::run::trainer::vocab(), &device);
        let mut learner = Learner::start(&broker, "hash", &config).unwrap();
        learner.publish(&model, 0).unwrap();
        test_runtime().block_on(async {
            let js = jetstream::new(broker.connect("test").await.unwrap());
            let mut bound = bind(&js, "hash").await.unwrap();
            assert!(policy(&mut bound, 0, 0, &device).await.is_ok());
            // The object replaced behind the record's back.
            let store = js
                .get_object_store(RunNames::new("hash").unwrap().weights())
                .await
                .unwrap();
            let forged = b"not the weights the learner published".to_vec();
            store.put("v_0_0", &mut forged.as_slice()).await.unwrap();
            bound.policy = None;
            let err = policy(&mut bound, 0, 0, &device).await.unwrap_err();
            assert!(format!("{err}").contains("refusing"), "{err}");
            assert!(bound.policy.is_none());
        });
    }
}

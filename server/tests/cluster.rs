//! Past one machine, through the real binary and a real `nats-server` with JetStream
//! on loopback: a learner (`arlbook train --nats`) and worker processes
//! (`arlbook worker`) write the metrics rows an in-process run writes (tokens and
//! counts exactly, losses to rounding), with one or two workers, a worker killed with
//! SIGKILL in the middle of a job, the learner killed and resumed, the broker
//! restarted during the run, a worker that joins late, and all three faults at
//! moments drawn at random (the seed is printed; `ARLBOOK_CHAOS_SEED` replays one).

#![allow(clippy::unwrap_used, reason = "test helpers outside #[test] functions")]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use arlbook_tests::nats::NatsServer;
use arlbook_tests::scratch::Scratch;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_arlbook");

/// A tiny run whose GRPO moves the weights every step (the entropy bonus gives a
/// gradient even when every reward is equal), so a worker on the wrong version would
/// sample other tokens.
const CONFIG: &str = r#"
seed = 5
backend = "cpu"
checkpoint_every = 2

[model]
layers = 1
width = 16
heads = 2
context = 400

[harness]
max_turns = 6
max_context_tokens = 400
max_new_tokens = 24

[sft]
steps = 4
batch_episodes = 4
tasks = 24
learning_rate = 1e-2
warmup_steps = 1

[grpo]
steps = 6
tasks_per_batch = 2
group_size = 3
microbatch_rows = 4
dynamic_sampling = false
learning_rate = 1e-2
entropy_coef = 0.05

[validation]
every_steps = 3
tasks = 2

[cluster]
ack_wait_s = 2
resend_after_s = 60
"#;

/// Fields that measure time or the cluster itself: they differ between runs.
const UNCOMPARED: [&str; 12] = [
    "wall_s",
    "collect_s",
    "step_s",
    "tokens_per_s",
    "worker_rollouts_per_s",
    "queue_depth",
    "redeliveries",
    "duplicate_results",
    "stale_dropped",
    "refused_results",
    "jobs_resent",
    "result_bytes",
];

/// The test's folder with the config; removed when the test passes.
fn scratch(name: &str) -> Scratch {
    let dir = Scratch::new(&format!("cluster-{name}"));
    std::fs::write(dir.join("config.toml"), CONFIG).unwrap();
    dir
}

fn rows(out: &Path) -> Vec<Value> {
    std::fs::read_to_string(out.join("metrics.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The rows of the same config trained in process.
fn in_process(dir: &Path) -> Vec<Value> {
    let out = dir.join("local");
    let status = Command::new(BIN)
        .args(["train", "--config"])
        .arg(dir.join("config.toml"))
        .arg("--out")
        .arg(&out)
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    rows(&out)
}

fn learner(dir: &Path, name: &str, url: &str, resume: bool) -> Child {
    let out = dir.join(name);
    let mut command = Command::new(BIN);
    command.arg("train");
    if resume {
        command.arg("--resume");
    } else {
        command.arg("--config").arg(dir.join("config.toml"));
    }
    command
        .arg("--out")
        .arg(&out)
        .args(["--nats", url])
        // Weights folders go into the test's folder, so a killed process leaves none
        // behind in the system's.
        .env("TMPDIR", dir)
        .stdout(Stdio::null())
        .stderr(log(dir, &format!("{name}-learner{}", u8::from(resume))))
        .spawn()
        .unwrap()
}

/// A worker process, killed (SIGKILL) and reaped when dropped.
struct Worker(Child);

impl Worker {
    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.kill();
    }
}

fn worker(dir: &Path, id: &str, url: &str, hold_ms: u64) -> Worker {
    let child = Command::new(BIN)
        .args(["worker", "--nats", url, "--id", id, "--backend", "cpu"])
        .args(["--hold-result-ms", &hold_ms.to_string()])
        .env("TMPDIR", dir)
        .stdout(Stdio::null())
        .stderr(log(dir, id))
        .spawn()
        .unwrap();
    Worker(child)
}

fn log(dir: &Path, name: &str) -> std::fs::File {
    std::fs::File::create(dir.join(format!("{name}.log"))).unwrap()
}

fn read_log(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap_or_default()
}

/// Waits until `done` holds (at most 120 s).
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for the learner to exit successfully (at most 180 s).
fn finish(mut child: Child, dir: &Path, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(
                status.success(),
                "the learner failed:\n{}",
                read_log(dir, &format!("{name}-learner0"))
                    + &read_log(dir, &format!("{name}-learner1"))
            );
            return;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the learner did not finish");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn grpo_rows(out: &Path) -> usize {
    rows(out).iter().filter(|r| r["stage"] == "grpo").count()
}

fn close(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            (x - y).abs() <= 1e-6 * x.abs().max(y.abs()).max(1e-3)
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| close(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| close(v, w)))
        }
        _ => a == b,
    }
}

/// Every row equal to the in-process run's, but for time and cluster measurements;
/// integers and strings exactly, floats within 1e-6 relative.
fn assert_same_rows(expected: &[Value], got: &[Value]) {
    assert_eq!(expected.len(), got.len(), "row counts differ");
    let mut tokens = 0;
    for (e, g) in expected.iter().zip(got) {
        let strip = |row: &Value| {
            let mut row = row.as_object().unwrap().clone();
            for key in UNCOMPARED {
                row.remove(key);
            }
            Value::Object(row)
        };
        let (e, g) = (strip(e), strip(g));
        assert!(close(&e, &g), "rows differ:\n{e}\n{g}");
        tokens += g["generated_tokens"].as_u64().unwrap_or(0);
    }
    assert!(tokens > 0, "no GRPO tokens compared");
}

fn sum(rows: &[Value], key: &str) -> u64 {
    rows.iter().filter_map(|r| r[key].as_u64()).sum()
}

fn workers_seen(rows: &[Value]) -> Vec<String> {
    let mut seen: Vec<String> = rows
        .iter()
        .filter_map(|r| r["worker_rollouts_per_s"].as_object())
        .flat_map(|m| m.keys().cloned())
        .collect();
    seen.sort();
    seen.dedup();
    seen
}

#[test]
fn one_or_two_workers_write_the_rows_of_an_in_process_run() {
    let dir = scratch("same");
    let expected = in_process(&dir);
    // The entropy bonus moves the weights: the versions differ.
    assert!(
        expected
            .iter()
            .any(|r| r["loss"].as_f64().is_some_and(|l| l != 0.0))
    );
    let nats = NatsServer::start(&dir.join("js"));
    let url = nats.url();
    let one = worker(&dir, "solo", &url, 0);
    finish(learner(&dir, "one", &url, false), &dir, "one");
    drop(one);
    let got = rows(&dir.join("one"));
    assert_same_rows(&expected, &got);
    assert_eq!(workers_seen(&got), ["solo"]);
    // Two workers, each holding its result a little so that both take jobs.
    let (a, b) = (worker(&dir, "a", &url, 150), worker(&dir, "b", &url, 150));
    finish(learner(&dir, "two", &url, false), &dir, "two");
    drop((a, b));
    let got = rows(&dir.join("two"));
    assert_same_rows(&expected, &got);
    assert_eq!(workers_seen(&got), ["a", "b"]);
    assert_eq!(
        sum(&got, "redeliveries") + sum(&got, "duplicate_results"),
        0
    );
    // Every record the honest workers sent checked, and the rows say so.
    assert!(got.iter().any(|r| r["refused_results"].is_u64()));
    assert_eq!(sum(&got, "refused_results"), 0);
}

#[test]
fn a_worker_killed_in_the_middle_of_a_job_loses_no_group() {
    let dir = scratch("worker-kill");
    let expected = in_process(&dir);
    let nats = NatsServer::start(&dir.join("js"));
    let url = nats.url();
    // This worker takes a job and holds its result until it is killed.
    let mut doomed = worker(&dir, "doomed", &url, 600_000);
    let run = learner(&dir, "run", &url, false);
    wait_until("the doomed worker to hold a result", || {
        read_log(&dir, "doomed").contains("holding the result")
    });
    let survivor = worker(&dir, "survivor", &url, 0);
    doomed.kill(); // SIGKILL on Unix
    finish(run, &dir, "run");
    drop(survivor);
    let got = rows(&dir.join("run"));
    assert_same_rows(&expected, &got);
    assert!(sum(&got, "redeliveries") >= 1, "no redelivery counted");
    assert_eq!(sum(&got, "duplicate_results"), 0);
}

#[test]
fn a_learner_killed_and_resumed_drains_the_old_jobs() {
    let dir = scratch("learner-kill");
    let expected = in_process(&dir);
    let nats = NatsServer::start(&dir.join("js"));
    let url = nats.url();
    let w = worker(&dir, "w", &url, 200);
    let mut first = learner(&dir, "run", &url, false);
    let out = dir.join("run");
    // Killed while a job of GRPO step 4 is out (after step 2's checkpoint).
    wait_until("a job of batch 3", || {
        read_log(&dir, "w").contains("holding the result of batch 3")
    });
    first.kill().unwrap();
    let _ = first.wait();
    assert!(grpo_rows(&out) < 6);
    finish(learner(&dir, "run", &url, true), &dir, "run");
    drop(w);
    let got = rows(&out);
    assert_same_rows(&expected, &got);
    assert!(
        read_log(&dir, "run-learner1").contains("incarnation 1"),
        "{}",
        read_log(&dir, "run-learner1")
    );
    assert!(
        sum(&got, "stale_dropped") >= 1,
        "nothing of the old learner was drained"
    );
}

#[test]
fn a_broker_restarted_during_a_run_loses_nothing() {
    let dir = scratch("broker-restart");
    let expected = in_process(&dir);
    let mut nats = NatsServer::start(&dir.join("js"));
    let url = nats.url();
    let w = worker(&dir, "w", &url, 100);
    let run = learner(&dir, "run", &url, false);
    let out = dir.join("run");
    wait_until("GRPO step 2", || grpo_rows(&out) >= 2);
    nats.restart(Duration::from_millis(800));
    finish(run, &dir, "run");
    drop(w);
    assert_same_rows(&expected, &rows(&out));
}

#[test]
fn a_worker_that_joins_late_trains_on_the_current_weights() {
    let dir = scratch("late");
    let expected = in_process(&dir);
    let nats = NatsServer::start(&dir.join("js"));
    let url = nats.url();
    let early = worker(&dir, "early", &url, 150);
    let run = learner(&dir, "run", &url, false);
    let out = dir.join("run");
    wait_until("GRPO step 2", || grpo_rows(&out) >= 2);
    let late = worker(&dir, "late", &url, 150);
    finish(run, &dir, "run");
    drop((early, late));
    let got = rows(&out);
    assert_same_rows(&expected, &got);
    let late_rows: Vec<Value> = got.iter().skip_while(|r| r["step"] != 3).cloned().collect();
    assert!(
        workers_seen(&late_rows).contains(&"late".to_owned()),
        "the late worker took no job: {}",
        read_log(&dir, "late")
    );
}

/// A uniform draw in `[0, 1)` from a splitmix64 state.
fn uniform(state: &mut u64) -> f64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// Sleeps until `at` seconds after `start`.
fn sleep_until(start: Instant, at: f64) {
    let target = start + Duration::from_secs_f64(at);
    if let Some(left) = target.checked_duration_since(Instant::now()) {
        std::thread::sleep(left);
    }
}

#[test]
fn a_worker_the_learner_and_the_broker_killed_at_random_moments_lose_nothing() {
    let seed = std::env::var("ARLBOOK_CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    let dir = scratch("chaos");
    let expected = in_process(&dir);
    let mut nats = NatsServer::start(&dir.join("js"));
    let url = nats.url();
    // An undisturbed cluster run first: its length is the span the moments are drawn
    // from, so that each lands somewhere inside the run (in SFT, a checkpoint, a
    // publication of weights, a round of jobs).
    let calm = (
        worker(&dir, "calm-a", &url, 50),
        worker(&dir, "calm-b", &url, 50),
    );
    let started = Instant::now();
    finish(learner(&dir, "calm", &url, false), &dir, "calm");
    let seconds = started.elapsed().as_secs_f64();
    drop(calm);
    assert_same_rows(&expected, &rows(&dir.join("calm")));
    let mut state = seed;
    let kill_worker_at = seconds * (0.05 + 0.55 * uniform(&mut state));
    let kill_learner_at = kill_worker_at + seconds * (0.05 + 0.45 * uniform(&mut state));
    let restart_broker_at = seconds * 0.8 * uniform(&mut state);
    eprintln!(
        "chaos seed {seed} (ARLBOOK_CHAOS_SEED={seed} replays it): a worker killed at \
         {kill_worker_at:.2} s, the learner at {kill_learner_at:.2} s, the broker restarted \
         {restart_broker_at:.2} s into the resumed run (an undisturbed run took {seconds:.2} s)"
    );
    let out = dir.join("run");
    let mut a = worker(&dir, "a", &url, 50);
    let b = worker(&dir, "b", &url, 50);
    let start = Instant::now();
    let mut first = learner(&dir, "run", &url, false);
    sleep_until(start, kill_worker_at);
    a.kill();
    let c = worker(&dir, "c", &url, 50);
    sleep_until(start, kill_learner_at);
    let killed = first.try_wait().unwrap().is_none();
    let _ = first.kill();
    let _ = first.wait();
    let rows_at_kill = rows(&out).len();
    // A learner killed before its first checkpoint starts over; any other resumes.
    let resume = out.join("checkpoints").join("latest").is_file();
    let second = learner(&dir, "run", &url, resume);
    let resumed = Instant::now();
    sleep_until(resumed, restart_broker_at);
    nats.restart(Duration::from_millis(500));
    finish(second, &dir, "run");
    drop((b, c));
    let got = rows(&out);
    eprintln!(
        "chaos seed {seed}: the learner was {} with {rows_at_kill} rows written; {} \
         redeliveries, {} duplicates, {} stale dropped",
        if killed { "killed" } else { "already done" },
        sum(&got, "redeliveries"),
        sum(&got, "duplicate_results"),
        sum(&got, "stale_dropped")
    );
    assert_same_rows(&expected, &got);
}

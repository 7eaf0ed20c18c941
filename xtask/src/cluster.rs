//! `cargo xtask cluster --workers N [--store DIR] -- TRAIN-ARGS`: a whole cluster on
//! one machine. Starts `nats-server` with JetStream on a free loopback port (storage in
//! `--store`, default `runs/nats`, kept so that a stopped run can be resumed), `N`
//! `arlbook worker`s (logs in the store folder) and the learner, `arlbook train
//! TRAIN-ARGS --nats URL`, in the foreground; when the learner exits, the workers and
//! the broker are stopped with it. Ctrl-C reaches all of them (one process group).

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::cmd::{cargo, run, workspace_root};

/// What `cluster` was asked for.
#[derive(Debug, PartialEq)]
struct Options {
    workers: usize,
    store: PathBuf,
    train: Vec<String>,
}

impl Options {
    fn parse(args: &[String]) -> anyhow::Result<Self> {
        let (ours, train) = match args.iter().position(|a| a == "--") {
            Some(split) => (&args[..split], args[split + 1..].to_vec()),
            None => (args, Vec::new()),
        };
        let mut options = Self {
            workers: 2,
            store: PathBuf::from("runs/nats"),
            train,
        };
        let mut it = ours.iter();
        while let Some(flag) = it.next() {
            let value = it
                .next()
                .with_context(|| format!("cluster: {flag} needs a value"))?;
            match flag.as_str() {
                "--workers" => {
                    options.workers = value
                        .parse()
                        .ok()
                        .filter(|n| (1..=64).contains(n))
                        .with_context(|| format!("--workers {value}: a number in 1..=64"))?;
                }
                "--store" => options.store = PathBuf::from(value),
                other => bail!("cluster: unknown option {other} (train's options go after --)"),
            }
        }
        if options.train.iter().any(|a| a == "--nats") {
            bail!("cluster: the broker is started here; drop --nats from train's options");
        }
        Ok(options)
    }
}

/// A child process stopped (SIGKILL) and reaped when dropped.
pub(crate) struct Stopped(pub(crate) Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn nats_program() -> PathBuf {
    std::env::var_os("ARLBOOK_NATS_SERVER").map_or_else(
        || {
            let sbin = PathBuf::from("/usr/sbin/nats-server");
            if crate::cmd::has_program("nats-server") || !sbin.is_file() {
                PathBuf::from("nats-server")
            } else {
                sbin
            }
        },
        PathBuf::from,
    )
}

/// Starts `nats-server -js` on a free loopback port storing under `store` (its log
/// there too); returns it with its URL once it listens.
pub(crate) fn start_broker(store: &std::path::Path) -> anyhow::Result<(Stopped, String)> {
    std::fs::create_dir_all(store).with_context(|| format!("creating {}", store.display()))?;
    let port = free_port()?;
    let log = store.join("nats-server.log");
    let broker = Stopped(
        Command::new(nats_program())
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(store)
            .stdin(Stdio::null())
            .stderr(
                std::fs::File::create(&log)
                    .with_context(|| format!("creating {}", log.display()))?,
            )
            .spawn()
            .context("starting nats-server")?,
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            bail!("nats-server did not start; see {}", log.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok((broker, format!("nats://127.0.0.1:{port}")))
}

/// Runs `cargo xtask cluster`.
pub fn run_cluster(args: &[String]) -> anyhow::Result<()> {
    let options = Options::parse(args)?;
    crate::test::ensure_nats_server()?;
    run(cargo().args(["build", "-p", "arlbook-server"]))?;
    let binary = workspace_root().join("target/debug/arlbook");
    let (_broker, url) = start_broker(&options.store)?;
    let log = |name: &str| -> anyhow::Result<std::fs::File> {
        let path = options.store.join(format!("{name}.log"));
        std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))
    };
    eprintln!(
        "xtask: broker at {url} (storage {st}; restarted by hand: nats-server -js -a 127.0.0.1 -p {port} -sd {st}); {} worker(s), logs in {st}",
        options.workers,
        st = options.store.display(),
        port = url.rsplit(':').next().unwrap_or_default(),
    );
    let mut workers = Vec::new();
    for i in 0..options.workers {
        let id = format!("worker-{i}");
        workers.push(Stopped(
            Command::new(&binary)
                .args(["worker", "--nats", &url, "--id", &id])
                .stdin(Stdio::null())
                .stderr(log(&id)?)
                .spawn()
                .context("starting a worker")?,
        ));
    }
    let status: ExitStatus = Command::new(&binary)
        .arg("train")
        .args(&options.train)
        .args(["--nats", &url])
        .status()
        .context("starting the learner")?;
    drop(workers);
    if !status.success() {
        bail!("the learner failed ({status})");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn options_split_at_the_double_dash() {
        let options = Options::parse(&strings(&[
            "--workers",
            "3",
            "--",
            "--config",
            "c.toml",
            "--out",
            "o",
        ]))
        .unwrap();
        assert_eq!(options.workers, 3);
        assert_eq!(options.store, PathBuf::from("runs/nats"));
        assert_eq!(
            options.train,
            strings(&["--config", "c.toml", "--out", "o"])
        );
        assert!(Options::parse(&strings(&["--workers", "0"])).is_err());
        assert!(Options::parse(&strings(&["--bogus", "1"])).is_err());
        assert!(Options::parse(&strings(&["--", "--nats", "x"])).is_err());
    }
}

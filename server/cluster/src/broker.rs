//! Reaching the broker: where it is, with what credentials, and the rule that keeps
//! a run off an open network by accident.
//!
//! A broker on loopback (`localhost`, `127.0.0.0/8`, `::1`) may be used without
//! credentials. Anywhere else a token (`ARLBOOK_NATS_TOKEN`) or an nkey seed file
//! (`--nats-nkey FILE`) is required, and a connection without one is refused before
//! it is made. The client reconnects by itself after the broker restarts; every
//! request the learner and the workers make is retried until it goes through.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};

/// The environment variable holding a broker token.
pub const TOKEN_VAR: &str = "ARLBOOK_NATS_TOKEN";

/// Where the broker is and how to authenticate.
#[derive(Debug, Clone, Default)]
pub struct Broker {
    /// `nats://host:port` (or `host:port`).
    pub url: String,
    /// A token, from [`TOKEN_VAR`].
    pub token: Option<String>,
    /// A file holding an nkey seed (`SU...`).
    pub nkey_file: Option<PathBuf>,
}

impl Broker {
    /// The broker at `url`, with the token of [`TOKEN_VAR`] if it is set.
    pub fn from_env(url: &str, nkey_file: Option<PathBuf>) -> Self {
        Self {
            url: url.to_owned(),
            token: std::env::var(TOKEN_VAR).ok().filter(|t| !t.is_empty()),
            nkey_file,
        }
    }

    /// The host part of the URL.
    fn host(&self) -> Result<String> {
        let rest = self
            .url
            .split_once("://")
            .map_or(self.url.as_str(), |(_, rest)| rest);
        let rest = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
        let host = if let Some(inner) = rest.strip_prefix('[') {
            inner.split_once(']').map(|(h, _)| h).unwrap_or_default()
        } else {
            rest.split(':').next().unwrap_or_default()
        };
        if host.is_empty() {
            bail!("--nats {:?}: no host in the URL", self.url);
        }
        Ok(host.to_owned())
    }

    /// Whether the URL names this machine.
    pub fn on_loopback(&self) -> Result<bool> {
        let host = self.host()?;
        Ok(host.eq_ignore_ascii_case("localhost")
            || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback()))
    }

    /// Checks the credentials rule without connecting.
    pub fn check(&self) -> Result<()> {
        if self.url.contains('@') {
            bail!("--nats: put no credentials in the URL; use {TOKEN_VAR} or --nats-nkey FILE");
        }
        if !self.on_loopback()? && self.token.is_none() && self.nkey_file.is_none() {
            bail!(
                "--nats {}: a broker off loopback needs credentials: set {TOKEN_VAR} or pass --nats-nkey FILE",
                self.url
            );
        }
        Ok(())
    }

    /// Connects as `name` (shown in the broker's connection list).
    pub async fn connect(&self, name: &str) -> Result<async_nats::Client> {
        self.check()?;
        let (who, url) = (name.to_owned(), self.url.clone());
        let mut options = async_nats::ConnectOptions::new()
            .name(name)
            .event_callback(move |event| {
                let (who, url) = (who.clone(), url.clone());
                async move { report(&who, &url, &event) }
            })
            .retry_on_initial_connect()
            .connection_timeout(Duration::from_secs(5))
            .request_timeout(Some(Duration::from_secs(10)));
        if let Some(token) = &self.token {
            options = options.token(token.clone());
        }
        if let Some(path) = &self.nkey_file {
            let seed = std::fs::read_to_string(path)
                .with_context(|| format!("--nats-nkey: reading {}", path.display()))?;
            options = options.nkey(seed.trim().to_owned());
        }
        options
            .connect(self.url.as_str())
            .await
            .with_context(|| format!("connecting to the broker at {}", self.url))
    }
}

/// The runtime the broker client runs on inside a synchronous process (the trainer, a
/// worker): one thread, so the connection keeps answering the broker's pings while the
/// caller computes.
pub fn client_runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("starting the broker client's runtime")
}

/// Says on standard error what happened to a connection: the client reconnects by
/// itself (so a broker that refuses the credentials would otherwise look like one that
/// is slow to answer).
fn report(who: &str, url: &str, event: &async_nats::Event) {
    match event {
        async_nats::Event::Connected => eprintln!("{who}: connected to the broker at {url}"),
        async_nats::Event::Disconnected => {
            eprintln!("{who}: lost the broker at {url}; reconnecting");
        }
        async_nats::Event::ServerError(e) => eprintln!("{who}: the broker at {url} says: {e}"),
        other => eprintln!("{who}: broker at {url}: {other}"),
    }
}

/// Runs `attempt` until it succeeds, waiting a little longer each time (at most 2 s),
/// and reports the first failure of a streak on standard error as `what`. For the
/// requests that fail while the broker restarts.
pub async fn retry<T, F, Fut>(what: &str, mut attempt: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let mut wait = Duration::from_millis(50);
    let mut reported = false;
    loop {
        match attempt().await {
            Ok(value) => return value,
            Err(e) => {
                if !reported {
                    eprintln!("{what}: {e:#}; retrying");
                    reported = true;
                }
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(2));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn broker(url: &str) -> Broker {
        Broker {
            url: url.to_owned(),
            ..Broker::default()
        }
    }

    #[test]
    fn loopback_needs_no_credentials_and_elsewhere_does() {
        for url in [
            "nats://127.0.0.1:4222",
            "localhost:4222",
            "nats://[::1]:4222",
            "127.0.0.9",
        ] {
            assert!(broker(url).check().is_ok(), "{url}");
        }
        let err = broker("nats://10.0.0.5:4222").check().unwrap_err();
        assert!(format!("{err}").contains(TOKEN_VAR), "{err}");
        assert!(broker("nats://nats.example:4222").check().is_err());
        let with_token = Broker {
            token: Some("t".into()),
            ..broker("nats://10.0.0.5:4222")
        };
        assert!(with_token.check().is_ok());
        assert!(broker("nats://user:pw@127.0.0.1:4222").check().is_err());
        assert!(broker("nats://:4222").check().is_err());
    }
}

//! A real NATS server with JetStream on a loopback port, for the cluster tests and
//! `cargo xtask cluster`: Debian's `nats-server` (which `cargo xtask test` installs),
//! file storage in a folder of the caller's, stopped when dropped, and restartable on
//! the same port and storage to test a broker that dies during a run.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The `nats-server` program: `ARLBOOK_NATS_SERVER`, else the first on `PATH` or in
/// `/usr/sbin` (where Debian puts it).
pub fn program() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("ARLBOOK_NATS_SERVER") {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/local/sbin")])
        .map(|dir| dir.join("nats-server"))
        .find(|candidate| candidate.is_file())
}

/// A running `nats-server -js` on `127.0.0.1:port`.
#[derive(Debug)]
pub struct NatsServer {
    child: Option<Child>,
    port: u16,
    store: PathBuf,
    log: PathBuf,
    auth: Auth,
}

/// What the server asks of its clients.
#[derive(Debug, Clone)]
enum Auth {
    /// Nothing.
    Open,
    /// This token (`--auth`).
    Token(String),
    /// A signature by the nkey whose public key (`U...`) this is, given to the server in
    /// a configuration file beside the storage.
    Nkey(String),
}

/// A free loopback port (bound and released; the server takes it right after).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("binding a loopback port")
}

impl NatsServer {
    /// Starts a server with JetStream storing under `store` (its log beside it).
    ///
    /// # Panics
    /// When `nats-server` is missing (install it: `apt-get install nats-server`, which
    /// `cargo xtask test` does) or does not start listening within 10 s.
    pub fn start(store: &Path) -> Self {
        Self::launched(store, Auth::Open)
    }

    /// As [`NatsServer::start`], with clients required to present `token`.
    ///
    /// # Panics
    /// As [`NatsServer::start`].
    pub fn start_with_token(store: &Path, token: &str) -> Self {
        Self::launched(store, Auth::Token(token.to_owned()))
    }

    /// As [`NatsServer::start`], with clients required to sign with the nkey whose
    /// public key is `public_key` (a user key, `U...`).
    ///
    /// # Panics
    /// As [`NatsServer::start`].
    pub fn start_with_nkey(store: &Path, public_key: &str) -> Self {
        Self::launched(store, Auth::Nkey(public_key.to_owned()))
    }

    fn launched(store: &Path, auth: Auth) -> Self {
        let mut server = Self {
            child: None,
            port: free_port(),
            store: store.to_owned(),
            log: store.with_extension("log"),
            auth,
        };
        server.launch();
        server
    }

    fn launch(&mut self) {
        let program = program().expect(
            "nats-server is not installed: `apt-get install nats-server` (cargo xtask test does)",
        );
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("opening the nats-server log");
        let mut command = Command::new(program);
        command
            .args([
                "-js",
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-sd",
            ])
            .arg(&self.store);
        match &self.auth {
            Auth::Open => {}
            Auth::Token(token) => {
                command.args(["--auth", token]);
            }
            Auth::Nkey(public_key) => {
                let conf = self.store.with_extension("conf");
                std::fs::write(
                    &conf,
                    format!("authorization {{ users = [ {{ nkey: \"{public_key}\" }} ] }}\n"),
                )
                .expect("writing the nats-server configuration");
                command.arg("-c").arg(conf);
            }
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("starting nats-server");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "nats-server did not listen on {} (log: {})",
                self.port,
                self.log.display()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `nats://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Kills the server (SIGKILL), waits `down`, and starts it again on the same port
    /// and storage.
    pub fn restart(&mut self, down: Duration) {
        self.stop();
        std::thread::sleep(down);
        self.launch();
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.stop();
    }
}

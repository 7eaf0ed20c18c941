//! Running the real `arlbook` binary, given its path.
//!
//! The integration tests live in the binary's own package (`server/tests/`), where cargo
//! has built it for the test run and names it in `env!("CARGO_BIN_EXE_arlbook")`; they
//! pass that path here. Nothing in this crate builds the binary.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    here.parent()
        .map_or(here.clone(), std::path::Path::to_path_buf)
}

/// The `arlbook` binary at a known path.
#[derive(Debug, Clone)]
pub struct Arlbook {
    bin: PathBuf,
}

impl Arlbook {
    /// The binary at `bin` (in an integration test of `arlbook-server`:
    /// `env!("CARGO_BIN_EXE_arlbook")`).
    pub fn new(bin: impl Into<PathBuf>) -> Self {
        Self { bin: bin.into() }
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.bin
    }

    /// A command that starts it, to add arguments and pipes to.
    pub fn command(&self) -> Command {
        Command::new(&self.bin)
    }

    /// Runs `arlbook args...` with `stdin` as standard input.
    ///
    /// # Panics
    /// If the process cannot be started.
    pub fn run(&self, args: &[&str], stdin: &str) -> Output {
        let mut child = self
            .command()
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", self.bin.display()));
        if let Some(mut input) = child.stdin.take() {
            // A process that exits before reading its input closes the pipe; that is fine.
            let _ = input.write_all(stdin.as_bytes());
        }
        child.wait_with_output().expect("waiting for arlbook")
    }

    /// Runs `arlbook compute <name>` on a JSON request and returns (exit code, JSON out).
    ///
    /// # Panics
    /// If stdout is not one JSON document.
    pub fn compute(&self, name: &str, request: &str) -> (i32, serde_json::Value) {
        let out = self.run(&["compute", name], request);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
            panic!(
                "stdout of `arlbook compute {name}` is not JSON ({e}): {stdout}\nstderr: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (out.status.code().unwrap_or(-1), value)
    }
}

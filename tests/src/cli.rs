//! Running the real `arlbook` binary.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    here.parent()
        .map_or(here.clone(), std::path::Path::to_path_buf)
}

/// Path of the `arlbook` binary, built on first use with the cargo running the tests.
///
/// # Panics
/// If the binary cannot be built (the tests cannot run without it).
pub fn arlbook_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let status = Command::new(cargo)
            .current_dir(workspace_root())
            .args([
                "build",
                "--quiet",
                "-p",
                "arlbook-server",
                "--bin",
                "arlbook",
            ])
            .status()
            .expect("starting cargo build for the arlbook binary");
        assert!(status.success(), "building the arlbook binary failed");
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map_or_else(|| workspace_root().join("target"), PathBuf::from);
        target
            .join("debug")
            .join(format!("arlbook{}", std::env::consts::EXE_SUFFIX))
    })
    .clone()
}

/// Runs `arlbook args...` with `stdin` as standard input.
///
/// # Panics
/// If the process cannot be started.
pub fn run(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(arlbook_bin())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting arlbook");
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
pub fn compute(name: &str, request: &str) -> (i32, serde_json::Value) {
    let out = run(&["compute", name], request);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "stdout of `arlbook compute {name}` is not JSON ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), value)
}

//! Running commands with a visible log line, and locating the workspace.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, bail};

/// The workspace root (the parent of this crate's directory).
pub fn workspace_root() -> PathBuf {
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .map_or_else(|| manifest_dir.clone(), std::path::Path::to_path_buf)
}

/// The packages that every test and binary build here selects: the workspace without
/// xtask. One selection gives one feature set, so each build reuses the dependencies the
/// previous one compiled. xtask stays out because `cargo xtask` has already compiled its
/// dependencies with the features xtask alone asks for; inside the workspace they would
/// unify with the other crates' features and compile a second time.
pub const PACKAGES: [&str; 3] = ["--workspace", "--exclude", "xtask"];

/// `cargo` as invoked by the user (respects `$CARGO`).
pub fn cargo() -> Command {
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    command.current_dir(workspace_root());
    command
}

/// Runs `command`, echoing it first; fails if it exits non-zero.
pub fn run(command: &mut Command) -> anyhow::Result<()> {
    eprintln!("xtask: $ {}", describe(command));
    let status = command
        .status()
        .with_context(|| format!("starting {}", describe(command)))?;
    if !status.success() {
        bail!("`{}` failed with {status}", describe(command));
    }
    Ok(())
}

/// Runs `command` and returns its stdout; fails if it exits non-zero.
pub fn output(command: &mut Command) -> anyhow::Result<String> {
    let out = command
        .output()
        .with_context(|| format!("starting {}", describe(command)))?;
    if !out.status.success() {
        bail!(
            "`{}` failed with {}:\n{}",
            describe(command),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Whether a program can be started (`program --version` succeeds).
pub fn has_program(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn describe(command: &Command) -> String {
    let mut text = command.get_program().to_string_lossy().into_owned();
    for arg in command.get_args() {
        text.push(' ');
        text.push_str(&arg.to_string_lossy());
    }
    text
}

/// Makes sure the wasm32 target is installed (`rustup target add` when missing).
pub fn ensure_wasm_target() -> anyhow::Result<()> {
    const TARGET: &str = "wasm32-unknown-unknown";
    if !has_program("rustup") {
        eprintln!("xtask: rustup not found; assuming the {TARGET} target is installed");
        return Ok(());
    }
    let installed = output(Command::new("rustup").current_dir(workspace_root()).args([
        "target",
        "list",
        "--installed",
    ]))?;
    if installed.lines().any(|line| line.trim() == TARGET) {
        return Ok(());
    }
    run(Command::new("rustup")
        .current_dir(workspace_root())
        .args(["target", "add", TARGET]))
}

/// Makes `command` (a cargo build or test) lint the workspace's own crates while it
/// compiles them: clippy's driver stands in for rustc on workspace members (cargo's
/// `RUSTC_WORKSPACE_WRAPPER`, exactly what `cargo clippy` sets) and turns every warning
/// into an error. Dependencies are compiled by rustc as usual. So one build both lints
/// (with the lint levels of `[workspace.lints]`) and produces the test binaries, instead
/// of a `cargo clippy` check build followed by a second, full build.
pub fn lint_while_building(command: &mut Command) -> anyhow::Result<&mut Command> {
    let driver = output(
        Command::new("rustup")
            .current_dir(workspace_root())
            .args(["which", "clippy-driver"]),
    )
    .map(|path| path.trim().to_owned())
    .or_else(|_| {
        if has_program("clippy-driver") {
            Ok("clippy-driver".to_owned())
        } else {
            bail!("clippy-driver not found: install clippy (`rustup component add clippy`)")
        }
    })?;
    Ok(command
        .env("RUSTC_WORKSPACE_WRAPPER", driver)
        .env("CLIPPY_ARGS", "-Dwarnings"))
}

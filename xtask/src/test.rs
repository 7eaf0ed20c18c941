//! `cargo xtask test` (what CI runs) and `cargo xtask check` (its static part).
//!
//! One target directory, debug builds with optimised dependencies (see the workspace
//! `Cargo.toml`), and the app checked only for wasm32, so no crate is built twice
//! with different feature sets.

use crate::cmd::{cargo, ensure_wasm_target, run};

/// fmt, clippy (native and wasm32) and the wasm32 build checks.
pub fn run_static_checks() -> anyhow::Result<()> {
    ensure_wasm_target()?;
    run(cargo().args(["fmt", "--all", "--check"]))?;
    run(cargo().args([
        "clippy",
        "--workspace",
        "--exclude",
        "arlbook-app",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]))?;
    // The core and the shaders must build for the browser; the app only builds there.
    run(cargo().args([
        "check",
        "-p",
        "arlbook-core",
        "-p",
        "arlbook-shaders",
        "--target",
        "wasm32-unknown-unknown",
    ]))?;
    run(cargo().args([
        "clippy",
        "-p",
        "arlbook-app",
        "--target",
        "wasm32-unknown-unknown",
        "--",
        "-D",
        "warnings",
    ]))?;
    Ok(())
}

/// Everything: the static checks, then every test of every native crate.
pub fn run_all() -> anyhow::Result<()> {
    run_static_checks()?;
    run(cargo().args([
        "test",
        "--workspace",
        "--exclude",
        "arlbook-app",
        "--no-fail-fast",
    ]))?;
    eprintln!("xtask: all checks and tests passed");
    Ok(())
}

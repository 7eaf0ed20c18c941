//! `cargo xtask test` (what CI runs) and `cargo xtask check` (its static part).
//!
//! One target directory, debug builds with optimised dependencies (see the workspace
//! `Cargo.toml`). Leptos is built only for wasm32: natively the app is its pure part
//! (figures, state, drawing), so no heavy crate is built twice. The browser tests
//! (`e2e.rs`) come last.

use crate::cmd::{cargo, ensure_wasm_target, run};

/// fmt, clippy (native and wasm32) and the wasm32 build checks.
pub fn run_static_checks() -> anyhow::Result<()> {
    ensure_wasm_target()?;
    run(cargo().args(["fmt", "--all", "--check"]))?;
    // The app builds natively without Leptos (its figures' state, computation and
    // drawing), so it is linted and tested here too; its page is linted for wasm32 below.
    run(cargo().args([
        "clippy",
        "--workspace",
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
    run(cargo().args(["test", "--workspace", "--no-fail-fast"]))?;
    crate::e2e::run_browser_tests()?;
    eprintln!("xtask: all checks and tests passed");
    Ok(())
}

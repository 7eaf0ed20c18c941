//! `cargo xtask test` (what CI runs) and `cargo xtask check` (the lints alone).
//!
//! One target directory, debug builds with optimised dependencies (see the workspace
//! `Cargo.toml`). Leptos is built only for wasm32: natively the app is its pure part
//! (figures, state, drawing), so no heavy crate is built twice. `test` lints while it
//! builds (see [`run_all`]); `check` runs `cargo clippy` as a developer would.

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
    // One invocation for the three, so the host-side proc macros are built once with
    // one feature set (clippy runs `cargo check` underneath, so this is also the
    // `cargo check -p arlbook-core --target wasm32-unknown-unknown` of the contract).
    run(cargo().args([
        "clippy",
        "-p",
        "arlbook-core",
        "-p",
        "arlbook-shaders",
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

/// Everything CI runs, with as few builds as possible on a 2-core machine:
/// 1. `cargo fmt --check`;
/// 2. the notebook's wasm32 build (`web-dev` profile), linting core, shaders and the app for
///    wasm32 while compiling them (this is also the wasm32 build check of the core);
/// 3. xtask's own tests, linted, on its own: `cargo xtask` has already compiled its
///    dependencies with the features xtask alone asks for, while inside the workspace
///    build the other crates' features would change them and compile them a second
///    time (wasm-bindgen's CLI library and the wasm parsers under it are large);
/// 4. one `cargo test` of every other crate that lints each one while compiling it
///    (clippy's driver as the workspace compiler, warnings denied) and runs every test,
///    the browser tests included (against the bundle of step 2, in headless Chromium).
pub fn run_all() -> anyhow::Result<()> {
    ensure_lavapipe()?;
    ensure_nats_server()?;
    ensure_wasm_target()?;
    run(cargo().args(["fmt", "--all", "--check"]))?;
    let dist = crate::web::build(&crate::web::WebOptions {
        dev: true,
        lint: true,
    })?;
    let mut xtask_tests = cargo();
    xtask_tests.args(["test", "--package", "xtask"]);
    crate::cmd::lint_while_building(&mut xtask_tests)?;
    run(&mut xtask_tests)?;
    let mut test = cargo();
    test.arg("test")
        .args(crate::cmd::PACKAGES)
        .arg("--no-fail-fast");
    // The trainer's GPU tests on lavapipe: cubecl's autotuning at its least (it changes
    // which kernel variant runs, not what it computes).
    if std::env::var_os("CUBECL_AUTOTUNE_LEVEL").is_none() {
        test.env("CUBECL_AUTOTUNE_LEVEL", "minimal");
    }
    crate::cmd::lint_while_building(&mut test)?;
    crate::e2e::browser_test_env(&mut test, &dist)?;
    run(&mut test)?;
    eprintln!("xtask: all checks and tests passed");
    Ok(())
}

/// Installs Debian's `nats-server` (with JetStream) when none is found: the cluster
/// tests (`server/tests/cluster.rs`) and `cargo xtask cluster` start it on loopback.
pub fn ensure_nats_server() -> anyhow::Result<()> {
    let found = std::env::var_os("ARLBOOK_NATS_SERVER").is_some()
        || crate::cmd::has_program("nats-server")
        || std::path::Path::new("/usr/sbin/nats-server").is_file();
    if found {
        return Ok(());
    }
    if !cfg!(target_os = "linux") || !crate::cmd::has_program("apt-get") {
        anyhow::bail!(
            "nats-server is missing and there is no apt-get: install nats-server (2.9 or \
             newer) or set ARLBOOK_NATS_SERVER to its path"
        );
    }
    eprintln!("xtask: installing nats-server for the cluster tests");
    run(std::process::Command::new("apt-get")
        .env("DEBIAN_FRONTEND", "noninteractive")
        .arg("update"))?;
    run(std::process::Command::new("apt-get")
        .env("DEBIAN_FRONTEND", "noninteractive")
        .args(["install", "-y", "--no-install-recommends", "nats-server"]))
}

/// Installs Mesa's CPU Vulkan driver (lavapipe) when no Vulkan loader or ICD is present,
/// so the GPU conformance tests run for real on a machine without a GPU (they fail in
/// CI without an adapter rather than skip).
pub fn ensure_lavapipe() -> anyhow::Result<()> {
    let has_loader = std::process::Command::new("ldconfig")
        .arg("-p")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("libvulkan.so"));
    let has_lavapipe = std::fs::read_dir("/usr/share/vulkan/icd.d").is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("lvp_icd"))
    });
    if has_loader && has_lavapipe {
        return Ok(());
    }
    if !cfg!(target_os = "linux") || !crate::cmd::has_program("apt-get") {
        eprintln!("xtask: no Vulkan driver found and no apt-get; GPU tests may skip or fail");
        return Ok(());
    }
    eprintln!("xtask: installing lavapipe (mesa-vulkan-drivers) for the GPU tests");
    run(std::process::Command::new("apt-get")
        .env("DEBIAN_FRONTEND", "noninteractive")
        .arg("update"))?;
    run(std::process::Command::new("apt-get")
        .env("DEBIAN_FRONTEND", "noninteractive")
        .args([
            "install",
            "-y",
            "--no-install-recommends",
            "mesa-vulkan-drivers",
            "libvulkan1",
        ]))
}

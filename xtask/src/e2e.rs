//! The browser tests: build the notebook, make sure Chromium is there, and run the
//! `e2e` test of `arlbook-server` against the bundle (`server/tests/e2e/`).
//!
//! The test serves `web/dist` with the real `arlbook serve` (the binary cargo builds for
//! that test, `CARGO_BIN_EXE_arlbook`), opens pages in headless Chromium and checks the
//! numbers on them; screenshots go to `target/e2e/`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

use crate::cmd::{cargo, run, workspace_root};
use crate::web::{self, WebOptions};

/// Where Debian's package puts the browser.
const SYSTEM_CHROMIUM: &str = "/usr/bin/chromium";

/// Builds the bundle (dev profile: the tests check numbers, not speed), then runs the
/// browser tests.
pub fn run_browser_tests() -> anyhow::Result<()> {
    let dist = web::build(&WebOptions {
        dev: true,
        lint: true,
    })?;
    let mut test = cargo();
    // `--workspace` and the linting wrapper, as `cargo xtask test` builds: the same
    // packages, features and compiler give the same fingerprints, so the binary built
    // there is reused here instead of rebuilt.
    test.args(["test", "--workspace", "--test", "e2e", "--", "--nocapture"]);
    crate::cmd::lint_while_building(&mut test)?;
    browser_test_env(&mut test, &dist)?;
    run(&mut test)?;
    eprintln!("xtask: browser tests passed");
    Ok(())
}

/// Turns on the browser tests in a `cargo test` of the workspace: the bundle in
/// `dist`, Chromium (installed when missing), and where screenshots go.
pub fn browser_test_env(command: &mut Command, dist: &Path) -> anyhow::Result<()> {
    let chromium = ensure_chromium()?;
    let target_dir = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || workspace_root().join("target"),
        |dir| workspace_root().join(dir),
    );
    command
        .env("ARLBOOK_E2E", "1")
        .env("ARLBOOK_WEB_DIR", dist)
        .env("ARLBOOK_CHROMIUM", &chromium)
        .env("ARLBOOK_E2E_OUT", target_dir.join("e2e"));
    Ok(())
}

/// The Chromium binary: `$ARLBOOK_CHROMIUM`, the system one, or installed with apt
/// when running as root.
fn ensure_chromium() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("ARLBOOK_CHROMIUM") {
        return Ok(PathBuf::from(path));
    }
    if Path::new(SYSTEM_CHROMIUM).is_file() {
        return Ok(PathBuf::from(SYSTEM_CHROMIUM));
    }
    let is_root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !is_root {
        bail!(
            "Chromium not found at {SYSTEM_CHROMIUM}; install it (`apt-get install chromium`) \
             or set ARLBOOK_CHROMIUM to a Chromium binary"
        );
    }
    eprintln!("xtask: installing chromium with apt-get");
    run(Command::new("apt-get").arg("update"))?;
    run(Command::new("apt-get")
        .args(["install", "-y", "--no-install-recommends", "chromium"])
        .env("DEBIAN_FRONTEND", "noninteractive"))
    .context("installing chromium")?;
    if !Path::new(SYSTEM_CHROMIUM).is_file() {
        bail!("apt-get installed chromium but {SYSTEM_CHROMIUM} is missing");
    }
    Ok(PathBuf::from(SYSTEM_CHROMIUM))
}

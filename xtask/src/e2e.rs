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
    // The package selection and linting wrapper that `cargo xtask test` builds with: the
    // same packages, features and compiler give the same fingerprints, so the binary built
    // there is reused here instead of rebuilt.
    test.arg("test")
        .args(crate::cmd::PACKAGES)
        .args(["--test", "e2e", "--", "--nocapture"]);
    crate::cmd::lint_while_building(&mut test)?;
    browser_test_env(&mut test, &dist)?;
    run(&mut test)?;
    eprintln!("xtask: browser tests passed");
    Ok(())
}

/// Turns on the browser tests in a `cargo test` of the workspace: the bundle in
/// `dist`, Chromium (installed when missing), and where screenshots go.
pub fn browser_test_env(command: &mut Command, dist: &Path) -> anyhow::Result<()> {
    let (chromium, chromedriver) = ensure_chromium()?;
    let target_dir = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || workspace_root().join("target"),
        |dir| workspace_root().join(dir),
    );
    command
        .env("ARLBOOK_E2E", "1")
        .env("ARLBOOK_WEB_DIR", dist)
        .env("ARLBOOK_CHROMIUM", &chromium)
        .env("ARLBOOK_CHROMEDRIVER", &chromedriver)
        .env("ARLBOOK_E2E_OUT", target_dir.join("e2e"));
    Ok(())
}

/// Where Debian's `chromium-driver` package puts `chromedriver`.
const SYSTEM_CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// The Chromium binary and its `chromedriver`: `$ARLBOOK_CHROMIUM` and
/// `$ARLBOOK_CHROMEDRIVER`, else the system ones, installed with apt (`chromium`,
/// `chromium-driver`, same version) when missing and running as root.
fn ensure_chromium() -> anyhow::Result<(PathBuf, PathBuf)> {
    let from_env = |name: &str, system: &str| {
        std::env::var_os(name).map_or_else(|| PathBuf::from(system), PathBuf::from)
    };
    let chromium = from_env("ARLBOOK_CHROMIUM", SYSTEM_CHROMIUM);
    let driver = from_env("ARLBOOK_CHROMEDRIVER", SYSTEM_CHROMEDRIVER);
    if chromium.is_file() && driver.is_file() {
        return Ok((chromium, driver));
    }
    let is_root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !is_root {
        bail!(
            "Chromium or chromedriver not found ({} and {}); install them \
             (`apt-get install chromium chromium-driver`) or set ARLBOOK_CHROMIUM and \
             ARLBOOK_CHROMEDRIVER",
            chromium.display(),
            driver.display()
        );
    }
    eprintln!("xtask: installing chromium and chromium-driver with apt-get");
    run(Command::new("apt-get").arg("update"))?;
    run(Command::new("apt-get")
        .args([
            "install",
            "-y",
            "--no-install-recommends",
            "chromium",
            "chromium-driver",
        ])
        .env("DEBIAN_FRONTEND", "noninteractive"))
    .context("installing chromium and chromium-driver")?;
    for path in [&chromium, &driver] {
        if !path.is_file() {
            bail!("apt-get ran but {} is missing", path.display());
        }
    }
    Ok((chromium, driver))
}

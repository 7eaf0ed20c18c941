//! `cargo xtask build-web`: the notebook as a static folder (`web/dist`).
//!
//! Builds `arlbook-app` for wasm32 and runs wasm-bindgen through its CLI support
//! library, so nothing is installed globally (the version is pinned in the workspace
//! `Cargo.toml`, equal to the `wasm-bindgen` crate the app links).

use std::path::PathBuf;

use anyhow::Context;

use crate::cmd::{cargo, ensure_wasm_target, run, workspace_root};

/// Options of the web build.
#[derive(Debug, Clone, Default)]
pub struct WebOptions {
    /// Build the wasm in the `web-dev` profile (dependencies unoptimised: about three
    /// times faster to build, slower to run).
    pub dev: bool,
    /// Lint the workspace crates (core, shaders, app) for wasm32 while building them.
    pub lint: bool,
}

impl WebOptions {
    /// Reads `--dev` from the task's arguments.
    pub fn parse(args: &[String]) -> Self {
        Self {
            dev: args.iter().any(|a| a == "--dev"),
            lint: false,
        }
    }
}

/// The output folder of the web build.
pub fn dist_dir() -> PathBuf {
    workspace_root().join("web").join("dist")
}

/// Builds the notebook into [`dist_dir`] and returns that folder.
pub fn build(options: &WebOptions) -> anyhow::Result<PathBuf> {
    ensure_wasm_target()?;
    // A custom profile's output folder is its name.
    let profile = if options.dev {
        "web-dev"
    } else {
        "wasm-release"
    };
    let mut build = cargo();
    build.args([
        "build",
        "-p",
        "arlbook-app",
        "--target",
        "wasm32-unknown-unknown",
        "--profile",
        profile,
    ]);
    if options.lint {
        crate::cmd::lint_while_building(&mut build)?;
    }
    run(&mut build)?;

    let root = workspace_root();
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root.join("target"), |dir| root.join(dir));
    let wasm = target_dir
        .join("wasm32-unknown-unknown")
        .join(profile)
        .join("arlbook_app.wasm");
    let dist = dist_dir();
    if dist.exists() {
        std::fs::remove_dir_all(&dist).with_context(|| format!("clearing {}", dist.display()))?;
    }
    std::fs::create_dir_all(&dist).with_context(|| format!("creating {}", dist.display()))?;
    eprintln!(
        "xtask: wasm-bindgen {} -> {}",
        wasm.display(),
        dist.display()
    );
    wasm_bindgen_cli_support::Bindgen::new()
        .input_path(&wasm)
        .web(true)
        .context("selecting the web target")?
        .out_name("arlbook_app")
        .generate(&dist)
        .context("running wasm-bindgen")?;
    for asset in ["index.html", "style.css", "favicon.ico"] {
        std::fs::copy(root.join("app").join(asset), dist.join(asset))
            .with_context(|| format!("copying app/{asset}"))?;
    }
    eprintln!("xtask: notebook built in {}", dist.display());
    Ok(dist)
}

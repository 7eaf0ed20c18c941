//! `cargo xtask device-bundle [--dev]`: what a lent GPU machine needs to run
//! `xtask/device/gpu-check.sh`, built here.
//!
//! The GPU machine has no Rust toolchain and no network, so this builds `arlbook`
//! (release profile: the GPU trainer's, everything optimised) and stores it, stripped
//! and compressed, as `target/device/arlbook.gz`, with the Vulkan loader's Debian package in
//! `target/device/gl/` (the machine mounts NVIDIA's driver but may lack the loader).
//! `--dev` bundles the dev-profile binary instead, to try the script on this machine.
//! The whole of `target/device` is what the run carries; it must stay well under the
//! 64 MiB a run may carry with the working tree.

use std::fs;
use std::process::Command;

use anyhow::{Context, bail};

use crate::cmd::{cargo, has_program, run, workspace_root};

/// The most the bundle may weigh (the working tree travels beside it).
const MAX_BUNDLE_BYTES: u64 = 56 << 20;

/// Builds the bundle and prints how to run the check.
pub fn bundle(args: &[String]) -> anyhow::Result<()> {
    let dev = args.iter().any(|a| a == "--dev");
    let profile = if dev { "dev" } else { "release" };
    // The packages every other build here selects, so that features unify the same
    // way and the dependencies already built are reused.
    run(cargo()
        .args(["build", "--profile", profile])
        .args(crate::cmd::PACKAGES)
        .args(["--bin", "arlbook"]))?;
    let root = workspace_root();
    let built = root
        .join("target")
        .join(if dev { "debug" } else { "release" })
        .join("arlbook");
    let folder = root.join("target").join("device");
    fs::create_dir_all(folder.join("gl")).context("creating target/device")?;
    let binary = folder.join("arlbook");
    fs::copy(&built, &binary)
        .with_context(|| format!("copying {} to {}", built.display(), binary.display()))?;
    if has_program("strip") {
        run(Command::new("strip").arg(&binary))?;
    }
    // `-f`: replace the archive of an earlier bundle.
    run(Command::new("gzip").args(["-9", "-f"]).arg(&binary))?;
    if has_program("apt-get") {
        run(Command::new("apt-get")
            .args(["download", "libvulkan1"])
            .current_dir(folder.join("gl")))?;
    } else {
        eprintln!("xtask: no apt-get here; the GPU machine must already have libvulkan.so.1");
    }
    let bytes = folder_bytes(&folder)?;
    if bytes > MAX_BUNDLE_BYTES {
        bail!(
            "target/device is {} MiB, more than the {} MiB a device run can carry",
            bytes >> 20,
            MAX_BUNDLE_BYTES >> 20
        );
    }
    println!(
        "bundle ready: target/device ({} MiB). On the GPU machine, from the repository root, \
         carrying target/device:\n    bash xtask/device/gpu-check.sh",
        bytes >> 20
    );
    Ok(())
}

/// Total size of the files under `folder`.
fn folder_bytes(folder: &std::path::Path) -> anyhow::Result<u64> {
    let mut total = 0;
    for entry in fs::read_dir(folder).with_context(|| format!("reading {}", folder.display()))? {
        let entry = entry?;
        let meta = entry.metadata()?;
        total += if meta.is_dir() {
            folder_bytes(&entry.path())?
        } else {
            meta.len()
        };
    }
    Ok(total)
}

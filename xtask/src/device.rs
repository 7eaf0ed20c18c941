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
//!
//! `cargo xtask bench device` is the script's dry run here: the same
//! `xtask/device/gpu-check.sh`, with the dev `arlbook` on this machine's Vulkan adapter
//! (lavapipe without a GPU), PyTorch on the CPU, a small model shape and a tiny
//! training config, so that every step of the script (benchmark, shortened run,
//! summary) is exercised before a lent machine's minutes are spent on it.

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

/// The dry run's training config: the GPU config's sections at a tiny size.
const DRY_RUN_CONFIG: &str = r#"# The dry run of xtask/device/gpu-check.sh (cargo xtask bench device).
seed = 1
backend = "gpu"
checkpoint_every = 2

[model]
layers = 1
width = 32
heads = 2
context = 400

[harness]
max_turns = 6
max_context_tokens = 400
max_new_tokens = 24

[sft]
steps = 4
batch_episodes = 4
tasks = 16
learning_rate = 1e-2

[grpo]
steps = 2
tasks_per_batch = 2
group_size = 2
microbatch_rows = 4
dynamic_sampling = false

[validation]
every_steps = 0
"#;

/// The dry run's benchmark shape (both sides).
const DRY_RUN_SHAPE: &str = "--layers 1 --width 32 --heads 2 --context 128 --rows 4 \
    --prompt 32 --new-tokens 8 --microbatch-rows 4 --turns 3 --turn-tokens 8 --observation-tokens 8";

/// Runs `xtask/device/gpu-check.sh` here at a tiny size and checks its summary.
pub fn dry_run() -> anyhow::Result<()> {
    crate::test::ensure_lavapipe()?;
    run(cargo().args(["build", "-p", "arlbook-server", "--bin", "arlbook"]))?;
    let python = crate::bench_train::venv_python()?;
    let root = workspace_root();
    let folder = root.join("target").join("device").join("dry-run");
    fs::create_dir_all(&folder).context("creating target/device/dry-run")?;
    let config = folder.join("config.toml");
    fs::write(&config, DRY_RUN_CONFIG).context("writing the dry run's config")?;
    let out = folder.join("out");
    let started = std::time::Instant::now();
    run(Command::new("bash")
        .arg(root.join("xtask").join("device").join("gpu-check.sh"))
        .current_dir(&root)
        .env("OUT", &out)
        .env("BIN", root.join("target").join("debug").join("arlbook"))
        .env("BACKEND", "gpu")
        .env("TORCH_DEVICE", "cpu")
        .env("PYTHON", &python)
        .env("CONFIG", &config)
        .env("SFT_STEPS", "4")
        .env("GRPO_STEPS", "2")
        .env("TRAIN_SECONDS", "300")
        .env("SHAPE", DRY_RUN_SHAPE))?;
    let seconds = started.elapsed().as_secs_f64();
    let summary_path = out.join("summary.json");
    let summary: serde_json::Value = serde_json::from_str(
        &fs::read_to_string(&summary_path)
            .with_context(|| format!("the script wrote no {}", summary_path.display()))?,
    )
    .context("parsing the summary")?;
    for key in [
        "rollout_tokens_per_s_ratio",
        "update_tokens_per_s_ratio",
        "grpo_step_speed_ratio",
        "multi_turn_tokens_per_s_ratio",
    ] {
        if !summary[key].as_f64().is_some_and(f64::is_finite) {
            bail!("the dry run's summary has no finite `{key}`: {summary}");
        }
    }
    if summary["train_grpo_steps"].as_u64() != Some(2) {
        bail!("the dry run's shortened training did not reach its 2 GRPO steps: {summary}");
    }
    println!(
        "dry run of xtask/device/gpu-check.sh passed in {seconds:.0} s on this machine \
         (output in {})",
        out.display()
    );
    Ok(())
}

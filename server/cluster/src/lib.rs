//! Past one machine: rollout workers and a GRPO learner of arlbook over NATS
//! JetStream, with nothing lost when a process or the broker dies.
//!
//! - [`broker`]: where the broker is, credentials, and the rule that a broker off
//!   loopback needs them; retries for requests that fail while it restarts.
//! - [`names`]: the streams, buckets and keys of a run.
//! - [`wire`]: jobs, results and version records, and their encodings.
//! - [`learner`]: the trainer's [`arlbook_train::learner::grpo::remote::RemoteRollouts`] over
//!   the broker (`arlbook train --nats URL`).
//! - [`worker`]: `arlbook worker --nats URL`.
//!
//! The learner assigns every job its policy version, and a worker runs it with exactly
//! that version's weights, so the lag between sampling and training is the trainer's
//! `max_policy_lag` and nothing else; with the same config and seed, a run with any
//! number of workers trains on the rollouts an in-process run would have collected.

pub mod broker;
pub mod learner;
pub mod names;
pub mod wire;
pub mod worker;

/// A `model.bpk` in a folder of its own under the temporary folder, removed (with the
/// folder) when dropped: the learner saves a version's weights there to read their
/// bytes, and a worker writes the bytes it fetched there for burn to load (burn reads a
/// record's tensors when first used, so a worker keeps the file while it holds that
/// version).
pub(crate) struct WeightsFile(std::path::PathBuf);

impl WeightsFile {
    /// A fresh folder, the file not yet written.
    pub(crate) fn fresh() -> anyhow::Result<Self> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "arlbook-weights-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir)?;
        Ok(Self(dir))
    }

    /// A fresh file holding `bytes`.
    pub(crate) fn write(bytes: &[u8]) -> anyhow::Result<Self> {
        let file = Self::fresh()?;
        std::fs::write(file.path(), bytes)?;
        Ok(file)
    }

    /// The file's path.
    pub(crate) fn path(&self) -> std::path::PathBuf {
        self.0.join("model.bpk")
    }
}

impl Drop for WeightsFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

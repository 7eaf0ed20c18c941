//! The WGSL compute kernels of arlbook, embedded as strings and validated by naga.
//!
//! One `.wgsl` file per kernel lives in `shaders/wgsl/`. Each [`Kernel`] carries its full
//! source (the shared files it needs prepended, since WGSL has no `#include`), its entry
//! points and its binding table, so `core::gpu` can build the bind group layout without
//! reflection and the kernels ship inside the binary and the wasm bundle alike.
//!
//! ## Design
//! - `rng.wgsl` is Philox4x32-10, bit-identical to `core::rng`; every kernel gets it
//!   (it also holds the 2D workgroup indexing helper).
//! - `segmented.wgsl` holds the 64-lane workgroup reduction and the segment search of
//!   the ragged kernels. Short segments avoid it: group advantages give one thread to
//!   each group of up to 4096 rewards, and the policy loss sums tokens in chunks of
//!   at most 64 within a sequence, one thread per chunk, then one thread per sequence;
//!   only a few whole-batch sums still use a workgroup reduction (see
//!   `core::gpu::advantage` and `core::gpu::policy_loss` for the measurements).
//! - Every kernel uses one bind group (group 0): binding 0 is a uniform block of
//!   parameters, the others storage buffers, at most five per kernel (WebGPU's default
//!   limit is eight per stage).
//! - All kernels use 64 threads per workgroup ([`WORKGROUP_SIZE`]) and a 2D grid of
//!   workgroups when one dimension would pass 65 535.

/// Where the kernel sources live, relative to this crate's root.
pub const WGSL_DIR: &str = "wgsl";

/// Threads per workgroup of every kernel.
pub const WORKGROUP_SIZE: u32 = 64;

/// How a kernel sees one binding of group 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    /// A uniform block (the parameters).
    Uniform,
    /// A storage buffer the kernel only reads.
    ReadOnly,
    /// A storage buffer the kernel writes.
    ReadWrite,
}

/// One kernel file: its source with shared code prepended, entry points and bindings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kernel {
    /// The file name without `.wgsl`; also the pipeline cache key.
    pub name: &'static str,
    /// The complete WGSL module.
    pub source: &'static str,
    /// Entry points, in the order a run dispatches them.
    pub entry_points: &'static [&'static str],
    /// Binding `i` of group 0 is `bindings[i]`.
    pub bindings: &'static [Binding],
}

macro_rules! sampling_source {
    ($file:literal) => {
        concat!(
            include_str!("../wgsl/rng.wgsl"),
            "\n",
            include_str!(concat!("../wgsl/", $file))
        )
    };
}

macro_rules! segmented_source {
    ($file:literal) => {
        concat!(
            include_str!("../wgsl/rng.wgsl"),
            "\n",
            include_str!("../wgsl/segmented.wgsl"),
            "\n",
            include_str!(concat!("../wgsl/", $file))
        )
    };
}

use Binding::{ReadOnly, ReadWrite, Uniform};

/// The words of one random stream (tests the WGSL Philox against `core::rng`).
pub const RNG_STREAM: Kernel = Kernel {
    name: "rng_stream",
    source: sampling_source!("rng_stream.wgsl"),
    entry_points: &["rng_stream"],
    bindings: &[Uniform, ReadWrite],
};

/// Bandit policy-gradient Monte Carlo: integer counts per replicate.
pub const BANDIT_MC: Kernel = Kernel {
    name: "bandit_mc",
    source: sampling_source!("bandit_mc.wgsl"),
    entry_points: &["bandit_mc"],
    bindings: &[Uniform, ReadWrite],
};

/// Importance-sampling Monte Carlo: action counts per replicate.
pub const IMPORTANCE_MC: Kernel = Kernel {
    name: "importance_mc",
    source: sampling_source!("importance_mc.wgsl"),
    entry_points: &["importance_mc"],
    bindings: &[Uniform, ReadOnly, ReadWrite],
};

/// KL estimator Monte Carlo: sums of k1, k2, k3 per replicate.
pub const KL_MC: Kernel = Kernel {
    name: "kl_mc",
    source: sampling_source!("kl_mc.wgsl"),
    entry_points: &["kl_mc"],
    bindings: &[Uniform, ReadOnly, ReadOnly, ReadWrite],
};

/// Dynamic sampling until enough mixed groups: groups drawn per replicate.
pub const MIXED_GROUP: Kernel = Kernel {
    name: "mixed_group",
    source: sampling_source!("mixed_group.wgsl"),
    entry_points: &["mixed_group"],
    bindings: &[Uniform, ReadWrite],
};

/// Policy-lag event simulation: kept counts, elapsed time, pooled lag histogram.
pub const LAG_SIM: Kernel = Kernel {
    name: "lag_sim",
    source: sampling_source!("lag_sim.wgsl"),
    entry_points: &["lag_sim"],
    bindings: &[Uniform, ReadWrite, ReadWrite, ReadWrite],
};

/// The clipped surrogate, element-wise.
pub const CLIP_SURROGATE: Kernel = Kernel {
    name: "clip_surrogate",
    source: sampling_source!("clip_surrogate.wgsl"),
    entry_points: &["clip_surrogate"],
    bindings: &[Uniform, ReadOnly, ReadWrite, ReadWrite],
};

/// Group advantages over ragged groups.
pub const GROUP_ADVANTAGE: Kernel = Kernel {
    name: "group_advantage",
    source: segmented_source!("group_advantage.wgsl"),
    entry_points: &["batch_stats", "group_serial", "group_wide"],
    bindings: &[Uniform, ReadOnly, ReadOnly, ReadWrite, ReadWrite],
};

/// The policy loss over ragged sequences.
pub const POLICY_LOSS: Kernel = Kernel {
    name: "policy_loss",
    source: segmented_source!("policy_loss.wgsl"),
    entry_points: &[
        "chunk_log_ratio",
        "row_log_ratio",
        "token_terms",
        "chunk_sums",
        "row_sums",
        "batch_sums",
    ],
    bindings: &[Uniform, ReadOnly, ReadOnly, ReadWrite, ReadWrite, ReadWrite],
};

/// Every kernel, for validation and pipeline warm-up.
pub const KERNELS: &[Kernel] = &[
    RNG_STREAM,
    BANDIT_MC,
    IMPORTANCE_MC,
    KL_MC,
    MIXED_GROUP,
    LAG_SIM,
    CLIP_SURROGATE,
    GROUP_ADVANTAGE,
    POLICY_LOSS,
];

/// The shared files, alone (for validation as libraries).
pub const SHARED: &[(&str, &str)] = &[
    ("rng.wgsl", include_str!("../wgsl/rng.wgsl")),
    (
        "segmented.wgsl",
        concat!(
            include_str!("../wgsl/segmented.wgsl"),
            "\nvar<private> offsets: array<u32, 1>;\n"
        ),
    ),
];

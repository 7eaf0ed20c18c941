//! The WGSL compute kernels of arlbook, embedded as strings and validated by naga.
//!
//! One `.wgsl` file per kernel lives in `shaders/wgsl/`; each is exposed here as a
//! `&'static str` through `include_str!` together with its entry point name, so the
//! kernels ship inside the binary and the wasm bundle alike. The kernels arrive with
//! the GPU compute path; until then this crate only fixes where they live.

/// Where the kernel sources live, relative to this crate's root.
pub const WGSL_DIR: &str = "wgsl";

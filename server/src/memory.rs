//! The process's allocator: mimalloc, and for the commands that train or evaluate a
//! policy, freed memory kept for reuse rather than handed back to the system.
//!
//! burn's CPU backend allocates and frees a fresh buffer for nearly every tensor op.
//! With the system allocator, the large ones are mapped and unmapped each time and
//! the pages fault back in on first touch: on the trainer's benchmark that was about
//! a fifth of the wall time. mimalloc keeps freed memory for reuse, but by default it
//! returns ("purges") memory unused for a moment, and the trainer's next step maps it
//! again: 184,000 page faults in 120 SFT steps, the kernel clearing pages for 4% of
//! SFT's time and 11% of GRPO's (`perf record` of `arlbook train`, two cores). With
//! purging off (mimalloc's `purge_delay` option at -1) the same steps took about 2,600.
//! The resident memory then stays at the run's peak, which is what a training
//! process holds anyway; `serve` keeps the default and returns what it frees.

/// The global allocator of the `arlbook` binary.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (its `mimalloc.h`, the same index in its v2 and
/// v3 that `libmimalloc-sys` builds).
const MI_OPTION_PURGE_DELAY: std::ffi::c_int = 15;

#[allow(unsafe_code)]
unsafe extern "C" {
    /// mimalloc's `void mi_option_set(mi_option_t option, long value)`, linked from
    /// the library `libmimalloc-sys` builds for the global allocator.
    fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
}

/// Keep freed memory for reuse for the rest of the process (see the module docs).
/// Call before the work starts; `MIMALLOC_PURGE_DELAY` in the environment still wins.
#[allow(unsafe_code)]
pub fn keep_freed_memory() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: `mi_option_set` only stores the value in mimalloc's option table and
    // may be called at any time from any thread; the signature matches `mimalloc.h`.
    unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
}

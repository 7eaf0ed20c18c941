//! Shared helpers: one context for the whole suite, tolerances, random inputs.

use std::sync::OnceLock;

use arlbook_core::gpu::GpuContext;
use arlbook_core::rng::RandomStream;

static CONTEXT: OnceLock<Option<GpuContext>> = OnceLock::new();

/// The suite's context, or `None` outside CI when no adapter exists: each test then
/// returns at once, and the skip is reported once, with its reason, on the real
/// standard error (past the test harness's output capture, so it shows in a passing
/// run). In CI a missing adapter panics.
pub fn context() -> Option<&'static GpuContext> {
    CONTEXT
        .get_or_init(|| match GpuContext::new_blocking() {
            Ok(ctx) => {
                eprintln!("GPU conformance on {}", ctx.adapter_name());
                Some(ctx)
            }
            Err(e) if std::env::var_os("CI").is_some() => {
                panic!("CI is set and no GPU adapter was found ({e}); install mesa-vulkan-drivers")
            }
            Err(e) => {
                use std::io::Write as _;
                let _ = writeln!(
                    std::io::stderr().lock(),
                    "SKIPPED: every GPU conformance test of this run, because no GPU adapter \
                     was found ({e}); install mesa-vulkan-drivers for lavapipe, or set CI=1 \
                     to make this an error"
                );
                None
            }
        })
        .as_ref()
}

/// `|g - c| <= 1e-4 |c| + 1e-5 scale`.
pub fn assert_close(what: &str, gpu: f64, cpu: f64, scale: f64) {
    let tolerance = 1e-4 * cpu.abs() + 1e-5 * scale;
    assert!(
        (gpu - cpu).abs() <= tolerance,
        "{what}: gpu {gpu} vs cpu {cpu} (tolerance {tolerance})"
    );
}

/// Element-wise [`assert_close`] with the scale of the CPU output.
pub fn assert_all_close(what: &str, gpu: &[f64], cpu: &[f64]) {
    assert_eq!(gpu.len(), cpu.len(), "{what}: lengths");
    let scale = cpu.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    for (i, (&g, &c)) in gpu.iter().zip(cpu).enumerate() {
        assert_close(&format!("{what}[{i}]"), g, c, scale);
    }
}

/// Estimates from the same draws, summed in another order: relative `1e-12`.
pub fn assert_same_estimate(what: &str, gpu: f64, cpu: f64) {
    assert!(
        (gpu - cpu).abs() <= 1e-12 * cpu.abs().max(1.0),
        "{what}: gpu {gpu} vs cpu {cpu}"
    );
}

/// A generator of test inputs (the project's own RNG, so cases are reproducible).
pub struct Inputs(RandomStream);

impl Inputs {
    pub fn new(seed: u64) -> Self {
        Self(RandomStream::new(seed, 999))
    }

    pub fn uniform(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.0.uniform()
    }

    pub fn below(&mut self, n: u32) -> usize {
        self.0.below(n) as usize
    }

    pub fn coin(&mut self, p: f64) -> bool {
        self.0.bernoulli(p)
    }
}

//! Repeated calls reuse the compiled pipelines and the pooled buffers.

use arlbook_core::Ragged;
use arlbook_core::gpu::{self, GpuContext};
use arlbook_core::math::advantage::AdvantageOptions;
use arlbook_core::math::policy_loss::{PolicyLossConfig, PolicyLossInput, TokenAdvantages};

use crate::support::context;

#[test]
fn repeated_calls_compile_once_and_allocate_no_new_buffers() {
    // Its own context: the shared one is used by tests running in parallel.
    if context().is_none() {
        return;
    }
    let ctx = GpuContext::new_blocking().unwrap();
    let rewards = Ragged::from_rows(&[vec![1.0, 0.0, 1.0], vec![0.5; 4], vec![0.0, 2.0]]);
    let logp = Ragged::from_rows(&[vec![-1.0, -0.5], vec![-2.0, -0.1, -0.3]]);
    let input = PolicyLossInput {
        logp: &logp,
        old_logp: &logp,
        ref_logp: None,
        advantages: TokenAdvantages::PerSequence(&[1.0, -1.0]),
    };
    let call = |ctx: &GpuContext| {
        gpu::block_on(gpu::advantage::group_advantages(
            ctx,
            &rewards,
            &AdvantageOptions::default(),
        ))
        .unwrap();
        gpu::block_on(gpu::policy_loss::policy_loss(
            ctx,
            &input,
            &PolicyLossConfig::default(),
        ))
        .unwrap();
    };
    assert_eq!(ctx.kernels_compiled(), 0);
    assert_eq!(ctx.buffers_created(), 0);
    call(&ctx);
    let after_first = ctx.buffers_created();
    assert_eq!(ctx.kernels_compiled(), 2);
    assert!(after_first > 0);
    for _ in 0..3 {
        call(&ctx);
    }
    assert_eq!(ctx.kernels_compiled(), 2, "pipelines compiled again");
    assert_eq!(
        ctx.buffers_created(),
        after_first,
        "buffers allocated again"
    );
    // Fewer groups of the same rewards fall in the same size classes.
    let fewer = Ragged::from_rows(&[vec![1.0, 0.0, 1.0, 0.5, 0.5], vec![0.5, 0.5, 0.0, 2.0]]);
    gpu::block_on(gpu::advantage::group_advantages(
        &ctx,
        &fewer,
        &AdvantageOptions::default(),
    ))
    .unwrap();
    assert_eq!(
        ctx.buffers_created(),
        after_first,
        "a smaller batch allocated"
    );
}

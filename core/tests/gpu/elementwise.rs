//! `f32` kernels without sequences: the clipped surrogate and group advantages.

use arlbook_core::Ragged;
use arlbook_core::gpu;
use arlbook_core::math::advantage::{self, AdvantageOptions, Baseline, Scale, StdKind};
use arlbook_core::math::clip::{self, ClipWidths};

use crate::support::{Inputs, assert_all_close, context};

/// A ratio at least `1e-5` (relative) away from every kink of `widths`.
fn ratio_off_kinks(inputs: &mut Inputs, widths: &ClipWidths) -> f64 {
    let kinks = [
        widths.ratio_low(),
        widths.ratio_high(),
        widths.dual_clip.unwrap_or(-1.0),
    ];
    loop {
        // Extreme ratios too: near 0 and far above any clip.
        let r = match inputs.below(10) {
            0 => inputs.uniform(0.0, 1e-3),
            1 => inputs.uniform(10.0, 1e4),
            _ => inputs.uniform(0.0, 4.0),
        };
        if kinks
            .iter()
            .all(|k| (r - k).abs() > 1e-5 * k.abs().max(1.0))
        {
            return r;
        }
    }
}

#[test]
fn clip_surrogate_matches_cpu_on_random_inputs() {
    let Some(ctx) = context() else { return };
    let mut inputs = Inputs::new(2);
    for case in 0..24 {
        let widths = ClipWidths {
            eps_low: inputs.uniform(0.0, 0.9),
            eps_high: inputs.uniform(0.0, 2.0),
            dual_clip: inputs.coin(0.5).then(|| inputs.uniform(1.5, 5.0)),
        };
        let n = [1usize, 7, 64, 1000][case % 4];
        let ratio: Vec<f64> = (0..n)
            .map(|_| ratio_off_kinks(&mut inputs, &widths))
            .collect();
        let advantage: Vec<f64> = (0..n)
            .map(|_| {
                if inputs.coin(0.1) {
                    0.0
                } else {
                    inputs.uniform(-3.0, 3.0)
                }
            })
            .collect();
        let cpu = clip::clipped_surrogate(&ratio, &advantage, &widths).unwrap();
        let gpu = gpu::block_on(gpu::clip::clipped_surrogate(
            ctx, &ratio, &advantage, &widths,
        ))
        .unwrap();
        let objective = |points: &[clip::SurrogatePoint]| -> Vec<f64> {
            points.iter().map(|p| p.objective).collect()
        };
        let slope = |points: &[clip::SurrogatePoint]| -> Vec<f64> {
            points.iter().map(|p| p.d_objective_d_ratio).collect()
        };
        assert_all_close(
            &format!("case {case} objective"),
            &objective(&gpu),
            &objective(&cpu),
        );
        assert_all_close(&format!("case {case} slope"), &slope(&gpu), &slope(&cpu));
        for (i, (g, c)) in gpu.iter().zip(&cpu).enumerate() {
            assert_eq!(
                g.side, c.side,
                "case {case} element {i}: ratio {}",
                ratio[i]
            );
        }
    }
}

fn random_rewards(inputs: &mut Inputs, groups: usize) -> Ragged<f64> {
    let mut rewards = Ragged::default();
    for g in 0..groups {
        let size = [1usize, 2, 4, 16, 100][inputs.below(5)];
        let row: Vec<f64> = match g % 4 {
            // All equal (including a group of one).
            0 => vec![inputs.uniform(-1.0, 1.0); size],
            // Binary outcome rewards, as in GRPO.
            1 => (0..size)
                .map(|_| f64::from(u8::from(inputs.coin(0.4))))
                .collect(),
            _ => (0..size).map(|_| inputs.uniform(-5.0, 5.0)).collect(),
        };
        rewards.push_row(&row);
    }
    rewards
}

#[test]
fn group_advantages_match_cpu_for_every_option() {
    let Some(ctx) = context() else { return };
    let mut inputs = Inputs::new(3);
    for groups in [1usize, 3, 17, 200] {
        let rewards = random_rewards(&mut inputs, groups);
        for baseline in [Baseline::Mean, Baseline::LeaveOneOut] {
            for scale in [Scale::Group, Scale::Batch, Scale::None] {
                for std in [StdKind::Population, StdKind::Sample] {
                    let options = AdvantageOptions {
                        baseline,
                        scale,
                        std,
                        eps: 1e-4,
                        ..AdvantageOptions::default()
                    };
                    let what = format!("{groups} groups {baseline:?} {scale:?} {std:?}");
                    let cpu = advantage::group_advantages(&rewards, &options).unwrap();
                    let gpu =
                        gpu::block_on(gpu::advantage::group_advantages(ctx, &rewards, &options))
                            .unwrap();
                    assert_all_close(
                        &format!("{what} advantages"),
                        gpu.advantages.flat(),
                        cpu.advantages.flat(),
                    );
                    assert_all_close(&format!("{what} mean"), &gpu.group_mean, &cpu.group_mean);
                    assert_all_close(&format!("{what} std"), &gpu.group_std, &cpu.group_std);
                    assert_all_close(&format!("{what} divisor"), &gpu.divisor, &cpu.divisor);
                    // All-equal groups are exactly 0 on both paths.
                    for (g, row) in rewards.iter_rows().enumerate() {
                        if row.iter().all(|&r| r == row[0]) {
                            assert!(gpu.advantages.row(g).iter().all(|&a| a == 0.0), "{what}");
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn one_group_of_thousands_of_rewards_matches_cpu() {
    let Some(ctx) = context() else { return };
    let mut inputs = Inputs::new(4);
    let row: Vec<f64> = (0..5000).map(|_| inputs.uniform(0.0, 1.0)).collect();
    let mut rewards = Ragged::default();
    rewards.push_row(&row);
    let options = AdvantageOptions::default();
    let cpu = advantage::group_advantages(&rewards, &options).unwrap();
    let gpu = gpu::block_on(gpu::advantage::group_advantages(ctx, &rewards, &options)).unwrap();
    assert_all_close("advantages", gpu.advantages.flat(), cpu.advantages.flat());
}

#[test]
fn short_and_long_groups_in_one_call_match_cpu_on_both_paths() {
    let Some(ctx) = context() else { return };
    let mut inputs = Inputs::new(6);
    // Groups on both sides of the serial threshold, and right at it.
    let threshold = gpu::advantage::SERIAL_MAX_GROUP;
    let mut rewards = Ragged::default();
    for (g, size) in [1usize, threshold, 3, threshold + 1, 16, 3000, 2, 64]
        .into_iter()
        .enumerate()
    {
        let row: Vec<f64> = if g == 5 {
            vec![0.25; size]
        } else {
            (0..size).map(|_| inputs.uniform(-1.0, 1.0)).collect()
        };
        rewards.push_row(&row);
    }
    for scale in [Scale::Group, Scale::Batch, Scale::None] {
        for baseline in [Baseline::Mean, Baseline::LeaveOneOut] {
            let options = AdvantageOptions {
                baseline,
                scale,
                std: StdKind::Sample,
                eps: 1e-4,
                ..AdvantageOptions::default()
            };
            let cpu = advantage::group_advantages(&rewards, &options).unwrap();
            // The default split, every group serial, every group on a workgroup.
            for serial_max in [threshold, usize::MAX, 0] {
                let what = format!("{scale:?} {baseline:?} serial_max={serial_max}");
                let gpu = gpu::block_on(gpu::advantage::group_advantages_split(
                    ctx, &rewards, &options, serial_max,
                ))
                .unwrap();
                assert_all_close(&what, gpu.advantages.flat(), cpu.advantages.flat());
                assert_all_close(&what, &gpu.group_mean, &cpu.group_mean);
                assert_all_close(&what, &gpu.group_std, &cpu.group_std);
                assert_all_close(&what, &gpu.divisor, &cpu.divisor);
                assert!(gpu.advantages.row(5).iter().all(|&a| a == 0.0), "{what}");
                assert!(gpu.advantages.row(0).iter().all(|&a| a == 0.0), "{what}");
            }
        }
    }
}

//! Monte Carlo kernels: the same seed gives the same samples as the CPU.

use arlbook_core::gpu;
use arlbook_core::math::bandit::{self, Baseline, TwoArmed};
use arlbook_core::math::importance::{self, Problem};
use arlbook_core::math::kl_estimation;
use arlbook_core::math::lag::{self, DurationDistribution, LagConfig, LagReport};
use arlbook_core::math::sampling;

use crate::support::{Inputs, assert_same_estimate, context};

const BASELINES: [Baseline; 3] = [Baseline::None, Baseline::GroupMean, Baseline::LeaveOneOut];

#[test]
fn bandit_estimates_match_cpu_for_every_baseline_and_group_size() {
    let Some(ctx) = context() else { return };
    // 0.3 and 0.35 are not f32-exact: both paths round the thresholds the same way.
    let cases = [
        (0.5, 0.75, 0.35),
        (0.3, 0.9, 0.1),
        (0.0, 0.5, 0.5),
        (1.0, 1.0, 0.0),
    ];
    for (p, q_a, q_b) in cases {
        let arm = TwoArmed::new(p, q_a, q_b).unwrap();
        for baseline in BASELINES {
            for group_size in [1usize, 2, 4, 7] {
                let samples = group_size * 6;
                let cpu =
                    bandit::sample_estimates(&arm, baseline, group_size, samples, 300, 42).unwrap();
                let gpu = gpu::block_on(gpu::bandit::sample_estimates(
                    ctx, &arm, baseline, group_size, samples, 300, 42,
                ))
                .unwrap();
                for (r, (&g, &c)) in gpu.iter().zip(&cpu).enumerate() {
                    let what = format!("p={p} {baseline:?} G={group_size} replicate {r}");
                    assert_same_estimate(&what, g, c);
                }
                // Both finish the same integer counts with the same function.
                assert_eq!(gpu, cpu, "p={p} {baseline:?} G={group_size}");
            }
        }
    }
}

#[test]
fn bandit_long_replicates_match_cpu() {
    let Some(ctx) = context() else { return };
    let arm = TwoArmed::new(0.62, 0.7, 0.2).unwrap();
    let cpu = bandit::sample_estimates(&arm, Baseline::LeaveOneOut, 16, 16_000, 64, 9).unwrap();
    let gpu = gpu::block_on(gpu::bandit::sample_estimates(
        ctx,
        &arm,
        Baseline::LeaveOneOut,
        16,
        16_000,
        64,
        9,
    ))
    .unwrap();
    for (&g, &c) in gpu.iter().zip(&cpu) {
        assert_same_estimate("long replicate", g, c);
    }
    assert_eq!(gpu, cpu);
}

fn random_problem(inputs: &mut Inputs, actions: usize) -> Problem {
    let mut mu: Vec<f64> = (0..actions).map(|_| inputs.uniform(0.01, 1.0)).collect();
    let mut pi: Vec<f64> = (0..actions).map(|_| inputs.uniform(0.0, 1.0)).collect();
    // An action the behaviour policy never takes (and the target neither).
    if actions > 2 {
        mu[1] = 0.0;
        pi[1] = 0.0;
    }
    let mu_total: f64 = mu.iter().sum();
    let pi_total: f64 = pi.iter().sum();
    for m in &mut mu {
        *m /= mu_total;
    }
    for p in &mut pi {
        *p /= pi_total;
    }
    let values = (0..actions).map(|_| inputs.uniform(-3.0, 3.0)).collect();
    Problem::new(mu, pi, values).unwrap()
}

#[test]
fn importance_replicates_match_cpu() {
    let Some(ctx) = context() else { return };
    let mut inputs = Inputs::new(1);
    for actions in [1usize, 2, 3, 8, 40] {
        let problem = random_problem(&mut inputs, actions);
        for samples in [1usize, 24, 500] {
            let cpu = importance::sample_replicates(&problem, samples, 200, 5).unwrap();
            let gpu = gpu::block_on(gpu::importance::sample_replicates(
                ctx, &problem, samples, 200, 5,
            ))
            .unwrap();
            assert_eq!(gpu.len(), cpu.len());
            for (r, (g, c)) in gpu.iter().zip(&cpu).enumerate() {
                let what = format!("K={actions} N={samples} replicate {r}");
                assert_same_estimate(&format!("{what} ordinary"), g.ordinary, c.ordinary);
                assert_same_estimate(
                    &format!("{what} snis"),
                    g.self_normalized,
                    c.self_normalized,
                );
                assert_same_estimate(&format!("{what} ess"), g.ess, c.ess);
            }
        }
    }
}

/// The KL kernel sums `f32` values: each estimate within `1e-5` of the largest `|k(a)|`
/// (the per-action values rounded to `f32`, then a compensated sum), and the sign of
/// every k1 estimate the same unless it lies that close to 0.
#[test]
fn kl_estimator_replicates_match_cpu() {
    let Some(ctx) = context() else { return };
    let mut inputs = Inputs::new(2);
    for actions in [1usize, 2, 3, 8, 40, 1000] {
        let mut draw = |zero: Option<usize>| {
            let mut p: Vec<f64> = (0..actions).map(|_| inputs.uniform(0.01, 1.0)).collect();
            if let Some(i) = zero.filter(|&i| i < actions && actions > 2) {
                p[i] = 0.0;
            }
            let total: f64 = p.iter().sum();
            p.iter().map(|x| x / total).collect::<Vec<f64>>()
        };
        // The policy never takes action 1 (so k3 is biased), the reference takes all.
        let policy = draw(Some(1));
        let reference = draw(None);
        let problem = kl_estimation::Problem::new(&policy, &reference).unwrap();
        let scale = problem
            .values
            .iter()
            .flatten()
            .fold(0.0f64, |m, v| m.max(v.abs()));
        for samples in [1usize, 16, 500] {
            let cpu = kl_estimation::sample_replicates(&problem, samples, 300, 9).unwrap();
            let gpu = gpu::block_on(gpu::kl_estimation::sample_replicates(
                ctx, &problem, samples, 300, 9,
            ))
            .unwrap();
            assert_eq!(gpu.len(), cpu.len());
            let tolerance = 1e-5 * scale + 1e-12;
            for (r, (g, c)) in gpu.iter().zip(&cpu).enumerate() {
                for i in 0..3 {
                    assert!(
                        (g[i] - c[i]).abs() <= tolerance,
                        "K={actions} N={samples} replicate {r} k{}: gpu {} vs cpu {}",
                        i + 1,
                        g[i],
                        c[i]
                    );
                }
                if c[0].abs() > tolerance {
                    assert_eq!(
                        g[0] < 0.0,
                        c[0] < 0.0,
                        "K={actions} N={samples} replicate {r}"
                    );
                }
            }
        }
    }
}

#[test]
fn dynamic_sampling_runs_are_identical() {
    let Some(ctx) = context() else { return };
    for (p, group_size, mixed, max_groups) in [
        (0.5, 4u64, 8u64, 1000u64),
        (0.01, 16, 3, 2000),
        (0.3, 1, 2, 50),
        (0.999, 8, 4, 30),
    ] {
        let cpu = sampling::simulate_replicates(p, group_size, mixed, max_groups, 500, 17).unwrap();
        let gpu = gpu::block_on(gpu::sampling::simulate_replicates(
            ctx, p, group_size, mixed, max_groups, 500, 17,
        ))
        .unwrap();
        assert_eq!(gpu, cpu, "p={p} G={group_size}");
    }
}

fn pooled_cpu(config: &LagConfig, replicates: usize, seed: u64) -> (LagReport, Vec<f64>) {
    let reports = lag::simulate_replicates(config, replicates, seed).unwrap();
    let mut pooled = LagReport::default();
    for report in &reports {
        pooled.pool(report);
    }
    (
        pooled,
        reports.iter().map(LagReport::kept_fraction).collect(),
    )
}

#[test]
fn lag_simulation_with_fixed_durations_is_identical() {
    let Some(ctx) = context() else { return };
    for (workers, batch_size, max_lag, duration) in [
        (4usize, 2usize, 1u64, 1.0),
        (7, 3, 0, 0.5),
        (1, 1, 0, 2.0),
        (16, 5, 2, 0.25),
    ] {
        let config = LagConfig {
            workers,
            duration: DurationDistribution::Fixed { duration },
            batch_size,
            max_lag,
            updates: 40,
        };
        let cpu = pooled_cpu(&config, 8, 3);
        let gpu = gpu::block_on(gpu::lag::simulate_pooled(ctx, &config, 8, 3)).unwrap();
        assert_eq!(gpu, cpu, "W={workers} B={batch_size}");
    }
}

#[test]
fn lag_simulation_with_random_durations_agrees() {
    let Some(ctx) = context() else { return };
    let replicates = 400;
    for duration in [
        DurationDistribution::Uniform { min: 1.0, max: 3.0 },
        DurationDistribution::Exponential { mean: 2.0 },
        DurationDistribution::Lognormal {
            log_mean: 0.0,
            log_std: 0.5,
        },
    ] {
        let config = LagConfig {
            workers: 6,
            duration,
            batch_size: 4,
            max_lag: 1,
            updates: 30,
        };
        let (cpu, cpu_fractions) = pooled_cpu(&config, replicates, 11);
        let (gpu, gpu_fractions) =
            gpu::block_on(gpu::lag::simulate_pooled(ctx, &config, replicates, 11)).unwrap();
        assert_eq!(gpu.completed, cpu.completed);
        let same = gpu_fractions
            .iter()
            .zip(&cpu_fractions)
            .filter(|(g, c)| g == c)
            .count();
        assert!(
            same * 10 >= replicates * 9,
            "{duration:?}: only {same} replicates agree"
        );
        let (g, c) = (gpu.kept_fraction(), cpu.kept_fraction());
        assert!((g - c).abs() < 0.01, "{duration:?}: kept {g} vs {c}");
        assert!(
            (gpu.elapsed / cpu.elapsed - 1.0).abs() < 1e-3,
            "{duration:?}: elapsed"
        );
    }
}

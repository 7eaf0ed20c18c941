//! Asynchronous rollout collection with a staleness filter: how much experience a
//! policy-lag bound throws away.
//!
//! `W` workers generate rollouts back to back; each rollout's duration is drawn from a
//! distribution. The learner takes an update after every `batch_size` completed
//! rollouts, and each update raises the policy version by one. A rollout started at
//! version `v` and consumed by the update at version `u` has lag `u - v`; the filter keeps
//! it when `u - v <= max_lag` and drops it otherwise (the policy-lag filter of GLM-5
//! Team 2026, §4.1.2; the actor/learner split of IMPALA, Espeholt et al. 2018).
//!
//! ## Design
//! - The update schedule counts completions, kept or not, and updates are instantaneous.
//!   So the timeline (which rollout finishes when, at which version) does not depend on
//!   `max_lag`: one seed gives the same run for every threshold, the filter is a pure
//!   mask over it, and the kept fraction can only grow with `max_lag`. A dropped rollout
//!   leaves its update with fewer than `batch_size` samples.
//! - The simulation is an event loop over one array of worker finish times: the next
//!   event is the smallest finish time, ties going to the lowest worker index. One GPU
//!   thread per replicate can run the same loop.
//! - Draw order (stream `RandomStream::new(seed, r)` for replicate `r`): first the
//!   initial durations of workers `0..W` in index order, then one duration each time a
//!   worker restarts, in event order. `fixed` draws nothing, `uniform` and `exponential`
//!   one uniform, `lognormal` two (Box-Muller, cosine branch: `u1` in `(0, 1]` then `u2`).
//! - The worker whose completion triggers an update restarts at the new version.

use serde::{Deserialize, Serialize};

use crate::error::{FieldError, Result, check};
use crate::rng::RandomStream;

/// Largest duration parameter accepted (`duration`, `max`, `mean`).
pub const MAX_DURATION: f64 = 1e9;

/// Smallest duration scale accepted (`duration`, `max`, `mean`): a smaller one makes the
/// throughput `kept / elapsed` overflow `f64`.
pub const MIN_DURATION: f64 = 1e-9;

/// How long one rollout takes, in arbitrary time units.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum DurationDistribution {
    /// Every rollout takes `duration` (> 0).
    Fixed {
        /// The duration, in `(0, 1e9]`.
        duration: f64,
    },
    /// Uniform on `[min, max]`, `0 <= min <= max <= 1e9`, `max > 0`.
    Uniform {
        /// Shortest duration.
        min: f64,
        /// Longest duration.
        max: f64,
    },
    /// Exponential with the given mean (> 0): `-mean ln(1 - u)` (`1 - u` in `(0, 1]`).
    Exponential {
        /// Mean duration, in `(0, 1e9]`.
        mean: f64,
    },
    /// `exp(log_mean + log_std Z)` with `Z` standard normal.
    Lognormal {
        /// Mean of the log duration, in `[-20, 20]`.
        log_mean: f64,
        /// Standard deviation of the log duration, in `[0, 10]`.
        log_std: f64,
    },
}

impl DurationDistribution {
    /// Checks the parameters; errors name `duration.<parameter>`.
    pub fn validate(&self) -> Result<()> {
        let within = |e: FieldError| e.within("duration");
        // Bounded so a run's clock stays finite.
        let bounded = |field: &str, v: f64| check::in_range(field, v, 0.0, MAX_DURATION);
        // Bounded below too, so the throughput (kept / elapsed) stays finite.
        let scale = |field: &str, v: f64| check::in_range(field, v, MIN_DURATION, MAX_DURATION);
        match *self {
            Self::Fixed { duration } => scale("duration", duration).map_err(within)?,
            Self::Uniform { min, max } => {
                bounded("min", min).map_err(within)?;
                scale("max", max).map_err(within)?;
                if max < min {
                    return Err(FieldError::new(
                        "duration.max",
                        format!("must be >= min ({min})"),
                    ));
                }
                max
            }
            Self::Exponential { mean } => scale("mean", mean).map_err(within)?,
            Self::Lognormal { log_mean, log_std } => {
                check::in_range("log_mean", log_mean, -20.0, 20.0).map_err(within)?;
                check::in_range("log_std", log_std, 0.0, 10.0).map_err(within)?
            }
        };
        Ok(())
    }

    /// One duration, drawing as the module docs describe.
    pub fn draw(&self, stream: &mut RandomStream) -> f64 {
        match *self {
            Self::Fixed { duration } => duration,
            Self::Uniform { min, max } => min + (max - min) * stream.uniform(),
            Self::Exponential { mean } => stream.exponential(mean),
            Self::Lognormal { log_mean, log_std } => {
                let u1 = stream.uniform_open_low();
                let u2 = stream.uniform();
                let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                (log_mean + log_std * z).exp()
            }
        }
    }
}

/// The simulation's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LagConfig {
    /// Number of workers generating rollouts in parallel (>= 1).
    pub workers: usize,
    /// Rollout durations.
    pub duration: DurationDistribution,
    /// Completed rollouts per learner update (>= 1).
    pub batch_size: usize,
    /// The largest lag kept.
    pub max_lag: u64,
    /// Updates to simulate (>= 1).
    pub updates: usize,
}

impl LagConfig {
    /// Checks counts and the distribution.
    pub fn validate(&self) -> Result<()> {
        check::count("workers", self.workers, 1, 1 << 16)?;
        check::count("batch_size", self.batch_size, 1, usize::MAX)?;
        check::count("updates", self.updates, 1, usize::MAX)?;
        self.duration.validate()
    }

    /// Rollouts completed in one replicate: `updates * batch_size`.
    pub fn completions(&self) -> usize {
        self.updates.saturating_mul(self.batch_size)
    }
}

/// What one replicate (or several, pooled) produced.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LagReport {
    /// Rollouts completed and consumed by an update.
    pub completed: u64,
    /// Of those, kept by the filter.
    pub kept: u64,
    /// Of those, dropped as too stale.
    pub discarded: u64,
    /// `lag_histogram[l]`: completed rollouts with lag `l`, for `l = 0..=max seen`.
    pub lag_histogram: Vec<u64>,
    /// Sum of lags over completed rollouts.
    pub lag_sum: u64,
    /// Time of the last update (summed over pooled replicates).
    pub elapsed: f64,
}

impl LagReport {
    /// `kept / completed` (0 when nothing completed).
    pub fn kept_fraction(&self) -> f64 {
        ratio(self.kept as f64, self.completed as f64)
    }

    /// Kept rollouts per unit time (0 when no time passed).
    pub fn throughput(&self) -> f64 {
        ratio(self.kept as f64, self.elapsed)
    }

    /// Mean lag of completed rollouts.
    pub fn mean_lag(&self) -> f64 {
        ratio(self.lag_sum as f64, self.completed as f64)
    }

    /// Adds another report's counts, histogram and time to this one.
    pub fn pool(&mut self, other: &Self) {
        self.completed += other.completed;
        self.kept += other.kept;
        self.discarded += other.discarded;
        self.lag_sum += other.lag_sum;
        self.elapsed += other.elapsed;
        if self.lag_histogram.len() < other.lag_histogram.len() {
            self.lag_histogram.resize(other.lag_histogram.len(), 0);
        }
        for (mine, theirs) in self.lag_histogram.iter_mut().zip(&other.lag_histogram) {
            *mine += theirs;
        }
    }
}

fn ratio(numerator: f64, denominator: f64) -> f64 {
    if denominator > 0.0 {
        numerator / denominator
    } else {
        0.0
    }
}

/// One replicate of the event simulation. Call [`LagConfig::validate`] first.
pub fn simulate(config: &LagConfig, stream: &mut RandomStream) -> LagReport {
    let mut finish_time: Vec<f64> = (0..config.workers)
        .map(|_| config.duration.draw(stream))
        .collect();
    let mut start_version = vec![0u64; config.workers];
    let mut version = 0u64;
    let mut in_batch = 0usize;
    let mut report = LagReport::default();
    while (version as usize) < config.updates {
        if crate::cancel::due(report.completed as usize) {
            break;
        }
        // Smallest finish time; strict `<` keeps the lowest index on ties.
        let mut worker = 0;
        for w in 1..config.workers {
            if finish_time[w] < finish_time[worker] {
                worker = w;
            }
        }
        let now = finish_time[worker];
        let lag = version - start_version[worker];
        let lag_index = lag as usize;
        if report.lag_histogram.len() <= lag_index {
            report.lag_histogram.resize(lag_index + 1, 0);
        }
        report.lag_histogram[lag_index] += 1;
        report.completed += 1;
        report.lag_sum += lag;
        if lag <= config.max_lag {
            report.kept += 1;
        } else {
            report.discarded += 1;
        }
        in_batch += 1;
        if in_batch == config.batch_size {
            in_batch = 0;
            version += 1;
            report.elapsed = now;
        }
        start_version[worker] = version;
        finish_time[worker] = now + config.duration.draw(stream);
    }
    report
}

/// `replicates` independent runs; replicate `r` draws from `RandomStream::new(seed, r)`.
pub fn simulate_replicates(
    config: &LagConfig,
    replicates: usize,
    seed: u64,
) -> Result<Vec<LagReport>> {
    config.validate()?;
    Ok((0..replicates)
        .map(|r| simulate(config, &mut RandomStream::new(seed, r as u64)))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn config(
        workers: usize,
        duration: DurationDistribution,
        batch_size: usize,
        max_lag: u64,
    ) -> LagConfig {
        LagConfig {
            workers,
            duration,
            batch_size,
            max_lag,
            updates: 50,
        }
    }

    const EXP: DurationDistribution = DurationDistribution::Exponential { mean: 1.0 };

    #[test]
    fn one_worker_with_batch_size_one_is_synchronous_and_keeps_everything() {
        let cfg = config(1, EXP, 1, 0);
        let report = &simulate_replicates(&cfg, 1, 3).unwrap()[0];
        assert_eq!(report.completed, 50);
        assert_eq!(report.kept, 50);
        assert_eq!(report.lag_histogram, vec![50]);
        assert_eq!(report.kept_fraction(), 1.0);
    }

    #[test]
    fn fixed_durations_with_workers_equal_to_batch_lag_by_one_except_the_last() {
        // Four equal rollouts finish together. Workers 0..3 restart before the batch is
        // full (still version v); worker 3 fills it and restarts at v + 1. From the
        // second round on, three of four rollouts are one version stale.
        let cfg = config(4, DurationDistribution::Fixed { duration: 2.0 }, 4, 0);
        let report = &simulate_replicates(&cfg, 1, 0).unwrap()[0];
        assert_eq!(report.lag_histogram, vec![4 + 49, 3 * 49]);
        assert_eq!(report.kept, 53);
        assert_eq!(report.elapsed, 100.0);
        assert!((report.throughput() - 0.53).abs() < 1e-12);
    }

    #[test]
    fn bad_distribution_parameters_name_the_field() {
        let bad = config(
            2,
            DurationDistribution::Uniform { min: 3.0, max: 1.0 },
            1,
            0,
        );
        assert_eq!(bad.validate().unwrap_err().field, "duration.max");
        let bad = config(2, DurationDistribution::Exponential { mean: -1.0 }, 1, 0);
        assert_eq!(bad.validate().unwrap_err().field, "duration.mean");
        assert_eq!(
            config(0, EXP, 1, 0).validate().unwrap_err().field,
            "workers"
        );
    }

    #[test]
    fn lognormal_durations_have_the_right_median() {
        let dist = DurationDistribution::Lognormal {
            log_mean: 1.0,
            log_std: 0.5,
        };
        let mut stream = RandomStream::new(4, 0);
        let n = 20_000;
        let below = (0..n)
            .filter(|_| dist.draw(&mut stream) < 1f64.exp())
            .count();
        let fraction = below as f64 / f64::from(n);
        assert!((fraction - 0.5).abs() < 0.015, "{fraction}");
    }

    #[test]
    fn runs_are_deterministic_per_seed() {
        let cfg = config(8, EXP, 4, 1);
        assert_eq!(
            simulate_replicates(&cfg, 2, 5).unwrap(),
            simulate_replicates(&cfg, 2, 5).unwrap()
        );
        assert_ne!(
            simulate_replicates(&cfg, 1, 5).unwrap(),
            simulate_replicates(&cfg, 1, 6).unwrap()
        );
    }

    proptest! {
        #[test]
        fn kept_fraction_never_falls_as_max_lag_grows(
            workers in 1usize..12, batch_size in 1usize..8, seed in 0u64..1000, max_lag in 0u64..6,
        ) {
            let dist = DurationDistribution::Uniform { min: 0.5, max: 3.0 };
            let low = simulate_replicates(&config(workers, dist, batch_size, max_lag), 1, seed).unwrap();
            let high = simulate_replicates(&config(workers, dist, batch_size, max_lag + 1), 1, seed).unwrap();
            prop_assert!(high[0].kept_fraction() >= low[0].kept_fraction());
        }

        #[test]
        fn counts_are_consistent(workers in 1usize..12, batch_size in 1usize..8, seed in 0u64..1000, max_lag in 0u64..4) {
            let cfg = config(workers, EXP, batch_size, max_lag);
            let report = &simulate_replicates(&cfg, 1, seed).unwrap()[0];
            prop_assert_eq!(report.kept + report.discarded, report.completed);
            prop_assert_eq!(report.completed, (50 * batch_size) as u64);
            prop_assert_eq!(report.lag_histogram.iter().sum::<u64>(), report.completed);
            let kept_by_histogram: u64 = report.lag_histogram.iter().take(max_lag as usize + 1).sum();
            prop_assert_eq!(kept_by_histogram, report.kept);
        }
    }
}

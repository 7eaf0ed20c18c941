//! `lag-filter`: a seeded event simulation of asynchronous rollout collection, and how
//! many rollouts a staleness bound keeps (see [`crate::math::lag`]).

use serde::{Deserialize, Serialize};

use super::{Entry, check_draws, check_work};
use crate::error::{Result, check};
use crate::math::lag::{self, DurationDistribution, LagConfig, LagReport};

/// Finish-time comparisons charged as one work unit (calibrated with the draws: a
/// comparison costs about a quarter of a draw).
const SCANS_PER_UNIT: u64 = 4;

/// Request for `lag-filter`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// Workers generating rollouts in parallel, `1..=65536`.
    pub workers: usize,
    /// Rollout duration distribution, tagged by `kind`: `{"kind": "fixed", "duration"}`,
    /// `{"kind": "uniform", "min", "max"}`, `{"kind": "exponential", "mean"}` or
    /// `{"kind": "lognormal", "log_mean", "log_std"}` (arbitrary time units); `duration`,
    /// `max` and `mean` in `[1e-9, 1e9]`, `min` in `[0, max]`.
    pub duration: DurationDistribution,
    /// Completed rollouts per learner update (>= 1). Default 8.
    #[serde(default = "default_batch_size")]
    pub batch_size: usize,
    /// Largest lag (in policy versions) the filter keeps.
    pub max_lag: u64,
    /// Learner updates to simulate (>= 1).
    pub updates: usize,
    /// Independent runs (`1..=100000`), pooled in the totals; run `r` uses stream `r`.
    /// Default 1.
    #[serde(default = "default_replicates")]
    pub replicates: usize,
    /// Seed. Default 0.
    #[serde(default)]
    pub seed: u64,
}

fn default_batch_size() -> usize {
    8
}
fn default_replicates() -> usize {
    1
}

/// Response of `lag-filter`, pooled over replicates.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Response {
    /// Kept rollouts / completed rollouts.
    pub kept_fraction: f64,
    /// Completed rollouts per lag `0..=max seen`.
    pub lag_histogram: Vec<u64>,
    /// Kept rollouts per unit time.
    pub throughput: f64,
    /// Rollouts consumed by updates (`updates * batch_size * replicates`).
    pub completed: u64,
    /// Rollouts kept by the filter.
    pub kept: u64,
    /// Rollouts dropped as too stale.
    pub discarded: u64,
    /// Mean lag of completed rollouts.
    pub mean_lag: f64,
    /// Simulated time until the last update, summed over replicates.
    pub elapsed: f64,
    /// Kept fraction of each replicate.
    pub kept_fraction_per_replicate: Vec<f64>,
}

impl Response {
    /// The kept fraction the filter gives with bound `max_lag` on this same run: the
    /// timeline does not depend on the bound ([`crate::math::lag`]), so it is the share
    /// of the completed rollouts at lags `0..=max_lag` (0 when none completed). Equal
    /// to `kept_fraction` of a request with that `max_lag` (tested).
    pub fn kept_fraction_within(&self, max_lag: u64) -> f64 {
        if self.completed == 0 {
            return 0.0;
        }
        let within: u64 = self
            .lag_histogram
            .iter()
            .take(
                usize::try_from(max_lag)
                    .unwrap_or(usize::MAX)
                    .saturating_add(1),
            )
            .sum();
        within as f64 / self.completed as f64
    }
}

/// The `lag-filter` entry.
pub struct LagFilter;

/// A validated request: the simulation to run (replicate `r` uses stream `r`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plan {
    /// The validated settings.
    pub config: LagConfig,
    /// Number of runs.
    pub replicates: usize,
    /// Seed.
    pub seed: u64,
}

/// The simulation's work in units of [`super::MAX_WORK`]: each event (a completion or
/// a worker's first start) scans every worker's finish time, a comparison being a
/// quarter unit.
fn scan_work(config: &LagConfig, replicates: usize) -> u64 {
    let events = (config.completions() as u64).saturating_add(config.workers as u64);
    events
        .saturating_mul(config.workers as u64)
        .saturating_mul(replicates as u64)
        / SCANS_PER_UNIT
}

impl Plan {
    /// The simulation's work in units of [`super::MAX_WORK`].
    pub fn work(&self) -> u64 {
        scan_work(&self.config, self.replicates)
    }
}

/// Validates `request`, including its work bounds.
pub fn plan(request: &Request) -> Result<Plan> {
    let config = LagConfig {
        workers: request.workers,
        duration: request.duration,
        batch_size: request.batch_size,
        max_lag: request.max_lag,
        updates: request.updates,
    };
    config.validate()?;
    check::count("replicates", request.replicates, 1, 100_000)?;
    let per_duration = match request.duration {
        DurationDistribution::Lognormal { .. } => 2,
        _ => 1,
    };
    let events = (config.completions() as u64).saturating_add(request.workers as u64);
    let replicates = request.replicates as u64;
    check_draws(
        "updates",
        events
            .saturating_mul(per_duration)
            .saturating_mul(replicates),
    )?;
    check_work("workers", scan_work(&config, request.replicates))?;
    Ok(Plan {
        config,
        replicates: request.replicates,
        seed: request.seed,
    })
}

/// The response from the pooled report and each replicate's kept fraction.
pub fn respond(pooled: LagReport, kept_fraction_per_replicate: Vec<f64>) -> Response {
    Response {
        kept_fraction: pooled.kept_fraction(),
        throughput: pooled.throughput(),
        mean_lag: pooled.mean_lag(),
        completed: pooled.completed,
        kept: pooled.kept,
        discarded: pooled.discarded,
        elapsed: pooled.elapsed,
        kept_fraction_per_replicate,
        lag_histogram: pooled.lag_histogram,
    }
}

impl Entry for LagFilter {
    const NAME: &'static str = "lag-filter";
    const SUMMARY: &'static str =
        "Asynchronous collection with a policy-lag bound: kept fraction, lag histogram, throughput";
    type Request = Request;
    type Response = Response;

    fn compute(request: &Request) -> Result<Response> {
        let plan = plan(request)?;
        let reports = lag::simulate_replicates(&plan.config, plan.replicates, plan.seed)?;
        let mut pooled = LagReport::default();
        for report in &reports {
            pooled.pool(report);
        }
        Ok(respond(
            pooled,
            reports.iter().map(LagReport::kept_fraction).collect(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::super::compute;
    use serde_json::json;

    #[test]
    fn synchronous_single_worker_keeps_everything() {
        let out = compute(
            "lag-filter",
            json!({"workers": 1, "duration": {"kind": "exponential", "mean": 1.0}, "batch_size": 1, "max_lag": 0, "updates": 30, "seed": 1}),
        )
        .unwrap();
        assert_eq!(out["kept_fraction"], json!(1.0));
        assert_eq!(out["lag_histogram"], json!([30]));
    }

    #[test]
    fn more_slack_keeps_more() {
        let run = |max_lag: u64| {
            compute(
                "lag-filter",
                json!({"workers": 16, "duration": {"kind": "lognormal", "log_mean": 0.0, "log_std": 1.0}, "batch_size": 4, "max_lag": max_lag, "updates": 100, "replicates": 4, "seed": 9}),
            )
            .unwrap()["kept_fraction"]
                .as_f64()
                .unwrap()
        };
        let fractions: Vec<f64> = (0..6).map(run).collect();
        assert!(fractions.windows(2).all(|w| w[1] >= w[0]), "{fractions:?}");
        assert!(fractions[0] < fractions[5]);
    }

    #[test]
    fn the_kept_fraction_at_any_bound_is_read_off_one_run() {
        use super::{LagFilter, Request};
        use crate::api::Entry;
        use crate::math::lag::DurationDistribution;
        for (workers, batch_size, duration, seed) in [
            (16, 8, DurationDistribution::Exponential { mean: 1.0 }, 7),
            (3, 1, DurationDistribution::Fixed { duration: 2.0 }, 0),
            (
                40,
                4,
                DurationDistribution::Lognormal {
                    log_mean: 0.0,
                    log_std: 1.5,
                },
                11,
            ),
        ] {
            let request = |max_lag| Request {
                workers,
                duration,
                batch_size,
                max_lag,
                updates: 60,
                replicates: 3,
                seed,
            };
            let one = LagFilter::compute(&request(0)).unwrap();
            for bound in 0..12 {
                let direct = LagFilter::compute(&request(bound)).unwrap().kept_fraction;
                assert_eq!(one.kept_fraction_within(bound), direct, "bound {bound}");
            }
            assert_eq!(one.kept_fraction_within(u64::MAX), 1.0);
        }
    }

    #[test]
    fn bad_duration_names_the_nested_field() {
        let err = compute(
            "lag-filter",
            json!({"workers": 2, "duration": {"kind": "fixed", "duration": 0.0}, "max_lag": 0, "updates": 3}),
        )
        .unwrap_err();
        assert_eq!(err.field, "duration.duration");
    }

    #[test]
    fn unknown_fields_are_rejected_inside_the_distribution_too() {
        let err = compute(
            "lag-filter",
            json!({"workers": 2, "duration": {"kind": "fixed", "duration": 1.0, "jitter": 1}, "max_lag": 0, "updates": 3}),
        )
        .unwrap_err();
        assert!(err.field.starts_with("duration"), "{err:?}");
        let err = compute(
            "lag-filter",
            json!({"workers": 2, "duration": {"kind": "fixed", "duration": 1.0}, "max_lag": 0, "updates": 3, "speed": 2}),
        )
        .unwrap_err();
        assert!(err.message.contains("speed"), "{err:?}");
    }

    #[test]
    fn huge_runs_are_refused() {
        let err = compute(
            "lag-filter",
            json!({"workers": 2, "duration": {"kind": "fixed", "duration": 1.0}, "max_lag": 0, "updates": 100_000_000}),
        )
        .unwrap_err();
        assert_eq!(err.field, "updates");
    }
}

//! `mixed-group`: the probability that a group holds both a success and a failure, the
//! expected cost of dynamic sampling, and optionally a seeded simulation of it (see
//! [`crate::math::sampling`]).

use serde::{Deserialize, Serialize};

use super::{Entry, MAX_DRAWS, OneOrMany, WORK_PER_CELL, check_draws, check_work, units, work};
use crate::error::{FieldError, Result, check};
use crate::math::bandit::mean_and_sample_variance;
use crate::math::sampling;

/// Request for `mixed-group`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// Success probability per rollout, in `[0, 1]`; a number or a list (grid rows).
    pub p: OneOrMany<f64>,
    /// Rollouts per group `G >= 1`; a number or a list (grid columns).
    pub group_size: OneOrMany<u64>,
    /// Mixed groups wanted per batch, `B >= 1`, for the cost figures. Default 1.
    #[serde(default = "default_mixed_groups")]
    pub mixed_groups: u64,
    /// Simulated runs of dynamic sampling (single `p` and `group_size` only), at most
    /// 100 000. Default 0: no simulation.
    #[serde(default)]
    pub replicates: usize,
    /// Seed of the simulation; run `r` uses stream `r`. Default 0.
    #[serde(default)]
    pub seed: u64,
}

fn default_mixed_groups() -> u64 {
    1
}

/// The documented defaults of the optional fields, with the required ones empty: a base
/// for `Request { .., ..Request::default() }`, not a valid request by itself.
impl Default for Request {
    fn default() -> Self {
        Self {
            p: OneOrMany::Many(Vec::new()),
            group_size: OneOrMany::Many(Vec::new()),
            mixed_groups: default_mixed_groups(),
            replicates: 0,
            seed: 0,
        }
    }
}

/// A number for scalar inputs, or a table `[p][group_size]` when either input is a list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Grid<T> {
    /// Both inputs were numbers.
    Scalar(T),
    /// `table[i][j]` is for `p[i]` and `group_size[j]`.
    Table(Vec<Vec<T>>),
}

impl<T> Grid<T> {
    /// The number, for scalar inputs (`None` for a table).
    pub fn into_scalar(self) -> Option<T> {
        match self {
            Self::Scalar(value) => Some(value),
            Self::Table(_) => None,
        }
    }

    /// The table, when either input was a list (`None` for a number).
    pub fn into_table(self) -> Option<Vec<Vec<T>>> {
        match self {
            Self::Scalar(_) => None,
            Self::Table(table) => Some(table),
        }
    }
}

/// Summary of the simulated runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Simulation {
    /// Mean number of groups drawn per run.
    pub mean_groups: f64,
    /// Sample variance of the groups drawn (divisor `replicates - 1`).
    pub variance_groups: f64,
    /// Closed-form variance `B (1 - P) / P^2`, to compare.
    pub variance_groups_theory: f64,
    /// Groups drawn in each run.
    pub groups_drawn: Vec<u64>,
    /// Runs stopped by the cap of `10 B / P + 100` groups before finding `B` mixed groups.
    pub capped: usize,
}

/// Response of `mixed-group`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Response {
    /// `P(mixed) = 1 - p^G - (1 - p)^G`.
    pub probability: Grid<f64>,
    /// Expected groups drawn to collect `B` mixed ones, `B / P`; `null` where `P = 0`
    /// (no number of draws suffices).
    pub expected_attempts: Grid<Option<f64>>,
    /// Expected rollouts generated, `B G / P`; `null` where `P = 0`.
    pub expected_rollouts: Grid<Option<f64>>,
    /// Present when `replicates > 0`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub simulation: Option<Simulation>,
}

/// The `mixed-group` entry.
pub struct MixedGroup;

fn map_grid<T, U>(table: &[Vec<T>], scalar: bool, f: impl Fn(usize, &T) -> U) -> Grid<U> {
    let mut mapped: Vec<Vec<U>> = table
        .iter()
        .map(|row| row.iter().enumerate().map(|(j, v)| f(j, v)).collect())
        .collect();
    // A scalar request has a 1 x 1 table.
    if scalar && let Some(value) = mapped.pop().and_then(|mut row| row.pop()) {
        return Grid::Scalar(value);
    }
    Grid::Table(mapped)
}

/// The simulation a validated request asks for (run `r` uses stream `r`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimulationJob {
    /// Success probability per rollout.
    pub p: f64,
    /// Rollouts per group.
    pub group_size: u64,
    /// Mixed groups wanted.
    pub mixed_groups: u64,
    /// The cap on groups drawn, `10 B / P + 100`.
    pub max_groups: u64,
    /// Number of runs.
    pub replicates: usize,
    /// Seed.
    pub seed: u64,
    /// `P(mixed)`.
    pub probability: f64,
}

fn simulation_job(
    request: &Request,
    p: f64,
    group_size: u64,
    probability: f64,
) -> Result<SimulationJob> {
    let Some(expected) = sampling::expected_groups_drawn(probability, request.mixed_groups) else {
        return Err(FieldError::new(
            "p",
            "no group can be mixed, so dynamic sampling never ends",
        ));
    };
    check::count("replicates", request.replicates, 1, 100_000)?;
    check::probability("p", p)?;
    check::count(
        "group_size",
        usize::try_from(group_size).unwrap_or(usize::MAX),
        1,
        1 << 20,
    )?;
    // The cap in f64 first: for a rare mixed group it is far past u64 (and the budget).
    let cap = (10.0 * expected).ceil() + 100.0;
    let draws = cap * request.replicates as f64 * group_size as f64;
    if draws > MAX_DRAWS as f64 {
        return Err(FieldError::new(
            "replicates",
            format!(
                "asks for up to {draws:e} random draws (replicates x (10 B / P + 100) x G); \
                 the limit per request is {MAX_DRAWS}"
            ),
        ));
    }
    let max_groups = cap as u64;
    check_draws(
        "replicates",
        work(&[units(request.replicates), max_groups, group_size]),
    )?;
    Ok(SimulationJob {
        p,
        group_size,
        mixed_groups: request.mixed_groups,
        max_groups,
        replicates: request.replicates,
        seed: request.seed,
        probability,
    })
}

fn summarize(job: &SimulationJob, runs: &[sampling::DynamicSamplingRun]) -> Simulation {
    let request = job;
    let probability = job.probability;
    let groups_drawn: Vec<u64> = runs.iter().map(|r| r.groups_drawn).collect();
    let as_f64: Vec<f64> = groups_drawn.iter().map(|&g| g as f64).collect();
    let (mean_groups, variance_groups) = mean_and_sample_variance(&as_f64);
    Simulation {
        mean_groups,
        variance_groups,
        variance_groups_theory: sampling::groups_drawn_variance(probability, request.mixed_groups)
            .unwrap_or(0.0),
        capped: runs.iter().filter(|r| r.capped).count(),
        groups_drawn,
    }
}

/// A validated request: the response without its simulation, and the simulation to run.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The closed-form part of the response (`simulation` is `None`).
    pub partial: Response,
    /// The simulation, when `replicates > 0`.
    pub job: Option<SimulationJob>,
}

/// Refuses a cell whose `P(mixed)` is positive but so small that `B / P` or `B G / P`
/// overflows `f64` (only `P = 0` reports `null`), naming `p` or `p[i]`.
fn check_representable(table: &[Vec<f64>], scalar: bool, sizes: &[u64], b: u64) -> Result<()> {
    for (i, row) in table.iter().enumerate() {
        for (&prob, &g) in row.iter().zip(sizes) {
            let rollouts = sampling::expected_groups_drawn(prob, b).map(|v| v * g as f64);
            if prob > 0.0 && !rollouts.is_some_and(f64::is_finite) {
                let field = if scalar {
                    "p".to_owned()
                } else {
                    format!("p[{i}]")
                };
                return Err(FieldError::new(
                    field,
                    format!(
                        "P(mixed) = {prob:e} is so small that the expected cost B G / P \
                         overflows f64"
                    ),
                ));
            }
        }
    }
    Ok(())
}

impl Plan {
    /// The simulation's expected random draws, `replicates x (B / P) x G` (a run
    /// draws groups until `B` are mixed; the request's check bounds the draws by the
    /// cap `10 B / P + 100` instead), in units of [`super::MAX_WORK`].
    pub fn work(&self) -> u64 {
        self.job.as_ref().map_or(0, |job| {
            let groups = (job.mixed_groups as f64 / job.probability)
                .ceil()
                .min(job.max_groups as f64) as u64;
            work(&[units(job.replicates), groups, job.group_size])
        })
    }
}

/// Validates `request` and computes the closed forms.
pub fn plan(request: &Request) -> Result<Plan> {
    let ps = request.p.to_vec();
    let sizes = request.group_size.to_vec();
    check::non_empty("p", &ps)?;
    check::non_empty("group_size", &sizes)?;
    check::count(
        "mixed_groups",
        usize::try_from(request.mixed_groups).unwrap_or(usize::MAX),
        1,
        1 << 30,
    )?;
    // Three numbers per cell (probability, attempts, rollouts); the longer list drives it.
    let longer = if ps.len() >= sizes.len() {
        "p"
    } else {
        "group_size"
    };
    check_work(
        longer,
        work(&[units(ps.len()), units(sizes.len()), 3 * WORK_PER_CELL]),
    )?;
    let scalar = !request.p.is_many() && !request.group_size.is_many();
    let table = if scalar {
        vec![vec![sampling::mixed_group_probability(ps[0], sizes[0])?]]
    } else {
        sampling::mixed_group_grid(&ps, &sizes)?
    };
    let b = request.mixed_groups;
    check_representable(&table, scalar, &sizes, b)?;
    let job = if request.replicates == 0 {
        None
    } else if scalar {
        Some(simulation_job(request, ps[0], sizes[0], table[0][0])?)
    } else {
        return Err(FieldError::new(
            "replicates",
            "the simulation needs a single p and group_size, not a grid",
        ));
    };
    Ok(Plan {
        partial: Response {
            probability: map_grid(&table, scalar, |_, &prob| prob),
            expected_attempts: map_grid(&table, scalar, |_, &prob| {
                sampling::expected_groups_drawn(prob, b)
            }),
            expected_rollouts: map_grid(&table, scalar, |j, &prob| {
                sampling::expected_groups_drawn(prob, b)
                    .map(|groups| groups * sizes[j] as f64)
                    .filter(|rollouts| rollouts.is_finite())
            }),
            simulation: None,
        },
        job,
    })
}

/// Completes a plan with the simulated runs (ignored when the plan has no job).
pub fn respond(plan: Plan, runs: &[sampling::DynamicSamplingRun]) -> Response {
    Response {
        simulation: plan.job.map(|job| summarize(&job, runs)),
        ..plan.partial
    }
}

impl Entry for MixedGroup {
    const NAME: &'static str = "mixed-group";
    const SUMMARY: &'static str =
        "Probability that a group of rollouts is mixed, and the cost of dynamic sampling";
    type Request = Request;
    type Response = Response;
    const NULLABLE: &'static [&'static str] = &["expected_attempts", "expected_rollouts"];

    fn compute(request: &Request) -> Result<Response> {
        let plan = plan(request)?;
        let runs = match &plan.job {
            Some(job) => sampling::simulate_replicates(
                job.p,
                job.group_size,
                job.mixed_groups,
                job.max_groups,
                job.replicates,
                job.seed,
            )?,
            None => Vec::new(),
        };
        Ok(respond(plan, &runs))
    }
}

#[cfg(test)]
mod tests {
    use super::super::compute;
    use serde_json::json;

    #[test]
    fn article_numbers_as_a_grid() {
        let out = compute(
            "mixed-group",
            json!({"p": [0.5, 0.01], "group_size": [4, 16]}),
        )
        .unwrap();
        let table = &out["probability"];
        assert!((table[0][0].as_f64().unwrap() - 0.875).abs() < 1e-15);
        assert!((table[1][0].as_f64().unwrap() - 0.0394).abs() < 5e-5);
        assert!((table[1][1].as_f64().unwrap() - 0.1485).abs() < 5e-5);
    }

    #[test]
    fn scalar_inputs_give_numbers_and_cost() {
        let out = compute(
            "mixed-group",
            json!({"p": 0.5, "group_size": 4, "mixed_groups": 7}),
        )
        .unwrap();
        assert_eq!(out["probability"], json!(0.875));
        assert!((out["expected_attempts"].as_f64().unwrap() - 8.0).abs() < 1e-12);
        assert!((out["expected_rollouts"].as_f64().unwrap() - 32.0).abs() < 1e-12);
    }

    #[test]
    fn hopeless_groups_report_null_cost() {
        let out = compute("mixed-group", json!({"p": 0.0, "group_size": [1, 4]})).unwrap();
        assert_eq!(out["expected_attempts"], json!([[null, null]]));
    }

    #[test]
    fn simulation_mean_is_near_the_closed_form() {
        let out = compute(
            "mixed-group",
            json!({"p": 0.125, "group_size": 4, "mixed_groups": 4, "replicates": 2000, "seed": 3}),
        )
        .unwrap();
        let expected = out["expected_attempts"].as_f64().unwrap();
        let sim = &out["simulation"];
        let se = (sim["variance_groups_theory"].as_f64().unwrap() / 2000.0).sqrt();
        assert!((sim["mean_groups"].as_f64().unwrap() - expected).abs() < 5.0 * se);
        assert_eq!(sim["capped"], json!(0));
    }
}

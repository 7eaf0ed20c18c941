//! `importance-sampling`: ordinary or self-normalised importance-sampling estimates of
//! `E_pi[f]` from draws of `mu` (see [`crate::math::importance`]).
//!
//! With `draws`, the estimates are computed on the caller's draws instead, exactly as
//! `importance-sampling-draws` computes them ([`super::importance_draws`]); `samples`,
//! `estimates` and `seed` are then given by the draws and refused if set otherwise.

use serde::{Deserialize, Serialize};

use super::renormalised::{Renormalised, renormalised};
use super::{Entry, OneOrMany, categorical_work, check_draws, check_work, units};
use crate::error::{FieldError, Result, check};
use crate::math::bandit::mean_and_sample_variance;
use crate::math::importance::{self, Problem};

/// Request for `importance-sampling`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// Behaviour policy over `K` actions; sums to 1 (within `1e-4` relative, then
    /// renormalised).
    pub mu: Vec<f64>,
    /// Target policy over the same actions; sums to 1 (within `1e-4` relative, then
    /// renormalised); zero wherever `mu` is zero.
    pub pi: Vec<f64>,
    /// `f(a)` per action (for example its success rate).
    pub values: Vec<f64>,
    /// Draws per estimate, `N >= 1`. Default 24.
    #[serde(default = "default_samples")]
    pub samples: usize,
    /// Number of independent estimates, `M`, at most 100 000. Default 100.
    #[serde(default = "default_estimates")]
    pub estimates: usize,
    /// Report the self-normalised estimator in `estimates` instead of the ordinary one.
    /// Default false.
    #[serde(default)]
    pub self_normalized: bool,
    /// Seed; estimate `r` uses stream `r`. Default 0.
    #[serde(default)]
    pub seed: u64,
    /// The caller's draws of `mu` (action indices): `[a_1, ..]` for one estimate or
    /// `[[..], ..]` for one estimate per list, all of one length. When given, no
    /// sampling happens; `samples`, `estimates` and `seed` must keep their defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draws: Option<OneOrMany<Vec<usize>>>,
}

/// The estimates of `request` on its given `draws`.
fn on_given_draws(request: &Request, draws: &OneOrMany<Vec<usize>>) -> Result<Response> {
    for (field, is_default) in [
        ("samples", request.samples == default_samples()),
        ("estimates", request.estimates == default_estimates()),
        ("seed", request.seed == 0),
    ] {
        if !is_default {
            return Err(FieldError::new(
                field,
                "does not apply with `draws`: the draws give the estimates and their size",
            ));
        }
    }
    estimate_on_draws(
        &request.mu,
        &request.pi,
        &request.values,
        draws,
        request.self_normalized,
    )
}

/// The draws as one list per estimate, each checked against `problem`.
fn draw_lists(problem: &Problem, draws: &OneOrMany<Vec<usize>>) -> Result<Vec<Vec<usize>>> {
    let lists = draws.to_vec();
    let nested = draws.is_many();
    check::non_empty("draws", &lists)?;
    let n = lists[0].len();
    check_work("draws", units(n).saturating_mul(units(lists.len())))?;
    let actions = problem.mu.len();
    for (r, list) in lists.iter().enumerate() {
        let list_field = if nested {
            format!("draws[{r}]")
        } else {
            "draws".to_string()
        };
        if list.is_empty() {
            return Err(FieldError::new(
                list_field,
                "holds no draw; an estimate needs at least one",
            ));
        }
        if list.len() != n {
            return Err(FieldError::new(
                list_field,
                format!(
                    "has {} draws but draws[0] has {n}; every estimate uses the same N",
                    list.len()
                ),
            ));
        }
        for (k, &a) in list.iter().enumerate() {
            let field = if nested {
                format!("draws[{r}][{k}]")
            } else {
                format!("draws[{k}]")
            };
            if a >= actions {
                return Err(FieldError::new(
                    field,
                    format!(
                        "is action {a}, but there are {actions} actions (0 to {})",
                        actions - 1
                    ),
                ));
            }
            if problem.mu[a] == 0.0 {
                return Err(FieldError::new(
                    field,
                    format!(
                        "is action {a}, which mu never takes (mu[{a}] = 0), so it cannot be a \
                         draw of mu"
                    ),
                ));
            }
        }
    }
    Ok(lists)
}

/// The estimates on given draws (no randomness): what `importance-sampling-draws` and
/// `importance-sampling` with `draws` answer.
pub fn estimate_on_draws(
    mu: &[f64],
    pi: &[f64],
    values: &[f64],
    draws: &OneOrMany<Vec<usize>>,
    self_normalized: bool,
) -> Result<Response> {
    let problem = Problem::new(mu.to_vec(), pi.to_vec(), values.to_vec())?;
    let lists = draw_lists(&problem, draws)?;
    let replicates: Vec<importance::Replicate> = lists
        .iter()
        .map(|list| importance::replicate_from_draws(&problem, list))
        .collect();
    let plan = Plan {
        problem,
        samples: lists[0].len(),
        estimates: lists.len(),
        self_normalized,
        seed: 0,
        renormalised: renormalised(&[("mu", Some(mu)), ("pi", Some(pi))]),
    };
    Ok(respond(&plan, &replicates))
}

fn default_samples() -> usize {
    24
}
fn default_estimates() -> usize {
    100
}

/// Response of `importance-sampling`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Response {
    /// `E_pi[f] = sum_a pi(a) f(a)`.
    pub exact: f64,
    /// The `M` estimates (ordinary or self-normalised, as requested).
    pub estimates: Vec<f64>,
    /// Mean of the estimates (0 when `M = 0`).
    pub mean: f64,
    /// Sample variance of the estimates, divisor `M - 1` (0 when `M < 2`).
    pub variance: f64,
    /// Mean effective sample size `(sum w)^2 / sum w^2` over the estimates.
    pub ess: f64,
    /// `pi(a) / mu(a)` per action (0 where both are 0).
    pub weights: Vec<f64>,
    /// Exact variance of one ordinary estimate, `Var_mu[w f] / N`.
    pub variance_ordinary_theory: f64,
    /// The probability fields divided by their sum before computing
    /// ([`super::renormalised`]); absent when none was.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub renormalised: Vec<Renormalised>,
}

/// The `importance-sampling` entry.
pub struct ImportanceSampling;

/// A validated request: the problem and the sampling it asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The validated problem.
    pub problem: Problem,
    /// Draws per estimate.
    pub samples: usize,
    /// Number of estimates (replicate `r` uses stream `r`).
    pub estimates: usize,
    /// Report the self-normalised estimator.
    pub self_normalized: bool,
    /// Seed.
    pub seed: u64,
    /// The request's renormalised fields.
    pub renormalised: Vec<Renormalised>,
}

impl Plan {
    /// The draws' work in units of [`super::MAX_WORK`] (as the request's check counts it).
    pub fn work(&self) -> u64 {
        categorical_work(
            (self.samples as u64).saturating_mul(self.estimates as u64),
            self.problem.mu.len(),
        )
    }
}

/// Validates `request`.
pub fn plan(request: &Request) -> Result<Plan> {
    let problem = Problem::new(
        request.mu.clone(),
        request.pi.clone(),
        request.values.clone(),
    )?;
    check::count("estimates", request.estimates, 0, 100_000)?;
    check::count("samples", request.samples, 1, usize::MAX)?;
    let draws = (request.samples as u64).saturating_mul(request.estimates as u64);
    check_draws("samples", draws)?;
    check_work("samples", categorical_work(draws, request.mu.len()))?;
    Ok(Plan {
        problem,
        samples: request.samples,
        estimates: request.estimates,
        self_normalized: request.self_normalized,
        seed: request.seed,
        renormalised: renormalised(&[("mu", Some(&request.mu)), ("pi", Some(&request.pi))]),
    })
}

/// The response from the sampled replicates.
pub fn respond(plan: &Plan, replicates: &[importance::Replicate]) -> Response {
    let estimates: Vec<f64> = replicates
        .iter()
        .map(|r| {
            if plan.self_normalized {
                r.self_normalized
            } else {
                r.ordinary
            }
        })
        .collect();
    let (mean, variance) = mean_and_sample_variance(&estimates);
    let ess_values: Vec<f64> = replicates.iter().map(|r| r.ess).collect();
    Response {
        exact: plan.problem.exact(),
        estimates,
        mean,
        variance,
        ess: mean_and_sample_variance(&ess_values).0,
        weights: plan.problem.weights(),
        variance_ordinary_theory: plan.problem.ordinary_variance(plan.samples),
        renormalised: plan.renormalised.clone(),
    }
}

impl Entry for ImportanceSampling {
    const NAME: &'static str = "importance-sampling";
    const SUMMARY: &'static str = "Ordinary and self-normalised importance sampling over discrete actions, with effective sample size";
    type Request = Request;
    type Response = Response;

    fn compute(request: &Request) -> Result<Response> {
        if let Some(draws) = &request.draws {
            return on_given_draws(request, draws);
        }
        let plan = plan(request)?;
        let replicates =
            importance::sample_replicates(&plan.problem, plan.samples, plan.estimates, plan.seed)?;
        Ok(respond(&plan, &replicates))
    }
}

#[cfg(test)]
mod tests {
    use super::super::compute;
    use serde_json::json;

    #[test]
    fn article_setup_reports_0_59_and_weights_3_and_half() {
        let out = compute(
            "importance-sampling",
            json!({"mu": [0.2, 0.8], "pi": [0.6, 0.4], "values": [0.75, 0.35]}),
        )
        .unwrap();
        assert!((out["exact"].as_f64().unwrap() - 0.59).abs() < 1e-15);
        let weights = out["weights"].as_array().unwrap();
        assert!((weights[0].as_f64().unwrap() - 3.0).abs() < 1e-12);
        assert!((weights[1].as_f64().unwrap() - 0.5).abs() < 1e-12);
        assert!(out["ess"].as_f64().unwrap() > 1.0);
    }

    #[test]
    fn given_draws_give_the_estimate_by_hand() {
        let setup = json!({"mu": [0.2, 0.8], "pi": [0.6, 0.4], "values": [0.75, 0.35],
                           "draws": [0, 1, 1]});
        let out = compute("importance-sampling", setup.clone()).unwrap();
        // (3 * 0.75 + 0.5 * 0.35 + 0.5 * 0.35) / 3
        let by_hand = (3.0 * 0.75 + 0.5 * 0.35 * 2.0) / 3.0;
        assert!((out["estimates"][0].as_f64().unwrap() - by_hand).abs() < 1e-12);
        let same = compute("importance-sampling-draws", setup).unwrap();
        assert_eq!(out, same);
        let err = compute(
            "importance-sampling",
            json!({"mu": [0.2, 0.8], "pi": [0.6, 0.4], "values": [0.75, 0.35],
                   "draws": [0, 1], "seed": 3}),
        )
        .unwrap_err();
        assert_eq!(err.field, "seed");
        let err = compute(
            "importance-sampling",
            json!({"mu": [0.2, 0.8], "pi": [0.6, 0.4], "values": [0.75, 0.35],
                   "draws": [0, 2]}),
        )
        .unwrap_err();
        assert_eq!(err.field, "draws[1]");
    }

    #[test]
    fn support_violation_names_pi_entry() {
        let err = compute(
            "importance-sampling",
            json!({"mu": [1.0, 0.0], "pi": [0.6, 0.4], "values": [0.75, 0.35]}),
        )
        .unwrap_err();
        assert_eq!(err.field, "pi[1]");
    }

    #[test]
    fn self_normalized_estimates_stay_within_the_value_range() {
        let out = compute(
            "importance-sampling",
            json!({"mu": [0.2, 0.8], "pi": [0.6, 0.4], "values": [0.75, 0.35], "self_normalized": true, "seed": 4}),
        )
        .unwrap();
        for e in out["estimates"].as_array().unwrap() {
            let e = e.as_f64().unwrap();
            assert!((0.35..=0.75).contains(&e), "{e}");
        }
    }
}

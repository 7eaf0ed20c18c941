//! `bandit-gradient`: the exact policy gradient of a two-action bandit and sampled
//! estimates of it under a choice of baseline (see [`crate::math::bandit`]).

use serde::{Deserialize, Serialize};

use super::{Entry, check_draws};
use crate::error::{FieldError, Result, check};
use crate::math::bandit::{self, Baseline, TwoArmed};

/// Request for `bandit-gradient`. Give exactly one of `p`, `logit`, `logits`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// Probability of action A, in `[0, 1]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p: Option<f64>,
    /// Logit difference `z = z_A - z_B`; `p = sigma(z)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logit: Option<f64>,
    /// Softmax logits of `K >= 2` actions. With `K = 2` it is the same as
    /// `logit = logits[0] - logits[1]`; with `K > 2` only the exact gradient is computed
    /// and `estimates` must be 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logits: Option<Vec<f64>>,
    /// Success probability of each action, `[q_A, q_B]` (or `K` entries with `logits`).
    pub q: Vec<f64>,
    /// `none`, `group-mean` (self-inclusive) or `leave-one-out`. Default `none`.
    #[serde(default = "default_baseline")]
    pub baseline: Baseline,
    /// Samples per group, `G >= 1`. Default 4.
    #[serde(default = "default_group_size")]
    pub group_size: usize,
    /// Samples per estimate, `N`, a positive multiple of `group_size`. Default 24.
    #[serde(default = "default_samples")]
    pub samples: usize,
    /// Number of independent estimates, `M`, at most 100 000. Default 100.
    #[serde(default = "default_estimates")]
    pub estimates: usize,
    /// Seed; estimate `r` uses stream `r`. Default 0.
    #[serde(default)]
    pub seed: u64,
}

fn default_baseline() -> Baseline {
    Baseline::None
}
fn default_group_size() -> usize {
    4
}
fn default_samples() -> usize {
    24
}
fn default_estimates() -> usize {
    100
}

/// The documented defaults of the optional fields, with the required ones empty: a base
/// for `Request { .., ..Request::default() }`, not a valid request by itself.
impl Default for Request {
    fn default() -> Self {
        Self {
            p: None,
            logit: None,
            logits: None,
            q: Vec::new(),
            baseline: default_baseline(),
            group_size: default_group_size(),
            samples: default_samples(),
            estimates: default_estimates(),
            seed: 0,
        }
    }
}

/// Response of `bandit-gradient`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Response {
    /// `d E[R] / d z`: `(q_A - q_B) p (1 - p)`; with `K` logits, the gradient w.r.t.
    /// `logits[0]`.
    pub exact: f64,
    /// The gradient w.r.t. every logit, `pi_k (q_k - sum_j pi_j q_j)` (for two actions,
    /// `[exact, -exact]`).
    pub exact_per_action: Vec<f64>,
    /// `p = pi(A)`.
    pub p: f64,
    /// The `M` sampled estimates, in replicate order.
    pub estimates: Vec<f64>,
    /// Mean of the estimates (0 when `M = 0`).
    pub mean: f64,
    /// Sample variance of the estimates, divisor `M - 1` (0 when `M < 2`).
    pub variance: f64,
    /// Expected value of one estimate under this baseline: `exact * shrinkage`.
    pub expected: f64,
    /// `expected / exact`: 1 for none and leave-one-out, `(G-1)/G` for the group mean.
    pub shrinkage: f64,
    /// Exact variance of one estimate (closed form), to compare with `variance`.
    pub variance_theory: f64,
}

/// The `bandit-gradient` entry.
pub struct BanditGradient;

fn policy(request: &Request) -> Result<(f64, Vec<f64>)> {
    let given = [
        request.p.is_some(),
        request.logit.is_some(),
        request.logits.is_some(),
    ];
    if given.iter().filter(|&&g| g).count() != 1 {
        return Err(FieldError::new(
            "p",
            "give exactly one of p, logit or logits",
        ));
    }
    if let Some(p) = request.p {
        check::probability("p", p)?;
        check::same_len("q", request.q.len(), "the two actions", 2)?;
        let g = TwoArmed::new(p, request.q[0], request.q[1])?.exact_gradient();
        return Ok((p, vec![g, -g]));
    }
    if let Some(z) = request.logit {
        check::finite("logit", z)?;
        check::same_len("q", request.q.len(), "the two actions", 2)?;
        let p = bandit::sigmoid(z);
        let g = TwoArmed::new(p, request.q[0], request.q[1])?.exact_gradient();
        return Ok((p, vec![g, -g]));
    }
    let logits = request.logits.as_deref().unwrap_or_default();
    check::count("logits", logits.len(), 2, 1 << 16)?;
    let gradient = bandit::exact_gradient_softmax(logits, &request.q)?;
    Ok((bandit::softmax(logits)[0], gradient))
}

/// The sampling a validated request asks for (replicate `r` uses stream `r`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SampleJob {
    /// The validated bandit.
    pub bandit: TwoArmed,
    /// The baseline.
    pub baseline: Baseline,
    /// Samples per group.
    pub group_size: usize,
    /// Samples per estimate.
    pub samples: usize,
    /// Number of estimates.
    pub estimates: usize,
    /// Seed.
    pub seed: u64,
}

/// A validated request: the response without its estimates, and the sampling to do
/// (none with `K > 2` logits). The CPU and GPU paths share it, so they validate alike.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The response with `estimates` empty and `mean`, `variance` 0.
    pub partial: Response,
    /// What to sample.
    pub job: Option<SampleJob>,
}

impl Plan {
    /// The random draws the sampling asks for (two per sample: the action and its
    /// reward), in units of [`super::MAX_WORK`].
    pub fn work(&self) -> u64 {
        self.job.as_ref().map_or(0, |job| {
            super::work(&[2, super::units(job.samples), super::units(job.estimates)])
        })
    }
}

/// Validates `request` and computes everything but the estimates.
pub fn plan(request: &Request) -> Result<Plan> {
    let (p, exact_per_action) = policy(request)?;
    let exact = exact_per_action[0];
    if exact_per_action.len() > 2 {
        if request.estimates > 0 {
            return Err(FieldError::new(
                "estimates",
                "sampled estimates need two actions; set estimates to 0 with K > 2 logits",
            ));
        }
        return Ok(Plan {
            partial: Response {
                exact,
                exact_per_action,
                p,
                estimates: Vec::new(),
                mean: 0.0,
                variance: 0.0,
                expected: exact,
                shrinkage: 1.0,
                variance_theory: 0.0,
            },
            job: None,
        });
    }
    let two_armed = TwoArmed::new(p, request.q[0], request.q[1])?;
    bandit::check_grouping(request.group_size, request.samples)?;
    // Every estimate is returned, so their number bounds the response size too.
    check::count("estimates", request.estimates, 0, 100_000)?;
    let draws = 2u64
        .saturating_mul(request.samples as u64)
        .saturating_mul(request.estimates as u64);
    check_draws("samples", draws)?;
    let shrinkage = bandit::shrinkage_factor(request.baseline, request.group_size);
    Ok(Plan {
        partial: Response {
            exact,
            exact_per_action,
            p,
            estimates: Vec::new(),
            mean: 0.0,
            variance: 0.0,
            expected: exact * shrinkage,
            shrinkage,
            variance_theory: bandit::estimate_variance(
                request.baseline,
                &two_armed,
                request.group_size,
                request.samples,
            ),
        },
        job: Some(SampleJob {
            bandit: two_armed,
            baseline: request.baseline,
            group_size: request.group_size,
            samples: request.samples,
            estimates: request.estimates,
            seed: request.seed,
        }),
    })
}

/// Completes a plan with the sampled estimates.
pub fn respond(plan: Plan, estimates: Vec<f64>) -> Response {
    let (mean, variance) = bandit::mean_and_sample_variance(&estimates);
    Response {
        estimates,
        mean,
        variance,
        ..plan.partial
    }
}

impl Entry for BanditGradient {
    const NAME: &'static str = "bandit-gradient";
    const SUMMARY: &'static str = "Exact two-action policy gradient and sampled estimates with no / group-mean / leave-one-out baseline";
    type Request = Request;
    type Response = Response;

    fn compute(request: &Request) -> Result<Response> {
        let plan = plan(request)?;
        let estimates = match plan.job {
            Some(job) => bandit::sample_estimates(
                &job.bandit,
                job.baseline,
                job.group_size,
                job.samples,
                job.estimates,
                job.seed,
            )?,
            None => Vec::new(),
        };
        Ok(respond(plan, estimates))
    }
}

#[cfg(test)]
mod tests {
    use super::super::compute;
    use serde_json::json;

    #[test]
    fn article_defaults_give_exact_0_1() {
        let out = compute("bandit-gradient", json!({"p": 0.5, "q": [0.75, 0.35]})).unwrap();
        assert!((out["exact"].as_f64().unwrap() - 0.1).abs() < 1e-15);
        assert_eq!(out["estimates"].as_array().unwrap().len(), 100);
    }

    #[test]
    fn group_mean_reports_the_shrinkage() {
        let out = compute(
            "bandit-gradient",
            json!({"logit": 0.0, "q": [0.75, 0.35], "baseline": "group-mean", "group_size": 4, "samples": 8, "estimates": 3, "seed": 2}),
        )
        .unwrap();
        assert!((out["shrinkage"].as_f64().unwrap() - 0.75).abs() < 1e-15);
        assert!((out["expected"].as_f64().unwrap() - 0.075).abs() < 1e-15);
    }

    #[test]
    fn both_p_and_logit_is_an_error() {
        let err = compute(
            "bandit-gradient",
            json!({"p": 0.5, "logit": 0.0, "q": [0.75, 0.35]}),
        )
        .unwrap_err();
        assert_eq!(err.field, "p");
    }

    #[test]
    fn too_many_draws_names_samples() {
        let err = compute(
            "bandit-gradient",
            json!({"p": 0.5, "q": [0.75, 0.35], "samples": 40_000_000, "estimates": 2}),
        )
        .unwrap_err();
        assert_eq!(err.field, "samples");
    }

    #[test]
    fn k_logits_give_the_exact_gradient_only() {
        let out = compute(
            "bandit-gradient",
            json!({"logits": [0.0, 0.0, 0.0], "q": [1.0, 0.0, 0.5], "estimates": 0}),
        )
        .unwrap();
        let g = out["exact_per_action"].as_array().unwrap();
        assert!((g[0].as_f64().unwrap() - 1.0 / 6.0).abs() < 1e-15);
        let err = compute(
            "bandit-gradient",
            json!({"logits": [0.0, 0.0, 0.0], "q": [1.0, 0.0, 0.5]}),
        )
        .unwrap_err();
        assert_eq!(err.field, "estimates");
    }
}

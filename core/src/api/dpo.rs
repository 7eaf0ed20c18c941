//! `dpo`: the DPO loss of preference pairs over a categorical policy, its implicit
//! rewards and its gradient with respect to the policy's logits, and optionally the
//! policy DPO converges to under Bradley-Terry preferences (see [`crate::math::dpo`]).

use serde::{Deserialize, Serialize};

use super::renormalised::{Renormalised, renormalised};
use super::{Entry, check_draws};
use crate::error::{FieldError, Result, check};
use crate::math::distill::kl_from_log_probs;
use crate::math::dpo::{self, PairSource, Setup};
use crate::math::kl_regularized::Problem;

/// Request of `dpo`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// `pi_ref(y)` over `K` responses (2 to 64); sums to 1 (within `1e-4` relative,
    /// then renormalised), every entry `> 0`.
    pub reference: Vec<f64>,
    /// `pi(y)`, the policy being trained; sums to 1, every entry `> 0`. Default: the
    /// reference (the start of training).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<Vec<f64>>,
    /// The KL coefficient `beta > 0` (TRL `beta`).
    pub beta: f64,
    /// Preference pairs `[chosen, rejected]` as response indices. Default none (then
    /// `fit` is required).
    #[serde(default)]
    pub pairs: Vec<[usize; 2]>,
    /// Label smoothing `eps` in `[0, 0.5)` (TRL `label_smoothing`, conservative DPO).
    /// Default 0.
    #[serde(default)]
    pub label_smoothing: f64,
    /// True rewards `r(y)` behind the preferences; required with `fit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewards: Option<Vec<f64>>,
    /// Fit the policy to Bradley-Terry preferences drawn from `rewards`, starting from
    /// the reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fit: Option<FitRequest>,
}

/// How to fit.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FitRequest {
    /// Preference pairs to sample from `pi_ref x pi_ref` (at most 16 666 666). Default:
    /// none sampled, the expected loss over every pair (infinitely many pairs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pairs: Option<usize>,
    /// Seed of the sampled pairs (stream 0). Default 0.
    #[serde(default)]
    pub seed: u64,
    /// Most Newton steps, 1 to 1000. Default 100.
    #[serde(default = "default_max_iterations")]
    pub max_iterations: usize,
    /// Pair counts (at most 64 of them, each at least 1) at which to fit too, each on the
    /// first `n` pairs of the same seed's stream: the fits `pairs = n` would give, from
    /// one sample of the largest count (a convergence curve). Default none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub curve: Vec<usize>,
}

/// Most points of a convergence curve.
pub const MAX_CURVE_POINTS: usize = 64;

fn default_max_iterations() -> usize {
    100
}

/// The documented defaults of the optional fields, with the required ones empty: a base
/// for `Request { .., ..Request::default() }`, not a valid request by itself.
impl Default for Request {
    fn default() -> Self {
        Self {
            reference: Vec::new(),
            policy: None,
            beta: 0.0,
            pairs: Vec::new(),
            label_smoothing: 0.0,
            rewards: None,
            fit: None,
        }
    }
}

/// The documented defaults: the expected loss, at most 100 Newton steps.
impl Default for FitRequest {
    fn default() -> Self {
        Self {
            pairs: None,
            seed: 0,
            max_iterations: default_max_iterations(),
            curve: Vec::new(),
        }
    }
}

/// The fitted policy, and the optimum it should reach.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FitResponse {
    /// The fit: `policy`, `implicit_rewards` (`beta log(pi / pi_ref)`), `loss`,
    /// `initial_loss`, `iterations`, `gradient_norm`, `converged` (false when the pairs
    /// are separable and the loss only approaches 0) and `pairs_used` (absent for the
    /// expected loss). See [`dpo::Fit`].
    #[serde(flatten)]
    pub fit: dpo::Fit,
    /// The KL-regularised optimum `pi_ref exp(r / beta) / Z` of the same rewards and beta.
    pub optimum: Vec<f64>,
    /// `KL(fit || optimum)`, nats.
    pub kl_to_optimum: f64,
    /// The fits at the request's `curve` counts, in its order (absent without one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub curve: Vec<CurvePoint>,
}

/// One point of a convergence curve: the fit on the first `pairs` sampled pairs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    /// Pairs drawn.
    pub pairs: usize,
    /// Pairs of two distinct responses among them.
    pub pairs_used: usize,
    /// `KL(fit || optimum)`, nats.
    pub kl_to_optimum: f64,
    /// Whether the fit converged (false when the pairs are separable).
    pub converged: bool,
}

/// Response of `dpo`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Response {
    /// `beta log(pi(y) / pi_ref(y))` of the request's policy, per response.
    pub implicit_rewards: Vec<f64>,
    /// The loss of `pairs` (absent when none were given): `loss` (their mean),
    /// `reward_accuracy` (TRL `rewards/accuracies`), `gradient` (`d loss / d logits`) and
    /// `pairs` (`chosen_reward`, `rejected_reward`, `margin`, `loss` each). See
    /// [`dpo::BatchLoss`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch: Option<dpo::BatchLoss>,
    /// The fit (absent without `fit`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fit: Option<FitResponse>,
    /// The probability fields divided by their sum before computing
    /// ([`super::renormalised`]); absent when none was.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub renormalised: Vec<Renormalised>,
}

/// The `dpo` entry.
pub struct Dpo;

fn fit(setup: &Setup, rewards: &[f64], request: &FitRequest, beta: f64) -> Result<FitResponse> {
    check::count("fit.max_iterations", request.max_iterations, 1, 1000)?;
    if request.curve.len() > MAX_CURVE_POINTS {
        return Err(FieldError::new(
            "fit.curve",
            format!(
                "at most {MAX_CURVE_POINTS} pair counts, got {}",
                request.curve.len()
            ),
        ));
    }
    for (i, &n) in request.curve.iter().enumerate() {
        let field = format!("fit.curve[{i}]");
        check::count(&field, n, 1, usize::MAX)?;
        check_draws(&field, (n as u64).saturating_mul(3))?;
    }
    let source = match request.pairs {
        Some(pairs) => {
            check::count("fit.pairs", pairs, 1, usize::MAX)?;
            check_draws("fit.pairs", (pairs as u64).saturating_mul(3))?;
            PairSource::Sampled {
                pairs,
                seed: request.seed,
            }
        }
        None => PairSource::Expected,
    };
    let reference: Vec<f64> = setup.log_reference.iter().map(|l| l.exp()).collect();
    let optimum = Problem::new(&reference, rewards)?.optimum(beta, "beta")?;
    let fitted = dpo::fit(setup, rewards, source, request.max_iterations)?;
    let log = |p: &[f64]| p.iter().map(|x| x.ln()).collect::<Vec<f64>>();
    let log_optimum = log(&optimum.policy);
    let kl = |fit: &dpo::Fit| kl_from_log_probs(&log(&fit.policy), &log_optimum, "optimum");
    let kl_to_optimum = kl(&fitted)?;
    let curve = dpo::fit_prefixes(
        setup,
        rewards,
        request.seed,
        &request.curve,
        request.max_iterations,
    )?
    .iter()
    .zip(&request.curve)
    .map(|(fit, &pairs)| {
        Ok(CurvePoint {
            pairs,
            pairs_used: fit.pairs_used.unwrap_or(0),
            kl_to_optimum: kl(fit)?,
            converged: fit.converged,
        })
    })
    .collect::<Result<Vec<CurvePoint>>>()?;
    Ok(FitResponse {
        fit: fitted,
        optimum: optimum.policy,
        kl_to_optimum,
        curve,
    })
}

impl Entry for Dpo {
    const NAME: &'static str = "dpo";
    const SUMMARY: &'static str = "DPO sigmoid loss, implicit rewards and logit gradient of preference pairs; the fitted policy under Bradley-Terry preferences";
    type Request = Request;
    type Response = Response;

    fn compute(request: &Request) -> Result<Response> {
        let policy = request.policy.as_ref().unwrap_or(&request.reference);
        let setup = Setup::new(
            &request.reference,
            policy,
            request.beta,
            request.label_smoothing,
        )?;
        if request.pairs.is_empty() && request.fit.is_none() {
            return Err(FieldError::new(
                "pairs",
                "give preference pairs, or `fit` with `rewards` to fit a policy",
            ));
        }
        let batch = if request.pairs.is_empty() {
            None
        } else {
            Some(setup.batch_loss(&request.pairs)?)
        };
        let fit = match &request.fit {
            None => None,
            Some(fit_request) => {
                let rewards = request.rewards.as_ref().ok_or_else(|| {
                    FieldError::new(
                        "rewards",
                        "is required with `fit`: the preferences come from it",
                    )
                })?;
                Some(fit(&setup, rewards, fit_request, request.beta)?)
            }
        };
        Ok(Response {
            implicit_rewards: setup.implicit_rewards(),
            batch,
            fit,
            renormalised: renormalised(&[
                ("reference", Some(&request.reference)),
                ("policy", request.policy.as_deref()),
            ]),
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::api::compute;
    use serde_json::json;

    #[test]
    fn a_batch_at_the_reference_costs_log_two_per_pair() {
        let out = compute(
            "dpo",
            json!({"reference": [0.2, 0.3, 0.5], "beta": 0.1, "pairs": [[0, 1], [2, 1]]}),
        )
        .unwrap();
        assert!((out["batch"]["loss"].as_f64().unwrap() - 2f64.ln()).abs() < 1e-15);
        assert_eq!(out["implicit_rewards"], json!([0.0, 0.0, 0.0]));
        assert!(out.get("fit").is_none());
    }

    #[test]
    fn the_expected_fit_lands_on_the_optimum() {
        let out = compute(
            "dpo",
            json!({"reference": [0.5, 0.3, 0.2], "beta": 0.5, "rewards": [0.0, 0.5, 1.0], "fit": {}}),
        )
        .unwrap();
        let fit = &out["fit"];
        assert_eq!(fit["converged"], json!(true));
        assert!(fit["kl_to_optimum"].as_f64().unwrap() < 1e-16);
        assert!(fit.get("pairs_used").is_none());
    }

    #[test]
    fn errors_name_the_field() {
        let err = compute("dpo", json!({"reference": [0.5, 0.5], "beta": 0.1})).unwrap_err();
        assert_eq!(err.field, "pairs");
        let err = compute(
            "dpo",
            json!({"reference": [0.5, 0.5], "beta": 0.1, "fit": {}}),
        )
        .unwrap_err();
        assert_eq!(err.field, "rewards");
        let err = compute(
            "dpo",
            json!({"reference": [0.5, 0.5], "beta": 0.1, "rewards": [0, 1], "fit": {"pairs": 100_000_000}}),
        )
        .unwrap_err();
        assert_eq!(err.field, "fit.pairs");
        let too_many = vec![10; super::MAX_CURVE_POINTS + 1];
        let err = compute(
            "dpo",
            json!({"reference": [0.5, 0.5], "beta": 0.1, "rewards": [0, 1], "fit": {"curve": too_many}}),
        )
        .unwrap_err();
        assert_eq!(err.field, "fit.curve");
        let err = compute(
            "dpo",
            json!({"reference": [0.5, 0.5], "beta": 0.1, "rewards": [0, 1], "fit": {"curve": [10, 0]}}),
        )
        .unwrap_err();
        assert_eq!(err.field, "fit.curve[1]");
    }

    #[test]
    fn a_curve_point_is_the_fit_of_a_separate_request_with_that_many_pairs() {
        let base = json!({
            "reference": [0.3, 0.25, 0.2, 0.12, 0.08, 0.05],
            "beta": 0.2,
            "rewards": [0.0, 0.2, 0.4, 0.6, 0.8, 1.0],
        });
        let with_fit = |fit: serde_json::Value| {
            let mut request = base.clone();
            request["fit"] = fit;
            compute("dpo", request).unwrap()["fit"].clone()
        };
        // Out of order and repeated: each point answers its own count.
        let counts = [500, 10, 2_000, 10, 37];
        let curve = with_fit(json!({"seed": 11, "pairs": 300, "curve": counts}));
        let points = curve["curve"].as_array().unwrap();
        assert_eq!(points.len(), counts.len());
        for (point, n) in points.iter().zip(counts) {
            let alone = with_fit(json!({"seed": 11, "pairs": n}));
            assert_eq!(point["pairs"], json!(n));
            assert_eq!(point["pairs_used"], alone["pairs_used"]);
            assert_eq!(point["converged"], alone["converged"]);
            assert_eq!(point["kl_to_optimum"], alone["kl_to_optimum"], "{n} pairs");
        }
        // The request's own fit is unchanged by the curve.
        let plain = with_fit(json!({"seed": 11, "pairs": 300}));
        assert_eq!(curve["kl_to_optimum"], plain["kl_to_optimum"]);
        assert!(plain.get("curve").is_none());
    }
}

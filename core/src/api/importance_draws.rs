//! `importance-sampling-draws`: the estimates of `importance-sampling` over draws the
//! caller gives, with no randomness (see [`crate::math::importance`]).
//!
//! With `N` given actions `a_1..a_N` (indices into `mu`, `pi` and `values`) and
//! `w(a) = pi(a) / mu(a)`, each list of draws is one estimate:
//!
//! ```text
//! ordinary          (1/N) sum_i w(a_i) f(a_i)
//! self-normalised   sum_i w(a_i) f(a_i) / sum_i w(a_i)        (0 when every weight is 0)
//! ESS               (sum_i w(a_i))^2 / sum_i w(a_i)^2
//! ```
//!
//! and the response is `importance-sampling`'s: the estimates (ordinary or
//! self-normalised, as asked), their mean and sample variance, the mean effective sample
//! size, the exact value, the weights and `Var_mu[w f] / N`. Source: Owen, "Monte Carlo
//! theory, methods and examples" (2013), ch. 9; Kong (1992) for the ESS.
//!
//! ## Design
//! - Also reachable as `importance-sampling` with its `draws` field; this entry takes
//!   only what applies to given draws. The same validation of `mu`, `pi` and
//!   `values`, and the same response.
//! - `draws` is one list `[a_1, ..]` (one estimate) or a list of lists `[[..], ..]`, all
//!   of one length `N >= 1` (one estimate each). An index outside `0..K` or an action
//!   `mu` never takes (so no draw of `mu`) is refused naming it: `draws[k]`, or
//!   `draws[r][k]` in the nested form; a list of another length names `draws[r]`.
//! - The work is one pass over the draws, held against [`super::MAX_WORK`] naming
//!   `draws`.

use serde::{Deserialize, Serialize};

use super::importance_sampling::{Response, estimate_on_draws};
use super::{Entry, OneOrMany};
use crate::error::Result;

/// Request of `importance-sampling-draws`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// Behaviour policy over `K` actions, the one the draws came from; sums to 1 (within
    /// `1e-4` relative, then renormalised).
    pub mu: Vec<f64>,
    /// Target policy over the same actions; sums to 1 (within `1e-4` relative, then
    /// renormalised); zero wherever `mu` is zero.
    pub pi: Vec<f64>,
    /// `f(a)` per action.
    pub values: Vec<f64>,
    /// The draws: action indices `[a_1, ..]` (one estimate), or `[[a_1, ..], ..]` (one
    /// estimate per list, every list of the same length `N >= 1`).
    pub draws: OneOrMany<Vec<usize>>,
    /// Report the self-normalised estimator in `estimates` instead of the ordinary one.
    /// Default false.
    #[serde(default)]
    pub self_normalized: bool,
}

/// The `importance-sampling-draws` entry.
pub struct ImportanceSamplingDraws;

impl Entry for ImportanceSamplingDraws {
    const NAME: &'static str = "importance-sampling-draws";
    const SUMMARY: &'static str = "Ordinary and self-normalised importance sampling over the caller's own draws, with effective sample size";
    type Request = Request;
    type Response = Response;

    fn compute(request: &Request) -> Result<Response> {
        estimate_on_draws(
            &request.mu,
            &request.pi,
            &request.values,
            &request.draws,
            request.self_normalized,
        )
    }
}

#[cfg(test)]
mod tests {
    use crate::api::compute;
    use serde_json::{Value, json};

    fn request(draws: &Value, self_normalized: bool) -> Value {
        json!({"mu": [0.2, 0.8], "pi": [0.6, 0.4], "values": [0.75, 0.35],
               "draws": draws, "self_normalized": self_normalized})
    }

    #[test]
    fn given_draws_are_estimated_without_randomness() {
        // Weights 3 and 0.5; draws A, B, B, A: w f sums to 2.25 + 0.175 + 0.175 + 2.25.
        let out = compute(
            "importance-sampling-draws",
            request(&json!([0, 1, 1, 0]), false),
        )
        .unwrap();
        assert_eq!(out["estimates"].as_array().unwrap().len(), 1);
        assert!((out["estimates"][0].as_f64().unwrap() - 4.85 / 4.0).abs() < 1e-15);
        assert!((out["ess"].as_f64().unwrap() - 49.0 / 18.5).abs() < 1e-12);
        assert_eq!(out["variance"], json!(0.0));
        // Var_mu[w f] / N for N = 4, as the sampling entry reports it.
        let sampled = compute(
            "importance-sampling",
            json!({"mu": [0.2, 0.8], "pi": [0.6, 0.4], "values": [0.75, 0.35],
                   "samples": 4, "estimates": 0}),
        )
        .unwrap();
        assert_eq!(
            out["variance_ordinary_theory"],
            sampled["variance_ordinary_theory"]
        );
        let out = compute(
            "importance-sampling-draws",
            request(&json!([[0, 1, 1, 0], [1, 1, 1, 1]]), true),
        )
        .unwrap();
        let estimates = out["estimates"].as_array().unwrap();
        assert!((estimates[0].as_f64().unwrap() - 4.85 / 7.0).abs() < 1e-15);
        assert!((estimates[1].as_f64().unwrap() - 0.35).abs() < 1e-15);
        assert!(out["variance"].as_f64().unwrap() > 0.0);
    }

    #[test]
    fn draws_out_of_range_or_off_support_are_named() {
        let base = |draws: Value| {
            json!({"mu": [0.5, 0.5, 0.0], "pi": [0.5, 0.5, 0.0], "values": [1.0, 0.0, 2.0],
                   "draws": draws})
        };
        let field = |draws: Value| {
            compute("importance-sampling-draws", base(draws))
                .unwrap_err()
                .field
        };
        assert_eq!(field(json!([0, 3, 1])), "draws[1]");
        assert_eq!(field(json!([[0, 1], [1, 2]])), "draws[1][1]");
        assert_eq!(field(json!([[0, 1], [1]])), "draws[1]");
        assert_eq!(field(json!([[0, 1], []])), "draws[1]");
        assert_eq!(field(json!([])), "draws");
        assert_eq!(field(json!([-1])), "draws");
        let mut extra = base(json!([0, 1]));
        extra["seed"] = json!(3);
        assert_eq!(
            compute("importance-sampling-draws", extra)
                .unwrap_err()
                .field,
            "seed"
        );
        let mut bad_pi = base(json!([0, 1]));
        bad_pi["pi"] = json!([0.5, 0.0, 0.5]);
        assert_eq!(
            compute("importance-sampling-draws", bad_pi)
                .unwrap_err()
                .field,
            "pi[2]"
        );
    }
}

//! `kl`: per-token KL estimators k1, k2, k3 (see [`crate::math::kl`]).

use serde::{Deserialize, Serialize};

use crate::api::Entry;
use crate::error::{FieldError, Result};
use crate::math::kl::{KlEstimator, kl_values};

/// Request of `kl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// Log-probabilities of sampled tokens under the current policy (finite, `<= 0`).
    pub logp: Vec<f64>,
    /// Log-probabilities of the same tokens under the reference policy, same length.
    pub ref_logp: Vec<f64>,
    /// `k1` (alias `kl`), `k2` (alias `mse`), `k3` (default; alias `low_var_kl`) or
    /// `abs` (verl's `|logp - ref_logp|`).
    #[serde(default)]
    pub estimator: KlEstimator,
    /// Apply verl's `low_var_kl` clamps to k3 (log ratio to [-20, 20], value to
    /// [-10, 10]). Default false.
    #[serde(default)]
    pub clamp: bool,
}

/// Response of `kl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// The estimate at each token.
    pub values: Vec<f64>,
    /// Their mean: the sample estimate of `KL(pi || pi_ref)`.
    pub mean: f64,
}

/// The `kl` entry.
pub struct Kl;

impl Entry for Kl {
    const NAME: &'static str = "kl";
    const SUMMARY: &'static str = "Per-token KL(pi || pi_ref) estimators k1, k2, k3 and their mean";
    type Request = Request;
    type Response = Response;

    fn compute(request: &Request) -> Result<Response> {
        if request.logp.is_empty() {
            return Err(FieldError::new("logp", "must not be empty"));
        }
        let values = kl_values(
            &request.logp,
            &request.ref_logp,
            request.estimator,
            request.clamp,
        )?;
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        Ok(Response { values, mean })
    }
}

#[cfg(test)]
mod tests {
    use crate::api::compute;
    use serde_json::json;

    #[test]
    fn aliases_select_the_same_estimator() {
        let req = |e: &str| json!({"logp": [-1.0, -2.0], "ref_logp": [-1.5, -1.0], "estimator": e});
        assert_eq!(
            compute("kl", req("k3")).unwrap(),
            compute("kl", req("low_var_kl")).unwrap()
        );
        assert_eq!(
            compute("kl", req("k2")).unwrap(),
            compute("kl", req("mse")).unwrap()
        );
        let k1 = compute("kl", req("kl")).unwrap();
        assert_eq!(k1["values"], json!([0.5, -1.0]));
        assert_eq!(k1["mean"], json!(-0.25));
    }

    #[test]
    fn length_mismatch_names_ref_logp() {
        let err = compute("kl", json!({"logp": [-1.0], "ref_logp": []})).unwrap_err();
        assert_eq!(err.field, "ref_logp");
    }
}

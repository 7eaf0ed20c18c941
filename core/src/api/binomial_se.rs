//! `binomial-se`: the standard error of a success rate over `n` independent tasks, its
//! normal 95% half-width, and the Wilson interval (see [`crate::math::eval`]).

use serde::{Deserialize, Serialize};

use super::Entry;
use crate::error::Result;
use crate::math::eval;

/// Request for `binomial-se`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// Observed success rate in `[0, 1]`.
    pub p: f64,
    /// Number of independent tasks, `>= 1`.
    pub n: u64,
}

/// Response of `binomial-se`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Response {
    /// `sqrt(p (1 - p) / n)`.
    pub se: f64,
    /// `1.96 se` (a proportion; multiply by 100 for percentage points).
    pub half_width_95: f64,
    /// Normal interval `[p - 1.96 se, p + 1.96 se]`, clipped to `[0, 1]`.
    pub normal_95: [f64; 2],
    /// Wilson score interval at 95%.
    pub wilson_95: [f64; 2],
}

/// The `binomial-se` entry.
pub struct BinomialSe;

impl Entry for BinomialSe {
    const NAME: &'static str = "binomial-se";
    const SUMMARY: &'static str =
        "Binomial standard error of a success rate, its 95% half-width and the Wilson interval";
    type Request = Request;
    type Response = Response;

    fn compute(request: &Request) -> Result<Response> {
        let se = eval::binomial_se(request.p, request.n)?;
        let half_width_95 = eval::Z_95 * se;
        Ok(Response {
            se,
            half_width_95,
            normal_95: [
                (request.p - half_width_95).max(0.0),
                (request.p + half_width_95).min(1.0),
            ],
            wilson_95: eval::wilson_interval(request.p, request.n, eval::Z_95)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::compute;
    use serde_json::json;

    #[test]
    fn article_200_tasks_at_half_give_se_0_035_and_6_9_points() {
        let out = compute("binomial-se", json!({"p": 0.5, "n": 200})).unwrap();
        assert!((out["se"].as_f64().unwrap() - 0.035).abs() < 5e-4);
        assert!((out["half_width_95"].as_f64().unwrap() * 100.0 - 6.9).abs() < 0.05);
    }

    #[test]
    fn zero_tasks_names_n() {
        assert_eq!(
            compute("binomial-se", json!({"p": 0.5, "n": 0}))
                .unwrap_err()
                .field,
            "n"
        );
    }
}

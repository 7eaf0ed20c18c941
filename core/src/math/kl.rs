//! Per-token estimators of `KL(pi_theta || pi_ref)` from tokens sampled from `pi_theta`.
//!
//! With `x = logp - ref_logp = log(pi_theta / pi_ref)` at a sampled token:
//!
//! ```text
//! k1 = x                      unbiased, can be negative, high variance
//! k2 = x^2 / 2                biased, always >= 0, low variance
//! k3 = exp(-x) - (-x) - 1     unbiased, always >= 0, low variance
//! abs = |x|                   biased, always >= 0 (verl's `abs`; slope sign(x), 0 at x = 0)
//! ```
//!
//! Source: J. Schulman, "Approximating KL Divergence" (2020 blog post). `k3` is the one
//! TRL's GRPO trainer uses (`per_token_kl`) and verl calls `low_var_kl`; verl's
//! `kl_penalty` clamps the log ratio `-x` to `[-20, 20]` before exponentiating and the
//! `k3` value to `[-10, 10]` afterwards. Those clamps are the `clamp` flag of [`kl_point`] and
//! apply to `k3` only, as in verl. verl's straight-through variants (`k3+`, which take
//! the value of `k3` and the gradient of `k2`) are not offered.

use serde::{Deserialize, Serialize};

use crate::error::{Result, check};

/// Which per-token KL estimator to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub enum KlEstimator {
    /// `logp - ref_logp`.
    #[serde(rename = "k1", alias = "kl")]
    K1,
    /// `(logp - ref_logp)^2 / 2`.
    #[serde(rename = "k2", alias = "mse")]
    K2,
    /// `exp(ref_logp - logp) - (ref_logp - logp) - 1`.
    #[default]
    #[serde(rename = "k3", alias = "low_var_kl", alias = "low-var-kl")]
    K3,
    /// `|logp - ref_logp|` (verl `kl_penalty = "abs"`).
    #[serde(rename = "abs")]
    Abs,
}

/// Bounds of verl's `low_var_kl` clamps.
const LOG_RATIO_CLAMP: f64 = 20.0;
const VALUE_CLAMP: f64 = 10.0;

/// The value of one estimator and its derivative with respect to `logp`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KlPoint {
    /// The estimate at this token.
    pub value: f64,
    /// `d value / d logp` (0 where a clamp is active).
    pub d_value_d_logp: f64,
}

/// Evaluates `estimator` at one token; `clamp` applies verl's `k3` clamps.
#[inline]
pub fn kl_point(logp: f64, ref_logp: f64, estimator: KlEstimator, clamp: bool) -> KlPoint {
    let x = logp - ref_logp;
    match estimator {
        KlEstimator::K1 => KlPoint {
            value: x,
            d_value_d_logp: 1.0,
        },
        KlEstimator::K2 => KlPoint {
            value: 0.5 * x * x,
            d_value_d_logp: x,
        },
        KlEstimator::Abs => KlPoint {
            value: x.abs(),
            // PyTorch's (and verl's) slope of |x|: sign(x), 0 at 0.
            d_value_d_logp: if x == 0.0 { 0.0 } else { x.signum() },
        },
        KlEstimator::K3 => {
            // In terms of y = log(pi_ref / pi) = -x: k3 = e^y - y - 1, dk3/dy = e^y - 1,
            // and dy/dlogp = -1.
            let y = -x;
            let (y, y_clamped) = if clamp && y.abs() > LOG_RATIO_CLAMP {
                (y.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP), true)
            } else {
                (y, false)
            };
            // One transcendental call serves both: e^y - 1 is the slope's negative.
            let exp_m1 = crate::math::fast_exp::exp_m1(y);
            let value = exp_m1 - y;
            let slope = if y_clamped { 0.0 } else { -exp_m1 };
            if clamp && value.abs() > VALUE_CLAMP {
                KlPoint {
                    value: value.clamp(-VALUE_CLAMP, VALUE_CLAMP),
                    d_value_d_logp: 0.0,
                }
            } else {
                KlPoint {
                    value,
                    d_value_d_logp: slope,
                }
            }
        }
    }
}

/// Per-token estimates over paired arrays (fields `logp`, `ref_logp`), both
/// log-probabilities (finite, `<= 0`). Fails if a value overflows (`k3` far from the
/// reference without the clamp).
pub fn kl_values(
    logp: &[f64],
    ref_logp: &[f64],
    estimator: KlEstimator,
    clamp: bool,
) -> Result<Vec<f64>> {
    check::same_len("ref_logp", ref_logp.len(), "logp", logp.len())?;
    check_log_probabilities("logp", logp)?;
    check_log_probabilities("ref_logp", ref_logp)?;
    let values: Vec<f64> = logp
        .iter()
        .zip(ref_logp)
        .map(|(&a, &b)| kl_point(a, b, estimator, clamp).value)
        .collect();
    check::all_finite("logp", &values).map_err(|mut e| {
        e.message = "the KL estimate overflows f64 here; set clamp to bound it".into();
        e
    })?;
    Ok(values)
}

/// Every entry is a finite log-probability (`<= 0`); the error names `field[i]`.
pub fn check_log_probabilities(field: &str, values: &[f64]) -> Result<()> {
    check::all_finite(field, values)?;
    for (i, &v) in values.iter().enumerate() {
        check::in_range(&format!("{field}[{i}]"), v, f64::NEG_INFINITY, 0.0).map_err(|mut e| {
            e.message = format!("must be a log-probability (finite, <= 0), got {v}");
            e
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Exact expectation of an estimator under `p`, by enumerating the categories.
    fn expectation(p: &[f64], q: &[f64], estimator: KlEstimator) -> f64 {
        p.iter()
            .zip(q)
            .map(|(&pi, &qi)| pi * kl_point(pi.ln(), qi.ln(), estimator, false).value)
            .sum()
    }

    fn normalise(w: &[f64]) -> Vec<f64> {
        let s: f64 = w.iter().sum();
        w.iter().map(|x| x / s).collect()
    }

    #[test]
    fn estimators_on_a_known_token() {
        // pi = 0.5, pi_ref = 0.25: x = ln 2.
        let (lp, lr) = (0.5f64.ln(), 0.25f64.ln());
        let ln2 = 2f64.ln();
        assert!((kl_point(lp, lr, KlEstimator::K1, false).value - ln2).abs() < 1e-15);
        assert!((kl_point(lp, lr, KlEstimator::K2, false).value - 0.5 * ln2 * ln2).abs() < 1e-15);
        let abs = kl_point(lp, lr, KlEstimator::Abs, false);
        assert!((abs.value - ln2).abs() < 1e-15);
        assert_eq!(abs.d_value_d_logp, (lp - lr).signum());
        assert_eq!(
            kl_point(lr, lr, KlEstimator::Abs, false).d_value_d_logp,
            0.0
        );
        assert_eq!(kl_point(lr, lp, KlEstimator::Abs, true).value, abs.value);
        assert!((kl_point(lp, lr, KlEstimator::K3, false).value - (0.5 + ln2 - 1.0)).abs() < 1e-15);
    }

    #[test]
    fn verl_clamps_bound_k3_far_from_the_reference() {
        let far = kl_point(-30.0, -1.0, KlEstimator::K3, true);
        assert_eq!(far.value, 10.0);
        assert_eq!(far.d_value_d_logp, 0.0);
        assert!(kl_point(-30.0, -1.0, KlEstimator::K3, false).value > 1e12);
        let near = kl_point(-1.0, -1.5, KlEstimator::K3, true);
        assert_eq!(near, kl_point(-1.0, -1.5, KlEstimator::K3, false));
    }

    #[test]
    fn positive_log_probability_is_rejected_by_index() {
        let err = kl_values(&[-1.0, 0.5], &[-1.0, -1.0], KlEstimator::K3, false).unwrap_err();
        assert_eq!(err.field, "logp[1]");
    }

    proptest! {
        #[test]
        fn k1_and_k3_are_unbiased_and_k2_is_not_below_zero(
            wp in proptest::collection::vec(0.05f64..1.0, 2..6),
            wq in proptest::collection::vec(0.05f64..1.0, 6),
        ) {
            let p = normalise(&wp);
            let q = normalise(&wq[..p.len()]);
            let exact: f64 = p.iter().zip(&q).map(|(a, b)| a * (a / b).ln()).sum();
            prop_assert!((expectation(&p, &q, KlEstimator::K1) - exact).abs() < 1e-12);
            prop_assert!((expectation(&p, &q, KlEstimator::K3) - exact).abs() < 1e-12);
            prop_assert!(expectation(&p, &q, KlEstimator::K2) >= 0.0);
            // Jensen: E|x| >= |E x| = KL, so `abs` is biased upward.
            prop_assert!(expectation(&p, &q, KlEstimator::Abs) >= exact - 1e-12);
        }

        #[test]
        fn k3_is_never_negative(lp in -30.0f64..0.0, lr in -30.0f64..0.0, clamp: bool) {
            prop_assert!(kl_point(lp, lr, KlEstimator::K3, clamp).value >= 0.0);
        }

        #[test]
        fn slopes_match_finite_differences(lp in -8.0f64..-0.01, lr in -8.0f64..0.0) {
            let h = 1e-6;
            for est in [KlEstimator::K1, KlEstimator::K2, KlEstimator::K3, KlEstimator::Abs] {
                if est == KlEstimator::Abs && (lp - lr).abs() < 1e-5 {
                    continue; // the kink of |x|
                }
                let fd = (kl_point(lp + h, lr, est, false).value - kl_point(lp - h, lr, est, false).value) / (2.0 * h);
                let got = kl_point(lp, lr, est, false).d_value_d_logp;
                prop_assert!((got - fd).abs() < 1e-5 * (1.0 + got.abs()));
            }
        }
    }
}

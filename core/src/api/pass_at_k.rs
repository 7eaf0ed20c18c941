//! `pass-at-k`: the unbiased pass@k estimate for one task or the mean over tasks, the
//! plug-in value for contrast, and an interval (see [`crate::math::eval`]).
//!
//! ## Interval
//! - Several tasks (`c` a list): a percentile bootstrap over tasks of the mean per-task
//!   estimate (`resamples` resamples, `level` coverage, `seed`).
//! - One task: the Wilson interval `[lo, hi]` for the per-sample success rate `c/n`,
//!   mapped through `1 - (1 - x)^k`, which is increasing in `x`: an interval for the
//!   true pass@k under independent samples.

use serde::{Deserialize, Serialize};

use super::{Entry, OneOrMany, check_draws, check_work};
use crate::error::{FieldError, Result, check};
use crate::math::eval;

/// Request for `pass-at-k`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// Samples per task, `n >= k`; one number shared by every task, or one per task.
    pub n: OneOrMany<u64>,
    /// Correct samples, `c <= n`; one number (one task) or one per task.
    pub c: OneOrMany<u64>,
    /// Attempts allowed, `1 <= k <= n`.
    pub k: u64,
    /// Bootstrap resamples for several tasks, `2..=100000`. Default 1000.
    #[serde(default = "default_resamples")]
    pub resamples: usize,
    /// Interval coverage in `(0, 1)`. Default 0.95.
    #[serde(default = "default_level")]
    pub level: f64,
    /// Bootstrap seed; resample `b` uses stream `b`. Default 0.
    #[serde(default)]
    pub seed: u64,
}

fn default_resamples() -> usize {
    1000
}
fn default_level() -> f64 {
    0.95
}

/// The documented defaults of the optional fields, with the required ones empty: a base
/// for `Request { .., ..Request::default() }`, not a valid request by itself.
impl Default for Request {
    fn default() -> Self {
        Self {
            n: OneOrMany::Many(Vec::new()),
            c: OneOrMany::Many(Vec::new()),
            k: 0,
            resamples: default_resamples(),
            level: default_level(),
            seed: 0,
        }
    }
}

/// Response of `pass-at-k`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Response {
    /// Unbiased pass@k (mean over tasks for several).
    pub estimate: f64,
    /// Plug-in `1 - (1 - c/n)^k` (mean over tasks for several).
    pub plug_in: f64,
    /// Interval `[lo, hi]` at `level`.
    pub ci: [f64; 2],
    /// `bootstrap` (several tasks) or `wilson` (one task).
    pub ci_method: CiMethod,
    /// Per-task unbiased estimates (one entry for one task).
    pub per_task: Vec<f64>,
}

/// How the interval of a `pass-at-k` response was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CiMethod {
    /// Percentile bootstrap over tasks (several tasks).
    Bootstrap,
    /// The Wilson interval of the pass rate, carried through `1 - (1 - x)^k` (one task).
    Wilson,
}

/// The `pass-at-k` entry.
pub struct PassAtK;

/// The normal quantile `z` with two-sided coverage `level` (1.96 at 0.95): Newton's
/// method on the standard normal CDF, which is integrated by Simpson's rule (2000
/// intervals from 0). Exact to about 1e-12, with no special functions beyond `exp`.
/// The last level asked for is remembered (per thread), since callers such as the
/// pass@k figure ask for the same level many times in a row.
fn normal_quantile(level: f64) -> f64 {
    thread_local! {
        static LAST: std::cell::Cell<Option<(f64, f64)>> = const { std::cell::Cell::new(None) };
    }
    if let Some((last_level, z)) = LAST.get()
        && last_level.to_bits() == level.to_bits()
    {
        return z;
    }
    let z = solve_normal_quantile(level);
    LAST.set(Some((level, z)));
    z
}

/// [`normal_quantile`] without the memo.
fn solve_normal_quantile(level: f64) -> f64 {
    let target = f64::midpoint(1.0, level);
    let density = |t: f64| (-0.5 * t * t).exp() / (2.0 * std::f64::consts::PI).sqrt();
    let cdf = |x: f64| -> f64 {
        let steps = 2000;
        let h = x / f64::from(steps);
        let mut total = density(0.0) + density(x);
        for i in 1..steps {
            let weight = if i % 2 == 1 { 4.0 } else { 2.0 };
            total += weight * density(h * f64::from(i));
        }
        0.5 + total * h / 3.0
    };
    // The CDF is increasing and concave on [0, ∞), so Newton's steps from 0 rise
    // monotonically to the root; the bracket guards the few steps near the tail.
    let mut z = 0.0_f64;
    for _ in 0..100 {
        let step = (cdf(z) - target) / density(z).max(1e-300);
        let next = (z - step).clamp(0.0, 40.0);
        if (next - z).abs() <= 1e-13 * next.max(1.0) {
            return next;
        }
        z = next;
    }
    z
}

impl Entry for PassAtK {
    const NAME: &'static str = "pass-at-k";
    const SUMMARY: &'static str =
        "Unbiased pass@k (Chen et al. 2021) against the plug-in, with an interval";
    type Request = Request;
    type Response = Response;

    fn compute(request: &Request) -> Result<Response> {
        let level = request.level;
        if !(level > 0.0 && level < 1.0) {
            return Err(FieldError::new(
                "level",
                format!("must be in (0, 1), got {level}"),
            ));
        }
        let c = request.c.to_vec();
        check::non_empty("c", &c)?;
        let n = match &request.n {
            OneOrMany::One(n) => vec![*n; c.len()],
            OneOrMany::Many(n) => n.clone(),
        };
        // The cost: pass@k's factors over every task (bounded by `eval::pass_at_k_terms`).
        let terms = n.iter().zip(&c).fold(0u64, |sum, (&n, &c)| {
            sum.saturating_add(eval::pass_at_k_terms(n, c, request.k))
        });
        check_work("k", terms)?;
        let per_task = if request.c.is_many() {
            eval::pass_at_k_per_task(&n, &c, request.k)?
        } else {
            check::same_len("n", n.len(), "c", 1)?;
            vec![eval::pass_at_k(n[0], c[0], request.k)?]
        };
        let tasks = per_task.len() as f64;
        let estimate = per_task.iter().sum::<f64>() / tasks;
        let plug_in = n
            .iter()
            .zip(&c)
            .map(|(&n, &c)| eval::pass_at_k_plug_in(n, c, request.k))
            .sum::<Result<f64>>()?
            / tasks;
        let (ci, ci_method) = if request.c.is_many() {
            check::count("resamples", request.resamples, 2, 100_000)?;
            check_draws(
                "resamples",
                (request.resamples as u64).saturating_mul(c.len() as u64),
            )?;
            let ci = eval::bootstrap_mean_ci(&per_task, request.resamples, level, request.seed)
                .map_err(|e| {
                    if e.field == "values" {
                        e.within("c")
                    } else {
                        e
                    }
                })?;
            (ci, CiMethod::Bootstrap)
        } else {
            let rate = c[0] as f64 / n[0] as f64;
            let [lo, hi] = eval::wilson_interval(rate, n[0], normal_quantile(level))?;
            let k = request.k as f64;
            let through = |x: f64| 1.0 - (1.0 - x).powf(k);
            ([through(lo), through(hi)], CiMethod::Wilson)
        };
        Ok(Response {
            estimate,
            plug_in,
            ci,
            ci_method,
            per_task,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::compute;
    use super::normal_quantile;
    use serde_json::json;

    #[test]
    fn article_single_task_estimate_and_plug_in() {
        let out = compute("pass-at-k", json!({"n": 10, "c": 2, "k": 3})).unwrap();
        assert!((out["estimate"].as_f64().unwrap() - 0.533).abs() < 5e-4);
        assert!((out["plug_in"].as_f64().unwrap() - 0.488).abs() < 1e-12);
        assert_eq!(out["ci_method"], json!("wilson"));
        let ci = out["ci"].as_array().unwrap();
        assert!(ci[0].as_f64().unwrap() < 0.533 && 0.533 < ci[1].as_f64().unwrap());
    }

    #[test]
    fn several_tasks_average_per_task_estimates() {
        let out = compute("pass-at-k", json!({"n": 10, "c": [2, 0, 10], "k": 3})).unwrap();
        let mean = (1.0 - 56.0 / 120.0 + 0.0 + 1.0) / 3.0;
        assert!((out["estimate"].as_f64().unwrap() - mean).abs() < 1e-12);
        assert_eq!(out["ci_method"], json!("bootstrap"));
    }

    #[test]
    fn k_above_n_names_k_and_c_above_n_names_the_task() {
        assert_eq!(
            compute("pass-at-k", json!({"n": 5, "c": 2, "k": 6}))
                .unwrap_err()
                .field,
            "k"
        );
        let err = compute("pass-at-k", json!({"n": [5, 5], "c": [2, 7], "k": 1})).unwrap_err();
        assert_eq!(err.field, "c[1]");
    }

    #[test]
    fn normal_quantile_matches_published_values() {
        // Two-sided quantiles of the standard normal (R's qnorm((1 + level) / 2)).
        for (level, z) in [
            (0.5, 0.674_489_750_196_081_7),
            (0.9, 1.644_853_626_951_472_7),
            (0.95, 1.959_963_984_540_054),
            (0.99, 2.575_829_303_548_900_4),
            (0.9999, 3.890_591_886_413_094),
        ] {
            // Simpson's rule loses digits where the density is small (the 0.9999 tail).
            let tolerance = if level > 0.999 { 1e-8 } else { 1e-10 };
            assert!(
                (normal_quantile(level) - z).abs() < tolerance,
                "{level}: {}",
                normal_quantile(level)
            );
            // Asked again: the remembered value, the same to the bit.
            assert_eq!(
                normal_quantile(level).to_bits(),
                normal_quantile(level).to_bits()
            );
        }
    }
}

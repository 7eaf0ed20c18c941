//! `masked-whiten`: verl's masked whitening on its own, outside GAE.
//!
//! A rectangular batch `x` (`values`, `[B][T]`) is centred and scaled by the statistics
//! of the positions its 0/1 `mask` selects, and every position is moved, masked or not:
//!
//! ```text
//! n    = sum_bt m_bt
//! mean = sum_bt m_bt x_bt / (n + 1e-8)                                  (masked_mean)
//! var  = [sum_bt m_bt (x_bt - mean)^2 / (n + 1e-8)] * n / (n - 1)       (masked_var, unbiased)
//! y_bt = (x_bt - mean) / sqrt(var + 1e-8)                               (every position)
//! y_bt = y_bt + mean                                                    (shift_mean = false)
//! ```
//!
//! Source: verl `verl/utils/torch_functional.py`, functions `masked_mean` (the masked
//! sum over the count plus 1e-8), `masked_var` (the same mean of the squared deviations,
//! times the Bessel factor `n / (n - 1)`) and `masked_whiten` (`(values - mean) *
//! rsqrt(var + 1e-8)`, the mean added back when `shift_mean` is false). A position
//! outside the mask does not enter the statistics, but its output is computed all the
//! same, as verl computes it; inside `gae` the same whitening follows the recursion,
//! which gives masked positions their own values (see [`crate::math::gae_batch`]).
//!
//! verl raises when the mask sums to 0, and when it sums to 1 (the Bessel factor
//! divides by zero); both are refused here naming `mask`.
//!
//! ## Design
//! - `values` must be rectangular (every row as long as the first) and `mask` of the
//!   same shape, each entry 0 or 1; errors name `values[b]`, `mask[b]`, `mask[b][t]`.
//! - The work is one pass over the numbers, bounded by the request's size; the count is
//!   still held against [`super::MAX_WORK`] naming `values`, like any entry's.

use serde::{Deserialize, Serialize};

use super::{Entry, check_work, units};
use crate::error::{FieldError, Result, check};
use crate::math::gae_batch::masked_whiten;

/// verl's guard in `masked_mean`'s denominator.
const VERL_MEAN_GUARD: f64 = 1e-8;

/// Request of `masked-whiten`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// The batch to whiten, `[B][T]`, rectangular, finite (verl's `values`).
    pub values: Vec<Vec<f64>>,
    /// 1 at the positions whose statistics whiten the batch, 0 elsewhere; shaped like
    /// `values` (verl's `mask`, e.g. the `response_mask`).
    pub mask: Vec<Vec<f64>>,
    /// Leave the result centred (`true`), or add the mean back (`false`). Default true.
    #[serde(default = "yes")]
    pub shift_mean: bool,
}

fn yes() -> bool {
    true
}

/// Response of `masked-whiten`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// The whitened batch, shaped like `values`; positions outside the mask are
    /// transformed too.
    pub whitened: Vec<Vec<f64>>,
    /// verl's masked mean of `values` (count plus 1e-8 in the denominator).
    pub mean: f64,
    /// verl's unbiased masked variance of `values`.
    pub var: f64,
    /// The number of masked positions, `sum m`.
    pub count: f64,
}

/// The `masked-whiten` entry.
pub struct MaskedWhiten;

/// Checks shapes, values and the mask, naming the fields.
fn validate(request: &Request) -> Result<f64> {
    let values = &request.values;
    let mask = &request.mask;
    check::non_empty("values", values)?;
    let width = values[0].len();
    for (b, row) in values.iter().enumerate() {
        if row.len() != width {
            return Err(FieldError::new(
                format!("values[{b}]"),
                format!(
                    "has {} entries but values[0] has {width}; the batch must be rectangular",
                    row.len()
                ),
            ));
        }
        check::all_finite(&format!("values[{b}]"), row)?;
    }
    check_work("values", units(values.len()).saturating_mul(units(width)))?;
    check::same_len("mask", mask.len(), "values", values.len())?;
    let mut count = 0.0;
    for (b, row) in mask.iter().enumerate() {
        check::same_len(
            &format!("mask[{b}]"),
            row.len(),
            &format!("values[{b}]"),
            width,
        )?;
        if let Some(t) = row.iter().position(|&m| m != 0.0 && m != 1.0) {
            return Err(FieldError::new(
                format!("mask[{b}][{t}]"),
                format!("must be 0 or 1, got {}", row[t]),
            ));
        }
        count += row.iter().sum::<f64>();
    }
    if count == 0.0 {
        return Err(FieldError::new(
            "mask",
            "selects no position: the masked statistics are undefined (verl's masked_var \
             raises when the mask sums to 0)",
        ));
    }
    if count == 1.0 {
        return Err(FieldError::new(
            "mask",
            "selects one position: the unbiased variance divides by n - 1 = 0 (verl's \
             masked_var raises when the mask sums to 1)",
        ));
    }
    Ok(count)
}

impl Entry for MaskedWhiten {
    const NAME: &'static str = "masked-whiten";
    const SUMMARY: &'static str = "verl's masked_whiten: centre and scale a padded batch by the mean and unbiased variance over a mask";
    type Request = Request;
    type Response = Response;

    fn compute(request: &Request) -> Result<Response> {
        let count = validate(request)?;
        let mut whitened = request.values.clone();
        let stats = masked_whiten(
            &mut whitened,
            &request.mask,
            request.shift_mean,
            VERL_MEAN_GUARD,
        )
        .map_err(|e| FieldError::new("mask", e.message))?;
        let finite = stats.mean.is_finite()
            && stats.var.is_finite()
            && whitened.iter().flatten().all(|v| v.is_finite());
        if !finite {
            return Err(FieldError::new(
                "values",
                "the mean, variance or whitened values overflow f64: the spread is too large \
                 to represent",
            ));
        }
        Ok(Response {
            whitened,
            mean: stats.mean,
            var: stats.var,
            count,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::api::compute;
    use serde_json::json;

    #[test]
    fn whitens_over_the_mask_and_moves_every_position() {
        let out = compute(
            "masked-whiten",
            json!({"values": [[1.0, 2.0, 50.0], [3.0, -7.0, 9.0]],
                   "mask": [[1, 1, 0], [1, 0, 0]]}),
        )
        .unwrap();
        // Masked values 1, 2, 3: mean 2 (over 3 + 1e-8), unbiased variance 1.
        let n = 3.0;
        let mean = 6.0 / (n + 1e-8);
        let centred: f64 = [1.0, 2.0, 3.0]
            .iter()
            .map(|x: &f64| (x - mean).powi(2))
            .sum();
        let var = centred / (n + 1e-8) * n / (n - 1.0);
        assert!((out["mean"].as_f64().unwrap() - mean).abs() < 1e-15);
        assert!((out["var"].as_f64().unwrap() - var).abs() < 1e-15);
        let scale = 1.0 / (var + 1e-8).sqrt();
        let padded = out["whitened"][0][2].as_f64().unwrap();
        assert!((padded - (50.0 - mean) * scale).abs() < 1e-12);
        assert_eq!(out["count"], json!(3.0));
        let kept = compute(
            "masked-whiten",
            json!({"values": [[1.0, 2.0, 50.0], [3.0, -7.0, 9.0]],
                   "mask": [[1, 1, 0], [1, 0, 0]], "shift_mean": false}),
        )
        .unwrap();
        let moved = kept["whitened"][1][1].as_f64().unwrap();
        assert!((moved - ((-7.0 - mean) * scale + mean)).abs() < 1e-12);
    }

    #[test]
    fn masks_of_zero_or_one_position_are_refused_naming_mask() {
        for mask in [json!([[0, 0], [0, 0]]), json!([[0, 1], [0, 0]])] {
            let err = compute(
                "masked-whiten",
                json!({"values": [[1.0, 2.0], [3.0, 4.0]], "mask": mask}),
            )
            .unwrap_err();
            assert_eq!(err.field, "mask");
        }
    }

    #[test]
    fn shapes_and_mask_values_are_named() {
        let err = compute(
            "masked-whiten",
            json!({"values": [[1.0, 2.0], [3.0]], "mask": [[1, 1], [1]]}),
        )
        .unwrap_err();
        assert_eq!(err.field, "values[1]");
        let err = compute(
            "masked-whiten",
            json!({"values": [[1.0, 2.0], [3.0, 4.0]], "mask": [[1, 1], [1]]}),
        )
        .unwrap_err();
        assert_eq!(err.field, "mask[1]");
        let err = compute(
            "masked-whiten",
            json!({"values": [[1.0, 2.0], [3.0, 4.0]], "mask": [[1, 1], [1, 0.5]]}),
        )
        .unwrap_err();
        assert_eq!(err.field, "mask[1][1]");
        let err = compute(
            "masked-whiten",
            json!({"values": [[1.0, 2.0]], "mask": [[1, 1], [1, 1]]}),
        )
        .unwrap_err();
        assert_eq!(err.field, "mask");
        let err = compute("masked-whiten", json!({"values": [], "mask": []})).unwrap_err();
        assert_eq!(err.field, "values");
        let err = compute(
            "masked-whiten",
            json!({"values": [[1.0, 2.0]], "mask": [[1, 1]], "shift": true}),
        )
        .unwrap_err();
        assert_eq!(err.field, "shift");
    }

    #[test]
    fn a_spread_that_overflows_is_refused() {
        let err = compute(
            "masked-whiten",
            json!({"values": [[1e308, -1e308, 0.0]], "mask": [[1, 1, 1]]}),
        )
        .unwrap_err();
        assert_eq!(err.field, "values");
    }
}

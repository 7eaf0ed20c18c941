//! The one error type of the core: which input field was wrong, and why.
//!
//! Handled exactly once, at the edge: the CLI prints it as
//! `{"error": {"field": ..., "message": ...}}` and exits 2, the server answers 422.

use serde::Serialize;

/// A rejected input: the field (a JSON path such as `rewards[2][0]`) and the constraint
/// it broke.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    /// The offending input field, as the user wrote it (`p`, `logp[3]`, `groups`).
    pub field: String,
    /// What is wrong with it, in one sentence.
    pub message: String,
}

impl FieldError {
    /// An error for `field` with a message.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }

    /// The same error, with its field nested under `parent` (`x` becomes `parent.x`,
    /// `[3]` becomes `parent[3]`).
    #[must_use]
    pub fn within(mut self, parent: &str) -> Self {
        self.field = if self.field.is_empty() {
            parent.to_owned()
        } else if self.field.starts_with('[') {
            format!("{parent}{}", self.field)
        } else {
            format!("{parent}.{}", self.field)
        };
        self
    }
}

/// Result of a computation that may reject its input.
pub type Result<T, E = FieldError> = std::result::Result<T, E>;

/// Validation helpers shared by every math module. Each names the field it checks.
pub mod check {
    use super::{FieldError, Result};

    /// `value` is a finite number.
    pub fn finite(field: &str, value: f64) -> Result<f64> {
        if value.is_finite() {
            Ok(value)
        } else {
            Err(FieldError::new(
                field,
                format!("must be a finite number, got {value}"),
            ))
        }
    }

    /// Every entry of `values` is finite; the error names the first bad index.
    pub fn all_finite(field: &str, values: &[f64]) -> Result<()> {
        match values.iter().position(|v| !v.is_finite()) {
            None => Ok(()),
            Some(i) => Err(FieldError::new(
                format!("{field}[{i}]"),
                format!("must be a finite number, got {}", values[i]),
            )),
        }
    }

    /// `value` is a probability in `[0, 1]`.
    pub fn probability(field: &str, value: f64) -> Result<f64> {
        if (0.0..=1.0).contains(&value) {
            Ok(value)
        } else {
            Err(FieldError::new(
                field,
                format!("must be a probability in [0, 1], got {value}"),
            ))
        }
    }

    /// Every entry of `values` is a probability in `[0, 1]`.
    pub fn all_probabilities(field: &str, values: &[f64]) -> Result<()> {
        for (i, &v) in values.iter().enumerate() {
            probability(&format!("{field}[{i}]"), v)?;
        }
        Ok(())
    }

    /// `value` is finite and strictly positive.
    pub fn positive(field: &str, value: f64) -> Result<f64> {
        if value.is_finite() && value > 0.0 {
            Ok(value)
        } else {
            Err(FieldError::new(
                field,
                format!("must be a finite number > 0, got {value}"),
            ))
        }
    }

    /// `value` is finite and not negative.
    pub fn non_negative(field: &str, value: f64) -> Result<f64> {
        if value.is_finite() && value >= 0.0 {
            Ok(value)
        } else {
            Err(FieldError::new(
                field,
                format!("must be a finite number >= 0, got {value}"),
            ))
        }
    }

    /// `value` lies in `[low, high]`.
    pub fn in_range(field: &str, value: f64, low: f64, high: f64) -> Result<f64> {
        if value.is_finite() && (low..=high).contains(&value) {
            Ok(value)
        } else {
            Err(FieldError::new(
                field,
                format!("must be in [{low}, {high}], got {value}"),
            ))
        }
    }

    /// An integer count in `[low, high]`.
    pub fn count(field: &str, value: usize, low: usize, high: usize) -> Result<usize> {
        if (low..=high).contains(&value) {
            Ok(value)
        } else {
            Err(FieldError::new(
                field,
                format!("must be an integer in [{low}, {high}], got {value}"),
            ))
        }
    }

    /// How far a distribution's sum may be from 1, relative: a vector whose entries
    /// were rounded (to six decimals, say) still sums to within it, and is divided by
    /// its sum.
    pub const SUM_TOLERANCE: f64 = 1e-4;

    /// A sum this close to 1 is the rounding of the sum itself: the entries are used as
    /// given.
    pub const EXACT_SUM: f64 = 1e-12;

    /// `probs` is a non-empty probability vector summing to 1 within
    /// [`SUM_TOLERANCE`]; returns it divided by its sum (unchanged within
    /// [`EXACT_SUM`]). The error names the entry or the whole field.
    pub fn distribution(field: &str, probs: &[f64]) -> Result<Vec<f64>> {
        into_distribution(field, probs.to_vec())
    }

    /// [`distribution`] of an owned vector, divided in place.
    pub fn into_distribution(field: &str, mut probs: Vec<f64>) -> Result<Vec<f64>> {
        non_empty(field, &probs)?;
        all_probabilities(field, &probs)?;
        let total: f64 = probs.iter().sum();
        if (total - 1.0).abs() > SUM_TOLERANCE {
            return Err(FieldError::new(
                field,
                format!(
                    "must sum to 1 (within {SUM_TOLERANCE:e}; a sum that near is renormalised), sums to {total}"
                ),
            ));
        }
        if needs_renormalising(total) {
            for p in &mut probs {
                *p /= total;
            }
        }
        Ok(probs)
    }

    /// Whether a distribution summing to `total` is divided by it (see
    /// [`distribution`]).
    pub fn needs_renormalising(total: f64) -> bool {
        (total - 1.0).abs() > EXACT_SUM
    }

    /// `values` is not empty.
    pub fn non_empty<T>(field: &str, values: &[T]) -> Result<()> {
        if values.is_empty() {
            Err(FieldError::new(field, "must not be empty"))
        } else {
            Ok(())
        }
    }

    /// `field` has exactly `expected` entries, to line up with `other`.
    pub fn same_len(field: &str, actual: usize, other: &str, expected: usize) -> Result<()> {
        if actual == expected {
            Ok(())
        } else {
            Err(FieldError::new(
                field,
                format!("has {actual} entries but {other} has {expected}; they must line up"),
            ))
        }
    }
}

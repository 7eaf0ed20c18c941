//! The one place where figures call the core: `compute(name, request)`.
//!
//! Every figure builds a JSON request for an entry of `arlbook_core::api` and reads the
//! JSON response, exactly as the CLI and the HTTP server do, so a number on the page can
//! be checked with `arlbook compute <name>`. The computations run on the CPU (the core
//! compiled to wasm32); when the core's WebGPU path is available it is switched on here,
//! and [`backend`] tells the page's badge which one answered.

use arlbook_core::api;
use arlbook_core::error::FieldError;
use serde_json::Value;

/// Where a computation ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// The core's reference implementation on the CPU.
    Cpu,
}

impl Backend {
    /// The badge text.
    pub fn label(self) -> &'static str {
        match self {
            Backend::Cpu => "CPU",
        }
    }
}

/// The backend that [`compute`] uses.
pub fn backend() -> Backend {
    Backend::Cpu
}

/// Runs the entry `name` of the compute API on `request`.
pub fn compute(name: &str, request: Value) -> Result<Value, FieldError> {
    api::compute(name, request)
}

/// The number at `key` of a response.
pub fn number(response: &Value, key: &str) -> Result<f64, FieldError> {
    response
        .get(key)
        .and_then(Value::as_f64)
        .ok_or_else(|| missing(key))
}

/// The list of numbers at `key` of a response.
pub fn numbers(response: &Value, key: &str) -> Result<Vec<f64>, FieldError> {
    numbers_of(response.get(key).ok_or_else(|| missing(key))?, key)
}

/// A JSON list of numbers.
pub fn numbers_of(value: &Value, key: &str) -> Result<Vec<f64>, FieldError> {
    value
        .as_array()
        .ok_or_else(|| missing(key))?
        .iter()
        .map(|v| v.as_f64().ok_or_else(|| missing(key)))
        .collect()
}

/// The list of lists of numbers at `key` of a response (a ragged array).
pub fn ragged(response: &Value, key: &str) -> Result<Vec<Vec<f64>>, FieldError> {
    response
        .get(key)
        .and_then(Value::as_array)
        .ok_or_else(|| missing(key))?
        .iter()
        .map(|row| numbers_of(row, key))
        .collect()
}

fn missing(key: &str) -> FieldError {
    FieldError::new(
        format!("(response).{key}"),
        "the response lacks this number",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn compute_reaches_the_core() {
        let response = compute(
            "bandit-gradient",
            json!({"p": 0.5, "q": [0.75, 0.35], "estimates": 0}),
        )
        .unwrap();
        assert!((number(&response, "exact").unwrap() - 0.1).abs() < 1e-12);
        assert_eq!(backend().label(), "CPU");
    }

    #[test]
    fn missing_numbers_are_errors() {
        let value = json!({"a": [1.0, "x"]});
        assert!(number(&value, "b").is_err());
        assert!(numbers(&value, "a").is_err());
        assert!(ragged(&value, "a").is_err());
    }
}

//! Probability vectors that sum to 1 only within rounding (entries rounded to six
//! decimals, say) are accepted, divided by their sum, and the response lists them
//! (`api::renormalised`); sums further off are refused with the field named.
//!
//! The reference for each accepted request is the same request with its vectors
//! divided by their sums here, which must give the same numbers (to 1e-12, the
//! rounding of the division) and no `renormalised` list.

use arlbook_core::api;
use serde_json::{Value, json};

/// `values` divided by their sum.
fn normalised(values: &[f64]) -> Vec<f64> {
    let sum: f64 = values.iter().sum();
    values.iter().map(|v| v / sum).collect()
}

/// Entries of `1 / k` rounded to six decimals: their sum is `0.999999` for `k = 3`.
fn rounded_uniform(k: usize) -> Vec<f64> {
    vec![(1e6 / k as f64).round() / 1e6; k]
}

/// The numbers of `response` without its `renormalised` list, flattened.
fn numbers(value: &Value, out: &mut Vec<f64>) {
    match value {
        Value::Number(n) => out.push(n.as_f64().expect("a number")),
        Value::Array(items) => items.iter().for_each(|v| numbers(v, out)),
        Value::Object(fields) => fields
            .iter()
            .filter(|(k, _)| *k != "renormalised")
            .for_each(|(_, v)| numbers(v, out)),
        _ => {}
    }
}

fn assert_same_numbers(entry: &str, a: &Value, b: &Value) {
    let (mut x, mut y) = (Vec::new(), Vec::new());
    numbers(a, &mut x);
    numbers(b, &mut y);
    assert_eq!(x.len(), y.len(), "{entry}: shapes differ");
    for (i, (u, v)) in x.iter().zip(&y).enumerate() {
        assert!(
            (u - v).abs() <= 1e-12 * v.abs().max(1.0),
            "{entry}: number {i} is {u} renormalised against {v} given exactly"
        );
    }
}

/// Each entry with a probability field: the request with a rounded vector, the same
/// request with the vector given exactly, and the renormalised field's name.
fn cases() -> Vec<(&'static str, Value, Value, &'static str)> {
    let rounded = rounded_uniform(3);
    let exact = normalised(&rounded);
    let skewed = [0.2, 0.5, 0.3];
    vec![
        (
            "importance-sampling",
            json!({"mu": rounded, "pi": skewed, "values": [1.0, 0.0, 0.5], "samples": 8, "estimates": 50}),
            json!({"mu": exact, "pi": skewed, "values": [1.0, 0.0, 0.5], "samples": 8, "estimates": 50}),
            "mu",
        ),
        (
            "kl-estimators",
            json!({"policy": skewed, "reference": rounded, "samples": 4, "replicates": 100}),
            json!({"policy": skewed, "reference": exact, "samples": 4, "replicates": 100}),
            "reference",
        ),
        (
            "kl-regularized-optimum",
            json!({"reference": rounded, "rewards": [1.0, 0.0, 0.5], "beta": 0.5}),
            json!({"reference": exact, "rewards": [1.0, 0.0, 0.5], "beta": 0.5}),
            "reference",
        ),
        (
            "distill",
            json!({"teacher_probs": rounded, "student_probs": skewed}),
            json!({"teacher_probs": exact, "student_probs": skewed}),
            "teacher_probs",
        ),
        (
            "dpo",
            json!({"reference": rounded, "beta": 0.1, "pairs": [[0, 1]], "policy": skewed}),
            json!({"reference": exact, "beta": 0.1, "pairs": [[0, 1]], "policy": skewed}),
            "reference",
        ),
    ]
}

#[test]
fn rounded_distributions_are_renormalised_and_said_so() {
    for (entry, rounded, exact, field) in cases() {
        let answered = api::compute(entry, rounded).unwrap_or_else(|e| panic!("{entry}: {e}"));
        let reference = api::compute(entry, exact).unwrap_or_else(|e| panic!("{entry}: {e}"));
        assert_eq!(
            answered["renormalised"],
            json!([{"field": field, "sum": 0.999_999}]),
            "{entry}"
        );
        assert!(
            reference.get("renormalised").is_none(),
            "{entry}: {reference}"
        );
        assert_same_numbers(entry, &answered, &reference);
    }
}

#[test]
fn sums_beyond_the_tolerance_are_refused_with_the_field_named() {
    // Off by 2e-4: twice the tolerance.
    let off = [0.3332, 0.3333, 0.3333];
    for (entry, mut request, _, field) in cases() {
        request[field] = json!(off);
        let err = api::compute(entry, request).expect_err(entry);
        assert_eq!(err.field, field, "{entry}: {err}");
        assert!(err.message.contains("must sum to 1"), "{entry}: {err}");
    }
}

//! Every numeric field of every entry at the extremes: for each entry's example request,
//! each numeric leaf set to 0, -0.0, the smallest subnormal, 1e-300, 1e300, `f64::MAX`,
//! `-f64::MAX`, `u64::MAX` and -1. `compute` must answer either a response with no
//! `null` where a number belongs or a `FieldError` naming a field, and never panic. A
//! property test then sets several leaves at once.

use std::panic::{AssertUnwindSafe, catch_unwind};

use arlbook_core::api::{ENTRIES, compute, examples};
use arlbook_tests::json::numeric_leaves;
use proptest::prelude::*;
use serde_json::{Value, json};

fn extremes() -> Vec<Value> {
    vec![
        json!(0),
        json!(-0.0),
        json!(5e-324),
        json!(1e-300),
        json!(1e300),
        json!(f64::MAX),
        json!(-f64::MAX),
        json!(u64::MAX),
        json!(-1),
    ]
}

/// A `null` in `response` that is not one the entry documents: `mixed-group`'s costs
/// are `null` exactly where the probability in the same cell is 0.
fn undocumented_null(name: &str, response: &Value) -> Option<String> {
    fn first_null(value: &Value, path: &str) -> Option<String> {
        match value {
            Value::Null => Some(path.to_owned()),
            Value::Array(items) => items
                .iter()
                .enumerate()
                .find_map(|(i, v)| first_null(v, &format!("{path}[{i}]"))),
            Value::Object(fields) => fields
                .iter()
                .find_map(|(k, v)| first_null(v, &format!("{path}.{k}"))),
            _ => None,
        }
    }
    let Value::Object(fields) = response else {
        return first_null(response, "");
    };
    for (key, item) in fields {
        let nullable =
            name == "mixed-group" && (key == "expected_attempts" || key == "expected_rollouts");
        if !nullable {
            if let Some(path) = first_null(item, key) {
                return Some(path);
            }
            continue;
        }
        let cells = |v: &Value| -> Vec<Value> {
            match v {
                Value::Array(rows) => rows
                    .iter()
                    .flat_map(|r| r.as_array().cloned().unwrap_or_default())
                    .collect(),
                other => vec![other.clone()],
            }
        };
        for (cost, prob) in cells(item).iter().zip(cells(&fields["probability"])) {
            if cost.is_null() && prob.as_f64() != Some(0.0) {
                return Some(format!("{key} (probability {prob})"));
            }
        }
    }
    None
}

/// Runs one request; a description of what went wrong, if anything.
fn misbehaviour(name: &str, request: &Value) -> Option<String> {
    let result = catch_unwind(AssertUnwindSafe(|| compute(name, request.clone())));
    match result {
        Err(_) => Some(format!("{name} panicked on {request}")),
        Ok(Err(e)) if e.field.is_empty() || e.message.is_empty() => Some(format!(
            "{name}: an error without a field on {request}: {e}"
        )),
        Ok(Err(_)) => None,
        Ok(Ok(response)) => undocumented_null(name, &response)
            .map(|path| format!("{name}: null at {path} on {request}")),
    }
}

fn examples_with_leaves() -> Vec<(&'static str, Value, Vec<String>)> {
    ENTRIES
        .iter()
        .map(|entry| {
            let request = examples::example(entry.name).expect("every entry has an example");
            let leaves = numeric_leaves(&request);
            (entry.name, request, leaves)
        })
        .collect()
}

#[test]
fn every_numeric_field_at_every_extreme_is_answered_or_refused() {
    // Quiet the expected panics' messages; they are reported below.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut failures = Vec::new();
    for (name, request, leaves) in examples_with_leaves() {
        assert!(misbehaviour(name, &request).is_none(), "{name}'s example");
        for leaf in &leaves {
            for extreme in extremes() {
                let mut changed = request.clone();
                *changed.pointer_mut(leaf).expect("a leaf") = extreme;
                failures.extend(misbehaviour(name, &changed));
            }
        }
    }
    std::panic::set_hook(hook);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn several_fields_at_extremes_at_once_are_answered_or_refused(
        entry in 0..ENTRIES.len(),
        picks in proptest::collection::vec((any::<prop::sample::Index>(), 0..9usize), 1..5),
    ) {
        let (name, mut request, leaves) = examples_with_leaves().swap_remove(entry);
        for (leaf, value) in picks {
            let leaf = leaf.get(&leaves);
            *request.pointer_mut(leaf).expect("a leaf") = extremes()[value].clone();
        }
        let failure = misbehaviour(name, &request);
        prop_assert!(failure.is_none(), "{}", failure.unwrap_or_default());
    }
}

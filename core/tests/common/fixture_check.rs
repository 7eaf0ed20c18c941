//! Replaying the TRL/verl reference fixtures (`tests/fixtures/policy/`, written by the
//! independent numpy transcription `tests/reference/policy_reference.py`): their files,
//! and a response checked against a fixture's expected fields within a tolerance.

use std::path::PathBuf;

use serde_json::Value;

/// Every fixture file, sorted by name.
pub fn fixture_files() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/policy");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("fixture directory exists")
        .map(|entry| entry.expect("reading the fixture directory").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
}

/// Adds to `failures` every expected field of fixture `name` that `response` misses or
/// does not match within `tolerance` (relative, absolute below 1). verl's
/// `pg_clipfrac`, written as `clip_fraction_pg`, is the response's `low + high`.
pub fn check_response(
    name: &str,
    expected: &Value,
    response: &Value,
    tolerance: f64,
    failures: &mut Vec<String>,
) {
    let mut expected = expected.clone();
    if let Some(pg_clipfrac) = expected
        .as_object_mut()
        .and_then(|e| e.remove("clip_fraction_pg"))
    {
        let fraction = &response["clip_fraction"];
        let sum = fraction["low"].as_f64().unwrap_or(f64::NAN)
            + fraction["high"].as_f64().unwrap_or(f64::NAN);
        compare(
            &format!("{name}.clip_fraction.low+high"),
            &pg_clipfrac,
            &serde_json::json!(sum),
            tolerance,
            failures,
        );
    }
    compare(name, &expected, response, tolerance, failures);
}

/// Compares `expected` with `actual` recursively; objects compare only the expected keys.
fn compare(
    path: &str,
    expected: &Value,
    actual: &Value,
    tolerance: f64,
    failures: &mut Vec<String>,
) {
    match (expected, actual) {
        (Value::Number(e), Value::Number(a)) => {
            let (Some(e), Some(a)) = (e.as_f64(), a.as_f64()) else {
                failures.push(format!("{path}: not representable as f64"));
                return;
            };
            if (e - a).abs() > tolerance * e.abs().max(1.0) {
                failures.push(format!("{path}: expected {e}, got {a}"));
            }
        }
        (Value::Array(e), Value::Array(a)) => {
            if e.len() == a.len() {
                for (i, (x, y)) in e.iter().zip(a).enumerate() {
                    compare(&format!("{path}[{i}]"), x, y, tolerance, failures);
                }
            } else {
                failures.push(format!(
                    "{path}: expected {} entries, got {}",
                    e.len(),
                    a.len()
                ));
            }
        }
        (Value::Object(e), Value::Object(a)) => {
            for (key, x) in e {
                match a.get(key) {
                    Some(y) => compare(&format!("{path}.{key}"), x, y, tolerance, failures),
                    None => failures.push(format!("{path}.{key}: missing in the response")),
                }
            }
        }
        (e, a) if e == a => {}
        (e, a) => failures.push(format!("{path}: expected {e}, got {a}")),
    }
}

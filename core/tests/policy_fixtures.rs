//! Replays the fixtures written by `tests/reference/policy_reference.py` (an independent
//! numpy transcription of TRL's and verl's code paths) through the compute API and
//! checks every expected field to 1e-9, relative or absolute.

use std::path::PathBuf;

use serde_json::Value;

const TOLERANCE: f64 = 1e-9;

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/policy")
}

/// Compares `expected` with `actual` recursively; objects compare only the expected keys.
fn compare(path: &str, expected: &Value, actual: &Value, failures: &mut Vec<String>) {
    match (expected, actual) {
        (Value::Number(e), Value::Number(a)) => {
            let (Some(e), Some(a)) = (e.as_f64(), a.as_f64()) else {
                failures.push(format!("{path}: not representable as f64"));
                return;
            };
            if (e - a).abs() > TOLERANCE * e.abs().max(1.0) {
                failures.push(format!("{path}: expected {e}, got {a}"));
            }
        }
        (Value::Array(e), Value::Array(a)) => {
            if e.len() == a.len() {
                for (i, (x, y)) in e.iter().zip(a).enumerate() {
                    compare(&format!("{path}[{i}]"), x, y, failures);
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
                    Some(y) => compare(&format!("{path}.{key}"), x, y, failures),
                    None => failures.push(format!("{path}.{key}: missing in the response")),
                }
            }
        }
        (e, a) if e == a => {}
        (e, a) => failures.push(format!("{path}: expected {e}, got {a}")),
    }
}

#[test]
fn every_reference_fixture_agrees_with_the_compute_api() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixture_dir())
        .expect("fixture directory exists")
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 30,
        "expected about 30 fixtures, found {}",
        files.len()
    );
    let mut failures = Vec::new();
    for file in &files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        let entry = doc["entry"].as_str().unwrap();
        match arlbook_core::api::compute(entry, doc["request"].clone()) {
            Ok(response) => {
                let mut expected = doc["expected"].clone();
                // verl's `pg_clipfrac` is the response's `low + high`.
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
                        &mut failures,
                    );
                }
                compare(&name, &expected, &response, &mut failures);
            }
            Err(err) => failures.push(format!("{name}: rejected: {err}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn fixtures_cover_every_entry_and_both_frameworks() {
    let names: Vec<String> = std::fs::read_dir(fixture_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for prefix in [
        "trl_policy_",
        "verl_policy_",
        "trl_advantages_",
        "verl_kl_",
        "verl_gae_",
    ] {
        assert!(
            names.iter().any(|n| n.starts_with(prefix)),
            "no fixture starts with {prefix}"
        );
    }
}

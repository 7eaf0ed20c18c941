//! Replays the fixtures written by `tests/reference/policy_reference.py` (an independent
//! numpy transcription of TRL's and verl's code paths) through the compute API and
//! checks every expected field to 1e-9, relative or absolute.

use serde_json::Value;

#[path = "common/fixture_check.rs"]
mod fixture_check;
use fixture_check::{check_response, fixture_files};

const TOLERANCE: f64 = 1e-9;

#[test]
fn every_reference_fixture_agrees_with_the_compute_api() {
    let files = fixture_files();
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
                check_response(&name, &doc["expected"], &response, TOLERANCE, &mut failures);
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
    let names: Vec<String> = fixture_files()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for prefix in [
        "trl_policy_",
        "verl_policy_",
        "trl_advantages_",
        "verl_kl_",
        "verl_gae_",
        "conv_verl_masked_whiten_",
        "importance_given_draws",
        "trl_entropies_",
        "trl_luspo_padded_",
        "trl_vespo_padded_",
    ] {
        assert!(
            names.iter().any(|n| n.starts_with(prefix)),
            "no fixture starts with {prefix}"
        );
    }
}

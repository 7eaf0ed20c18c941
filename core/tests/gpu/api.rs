//! The compute API through the GPU: the TRL/verl reference fixtures within 1e-4, the
//! same validation errors as the CPU, the same response shapes, honest backend labels.

use arlbook_core::api::{self, examples, gpu::ComputedOn};
use serde_json::{Value, json};

use crate::fixture_check::{check_response, fixture_files};
use crate::support::context;

const TOLERANCE: f64 = 1e-4;

#[test]
fn reference_fixtures_agree_through_the_gpu_backend() {
    let Some(ctx) = context() else { return };
    let files = fixture_files();
    assert!(files.len() >= 30, "found {} fixtures", files.len());
    let (mut failures, mut on_gpu) = (Vec::new(), 0);
    for file in &files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        let entry = doc["entry"].as_str().unwrap();
        match api::gpu::compute(entry, doc["request"].clone(), ctx) {
            Ok(out) => {
                on_gpu += usize::from(out.backend == ComputedOn::Gpu);
                check_response(
                    &name,
                    &doc["expected"],
                    &out.response,
                    TOLERANCE,
                    &mut failures,
                );
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
    assert!(on_gpu >= 20, "only {on_gpu} fixtures ran on the GPU");
}

#[test]
fn every_example_has_the_cpu_response_shape() {
    let Some(ctx) = context() else { return };
    for entry in api::ENTRIES {
        let request = examples::example(entry.name).unwrap();
        let cpu = api::compute(entry.name, request.clone()).unwrap();
        let gpu = api::gpu::compute(entry.name, request, ctx).unwrap();
        let keys = |v: &Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };
        assert_eq!(keys(&gpu.response), keys(&cpu), "{}", entry.name);
        let has_kernel = api::gpu::GPU_ENTRIES.contains(&entry.name);
        assert_eq!(
            gpu.backend == ComputedOn::Gpu,
            has_kernel,
            "{}: {}",
            entry.name,
            gpu.backend
        );
    }
}

#[test]
fn bad_requests_name_the_same_field_on_both_backends() {
    let Some(ctx) = context() else { return };
    let cases = [
        ("bandit-gradient", json!({"p": 1.5, "q": [0.5, 0.5]})),
        (
            "importance-sampling",
            json!({"mu": [1.0, 0.0], "pi": [0.5, 0.5], "values": [1, 2]}),
        ),
        (
            "clip-surrogate",
            json!({"ratio": [1.0, -1.0], "advantage": 1.0}),
        ),
        ("group-advantages", json!({"rewards": [[1.0], []]})),
        (
            "policy-loss",
            json!({"logp": [[-1]], "old_logp": [[-1, -2]], "advantages": [1]}),
        ),
        (
            "mixed-group",
            json!({"p": 0.0, "group_size": 4, "replicates": 5}),
        ),
        (
            "lag-filter",
            json!({"workers": 0, "duration": {"kind": "fixed", "duration": 1}, "max_lag": 0, "updates": 3}),
        ),
        (
            "bandit-gradient",
            json!({"p": 0.5, "q": [0.5, 0.5], "surprise": 1}),
        ),
    ];
    for (name, request) in cases {
        let cpu = api::compute(name, request.clone()).unwrap_err();
        let gpu = api::gpu::compute(name, request, ctx).unwrap_err();
        assert_eq!(gpu.field, cpu.field, "{name}");
    }
}

#[test]
fn sampling_entries_give_the_cpu_numbers_for_the_same_seed() {
    let Some(ctx) = context() else { return };
    let request = json!({"p": 0.5, "q": [0.75, 0.35], "baseline": "leave-one-out", "seed": 12});
    let cpu = api::compute("bandit-gradient", request.clone()).unwrap();
    let gpu = api::gpu::compute("bandit-gradient", request, ctx)
        .unwrap()
        .response;
    let mean = |v: &Value| v["mean"].as_f64().unwrap();
    assert!((mean(&gpu) - mean(&cpu)).abs() < 1e-12);
    let request =
        json!({"p": 0.125, "group_size": 4, "mixed_groups": 4, "replicates": 300, "seed": 3});
    let cpu = api::compute("mixed-group", request.clone()).unwrap();
    let gpu = api::gpu::compute("mixed-group", request, ctx)
        .unwrap()
        .response;
    assert_eq!(gpu["simulation"], cpu["simulation"]);
}

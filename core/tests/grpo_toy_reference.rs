//! Replays the fixtures of `tests/reference/grpo_toy_reference.py`, an independent
//! numpy restatement of one update of the GRPO toy (rewards, group advantages, dynamic
//! sampling, E epochs of the clipped loss with its reduction and KL term, the chain
//! rule through the softmax, SGD or Adam), through `arlbook_core::math::grpo_toy`, and
//! checks every number to 1e-9 (relative, absolute below 1).

use std::path::PathBuf;

use arlbook_core::math::advantage::AdvantageOptions;
use arlbook_core::math::clip::ClipWidths;
use arlbook_core::math::grpo_toy::{
    LogitTable, Optimizer, Task, UpdateSettings, build_batch, update,
};
use serde_json::Value;

const TOLERANCE: f64 = 1e-9;

fn fixtures() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/grpo_toy");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("fixture directory exists")
        .map(|entry| entry.expect("reading the fixture directory").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
}

fn from<T: serde::de::DeserializeOwned>(value: &Value) -> T {
    serde_json::from_value(value.clone()).expect("a fixture field of the expected type")
}

fn close(name: &str, what: &str, got: f64, want: f64, failures: &mut Vec<String>) {
    let scale = want.abs().max(1.0);
    let within = (got - want).abs() <= TOLERANCE * scale;
    if !within {
        failures.push(format!("{name}: {what}: got {got:e}, want {want:e}"));
    }
}

fn replay(case: &Value, failures: &mut Vec<String>) {
    let name: String = from(&case["name"]);
    let (vocab, max_length): (usize, usize) = (from(&case["vocab"]), from(&case["max_length"]));
    let task = Task {
        vocab,
        max_length,
        target: from(&case["target"]),
        length_penalty: from(&case["length_penalty"]),
    };
    task.validate().expect("a valid task");
    let responses: Vec<Vec<usize>> = from(&case["responses"]);
    let expected = &case["expected"];
    let rewards: Vec<f64> = responses.iter().map(|r| task.reward(r)).collect();
    let want_rewards: Vec<f64> = from(&expected["rewards"]);
    for (i, (&got, &want)) in rewards.iter().zip(&want_rewards).enumerate() {
        close(&name, &format!("rewards[{i}]"), got, want, failures);
    }
    let options = AdvantageOptions {
        baseline: from(&case["baseline"]),
        scale: from(&case["scale"]),
        ..AdvantageOptions::default()
    };
    let group_size: usize = from(&case["group_size"]);
    let (all, _) = build_batch(&responses, &rewards, group_size, &options, false)
        .expect("the fixture's rewards make a batch");
    let want_advantages: Vec<f64> = from(&expected["advantages"]);
    for (i, (&got, &want)) in all.advantages.iter().zip(&want_advantages).enumerate() {
        close(&name, &format!("advantages[{i}]"), got, want, failures);
    }
    let dynamic: bool = from(&case["dynamic_sampling"]);
    let (batch, _) = build_batch(&responses, &rewards, group_size, &options, dynamic)
        .expect("the fixture's rewards make a batch");
    let kept: Vec<usize> = from(&expected["kept"]);
    let kept_responses: Vec<Vec<usize>> = kept.iter().map(|&i| responses[i].clone()).collect();
    assert_eq!(
        batch.responses, kept_responses,
        "{name}: the kept responses"
    );

    let u = &case["update"];
    let settings = UpdateSettings {
        clip: ClipWidths {
            eps_low: from(&u["eps_low"]),
            eps_high: from(&u["eps_high"]),
            dual_clip: None,
        },
        reduction: from(&u["reduction"]),
        constant: Some(max_length as f64),
        beta: from(&u["beta"]),
        kl_estimator: from(&u["kl_estimator"]),
        epochs: from(&u["epochs"]),
    };
    let mut table = LogitTable::from_logits(vocab, max_length, from(&case["table"]))
        .expect("the fixture's table");
    let reference = LogitTable::from_logits(vocab, max_length, from(&case["reference"]))
        .expect("the fixture's reference");
    let mut optimizer = Optimizer::new(
        from(&case["optimizer"]),
        from(&case["learning_rate"]),
        table.logits().len(),
    );
    let stats = update(&mut table, &reference, &mut optimizer, &batch, &settings)
        .expect("the update of a fixture");
    close(&name, "loss", stats.loss, from(&expected["loss"]), failures);
    close(
        &name,
        "clip_low",
        stats.clip_low,
        from(&expected["clip_low"]),
        failures,
    );
    close(
        &name,
        "clip_high",
        stats.clip_high,
        from(&expected["clip_high"]),
        failures,
    );
    let want_table: Vec<f64> = from(&expected["table_after"]);
    assert_eq!(want_table.len(), table.logits().len(), "{name}");
    for (i, (&got, &want)) in table.logits().iter().zip(&want_table).enumerate() {
        close(&name, &format!("table_after[{i}]"), got, want, failures);
    }
}

#[test]
fn one_update_agrees_with_the_numpy_restatement() {
    let files = fixtures();
    assert!(
        files.len() >= 6,
        "expected six fixtures, found {}",
        files.len()
    );
    let mut failures = Vec::new();
    let mut clipped = (0.0, 0.0);
    for file in &files {
        let case: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        clipped.0 += case["expected"]["clip_low"].as_f64().unwrap();
        clipped.1 += case["expected"]["clip_high"].as_f64().unwrap();
        replay(&case, &mut failures);
    }
    // The cases reach both clipped sides, so the clip's zero slopes are covered.
    assert!(clipped.0 > 0.0 && clipped.1 > 0.0);
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

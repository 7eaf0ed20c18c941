//! The qualitative claims a caption of the GRPO toy makes (`grpo-toy`, see
//! `arlbook_core::math::grpo_toy`), each over several seeds at the settings its doc
//! names, with margins well inside the measured effects. Run with `--nocapture` to see
//! the per-seed numbers.

use arlbook_core::api::compute;
use serde_json::{Value, json};

/// The runs of one request, each as its curves.
fn runs(request: Value) -> Vec<Value> {
    let out = compute("grpo-toy", request).unwrap_or_else(|e| panic!("{e}"));
    out["runs"]
        .as_array()
        .expect("a list of runs")
        .iter()
        .map(|run| run["curves"].clone())
        .collect()
}

fn curve(curves: &Value, key: &str) -> Vec<f64> {
    curves[key]
        .as_array()
        .expect("a curve")
        .iter()
        .map(|v| v.as_f64().expect("a number"))
        .collect()
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

/// Mean of `key` over steps `from..to`.
fn window(curves: &Value, key: &str, from: usize, to: usize) -> f64 {
    mean(&curve(curves, key)[from..to])
}

/// The failing responses' mean length over the whole run: each step's mean weighted by
/// its number of failing responses.
fn pooled_failing_length(curves: &Value) -> f64 {
    let failing: Vec<f64> = curve(curves, "pass_rate").iter().map(|p| 1.0 - p).collect();
    let lengths = curve(curves, "length_failing");
    let total: f64 = failing.iter().sum();
    failing
        .iter()
        .zip(&lengths)
        .map(|(w, l)| w * l)
        .sum::<f64>()
        / total
}

fn show(label: &str, values: &[f64]) {
    let list: Vec<String> = values.iter().map(|v| format!("{v:.3}")).collect();
    println!("{label}: [{}] mean {:.3}", list.join(", "), mean(values));
}

/// (a) Dr. GRPO's length bias. Defaults (uniform start, target [2, 3], SGD at 10, four
/// epochs, eps 0.2), 8 seeds. Under `seq-mean-token-mean` a response's tokens share
/// `1 / (N L_i)`: short passing responses get the larger push per token, so passing
/// responses shorten and the mean length ends well below `token-mean`'s; long failing
/// responses get the smaller penalty per token, so failing responses run longer.
#[test]
fn per_sequence_means_shorten_passing_responses_and_lengthen_failing_ones() {
    let request = |reduction: &str| json!({"reduction": reduction, "seeds": 8, "seed": 0});
    let token = runs(request("token-mean"));
    let sequence = runs(request("seq-mean-token-mean"));
    let final_length = |c: &Value| window(c, "length", 150, 200);
    let token_final: Vec<f64> = token.iter().map(final_length).collect();
    let sequence_final: Vec<f64> = sequence.iter().map(final_length).collect();
    let token_failing: Vec<f64> = token.iter().map(pooled_failing_length).collect();
    let sequence_failing: Vec<f64> = sequence.iter().map(pooled_failing_length).collect();
    show(
        "(a) token-mean, mean length over steps 150..200",
        &token_final,
    );
    show(
        "(a) seq-mean-token-mean, mean length over steps 150..200",
        &sequence_final,
    );
    show(
        "(a) token-mean, failing length over the run",
        &token_failing,
    );
    show(
        "(a) seq-mean-token-mean, failing length over the run",
        &sequence_failing,
    );
    // Both start from the same policy (about 5 tokens).
    let start = |runs: &[Value]| {
        mean(
            &runs
                .iter()
                .map(|c| window(c, "length", 0, 5))
                .collect::<Vec<_>>(),
        )
    };
    assert!((start(&token) - start(&sequence)).abs() < 0.3);
    assert!(
        mean(&sequence_final) < mean(&token_final) - 1.0,
        "the per-sequence mean should end at least a token shorter"
    );
    let shorter = sequence_final
        .iter()
        .zip(&token_final)
        .filter(|(s, t)| s < t)
        .count();
    assert!(shorter >= 7, "shorter in {shorter} of 8 seeds");
    assert!(
        mean(&sequence_failing) > mean(&token_failing) + 0.1,
        "failing responses should run longer under the per-sequence mean"
    );
    let longer = sequence_failing
        .iter()
        .zip(&token_failing)
        .filter(|(s, t)| s > t)
        .count();
    assert!(
        longer >= 7,
        "failing responses longer in {longer} of 8 seeds"
    );
}

/// (b) Clip-Higher. A peaked start (token 1 at logit 3: the target tokens 2 and 3 start
/// at probability 0.04 each), eight epochs per batch so the clip binds, 16 seeds. With
/// `eps_high = eps_low = 0.2` a target token can gain at most a factor 1.2 per step
/// while a likely token is hardly limited; the target is found later and the entropy
/// ends lower than with `eps_high = 0.4`.
#[test]
fn clip_higher_finds_the_rare_target_sooner_and_keeps_more_entropy() {
    let request = |eps_high: f64| {
        json!({"favoured_logit": 3.0, "epochs": 8, "eps_low": 0.2, "eps_high": eps_high,
               "seeds": 16, "seed": 0})
    };
    let symmetric = runs(request(0.2));
    let higher = runs(request(0.4));
    let late_entropy = |c: &Value| window(c, "entropy", 100, 200);
    let early_pass = |c: &Value| window(c, "pass_rate", 0, 50);
    let symmetric_entropy: Vec<f64> = symmetric.iter().map(late_entropy).collect();
    let higher_entropy: Vec<f64> = higher.iter().map(late_entropy).collect();
    let symmetric_pass: Vec<f64> = symmetric.iter().map(early_pass).collect();
    let higher_pass: Vec<f64> = higher.iter().map(early_pass).collect();
    show(
        "(b) eps_high 0.2, entropy over steps 100..200",
        &symmetric_entropy,
    );
    show(
        "(b) eps_high 0.4, entropy over steps 100..200",
        &higher_entropy,
    );
    show(
        "(b) eps_high 0.2, pass rate over steps 0..50",
        &symmetric_pass,
    );
    show("(b) eps_high 0.4, pass rate over steps 0..50", &higher_pass);
    assert!(
        mean(&higher_entropy) > mean(&symmetric_entropy) + 0.1,
        "the symmetric clip should end with less entropy"
    );
    assert!(
        mean(&higher_pass) > mean(&symmetric_pass) + 0.15,
        "Clip-Higher should find the target sooner"
    );
    let more = higher_entropy
        .iter()
        .zip(&symmetric_entropy)
        .filter(|(h, s)| h > s)
        .count();
    assert!(
        more >= 12,
        "more entropy with Clip-Higher in {more} of 16 seeds"
    );
}

/// (c) The KL penalty. Defaults, 8 seeds, `k3`: the mean exact KL to the reference over
/// the last 50 steps falls as beta rises, in every seed.
#[test]
fn a_larger_beta_keeps_the_policy_closer_to_the_reference() {
    let betas = [0.0, 0.05, 0.2];
    let kls: Vec<Vec<f64>> = betas
        .iter()
        .map(|beta| {
            runs(json!({"beta": beta, "kl_estimator": "k3", "seeds": 8, "seed": 0}))
                .iter()
                .map(|c| window(c, "kl", 150, 200))
                .collect()
        })
        .collect();
    for (beta, kl) in betas.iter().zip(&kls) {
        show(&format!("(c) beta {beta}, KL over steps 150..200"), kl);
    }
    for (seed, ((none, small), large)) in kls[0].iter().zip(&kls[1]).zip(&kls[2]).enumerate() {
        assert!(
            none > small && small > large,
            "seed {seed}: {none} {small} {large}"
        );
    }
    assert!(mean(&kls[2]) < 0.6 * mean(&kls[0]));
}

/// The same request gives the same curves; another seed gives others.
#[test]
fn the_entry_is_deterministic_for_a_seed() {
    let request = json!({"steps": 40, "seeds": 2, "seed": 3, "dynamic_sampling": true});
    let first = compute("grpo-toy", request.clone()).unwrap();
    assert_eq!(first, compute("grpo-toy", request).unwrap());
    let other = compute(
        "grpo-toy",
        json!({"steps": 40, "seeds": 2, "seed": 4, "dynamic_sampling": true}),
    )
    .unwrap();
    assert_ne!(first["runs"], other["runs"]);
    // Run r of a request with more seeds is the same run.
    let one = compute(
        "grpo-toy",
        json!({"steps": 40, "seeds": 1, "seed": 3, "dynamic_sampling": true}),
    )
    .unwrap();
    assert_eq!(one["runs"][0], first["runs"][0]);
}

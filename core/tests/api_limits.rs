//! The compute API under hostile requests: bounded work, no panic, no `null` standing
//! for a number. Each test is one reproduction from probing the server; every one
//! failed (a panic, a hang, an abort or a `null`) before the work budget and the
//! overflow checks.

use arlbook_core::api::compute;
use serde_json::{Value, json};

fn refused(name: &str, request: Value) -> String {
    match compute(name, request) {
        Ok(out) => panic!("{name} accepted: {out}"),
        Err(e) => {
            assert!(!e.message.is_empty());
            e.field
        }
    }
}

#[test]
fn a_mixed_group_grid_of_25_million_cells_is_refused_before_it_is_built() {
    // 5001 p values x group sizes 1..=5000 from a 67 KB body aborted the process.
    let ps: Vec<f64> = (0..5001).map(|i| f64::from(i) / 5000.0).collect();
    let sizes: Vec<u64> = (1..=5000).collect();
    assert_eq!(
        refused("mixed-group", json!({"p": ps, "group_size": sizes})),
        "p"
    );
}

#[test]
fn a_mixed_group_grid_of_4_million_cells_is_refused() {
    // A 26 KB body for 4 M cells peaked at 718 MB.
    let ps: Vec<f64> = (0..2000).map(|i| f64::from(i) / 2000.0).collect();
    let sizes: Vec<u64> = (1..=2000).collect();
    assert!(
        compute(
            "mixed-group",
            json!({"p": [0.5], "group_size": sizes.clone()})
        )
        .is_ok()
    );
    assert_eq!(
        refused("mixed-group", json!({"p": ps, "group_size": sizes})),
        "p"
    );
}

#[test]
fn pass_at_k_of_a_huge_count_does_not_loop_over_it() {
    // Looped c = 5e15 times.
    let out = compute(
        "pass-at-k",
        json!({"n": 10_000_000_000_000_000u64, "c": 5_000_000_000_000_000u64, "k": 1}),
    )
    .unwrap();
    assert_eq!(out["estimate"], json!(0.5));
    assert_eq!(out["per_task"], json!([0.5]));
}

#[test]
fn pass_at_k_whose_terms_exceed_the_budget_names_k() {
    // 1e8 factors, none negligible: over the budget rather than a long loop.
    let field = refused(
        "pass-at-k",
        json!({"n": 1_000_000_000_000_000_000u64, "c": 100_000_000u64, "k": 100_000_000u64}),
    );
    assert_eq!(field, "k");
}

#[test]
fn importance_sampling_over_many_actions_is_charged_per_action() {
    // 50 M draws over 1000 actions took 20 s; the draw cap alone allowed it.
    let k = 1000;
    let mu = vec![1.0 / f64::from(k); k as usize];
    let values = vec![0.5; k as usize];
    let field = refused(
        "importance-sampling",
        json!({"mu": mu, "pi": mu, "values": values, "samples": 500, "estimates": 100_000}),
    );
    assert_eq!(field, "samples");
}

#[test]
fn a_rare_mixed_group_simulation_is_refused_not_overflowed() {
    // 10 B / P + 100 overflowed u64: exit 101 on the CLI, 500 over HTTP.
    let field = refused(
        "mixed-group",
        json!({"p": 1e-300, "group_size": 2, "replicates": 1}),
    );
    assert_eq!(field, "replicates");
}

#[test]
fn pass_at_k_at_u64_max_does_not_overflow() {
    // n - c + 1 overflowed.
    let out = compute("pass-at-k", json!({"n": u64::MAX, "c": 0, "k": u64::MAX})).unwrap();
    assert_eq!(out["estimate"], json!(0.0));
    assert!(!out.to_string().contains("null"), "{out}");
}

#[test]
fn rewards_whose_spread_overflows_are_refused() {
    // Answered 200 with std null and advantages 0.
    assert_eq!(
        refused("group-advantages", json!({"rewards": [[1e300, 0]]})),
        "rewards[0]"
    );
    assert_eq!(
        refused(
            "group-advantages",
            json!({"rewards": [[1e200, 1e200], [-1e200, -1e200]], "scale": "batch"})
        ),
        "rewards"
    );
}

#[test]
fn a_clip_objective_that_overflows_is_refused() {
    // rho x A = 1.3 x -1.797e308 was written as null.
    let field = refused(
        "clip-surrogate",
        json!({"ratio": [1.0, 1.3], "advantage": -1.797e308, "eps_low": 0.2}),
    );
    assert_eq!(field, "advantage[1]");
}

#[test]
fn an_acceptance_whose_attempts_overflow_is_refused() {
    // attempts_needed saturated at u64::MAX and attempts_per_batch was null.
    let field = refused(
        "rollout-budget",
        json!({"tasks_per_batch": 32, "group_size": 4, "iterations": 100,
               "mean_tokens": 2000, "acceptance": 5e-324}),
    );
    assert_eq!(field, "acceptance");
}

#[test]
fn a_vanishing_rollout_duration_is_refused() {
    // The throughput kept / elapsed overflowed to null.
    let field = refused(
        "lag-filter",
        json!({"workers": 2, "duration": {"kind": "fixed", "duration": 1e-320},
               "batch_size": 2, "max_lag": 1, "updates": 3}),
    );
    assert_eq!(field, "duration.duration");
}

#[test]
fn a_mixed_group_cost_that_overflows_is_refused() {
    // P(mixed) = 2e-320 > 0 yet B / P was null, which the docs keep for P = 0.
    assert_eq!(
        refused("mixed-group", json!({"p": 1e-320, "group_size": 2})),
        "p"
    );
    assert_eq!(
        refused(
            "mixed-group",
            json!({"p": [0.5, 1e-320], "group_size": [2]})
        ),
        "p[1]"
    );
    let out = compute("mixed-group", json!({"p": 0.0, "group_size": 2})).unwrap();
    assert_eq!(out["expected_attempts"], Value::Null);
}

#[test]
fn a_lag_simulation_whose_scans_exceed_the_budget_names_workers() {
    // 65,536 workers over 4,000 completions: few draws, but every completion scans
    // every worker (2.6e8 comparisons).
    let request = |workers: u64| {
        json!({"workers": workers, "batch_size": 40, "updates": 100, "max_lag": 1,
               "duration": {"kind": "exponential", "mean": 1.0}})
    };
    assert_eq!(refused("lag-filter", request(1 << 16)), "workers");
    assert!(compute("lag-filter", request(64)).is_ok());
}

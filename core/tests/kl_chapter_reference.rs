//! The KL chapter's entries against values computed outside the project, with Python's
//! `math` module from the formulas as TRL and the papers state them:
//! - `kl-regularized-optimum`: `pi* = pi_ref exp(r / beta) / Z` summed by hand;
//! - `dpo`: TRL's `DPOTrainer.dpo_loss` for `loss_type = "sigmoid"`,
//!   `-logsigmoid(beta l)(1 - eps) - logsigmoid(-beta l) eps` with
//!   `l = (log pi_w - log pi_l) - (log ref_w - log ref_l)`;
//! - `kl-estimators`: `sum_a pi(a) k(a)` and `sum_a pi(a) (k(a) - E k)^2 / N`.

#![allow(clippy::unwrap_used)]

use arlbook_core::api::compute;
use serde_json::{Value, json};

fn close(what: &str, got: &Value, expected: f64) {
    let got = got
        .as_f64()
        .unwrap_or_else(|| panic!("{what}: not a number: {got}"));
    assert!(
        (got - expected).abs() <= 1e-12 * expected.abs().max(1.0),
        "{what}: {got} against {expected}"
    );
}

#[test]
fn the_optimum_matches_the_closed_form() {
    let out = compute(
        "kl-regularized-optimum",
        json!({"reference": [0.3, 0.25, 0.2, 0.12, 0.08, 0.05],
               "rewards": [0.1, 0.3, 0.2, 0.9, 0.5, 1.0], "beta": 0.5}),
    )
    .unwrap();
    close(
        "expected_reward",
        &out["expected_reward"],
        0.560_795_013_232_682,
    );
    close("kl", &out["kl"], 0.232_387_483_533_734);
    close("objective", &out["objective"], 0.444_601_271_465_815);
    close("policy[5]", &out["policy"][5], 0.151_838_956_503_668_6);
}

#[test]
fn the_dpo_loss_is_trls_sigmoid_loss() {
    let out = compute(
        "dpo",
        json!({"reference": [0.2, 0.3, 0.5], "policy": [0.5, 0.3, 0.2], "beta": 0.3,
               "label_smoothing": 0.1, "pairs": [[0, 2], [1, 0], [2, 1]]}),
    )
    .unwrap();
    close("loss", &out["batch"]["loss"], 0.711_862_719_936_178_7);
    close(
        "reward_accuracy",
        &out["batch"]["reward_accuracy"],
        1.0 / 3.0,
    );
}

#[test]
fn the_estimators_expectations_and_variances_match_the_sums() {
    let out = compute(
        "kl-estimators",
        json!({"policy": [0.5, 0.3, 0.2], "reference": [0.2, 0.3, 0.5], "samples": 16, "replicates": 10}),
    )
    .unwrap();
    let expected = [
        ("k1", 0.274_887_219_562_246_54, 0.032_009_319_390_266_85),
        ("k2", 0.293_856_046_861_466_16, 0.002_312_983_293_135_22),
        ("k3", 0.274_887_219_562_246_5, 0.002_662_514_499_705_219_4),
    ];
    close("true_kl", &out["true_kl"], expected[0].1);
    for (name, mean, variance) in expected {
        close(
            &format!("{name}.expectation"),
            &out[name]["expectation"],
            mean,
        );
        close(
            &format!("{name}.variance_theory"),
            &out[name]["variance_theory"],
            variance,
        );
    }
}

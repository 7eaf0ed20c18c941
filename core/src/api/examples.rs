//! One example request per entry: the article's worked numbers where it has them.
//!
//! `arlbook compute <name> --example` prints these, the notebook's explorer starts from
//! them, and a test runs every one, so each stays a valid request.

use serde_json::{Value, json};

/// The example request of entry `name`, if it has one.
pub fn example(name: &str) -> Option<Value> {
    let value = match name {
        // Figure 2 at p = 0.5: the exact gradient is (0.75 - 0.35) · 0.25 = 0.1.
        "bandit-gradient" => json!({
            "p": 0.5, "q": [0.75, 0.35], "baseline": "leave-one-out",
            "group_size": 4, "samples": 16, "estimates": 200, "seed": 7
        }),
        // mu(A) = 0.2, pi(A) = 0.6: weights 3 and 0.5, exact value 0.59.
        "importance-sampling" => json!({
            "mu": [0.2, 0.8], "pi": [0.6, 0.4], "values": [0.75, 0.35],
            "samples": 24, "estimates": 200, "self_normalized": false, "seed": 7
        }),
        // The same setup over four draws of mu given by the caller, twice: A B B B, A B A B.
        "importance-sampling-draws" => json!({
            "mu": [0.2, 0.8], "pi": [0.6, 0.4], "values": [0.75, 0.35],
            "draws": [[0, 1, 1, 1], [0, 1, 0, 1]], "self_normalized": false
        }),
        // rho = 1.3, eps = 0.2 with the advantages of rewards (1, 0, 0, 0).
        "clip-surrogate" => json!({
            "ratio": [1.3, 1.3], "advantage": [1.732_050_807_568_877_2, -0.577_350_269_189_625_7],
            "eps_low": 0.2, "eps_high": 0.2
        }),
        "group-advantages" => json!({
            "rewards": [[1.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 1.0]],
            "scale": "group", "std": "population", "baseline": "mean", "eps": 0.0
        }),
        // Token counts (2, 4, 4, 6) at rho = 1: the global token mean gives 1/(2 sqrt 3).
        "policy-loss" => json!({
            "logp": [[-1.0, -1.0], [-1.0, -1.0, -1.0, -1.0], [-1.0, -1.0, -1.0, -1.0], [-1.0, -1.0, -1.0, -1.0, -1.0, -1.0]],
            "old_logp": [[-1.0, -1.0], [-1.0, -1.0, -1.0, -1.0], [-1.0, -1.0, -1.0, -1.0], [-1.0, -1.0, -1.0, -1.0, -1.0, -1.0]],
            "advantages": [1.732_050_807_568_877_2, -0.577_350_269_189_625_7, -0.577_350_269_189_625_7, -0.577_350_269_189_625_7],
            "eps_low": 0.2, "eps_high": 0.2, "reduction": "token-mean"
        }),
        "kl" => json!({
            "logp": [-0.5, -1.2, -2.0], "ref_logp": [-0.7, -1.0, -2.5], "estimator": "k3"
        }),
        "gae" => json!({
            "rewards": [0.0, 0.0, 1.0], "values": [0.4, 0.5, 0.8],
            "gamma": 1.0, "lambda": 0.95, "terminated": true
        }),
        // Two responses padded to four tokens: the statistics come from the five response
        // tokens, and the two padded positions are moved all the same.
        "masked-whiten" => json!({
            "values": [[0.5, -0.2, 0.9, 0.0], [1.2, 0.3, 0.0, 0.0]],
            "mask": [[1, 1, 1, 0], [1, 1, 0, 0]], "shift_mean": true
        }),
        "mixed-group" => json!({ "p": [0.5, 0.01], "group_size": [4, 16] }),
        "shaping" => json!({
            "rewards": [0.0, 0.0, 1.0], "potentials": [0.0, 0.5, 0.75, 0.0], "gamma": 1.0
        }),
        // n = 10 samples, c = 2 correct, k = 3: unbiased 0.533 against plug-in 0.488.
        "pass-at-k" => json!({ "n": 10, "c": 2, "k": 3 }),
        "binomial-se" => json!({ "p": 0.5, "n": 200 }),
        "rollout-budget" => json!({
            "tasks_per_batch": 32, "group_size": 4, "iterations": 100,
            "mean_tokens": 2000, "acceptance": 0.25, "demos": 1000
        }),
        "lag-filter" => json!({
            "workers": 8, "duration": { "kind": "exponential", "mean": 1.0 },
            "batch_size": 8, "max_lag": 1, "updates": 200, "seed": 7
        }),
        "distill" => json!({
            "teacher_probs": [0.05, 0.4, 0.05, 0.05, 0.4, 0.05],
            "student_probs": [0.1, 0.2, 0.4, 0.2, 0.05, 0.05]
        }),
        // Six responses; the rare best one (reward 1) gains most as beta falls.
        "kl-regularized-optimum" => json!({
            "reference": [0.3, 0.25, 0.2, 0.12, 0.08, 0.05],
            "rewards": [0.1, 0.3, 0.2, 0.9, 0.5, 1.0], "beta": 0.2
        }),
        // One pair at the start of training, and the policy DPO reaches from 2000 pairs.
        "dpo" => json!({
            "reference": [0.3, 0.25, 0.2, 0.12, 0.08, 0.05], "beta": 0.2,
            "pairs": [[5, 0]], "rewards": [0.1, 0.3, 0.2, 0.9, 0.5, 1.0],
            "fit": { "pairs": 2000, "seed": 7 }
        }),
        "kl-estimators" => json!({
            "policy": [0.5, 0.3, 0.2], "reference": [0.2, 0.3, 0.5],
            "samples": 16, "replicates": 1000, "seed": 7
        }),
        // Two short GRPO runs on the toy task from its uniform start, Clip-Higher widths.
        "grpo-toy" => json!({
            "vocab": 6, "max_length": 8, "target": [2, 3], "groups": 4, "group_size": 8,
            "steps": 60, "epochs": 4, "learning_rate": 10.0, "eps_low": 0.2, "eps_high": 0.28,
            "reduction": "token-mean", "beta": 0.0, "seeds": 2, "seed": 7
        }),
        _ => return None,
    };
    Some(value)
}

//! `grpo-toy`: GRPO training runs on the toy sequence task of
//! [`crate::math::grpo_toy`], several seeds at once, with per-step curves, their mean
//! and min/max band, and each run's final policy. CPU only (no WebGPU kernel).

use serde::{Deserialize, Serialize};

use super::{Entry, WORK_PER_CELL, categorical_work, check_work, units, work};
use crate::error::{Result, check};
use crate::math::advantage::{AdvantageOptions, Baseline, Scale};
use crate::math::clip::ClipWidths;
use crate::math::grpo_toy::{
    Curves, InitialTable, LogitTable, OptimizerKind, Task, ToySettings, UpdateSettings,
    table::marginals, train,
};
use crate::math::kl::KlEstimator;
use crate::math::reduction::Reduction;

/// The most seeds one request may train.
pub const MAX_SEEDS: usize = 256;

/// Request for `grpo-toy`. Every field is optional; the defaults train one run of the
/// documented task (see [`crate::math::grpo_toy`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// Vocabulary size `V`, the end token (0) included, in `[2, 64]`. Default 6.
    #[serde(default = "default_vocab")]
    pub vocab: usize,
    /// Length cap `L`, in `[1, 64]` tokens. Default 8.
    #[serde(default = "default_max_length")]
    pub max_length: usize,
    /// The pattern a passing response contains, in a row: 1 to `L` content tokens
    /// (`1..V`). Default `[2, 3]`.
    #[serde(default = "default_target")]
    pub target: Vec<usize>,
    /// `lambda` in `[0, 100]`: the reward is `1{pass} - lambda * length / L`. Default 0.
    #[serde(default)]
    pub length_penalty: f64,
    /// A content token every row of the initial table prefers, or 0 for none. Default 1.
    #[serde(default = "default_favoured_token")]
    pub favoured_token: usize,
    /// Its initial logit in every row, in `[-50, 50]` (0: the uniform start). Default 0.
    #[serde(default)]
    pub favoured_logit: f64,
    /// The end token's initial logit in every row, in `[-50, 50]`. Default 0.
    #[serde(default)]
    pub end_logit: f64,
    /// Groups per step `B`, in `[1, 4096]`. Default 4.
    #[serde(default = "default_groups")]
    pub groups: usize,
    /// Responses per group `G`, in `[1, 4096]`. Default 8.
    #[serde(default = "default_group_size")]
    pub group_size: usize,
    /// Training steps, in `[1, 100000]`. Default 200.
    #[serde(default = "default_steps")]
    pub steps: usize,
    /// Optimiser steps on each rollout batch `E`, in `[1, 64]`. Default 4.
    #[serde(default = "default_epochs")]
    pub epochs: usize,
    /// `sgd` or `adam`. Default `sgd`.
    #[serde(default)]
    pub optimizer: OptimizerKind,
    /// Learning rate, `> 0`. Default 10 with `sgd` (the token-mean weights are about
    /// `1 / tokens`), 0.05 with `adam`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learning_rate: Option<f64>,
    /// Lower clip width, in `[0, 1]`. Default 0.2.
    #[serde(default = "default_eps_low")]
    pub eps_low: f64,
    /// Upper clip width, `>= 0`. Default `eps_low`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eps_high: Option<f64>,
    /// Loss reduction (`token-mean`, `seq-mean-token-mean`, `seq-mean-token-sum`,
    /// `seq-mean-token-sum-norm`, `dr_grpo`; see [`crate::math::reduction`]), with the
    /// constant `C = L`. Default `token-mean`.
    #[serde(default)]
    pub reduction: Reduction,
    /// KL coefficient `beta`, in `[0, 100]`. Default 0 (no KL term).
    #[serde(default)]
    pub beta: f64,
    /// KL estimator `k1`, `k2`, `k3` or `abs`. Default `k3`.
    #[serde(default)]
    pub kl_estimator: KlEstimator,
    /// Drop the groups whose rewards are all equal before the update. Default false.
    #[serde(default)]
    pub dynamic_sampling: bool,
    /// Advantage scaling `group`, `batch` or `none`. Default `group`.
    #[serde(default)]
    pub scale: Scale,
    /// Advantage baseline `mean` or `leave-one-out`. Default `mean`.
    #[serde(default)]
    pub baseline: Baseline,
    /// Seed; run `r` draws from stream `r`. Default 0.
    #[serde(default)]
    pub seed: u64,
    /// Runs, each from its own stream, in `[1, 256]`. Default 1.
    #[serde(default = "default_seeds")]
    pub seeds: usize,
}

fn default_vocab() -> usize {
    6
}
fn default_max_length() -> usize {
    8
}
fn default_target() -> Vec<usize> {
    vec![2, 3]
}
fn default_favoured_token() -> usize {
    1
}
fn default_groups() -> usize {
    4
}
fn default_group_size() -> usize {
    8
}
fn default_steps() -> usize {
    200
}
fn default_epochs() -> usize {
    4
}
fn default_eps_low() -> f64 {
    0.2
}
fn default_seeds() -> usize {
    1
}

/// The learning rate used when none is given.
pub fn default_learning_rate(optimizer: OptimizerKind) -> f64 {
    match optimizer {
        OptimizerKind::Sgd => 10.0,
        OptimizerKind::Adam => 0.05,
    }
}

impl Default for Request {
    fn default() -> Self {
        Self {
            vocab: default_vocab(),
            max_length: default_max_length(),
            target: default_target(),
            length_penalty: 0.0,
            favoured_token: default_favoured_token(),
            favoured_logit: 0.0,
            end_logit: 0.0,
            groups: default_groups(),
            group_size: default_group_size(),
            steps: default_steps(),
            epochs: default_epochs(),
            optimizer: OptimizerKind::default(),
            learning_rate: None,
            eps_low: default_eps_low(),
            eps_high: None,
            reduction: Reduction::default(),
            beta: 0.0,
            kl_estimator: KlEstimator::default(),
            dynamic_sampling: false,
            scale: Scale::default(),
            baseline: Baseline::default(),
            seed: 0,
            seeds: default_seeds(),
        }
    }
}

impl Request {
    /// The math's settings for this request (not yet validated).
    pub fn settings(&self) -> ToySettings {
        ToySettings {
            task: Task {
                vocab: self.vocab,
                max_length: self.max_length,
                target: self.target.clone(),
                length_penalty: self.length_penalty,
            },
            initial: InitialTable {
                end_logit: self.end_logit,
                favoured_token: self.favoured_token,
                favoured_logit: self.favoured_logit,
            },
            groups: self.groups,
            group_size: self.group_size,
            steps: self.steps,
            advantage: AdvantageOptions {
                baseline: self.baseline,
                scale: self.scale,
                ..AdvantageOptions::default()
            },
            dynamic_sampling: self.dynamic_sampling,
            update: UpdateSettings {
                clip: ClipWidths {
                    eps_low: self.eps_low,
                    eps_high: self.eps_high.unwrap_or(self.eps_low),
                    dual_clip: None,
                },
                reduction: self.reduction,
                constant: Some(self.max_length as f64),
                beta: self.beta,
                kl_estimator: self.kl_estimator,
                epochs: self.epochs,
            },
            optimizer: self.optimizer,
            learning_rate: self
                .learning_rate
                .unwrap_or_else(|| default_learning_rate(self.optimizer)),
        }
    }

    /// The work of the request, in units of [`super::MAX_WORK`]: per run and step, the
    /// categorical draws of `B G L` tokens over `V` actions, and per epoch
    /// `B G L (2 + V / 4)` for the loss and the chain rule plus `L V^2` for the table's
    /// softmax; and [`WORK_PER_CELL`] for each number of the response.
    pub fn work(&self) -> u64 {
        let (v, l) = (units(self.vocab), units(self.max_length));
        let tokens = work(&[units(self.groups), units(self.group_size), l]);
        let per_epoch = tokens
            .saturating_mul(2 + v / 4)
            .saturating_add(work(&[l, v, v]));
        let per_step = categorical_work(tokens, self.vocab)
            .saturating_add(per_epoch.saturating_mul(units(self.epochs)));
        let runs = work(&[units(self.seeds), units(self.steps), per_step]);
        let curves = units(Curves::COUNT).saturating_mul(units(self.steps));
        let per_run_cells = curves
            .saturating_add(work(&[l, v, v]))
            .saturating_add(work(&[l, v]))
            .saturating_add(l);
        let cells = work(&[units(self.seeds), per_run_cells]).saturating_add(3 * curves);
        runs.saturating_add(cells.saturating_mul(WORK_PER_CELL))
    }

    /// The field that drives the cost most: the one furthest above its default (as a
    /// ratio), `steps` when none is.
    pub fn cost_driver(&self) -> &'static str {
        let ratio = |value: usize, default: usize| value as f64 / default as f64;
        [
            ("steps", ratio(self.steps, default_steps())),
            ("seeds", ratio(self.seeds, default_seeds())),
            ("groups", ratio(self.groups, default_groups())),
            ("group_size", ratio(self.group_size, default_group_size())),
            ("epochs", ratio(self.epochs, default_epochs())),
            ("max_length", ratio(self.max_length, default_max_length())),
            ("vocab", ratio(self.vocab, default_vocab())),
        ]
        .into_iter()
        .fold(
            ("steps", 1.0),
            |best, next| {
                if next.1 > best.1 { next } else { best }
            },
        )
        .0
    }
}

/// The policy a run ends with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FinalPolicy {
    /// `probs[t][prev][v] = pi(v | t, prev)`; `prev = 0` at `t = 0` is the start state.
    /// Rows no response can visit (`t = 0, prev > 0` and `t > 0, prev = 0`) keep their
    /// initial values.
    pub probs: Vec<Vec<Vec<f64>>>,
    /// `position_probs[t][v]`: probability that the response's token `t` exists and is
    /// `v` (exact; row `t` sums to the probability of reaching position `t`).
    pub position_probs: Vec<Vec<f64>>,
    /// `length_probs[l - 1]`: probability of a response of `l` tokens (exact).
    pub length_probs: Vec<f64>,
}

/// One training run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResponse {
    /// The stream it drew from (`0..seeds`).
    pub stream: u64,
    /// Per-step curves.
    pub curves: Curves,
    /// The policy after the last step.
    pub final_policy: FinalPolicy,
}

/// Response of `grpo-toy`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// One entry per seed, in stream order.
    pub runs: Vec<RunResponse>,
    /// Step-by-step mean of every curve over the runs.
    pub mean: Curves,
    /// Step-by-step minimum over the runs.
    pub min: Curves,
    /// Step-by-step maximum over the runs.
    pub max: Curves,
    /// The learning rate used (the request's, or the optimiser's default).
    pub learning_rate: f64,
}

/// The `grpo-toy` entry.
pub struct GrpoToy;

fn final_policy(table: &LogitTable) -> FinalPolicy {
    let vocab = table.vocab();
    let probs: Vec<f64> = table.log_probs().iter().map(|l| l.exp()).collect();
    let rows: Vec<Vec<f64>> = probs.chunks_exact(vocab).map(<[f64]>::to_vec).collect();
    let by_position = rows.chunks_exact(vocab).map(<[Vec<f64>]>::to_vec).collect();
    let m = marginals(table);
    FinalPolicy {
        probs: by_position,
        position_probs: m.position_probs,
        length_probs: m.length_probs,
    }
}

impl Entry for GrpoToy {
    const NAME: &'static str = "grpo-toy";
    const SUMMARY: &'static str = "GRPO on a toy token task (tabular policy): reward, entropy, length, clip fractions and KL per step, per seed with bands, for any reduction, clip widths, beta and dynamic sampling";
    type Request = Request;
    type Response = Response;

    fn compute(request: &Request) -> Result<Response> {
        check::count("seeds", request.seeds, 1, MAX_SEEDS)?;
        let settings = request.settings();
        crate::math::grpo_toy::train::validate(&settings)?;
        check_work(request.cost_driver(), request.work())?;
        let mut runs = Vec::with_capacity(request.seeds);
        for stream in 0..units(request.seeds) {
            let run = train(&settings, request.seed, stream)?;
            runs.push(RunResponse {
                stream,
                final_policy: final_policy(&run.table),
                curves: run.curves,
            });
        }
        let curves: Vec<&Curves> = runs.iter().map(|r| &r.curves).collect();
        let (mean, min, max) = Curves::mean_min_max(&curves);
        Ok(Response {
            runs,
            mean,
            min,
            max,
            learning_rate: settings.learning_rate,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::compute;
    use super::*;
    use serde_json::json;

    #[test]
    fn the_defaults_train_one_run_of_200_steps() {
        let out = compute("grpo-toy", json!({})).unwrap();
        let runs = out["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 1);
        let reward = runs[0]["curves"]["reward"].as_array().unwrap();
        assert_eq!(reward.len(), 200);
        assert_eq!(out["learning_rate"], 10.0);
        let probs = &runs[0]["final_policy"]["probs"];
        assert_eq!(probs.as_array().unwrap().len(), 8);
        assert_eq!(probs[0].as_array().unwrap().len(), 6);
        let lengths: f64 = runs[0]["final_policy"]["length_probs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_f64().unwrap())
            .sum();
        assert!((lengths - 1.0).abs() < 1e-12);
    }

    #[test]
    fn bands_bracket_the_mean_and_one_seed_is_its_own_band() {
        let out = compute("grpo-toy", json!({"steps": 30, "seeds": 3, "seed": 4})).unwrap();
        for key in ["reward", "entropy", "length", "kl"] {
            let at = |part: &str, i: usize| out[part][key][i].as_f64().unwrap();
            for i in 0..30 {
                assert!(at("min", i) <= at("mean", i) + 1e-15, "{key}[{i}]");
                assert!(at("mean", i) <= at("max", i) + 1e-15, "{key}[{i}]");
            }
        }
        let one = compute("grpo-toy", json!({"steps": 30})).unwrap();
        assert_eq!(one["min"], one["max"]);
        assert_eq!(one["mean"], one["runs"][0]["curves"]);
    }

    #[test]
    fn adam_gets_its_own_default_learning_rate() {
        let out = compute("grpo-toy", json!({"steps": 2, "optimizer": "adam"})).unwrap();
        assert_eq!(out["learning_rate"], 0.05);
    }

    #[test]
    fn bad_fields_are_named() {
        let field = |request: serde_json::Value| compute("grpo-toy", request).unwrap_err().field;
        assert_eq!(field(json!({"vocab": 1})), "vocab");
        assert_eq!(field(json!({"target": [2, 9]})), "target[1]");
        assert_eq!(field(json!({"target": []})), "target");
        assert_eq!(field(json!({"eps_low": 1.5})), "eps_low");
        assert_eq!(field(json!({"eps_high": -0.1})), "eps_high");
        assert_eq!(field(json!({"learning_rate": 0.0})), "learning_rate");
        assert_eq!(field(json!({"beta": -1.0})), "beta");
        assert_eq!(field(json!({"seeds": 0})), "seeds");
        assert_eq!(field(json!({"favoured_token": 6})), "favoured_token");
        assert_eq!(field(json!({"reduction": "nope"})), "reduction");
        assert_eq!(field(json!({"learning": 1.0})), "learning");
    }

    #[test]
    fn too_much_work_names_the_field_that_asks_for_it() {
        let field = |request: serde_json::Value| compute("grpo-toy", request).unwrap_err().field;
        assert_eq!(field(json!({"steps": 100_000})), "steps");
        assert_eq!(field(json!({"seeds": 2, "steps": 20_000})), "steps");
        assert_eq!(field(json!({"seeds": 256, "steps": 2000})), "seeds");
        assert_eq!(
            field(json!({"group_size": 4096, "steps": 400})),
            "group_size"
        );
        let typical = Request::default();
        assert!(
            typical.work() < super::super::MAX_WORK / 20,
            "{}",
            typical.work()
        );
    }

    #[test]
    fn a_learning_rate_that_blows_up_is_named() {
        let err = compute(
            "grpo-toy",
            json!({"learning_rate": 1e300, "steps": 20, "epochs": 2}),
        )
        .unwrap_err();
        assert_eq!(err.field, "learning_rate");
        assert!(err.message.contains("diverged"), "{err}");
    }
}

//! `gae`: generalised advantage estimation over one trajectory (see
//! [`crate::math::gae`]) or over a padded batch `[B][T]` with a response mask and masked
//! whitening, as verl and TRL compute it (see [`crate::math::gae_batch`]).
//!
//! One trajectory under arlbook's names keeps its terminated / truncated ending and is
//! not whitened unless asked. verl's name (`response_mask`) or `convention: "verl"`
//! follows `compute_gae_advantage_return`: masked positions are carried through the
//! recursion and the advantages are whitened over the mask (verl's `masked_mean` adds
//! 1e-8 to the count). TRL's name (`padding_mask`, true at padding) or `convention:
//! "trl"` follows `PPOTrainer`: the plain recursion over every position, whitening over
//! the non-padding positions with an exact count, padding set to 0. `lam` is both
//! libraries' name for `lambda`.

use serde::{Deserialize, Serialize};

use crate::api::Entry;
use crate::error::{FieldError, Result};
use crate::math::convention::{Convention, infer, one_of};
use crate::math::gae::{Ending, gae};
use crate::math::gae_batch::{BatchGaeOptions, MaskRule, Whitening, gae_batch};

/// One trajectory's numbers, or a padded batch's `[B][T]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Series {
    /// One trajectory, `[T]`.
    One(Vec<f64>),
    /// A padded batch, `[B][T]`.
    Batch(Vec<Vec<f64>>),
}

impl Series {
    /// The rows: one for a single trajectory.
    pub fn rows(&self) -> Vec<Vec<f64>> {
        match self {
            Self::One(row) => vec![row.clone()],
            Self::Batch(rows) => rows.clone(),
        }
    }

    /// The single trajectory's numbers (the first row of a batch).
    pub fn into_one(self) -> Vec<f64> {
        match self {
            Self::One(row) => row,
            Self::Batch(rows) => rows.into_iter().next().unwrap_or_default(),
        }
    }

    fn like(&self, mut rows: Vec<Vec<f64>>) -> Self {
        match self {
            Self::One(_) => Self::One(rows.pop().unwrap_or_default()),
            Self::Batch(_) => Self::Batch(rows),
        }
    }
}

/// Request of `gae`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// Reward `r_t` after each step, finite: `[T]`, or `[B][T]` (verl
    /// `token_level_rewards`).
    pub rewards: Series,
    /// Value estimate `V(h_t)` of each step's state, finite, shaped like `rewards`.
    pub values: Series,
    /// Discount `gamma` in `[0, 1]`. Default 1.
    #[serde(default = "one")]
    pub gamma: f64,
    /// GAE `lambda` in `[0, 1]`. Default 0.95.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lambda: Option<f64>,
    /// TRL's and verl's name for `lambda`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lam: Option<f64>,
    /// The trajectory reached a true terminal state (`V_T = 0`). Default: true unless
    /// `truncated` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminated: Option<bool>,
    /// The trajectory was cut off by a limit (`V_T = bootstrap_value`). Default false.
    /// One trajectory under arlbook's rules only (the libraries end every row at a
    /// terminal state).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
    /// Value of the state after the last step; required when truncated, rejected when
    /// terminated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_value: Option<f64>,
    /// verl: 1 at the policy's own tokens, 0 at padding and observation tokens, shaped
    /// like `rewards`. Default all 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_mask: Option<Vec<Vec<f64>>>,
    /// TRL: true at padding, shaped like `rewards` (the complement of `response_mask`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub padding_mask: Option<Vec<Vec<bool>>>,
    /// Whiten the advantages over the mask. Default: false under arlbook's rules, true
    /// under TRL's and verl's (both whiten in their GAE).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whiten: Option<bool>,
    /// Whitening keeps the mean (`false`: it is added back, verl's `shift_mean`).
    /// Default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shift_mean: Option<bool>,
    /// `arlbook`, `trl` or `verl` (otherwise from the mask's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub convention: Option<Convention>,
}

fn one() -> f64 {
    1.0
}

const DEFAULT_LAMBDA: f64 = 0.95;

/// Response of `gae`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// `\hat A_t`, shaped like `rewards` (whitened when asked).
    pub advantages: Series,
    /// `\hat A_t + V_t` with the advantages before whitening, shaped like `rewards`.
    pub returns: Series,
    /// The `V_T` used after the last step (one trajectory under arlbook's rules).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_value: Option<f64>,
    /// The masked mean and unbiased variance whitening used, when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whitening: Option<Whitening>,
    /// The convention that computed this: `arlbook`, `trl` or `verl`.
    pub convention: Convention,
}

/// The `gae` entry.
pub struct GaeEntry;

fn ending(request: &Request) -> Result<Ending> {
    let truncated = request.truncated.unwrap_or(false);
    let terminated = request.terminated.unwrap_or(!truncated);
    match (terminated, truncated, request.bootstrap_value) {
        (true, true, _) => Err(FieldError::new(
            "truncated",
            "a trajectory is either terminated or truncated, not both",
        )),
        (false, false, _) => Err(FieldError::new(
            "terminated",
            "set terminated or truncated (with bootstrap_value)",
        )),
        (true, false, None) => Ok(Ending::Terminated),
        (true, false, Some(_)) => Err(FieldError::new(
            "bootstrap_value",
            "is only used for truncated trajectories; a terminal state has value 0",
        )),
        (false, true, Some(v)) => Ok(Ending::Truncated { bootstrap_value: v }),
        (false, true, None) => Err(FieldError::new(
            "bootstrap_value",
            "is required when truncated (the value of the state where the trajectory was cut)",
        )),
    }
}

/// The 0/1 mask of a request, `[B][T]` (all 1 when none is given).
fn mask(request: &Request, rows: &[Vec<f64>]) -> Vec<Vec<f64>> {
    if let Some(mask) = &request.response_mask {
        return mask.clone();
    }
    if let Some(padding) = &request.padding_mask {
        return padding
            .iter()
            .map(|row| row.iter().map(|&pad| if pad { 0.0 } else { 1.0 }).collect())
            .collect();
    }
    rows.iter().map(|r| vec![1.0; r.len()]).collect()
}

fn convention(request: &Request) -> Result<Convention> {
    let trl: Vec<&str> = request
        .padding_mask
        .as_ref()
        .map(|_| "padding_mask")
        .into_iter()
        .collect();
    let verl: Vec<&str> = request
        .response_mask
        .as_ref()
        .map(|_| "response_mask")
        .into_iter()
        .collect();
    infer(request.convention, &trl, &verl)
}

impl Entry for GaeEntry {
    const NAME: &'static str = "gae";
    const SUMMARY: &'static str = "Generalised advantage estimation: one trajectory (terminated \
         or truncated) or a padded batch with a response mask and masked whitening";
    type Request = Request;
    type Response = Response;

    fn compute(request: &Request) -> Result<Response> {
        let convention = convention(request)?;
        let lambda =
            one_of(&[("lambda", request.lambda), ("lam", request.lam)])?.unwrap_or(DEFAULT_LAMBDA);
        let lambda_name = if request.lam.is_some() {
            "lam"
        } else {
            "lambda"
        };
        let whiten = request.whiten.unwrap_or(convention != Convention::Arlbook);
        let single = matches!(request.rewards, Series::One(_));
        let masked = request.response_mask.is_some() || request.padding_mask.is_some();
        if single && convention == Convention::Arlbook && !masked {
            let end = ending(request)?;
            let rewards = request.rewards.rows().remove(0);
            let values = match &request.values {
                Series::One(values) => values.clone(),
                Series::Batch(_) => {
                    return Err(FieldError::new(
                        "values",
                        "is a batch [B][T] but rewards is one trajectory [T]",
                    ));
                }
            };
            let out = gae(&rewards, &values, request.gamma, lambda, end)
                .map_err(|e| rename(e, lambda_name))?;
            let (advantages, whitening) = if whiten {
                let mut rows = vec![out.advantages];
                let mask = vec![vec![1.0; rewards.len()]];
                let stats = crate::math::gae_batch::masked_whiten(
                    &mut rows,
                    &mask,
                    request.shift_mean.unwrap_or(true),
                    0.0,
                )
                .map_err(|e| FieldError::new("whiten", e.message))?;
                (rows.remove(0), Some(stats))
            } else {
                (out.advantages, None)
            };
            return Ok(Response {
                advantages: Series::One(advantages),
                returns: Series::One(out.returns),
                final_value: Some(match end {
                    Ending::Terminated => 0.0,
                    Ending::Truncated { bootstrap_value } => bootstrap_value,
                }),
                whitening,
                convention,
            });
        }
        if request.truncated == Some(true) || request.bootstrap_value.is_some() {
            return Err(FieldError::new(
                if request.truncated == Some(true) {
                    "truncated"
                } else {
                    "bootstrap_value"
                },
                "a batch, a mask or a library's convention ends every row at a terminal \
                 state (as TRL and verl do); give one trajectory under arlbook's rules to \
                 bootstrap a truncated one",
            ));
        }
        if request.terminated == Some(false) {
            return Err(FieldError::new(
                "terminated",
                "a batch, a mask or a library's convention ends every row at a terminal state",
            ));
        }
        let rewards = request.rewards.rows();
        let values = request.values.rows();
        let mask = mask(request, &rewards);
        let out = gae_batch(
            &rewards,
            &values,
            &mask,
            BatchGaeOptions {
                gamma: request.gamma,
                lambda,
                rule: MaskRule::of(convention),
                whiten,
                shift_mean: request.shift_mean.unwrap_or(true),
                mean_guard: if convention == Convention::Verl {
                    1e-8
                } else {
                    0.0
                },
            },
        )
        .map_err(|e| rename_mask(rename(e, lambda_name), request))?;
        Ok(Response {
            advantages: request.rewards.like(out.advantages),
            returns: request.rewards.like(out.returns),
            final_value: None,
            whitening: out.whitening,
            convention,
        })
    }
}

/// Errors about `lambda` name the field the request used.
fn rename(mut error: FieldError, lambda_name: &str) -> FieldError {
    if error.field == "lambda" {
        error.field = lambda_name.to_string();
    }
    error
}

/// Errors about the mask name the field the request used (`padding_mask` for TRL's, or
/// `whiten` when there is no mask and too few positions to whiten).
fn rename_mask(mut error: FieldError, request: &Request) -> FieldError {
    if request.padding_mask.is_some() && error.field.starts_with("response_mask") {
        error.field = error.field.replacen("response_mask", "padding_mask", 1);
    } else if request.response_mask.is_none() && error.field.starts_with("response_mask") {
        error.field = "whiten".to_string();
    }
    error
}

#[cfg(test)]
mod tests {
    use crate::api::compute;
    use serde_json::json;

    #[test]
    fn truncated_needs_a_bootstrap_value() {
        let err = compute(
            "gae",
            json!({"rewards": [0], "values": [0], "truncated": true}),
        )
        .unwrap_err();
        assert_eq!(err.field, "bootstrap_value");
        let out = compute(
            "gae",
            json!({"rewards": [0], "values": [0.5], "truncated": true, "bootstrap_value": 0.5, "gamma": 1, "lambda": 1}),
        )
        .unwrap();
        assert_eq!(out["advantages"], json!([0.0]));
    }

    #[test]
    fn terminated_by_default() {
        let out = compute("gae", json!({"rewards": [1], "values": [0.25]})).unwrap();
        assert_eq!(out["advantages"], json!([0.75]));
        assert_eq!(out["returns"], json!([1.0]));
    }

    #[test]
    fn a_verl_batch_is_carried_through_its_mask_and_whitened() {
        let out = compute(
            "gae",
            json!({"rewards": [[0, 0, 1], [0, 1, 0]], "values": [[0.1, 0.2, 0.3], [0.5, 0.4, 0.0]],
                   "response_mask": [[1, 1, 1], [1, 1, 0]], "lam": 1.0}),
        )
        .unwrap();
        assert_eq!(out["convention"], "verl");
        let adv = out["advantages"].as_array().unwrap();
        assert_eq!(adv.len(), 2);
        // Whitened over the five masked positions: their mean is 0.
        let masked: Vec<f64> = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]
            .iter()
            .map(|&(b, t)| adv[b][t].as_f64().unwrap())
            .collect();
        assert!(masked.iter().sum::<f64>().abs() < 1e-6);
        assert!(out["whitening"]["var"].as_f64().unwrap() > 0.0);
    }

    #[test]
    fn lambda_under_two_names_is_refused() {
        let err = compute(
            "gae",
            json!({"rewards": [1, 0], "values": [0, 0], "lambda": 0.9, "lam": 0.9}),
        )
        .unwrap_err();
        assert_eq!(err.field, "lam");
    }

    #[test]
    fn a_batch_cannot_bootstrap() {
        let err = compute(
            "gae",
            json!({"rewards": [[1, 0]], "values": [[0, 0]], "truncated": true, "bootstrap_value": 0.2}),
        )
        .unwrap_err();
        assert_eq!(err.field, "truncated");
    }

    #[test]
    fn both_masks_are_two_libraries() {
        let err = compute(
            "gae",
            json!({"rewards": [[1, 0]], "values": [[0, 0]], "response_mask": [[1, 1]],
                   "padding_mask": [[false, false]]}),
        )
        .unwrap_err();
        assert_eq!(err.field, "response_mask");
    }

    #[test]
    fn trl_padding_mask_errors_use_its_name() {
        let err = compute(
            "gae",
            json!({"rewards": [[1, 0]], "values": [[0, 0]], "padding_mask": [[false, true, true]]}),
        )
        .unwrap_err();
        assert_eq!(err.field, "padding_mask[0]");
    }
}

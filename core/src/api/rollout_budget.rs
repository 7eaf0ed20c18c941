//! `rollout-budget`: trajectories and generated tokens for a collection schedule, and
//! the attempts an acceptance rate below 1 adds (see [`crate::math::budget`]).

use serde::{Deserialize, Serialize};

use super::Entry;
use crate::error::Result;
use crate::math::budget;

/// Request for `rollout-budget`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// Tasks drawn per collection batch, `B`.
    pub tasks_per_batch: u64,
    /// Rollouts per task, `G`.
    pub group_size: u64,
    /// Collection iterations, `K` (not optimizer steps).
    pub iterations: u64,
    /// Mean generated tokens per trajectory, `L` (>= 0).
    pub mean_tokens: f64,
    /// Fraction of candidates accepted, in `(0, 1]`, large enough that the attempts fit a
    /// `u64`. Default 1.
    #[serde(default = "default_acceptance")]
    pub acceptance: f64,
    /// Optional: accepted demonstrations wanted; `attempts_needed` then counts attempts
    /// for these instead of for the trajectories.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub demos: Option<u64>,
}

fn default_acceptance() -> f64 {
    1.0
}

/// Response of `rollout-budget`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Response {
    /// `B G K` accepted trajectories.
    pub trajectories: u64,
    /// `B G K L` generated tokens in accepted trajectories.
    pub generated_tokens: f64,
    /// `ceil(demos / acceptance)` with `demos`, else `ceil(B G K / acceptance)`.
    pub attempts_needed: u64,
    /// Expected rollouts generated per batch, `B G / acceptance`.
    pub attempts_per_batch: f64,
    /// Tokens generated including rejected attempts, `attempts_needed * L`.
    pub generated_tokens_with_rejections: f64,
}

/// The `rollout-budget` entry.
pub struct RolloutBudget;

impl Entry for RolloutBudget {
    const NAME: &'static str = "rollout-budget";
    const SUMMARY: &'static str =
        "Trajectories, generated tokens and attempts for a rollout schedule and acceptance rate";
    type Request = Request;
    type Response = Response;

    fn compute(request: &Request) -> Result<Response> {
        let trajectories = budget::trajectories(
            request.tasks_per_batch,
            request.group_size,
            request.iterations,
        )?;
        let generated_tokens = budget::generated_tokens(trajectories, request.mean_tokens)?;
        let wanted = request.demos.unwrap_or(trajectories);
        let attempts_needed = budget::attempts_needed(wanted, request.acceptance)?;
        let per_batch = request.tasks_per_batch.saturating_mul(request.group_size);
        Ok(Response {
            trajectories,
            generated_tokens,
            attempts_needed,
            attempts_per_batch: budget::expected_attempts(per_batch as f64, request.acceptance)?,
            generated_tokens_with_rejections: attempts_needed as f64 * request.mean_tokens,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::compute;
    use serde_json::json;

    #[test]
    fn article_budget_is_12_800_trajectories_and_25_6_million_tokens() {
        let out = compute(
            "rollout-budget",
            json!({"tasks_per_batch": 32, "group_size": 4, "iterations": 100, "mean_tokens": 2000}),
        )
        .unwrap();
        assert_eq!(out["trajectories"], json!(12_800));
        assert_eq!(out["generated_tokens"], json!(25_600_000.0));
        assert_eq!(out["attempts_needed"], json!(12_800));
    }

    #[test]
    fn article_1000_demos_at_a_quarter_take_4000_attempts() {
        let out = compute(
            "rollout-budget",
            json!({"tasks_per_batch": 32, "group_size": 4, "iterations": 100, "mean_tokens": 2000, "acceptance": 0.25, "demos": 1000}),
        )
        .unwrap();
        assert_eq!(out["attempts_needed"], json!(4000));
        assert_eq!(out["attempts_per_batch"], json!(512.0));
    }

    #[test]
    fn zero_acceptance_names_acceptance() {
        let err = compute(
            "rollout-budget",
            json!({"tasks_per_batch": 1, "group_size": 1, "iterations": 1, "mean_tokens": 1, "acceptance": 0}),
        )
        .unwrap_err();
        assert_eq!(err.field, "acceptance");
    }
}

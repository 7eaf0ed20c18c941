//! Per-turn rewards of a record under three schemes, for the shaping figure.
//!
//! - `sparse`: `r_t = 0` except the last turn, which gets the episode reward (1 when
//!   the hidden tests pass at `finish`).
//! - `potential`: `r'_t = r_t + gamma Phi(h_{t+1}) - Phi(h_t)`, with `Phi` the fraction
//!   of visible tests the code passes and the terminal potential set to 0, so that
//!   `sum_t gamma^t r'_t = sum_t gamma^t r_t - Phi(h_0)`: the ranking of policies is
//!   unchanged. Ng, Harada & Russell (1999), "Policy invariance under reward
//!   transformations", Theorem 1.
//! - `naive_bonus`: `r_t + bonus` for every `run_tests` call; it pays for testing itself
//!   and so changes what is optimal (a policy that only tests collects it).
//!
//! Episodes that ended in an environment fault have no training reward
//! ([`EpisodeRecord::training_reward`]); [`turn_rewards`] returns `None` for them.

use serde::{Deserialize, Serialize};

use super::action::ToolCall;
use super::record::EpisodeRecord;

/// How per-turn rewards are formed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "scheme", rename_all = "snake_case")]
pub enum RewardScheme {
    /// Outcome reward at the last turn only.
    Sparse,
    /// Potential-based shaping with discount `gamma` and terminal potential 0.
    Potential {
        /// Discount factor in `[0, 1]`.
        gamma: f64,
    },
    /// `+bonus` for every `run_tests` call.
    NaiveBonus {
        /// The bonus per call.
        bonus: f64,
    },
}

/// One reward per model call, or `None` when the episode hit an environment fault.
pub fn turn_rewards(record: &EpisodeRecord, scheme: RewardScheme) -> Option<Vec<f64>> {
    let outcome = record.training_reward()?;
    let turns = record.calls.len();
    let mut rewards = vec![0.0; turns];
    if let Some(last) = rewards.last_mut() {
        *last = outcome;
    }
    match scheme {
        RewardScheme::Sparse => {}
        RewardScheme::Potential { gamma } => {
            let potential = |t: usize| {
                if t == turns {
                    0.0
                } else {
                    record.visible_pass_fraction.get(t).copied().unwrap_or(0.0)
                }
            };
            for (t, reward) in rewards.iter_mut().enumerate() {
                *reward += gamma * potential(t + 1) - potential(t);
            }
        }
        RewardScheme::NaiveBonus { bonus } => {
            for (reward, call) in rewards.iter_mut().zip(&record.calls) {
                if call.call == Some(ToolCall::RunTests) {
                    *reward += bonus;
                }
            }
        }
    }
    Some(rewards)
}

/// `sum_t gamma^t r_t`.
pub fn discounted_return(rewards: &[f64], gamma: f64) -> f64 {
    rewards
        .iter()
        .rev()
        .fold(0.0, |acc, &reward| reward + gamma * acc)
}

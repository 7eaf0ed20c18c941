//! Generalised advantage estimation over one trajectory.
//!
//! ```text
//! delta_t = r_t + gamma * V_{t+1} - V_t
//! \hat A_t = sum_{l=0}^{T-t-1} (gamma lambda)^l delta_{t+l}
//!          = delta_t + gamma * lambda * \hat A_{t+1}
//! returns_t = \hat A_t + V_t
//! ```
//!
//! Source: Schulman et al. 2016, "High-Dimensional Continuous Control Using Generalized
//! Advantage Estimation", section 3. How the trajectory ended decides `V_T`: a true
//! terminal state has no future, so `V_T = 0`; a trajectory cut off by a collection limit
//! (turn or token budget) continues in principle, so `V_T` is the value estimate of the
//! state where it was cut (`bootstrap_value`). Treating a truncation as a termination
//! teaches the value that the budget's end is worth nothing.
//!
//! verl's `compute_gae_advantage_return` is the terminated case (next value 0 after the
//! last response token); over a padded batch with a response mask, and with the
//! whitening that follows, it is `gae_batch` (the `gae` entry takes both forms).

use serde::{Deserialize, Serialize};

use crate::error::{Result, check};

/// How the trajectory ended.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Ending {
    /// A true terminal state: `V_T = 0`.
    Terminated,
    /// Cut off by a limit: `V_T = bootstrap_value`.
    Truncated {
        /// Value estimate of the state after the last step.
        bootstrap_value: f64,
    },
}

/// Advantages and returns of one trajectory.
#[derive(Debug, Clone, PartialEq)]
pub struct Gae {
    /// `\hat A_t`.
    pub advantages: Vec<f64>,
    /// `\hat A_t + V_t`, the value targets.
    pub returns: Vec<f64>,
}

/// GAE over `rewards` and `values` (fields of those names, same length), with
/// `gamma`, `lambda` in `[0, 1]`.
pub fn gae(
    rewards: &[f64],
    values: &[f64],
    gamma: f64,
    lambda: f64,
    ending: Ending,
) -> Result<Gae> {
    check::same_len("values", values.len(), "rewards", rewards.len())?;
    check::all_finite("rewards", rewards)?;
    check::all_finite("values", values)?;
    check::in_range("gamma", gamma, 0.0, 1.0)?;
    check::in_range("lambda", lambda, 0.0, 1.0)?;
    let mut next_value = match ending {
        Ending::Terminated => 0.0,
        Ending::Truncated { bootstrap_value } => check::finite("bootstrap_value", bootstrap_value)?,
    };
    let mut advantages = vec![0.0; rewards.len()];
    let mut running = 0.0;
    for t in (0..rewards.len()).rev() {
        let delta = rewards[t] + gamma * next_value - values[t];
        running = delta + gamma * lambda * running;
        advantages[t] = running;
        next_value = values[t];
    }
    check::all_finite("rewards", &advantages)?;
    let returns = advantages.iter().zip(values).map(|(a, v)| a + v).collect();
    Ok(Gae {
        advantages,
        returns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The explicit sum of discounted TD residuals.
    fn by_definition(r: &[f64], v: &[f64], gamma: f64, lambda: f64, v_end: f64) -> Vec<f64> {
        let t_max = r.len();
        let next = |t: usize| if t + 1 < t_max { v[t + 1] } else { v_end };
        let delta: Vec<f64> = (0..t_max).map(|t| r[t] + gamma * next(t) - v[t]).collect();
        (0..t_max)
            .map(|t| {
                (t..t_max)
                    .map(|k| (gamma * lambda).powi((k - t) as i32) * delta[k])
                    .sum()
            })
            .collect()
    }

    #[test]
    fn lambda_one_gives_discounted_return_minus_value() {
        let g = gae(
            &[0.0, 0.0, 1.0],
            &[0.2, 0.3, 0.4],
            0.9,
            1.0,
            Ending::Terminated,
        )
        .unwrap();
        assert!((g.returns[0] - 0.81).abs() < 1e-15);
        assert!((g.advantages[0] - (0.81 - 0.2)).abs() < 1e-15);
    }

    #[test]
    fn truncation_bootstraps_from_the_cut_state() {
        let term = gae(&[0.0], &[0.5], 1.0, 1.0, Ending::Terminated).unwrap();
        let trunc = gae(
            &[0.0],
            &[0.5],
            1.0,
            1.0,
            Ending::Truncated {
                bootstrap_value: 0.5,
            },
        )
        .unwrap();
        assert_eq!(term.advantages, vec![-0.5]);
        assert_eq!(trunc.advantages, vec![0.0]);
    }

    #[test]
    fn bad_lambda_is_named() {
        assert_eq!(
            gae(&[0.0], &[0.0], 1.0, 1.5, Ending::Terminated)
                .unwrap_err()
                .field,
            "lambda"
        );
    }

    proptest! {
        #[test]
        fn recursion_matches_the_explicit_sum(
            rv in proptest::collection::vec((-1.0f64..1.0, -1.0f64..1.0), 1..12),
            gamma in 0.0f64..1.0, lambda in 0.0f64..1.0, boot in proptest::option::of(-1.0f64..1.0),
        ) {
            let (r, v): (Vec<f64>, Vec<f64>) = rv.into_iter().unzip();
            let ending = boot.map_or(Ending::Terminated, |b| Ending::Truncated { bootstrap_value: b });
            let g = gae(&r, &v, gamma, lambda, ending).unwrap();
            let want = by_definition(&r, &v, gamma, lambda, boot.unwrap_or(0.0));
            for (a, b) in g.advantages.iter().zip(&want) {
                prop_assert!((a - b).abs() < 1e-12);
            }
        }
    }
}

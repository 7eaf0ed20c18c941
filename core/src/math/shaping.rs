//! Reward shaping: potential-based shaping, which cannot change which policy is best,
//! against a naive per-call bonus, which can.
//!
//! Potential-based shaping (Ng, Harada and Russell 1999, "Policy invariance under reward
//! transformations", Theorem 1) adds `F_t = gamma Phi(s_{t+1}) - Phi(s_t)` to each
//! reward. The discounted sum telescopes:
//! `sum_{t<T} gamma^t r'_t = sum_{t<T} gamma^t r_t + gamma^T Phi(s_T) - Phi(s_0)`,
//! so with the terminal potential fixed at 0 every episode from `s_0` moves by the same
//! constant `-Phi(s_0)` and the ranking of policies is unchanged.
//!
//! A naive bonus (`+b` for each step whose action is, say, a test run) has no such
//! cancellation: its contribution grows with the number of bonused steps, so a policy
//! that repeats the bonused action can out-earn one that solves the task.

use crate::error::{FieldError, Result, check};

/// Discounted return `sum_t gamma^t r_t`.
pub fn discounted_return(rewards: &[f64], gamma: f64) -> f64 {
    // Horner's scheme from the end: G = r_0 + gamma (r_1 + gamma (...)).
    rewards.iter().rev().fold(0.0, |acc, &r| r + gamma * acc)
}

/// Largest |reward|, |potential| or |bonus| accepted, so returns cannot overflow.
pub const MAX_MAGNITUDE: f64 = 1e12;

fn check_bounded(field: &str, values: &[f64]) -> Result<()> {
    for (i, &v) in values.iter().enumerate() {
        check::in_range(&format!("{field}[{i}]"), v, -MAX_MAGNITUDE, MAX_MAGNITUDE)?;
    }
    Ok(())
}

fn check_gamma(gamma: f64) -> Result<f64> {
    check::in_range("gamma", gamma, 0.0, 1.0)
}

/// Shaped rewards `r_t + gamma Phi(s_{t+1}) - Phi(s_t)` for `T` rewards and `T + 1`
/// potentials `Phi(s_0) .. Phi(s_T)`.
pub fn shaped_rewards(rewards: &[f64], potentials: &[f64], gamma: f64) -> Result<Vec<f64>> {
    check_bounded("rewards", rewards)?;
    check_bounded("potentials", potentials)?;
    check_gamma(gamma)?;
    if potentials.len() != rewards.len() + 1 {
        return Err(FieldError::new(
            "potentials",
            format!(
                "needs one entry per state, {} (rewards has {}, plus the final state), got {}",
                rewards.len() + 1,
                rewards.len(),
                potentials.len()
            ),
        ));
    }
    Ok(rewards
        .iter()
        .enumerate()
        .map(|(t, &r)| r + gamma * potentials[t + 1] - potentials[t])
        .collect())
}

/// Everything the shaping figure shows for one episode.
#[derive(Debug, Clone, PartialEq)]
pub struct Shaped {
    /// `r'_t` per step.
    pub shaped: Vec<f64>,
    /// `sum gamma^t r_t`.
    pub return_: f64,
    /// `sum gamma^t r'_t`, summed step by step.
    pub shaped_return: f64,
    /// `gamma^T Phi(s_T) - Phi(s_0)`: the telescoped offset.
    pub offset: f64,
    /// `shaped_return - (return_ + offset)`: zero up to rounding.
    pub identity_gap: f64,
}

/// Shapes an episode and checks the telescoping identity.
pub fn shape(rewards: &[f64], potentials: &[f64], gamma: f64) -> Result<Shaped> {
    let shaped = shaped_rewards(rewards, potentials, gamma)?;
    let return_ = discounted_return(rewards, gamma);
    let shaped_return = discounted_return(&shaped, gamma);
    let horizon = rewards.len() as i32;
    let offset = gamma.powi(horizon) * potentials[rewards.len()] - potentials[0];
    Ok(Shaped {
        identity_gap: shaped_return - (return_ + offset),
        shaped,
        return_,
        shaped_return,
        offset,
    })
}

/// Rewards with `bonus` added at every step where `bonus_mask` is true.
pub fn naive_bonus_rewards(rewards: &[f64], bonus_mask: &[bool], bonus: f64) -> Result<Vec<f64>> {
    check_bounded("rewards", rewards)?;
    check::same_len("bonus_mask", bonus_mask.len(), "rewards", rewards.len())?;
    check::in_range("bonus", bonus, -MAX_MAGNITUDE, MAX_MAGNITUDE)?;
    Ok(rewards
        .iter()
        .zip(bonus_mask)
        .map(|(&r, &hit)| if hit { r + bonus } else { r })
        .collect())
}

/// Returns of one scripted policy in the toy repair episode under three reward schemes.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PolicyReturns {
    /// `solve` or `repeat-tests`.
    pub policy: String,
    /// Steps in its episode.
    pub steps: usize,
    /// Return under the sparse success reward.
    pub sparse: f64,
    /// Return with potential-based shaping added.
    pub potential: f64,
    /// Return with the naive per-test-run bonus added.
    pub naive: f64,
}

/// A tiny repair episode: `solve` runs the tests, reads and edits the code, runs the
/// tests again and finishes with reward 1 (five steps); `repeat-tests` calls the tests
/// until the turn budget `horizon` ends the episode with reward 0.
///
/// Potential: `Phi(s) = bonus` once the tests have been run at least once, 0 before that
/// and 0 in the terminal state. It pays for verifying but, being a potential, is taken
/// back when the episode ends. The naive scheme pays `bonus` for every test call.
pub fn compare_solve_and_repeat(
    horizon: usize,
    bonus: f64,
    gamma: f64,
) -> Result<[PolicyReturns; 2]> {
    const SOLVE_TESTS: [bool; 5] = [true, false, false, true, false];
    check::count("horizon", horizon, SOLVE_TESTS.len(), 10_000)?;
    check::in_range("bonus", bonus, -MAX_MAGNITUDE, MAX_MAGNITUDE)?;
    check_gamma(gamma)?;
    let evaluate = |policy: &str, tests: &[bool], success: bool| -> Result<PolicyReturns> {
        let steps = tests.len();
        let mut rewards = vec![0.0; steps];
        if success {
            rewards[steps - 1] = 1.0;
        }
        // Phi(s_t) for t = 0..=T: has a test run happened before step t; terminal is 0.
        let mut potentials = Vec::with_capacity(steps + 1);
        let mut tested = false;
        for &is_test in tests {
            potentials.push(if tested { bonus } else { 0.0 });
            tested |= is_test;
        }
        potentials.push(0.0);
        let shaped = shape(&rewards, &potentials, gamma)?;
        let naive = naive_bonus_rewards(&rewards, tests, bonus)?;
        Ok(PolicyReturns {
            policy: policy.to_owned(),
            steps,
            sparse: shaped.return_,
            potential: shaped.shaped_return,
            naive: discounted_return(&naive, gamma),
        })
    };
    Ok([
        evaluate("solve", &SOLVE_TESTS, true)?,
        evaluate("repeat-tests", &vec![true; horizon], false)?,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn wrong_potential_length_names_potentials() {
        let err = shaped_rewards(&[0.0, 1.0], &[0.0, 0.0], 1.0).unwrap_err();
        assert_eq!(err.field, "potentials");
        assert_eq!(
            shaped_rewards(&[0.0], &[0.0, 0.0], 1.5).unwrap_err().field,
            "gamma"
        );
    }

    #[test]
    fn discounted_return_matches_direct_sum() {
        let r = [0.5, 0.0, 2.0, -1.0];
        let direct: f64 = r
            .iter()
            .enumerate()
            .map(|(t, x)| 0.9f64.powi(t as i32) * x)
            .sum();
        assert!((discounted_return(&r, 0.9) - direct).abs() < 1e-14);
    }

    #[test]
    fn naive_bonus_return_grows_with_repeated_calls() {
        let returns: Vec<f64> = (1..6)
            .map(|n| {
                discounted_return(
                    &naive_bonus_rewards(&vec![0.0; n], &vec![true; n], 0.1).unwrap(),
                    1.0,
                )
            })
            .collect();
        assert!(returns.windows(2).all(|w| w[1] > w[0]));
        assert!((returns[4] - 0.5).abs() < 1e-12);
    }

    #[test]
    fn naive_bonus_lets_repeating_tests_beat_solving_but_potential_shaping_does_not() {
        let [solve, repeat] = compare_solve_and_repeat(20, 0.1, 1.0).unwrap();
        assert!(solve.sparse > repeat.sparse);
        assert!(solve.potential > repeat.potential);
        assert!(repeat.naive > solve.naive, "{repeat:?} vs {solve:?}");
        // With terminal potential 0 and Phi(s_0) = 0 the shaped returns equal the sparse ones.
        assert!((solve.potential - solve.sparse).abs() < 1e-12);
        assert!((repeat.potential - repeat.sparse).abs() < 1e-12);
    }

    proptest! {
        #[test]
        fn shaping_telescopes_for_any_potentials(
            rewards in proptest::collection::vec(-10.0f64..10.0, 0..30),
            raw_potentials in proptest::collection::vec(-10.0f64..10.0, 31),
            gamma in 0.0f64..=1.0,
        ) {
            let mut potentials = raw_potentials[..=rewards.len()].to_vec();
            let t = rewards.len();
            potentials[t] = 0.0;
            let out = shape(&rewards, &potentials, gamma).unwrap();
            prop_assert!(out.identity_gap.abs() < 1e-9, "gap {}", out.identity_gap);
            // Terminal potential 0: the shift is -Phi(s_0), whatever happens in between.
            prop_assert!((out.shaped_return - (out.return_ - potentials[0])).abs() < 1e-9);
        }

        #[test]
        fn potential_shaping_preserves_the_ordering_of_policies(
            horizon in 5usize..60, bonus in 0.0f64..2.0, gamma in 0.5f64..=1.0,
        ) {
            let [solve, repeat] = compare_solve_and_repeat(horizon, bonus, gamma).unwrap();
            prop_assert!(solve.potential > repeat.potential);
        }
    }
}

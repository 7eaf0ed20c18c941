//! Rollout and token budgets.
//!
//! Drawing `B` tasks per batch, `G` rollouts per task, for `K` collection iterations
//! generates `B G K` trajectories and `B G K L` generated tokens at mean length `L`
//! (prefill, tool output, backward passes and grading are extra). When only a fraction
//! `alpha` of candidates is accepted (dynamic sampling keeping mixed groups, or
//! distillation keeping verified demonstrations), collecting `D` accepted items takes
//! `D / alpha` attempts on average (the mean of a negative binomial count).

use crate::error::{FieldError, Result, check};

/// `B G K`, with overflow reported as an error naming `iterations`.
pub fn trajectories(tasks_per_batch: u64, group_size: u64, iterations: u64) -> Result<u64> {
    tasks_per_batch
        .checked_mul(group_size)
        .and_then(|per_batch| per_batch.checked_mul(iterations))
        .ok_or_else(|| FieldError::new("iterations", "the trajectory count overflows"))
}

/// Generated tokens `trajectories * mean_tokens`.
pub fn generated_tokens(trajectories: u64, mean_tokens: f64) -> Result<f64> {
    check::in_range("mean_tokens", mean_tokens, 0.0, 1e12)?;
    Ok(trajectories as f64 * mean_tokens)
}

fn check_acceptance(acceptance: f64) -> Result<f64> {
    if acceptance > 0.0 && acceptance <= 1.0 {
        Ok(acceptance)
    } else {
        Err(FieldError::new(
            "acceptance",
            format!("must be in (0, 1], got {acceptance}"),
        ))
    }
}

/// Expected attempts `accepted / acceptance` (not rounded).
pub fn expected_attempts(accepted: f64, acceptance: f64) -> Result<f64> {
    check::non_negative("accepted", accepted)?;
    let attempts = accepted / check_acceptance(acceptance)?;
    if attempts.is_finite() {
        Ok(attempts)
    } else {
        Err(FieldError::new(
            "acceptance",
            format!("{acceptance:e} is so small that {accepted} / acceptance overflows f64"),
        ))
    }
}

/// Attempts needed on average for `accepted` items, rounded up: `ceil(D / alpha)`.
///
/// The quotient is nudged down by a relative `1e-12` before rounding, so a ratio that is
/// an integer on paper (`1000 / 0.25`) is not pushed to the next integer by the binary
/// representation of `alpha`.
pub fn attempts_needed(accepted: u64, acceptance: f64) -> Result<u64> {
    let attempts = (expected_attempts(accepted as f64, acceptance)? * (1.0 - 1e-12)).ceil();
    // 2^64: the first f64 past u64::MAX (the cast would saturate there).
    if attempts < 18_446_744_073_709_551_616.0 {
        Ok(attempts as u64)
    } else {
        Err(FieldError::new(
            "acceptance",
            format!(
                "{acceptance:e} is so small that {accepted} / acceptance attempts overflow u64"
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn article_32_tasks_4_rollouts_100_iterations_is_12_800_trajectories() {
        assert_eq!(trajectories(32, 4, 100).unwrap(), 12_800);
    }

    #[test]
    fn article_2000_tokens_each_is_25_6_million_tokens() {
        assert_eq!(generated_tokens(12_800, 2000.0).unwrap(), 25_600_000.0);
    }

    #[test]
    fn article_1000_demos_at_25_percent_take_4000_attempts() {
        assert_eq!(attempts_needed(1000, 0.25).unwrap(), 4000);
    }

    #[test]
    fn acceptance_outside_unit_interval_names_acceptance() {
        assert_eq!(attempts_needed(10, 0.0).unwrap_err().field, "acceptance");
        assert_eq!(attempts_needed(10, 1.5).unwrap_err().field, "acceptance");
        assert_eq!(
            trajectories(u64::MAX, 2, 1).unwrap_err().field,
            "iterations"
        );
    }

    #[test]
    fn decimal_acceptance_rates_round_to_the_paper_answer() {
        assert_eq!(attempts_needed(3, 0.3).unwrap(), 10);
        assert_eq!(attempts_needed(1000, 0.1).unwrap(), 10_000);
        assert_eq!(attempts_needed(7, 0.7).unwrap(), 10);
        assert_eq!(attempts_needed(1, 0.3).unwrap(), 4);
    }

    proptest! {
        #[test]
        fn attempts_cover_the_demand(accepted in 0u64..1_000_000, acceptance in 0.001f64..=1.0) {
            let attempts = attempts_needed(accepted, acceptance).unwrap();
            prop_assert!(attempts as f64 * acceptance >= accepted as f64 * (1.0 - 1e-9));
            prop_assert!(attempts >= accepted);
        }
    }
}

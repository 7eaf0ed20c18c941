//! The toy's task: the vocabulary, the length cap and the verifiable reward.

use crate::error::{FieldError, Result, check};

use super::table::END;

/// The largest vocabulary (end token included) and length cap the toy accepts: the
/// table has `max_length * vocab^2` logits.
pub const MAX_VOCAB: usize = 64;
/// See [`MAX_VOCAB`].
pub const MAX_LENGTH: usize = 64;
/// The largest length penalty accepted (the pass reward is 1, so a penalty of 100
/// already makes length all that matters).
pub const MAX_LENGTH_PENALTY: f64 = 100.0;

/// The task: responses over tokens `0..vocab` (token 0 ends a response) of at most
/// `max_length` tokens, and a reward that checks for a target pattern.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    /// Vocabulary size `V`, the end token included.
    pub vocab: usize,
    /// Length cap `L`.
    pub max_length: usize,
    /// The pattern a passing response contains: content tokens (`1..V`), in a row.
    pub target: Vec<usize>,
    /// `lambda >= 0`: the reward loses `lambda * length / L`.
    pub length_penalty: f64,
}

impl Task {
    /// Checks the sizes, the target and the penalty (fields `vocab`, `max_length`,
    /// `target[i]`, `length_penalty`).
    pub fn validate(&self) -> Result<()> {
        check::count("vocab", self.vocab, 2, MAX_VOCAB)?;
        check::count("max_length", self.max_length, 1, MAX_LENGTH)?;
        check::count("target", self.target.len(), 1, self.max_length)?;
        for (i, &token) in self.target.iter().enumerate() {
            if token == END || token >= self.vocab {
                return Err(FieldError::new(
                    format!("target[{i}]"),
                    format!(
                        "must be a content token in [1, {}] (0 is the end token), got {token}",
                        self.vocab - 1
                    ),
                ));
            }
        }
        check::in_range(
            "length_penalty",
            self.length_penalty,
            0.0,
            MAX_LENGTH_PENALTY,
        )?;
        Ok(())
    }

    /// Whether `response` passes: its tokens before [`END`] contain `target` as a
    /// contiguous run.
    pub fn passes(&self, response: &[usize]) -> bool {
        let content = match response.iter().position(|&t| t == END) {
            Some(end) => &response[..end],
            None => response,
        };
        content
            .windows(self.target.len())
            .any(|window| window == self.target.as_slice())
    }

    /// The reward `1{passes} - lambda * length / L` of `response` (its length counts
    /// the end token when there is one).
    pub fn reward(&self, response: &[usize]) -> f64 {
        let pass = if self.passes(response) { 1.0 } else { 0.0 };
        pass - self.length_penalty * response.len() as f64 / self.max_length as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task() -> Task {
        Task {
            vocab: 6,
            max_length: 8,
            target: vec![2, 3],
            length_penalty: 0.0,
        }
    }

    #[test]
    fn the_pattern_must_appear_in_a_row_before_the_end() {
        let task = task();
        assert!(task.passes(&[1, 2, 3, 0]));
        assert!(task.passes(&[2, 3]));
        assert!(!task.passes(&[2, 1, 3, 0]));
        assert!(!task.passes(&[2, 0]));
        assert!(!task.passes(&[0]));
    }

    #[test]
    fn the_length_penalty_counts_the_end_token() {
        let task = Task {
            length_penalty: 0.5,
            ..task()
        };
        assert!((task.reward(&[2, 3, 0]) - (1.0 - 0.5 * 3.0 / 8.0)).abs() < 1e-15);
        assert!((task.reward(&[1, 0]) + 0.5 * 2.0 / 8.0).abs() < 1e-15);
    }

    #[test]
    fn bad_settings_name_their_field() {
        let bad = |t: Task| t.validate().unwrap_err().field;
        assert_eq!(bad(Task { vocab: 1, ..task() }), "vocab");
        assert_eq!(
            bad(Task {
                max_length: 0,
                ..task()
            }),
            "max_length"
        );
        assert_eq!(
            bad(Task {
                target: vec![],
                ..task()
            }),
            "target"
        );
        assert_eq!(
            bad(Task {
                target: vec![2, 0],
                ..task()
            }),
            "target[1]"
        );
        assert_eq!(
            bad(Task {
                target: vec![6],
                ..task()
            }),
            "target[0]"
        );
        assert_eq!(
            bad(Task {
                length_penalty: f64::NAN,
                ..task()
            }),
            "length_penalty"
        );
        assert!(task().validate().is_ok());
    }
}

//! Forward and reverse KL between categorical distributions, their gradients with
//! respect to the student's logits, and a unimodal student fitted to a teacher.
//!
//! With teacher `p` and student `q = softmax(z)`:
//! - forward `KL(p || q) = sum_k p_k (log p_k - log q_k)`, gradient `dKL/dz_k = q_k - p_k`;
//! - reverse `KL(q || p) = sum_k q_k (log q_k - log p_k)`, gradient
//!   `dKL/dz_k = q_k (log q_k - log p_k - KL(q || p))`.
//!
//! Forward KL charges the student wherever the teacher has mass it misses, so a
//! one-bump student spreads over all of the teacher's modes (mode covering); reverse KL
//! charges the student wherever it puts mass the teacher lacks, so it settles on one mode
//! (mode seeking). See Bishop, "Pattern recognition and machine learning" (2006), §10.1.2;
//! Agarwal et al. 2024, "On-policy distillation of language models" (GKD), §3.
//!
//! ## Design
//! Everything is computed from log-probabilities (`0 log 0 = 0`), so a student given by
//! logits never underflows to an infinite KL. An infinite KL (mass against zero mass) is
//! an error naming the field whose zero causes it.

use crate::error::{FieldError, Result, check};

/// `log softmax(logits)`.
pub fn log_softmax(logits: &[f64]) -> Vec<f64> {
    let max = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let log_total = max + logits.iter().map(|&z| (z - max).exp()).sum::<f64>().ln();
    logits.iter().map(|&z| z - log_total).collect()
}

/// Log-probabilities of a categorical distribution given as logits (field `field`).
pub fn log_probs_from_logits(field: &str, logits: &[f64]) -> Result<Vec<f64>> {
    check::non_empty(field, logits)?;
    check::all_finite(field, logits)?;
    Ok(log_softmax(logits))
}

/// Log-probabilities (`-inf` for zeros) of a distribution given as probabilities that
/// sum to 1 within `1e-6` (field `field`).
pub fn log_probs_from_probs(field: &str, probs: &[f64]) -> Result<Vec<f64>> {
    check::distribution(field, probs)?;
    Ok(probs.iter().map(|p| p.ln()).collect())
}

/// `KL(a || b) = sum_k a_k (log a_k - log b_k)` from log-probabilities; an infinite value
/// (`a_k > 0` where `b_k = 0`) is an error naming `b_field[k]`.
pub fn kl_from_log_probs(log_a: &[f64], log_b: &[f64], b_field: &str) -> Result<f64> {
    check::same_len(b_field, log_b.len(), "the other distribution", log_a.len())?;
    let mut total = 0.0;
    for (k, (&la, &lb)) in log_a.iter().zip(log_b).enumerate() {
        if la == f64::NEG_INFINITY {
            continue;
        }
        if lb == f64::NEG_INFINITY {
            return Err(FieldError::new(
                format!("{b_field}[{k}]"),
                "is 0 where the other distribution is positive, so the KL is infinite",
            ));
        }
        total += la.exp() * (la - lb);
    }
    Ok(total.max(0.0))
}

/// Gradient of forward `KL(p || q)` w.r.t. the student logits: `q - p`.
pub fn forward_kl_gradient(log_teacher: &[f64], log_student: &[f64]) -> Vec<f64> {
    log_student
        .iter()
        .zip(log_teacher)
        .map(|(lq, lp)| lq.exp() - lp.exp())
        .collect()
}

/// Gradient of reverse `KL(q || p)` w.r.t. the student logits:
/// `q_k (log q_k - log p_k - KL)`. Needs the KL to be finite.
pub fn reverse_kl_gradient(log_teacher: &[f64], log_student: &[f64], reverse_kl: f64) -> Vec<f64> {
    log_student
        .iter()
        .zip(log_teacher)
        .map(|(&lq, &lp)| {
            if lq == f64::NEG_INFINITY {
                0.0
            } else {
                lq.exp() * (lq - lp - reverse_kl)
            }
        })
        .collect()
}

/// Which KL a student is fitted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Direction {
    /// `KL(teacher || student)`.
    Forward,
    /// `KL(student || teacher)`.
    Reverse,
}

/// Logits of a discretised Gaussian bump over categories `0..K`:
/// `z_k = -(k - mean)^2 / (2 width^2)`.
pub fn gaussian_logits(categories: usize, mean: f64, width: f64) -> Vec<f64> {
    (0..categories)
        .map(|k| {
            let d = k as f64 - mean;
            -d * d / (2.0 * width * width)
        })
        .collect()
}

/// A fitted one-bump student.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FittedStudent {
    /// Centre of the bump, in category units.
    pub mean: f64,
    /// Width (standard deviation of the bump), in category units.
    pub width: f64,
    /// The student's probabilities.
    pub probs: Vec<f64>,
    /// The minimised KL.
    pub kl: f64,
}

/// Fits `(mean, width)` of a [`gaussian_logits`] student to the teacher by minimising the
/// chosen KL: a grid over `mean` in `[0, K-1]` (steps of 1/4) and `ln width` (48 points
/// from `ln 0.2` to `ln 2K`), then a compass search that halves its steps 40 times.
/// Deterministic. Reverse KL needs a teacher with no zero entries (error names
/// `teacher[k]`).
pub fn fit_gaussian_student(log_teacher: &[f64], direction: Direction) -> Result<FittedStudent> {
    let k = log_teacher.len();
    check::count("teacher", k, 2, 256)?;
    if direction == Direction::Reverse
        && let Some(i) = log_teacher.iter().position(|&l| l == f64::NEG_INFINITY)
    {
        return Err(FieldError::new(
            format!("teacher[{i}]"),
            "must be > 0 to fit by reverse KL: any full-support student puts mass there",
        ));
    }
    let (log_w_min, log_w_max) = (0.2f64.ln(), (2.0 * k as f64).ln());
    let objective = |mean: f64, log_width: f64| -> f64 {
        let log_q = log_softmax(&gaussian_logits(k, mean, log_width.exp()));
        let value = match direction {
            Direction::Forward => kl_from_log_probs(log_teacher, &log_q, "student"),
            Direction::Reverse => kl_from_log_probs(&log_q, log_teacher, "teacher"),
        };
        value.unwrap_or(f64::INFINITY)
    };
    let mut best = (0.0, log_w_min, f64::INFINITY);
    for mean_step in 0..=4 * (k - 1) {
        let mean = mean_step as f64 / 4.0;
        for width_step in 0..48 {
            let log_width = log_w_min + (log_w_max - log_w_min) * f64::from(width_step) / 47.0;
            let value = objective(mean, log_width);
            if value < best.2 {
                best = (mean, log_width, value);
            }
        }
    }
    let (mut step_mean, mut step_width) = (0.25, (log_w_max - log_w_min) / 47.0);
    for _ in 0..40 {
        let mut improved = true;
        while improved {
            improved = false;
            for (dm, dw) in [
                (step_mean, 0.0),
                (-step_mean, 0.0),
                (0.0, step_width),
                (0.0, -step_width),
            ] {
                let (mean, log_width) = (best.0 + dm, (best.1 + dw).clamp(log_w_min, log_w_max));
                let value = objective(mean, log_width);
                if value < best.2 {
                    best = (mean, log_width, value);
                    improved = true;
                }
            }
        }
        step_mean /= 2.0;
        step_width /= 2.0;
    }
    let width = best.1.exp();
    Ok(FittedStudent {
        mean: best.0,
        width,
        probs: log_softmax(&gaussian_logits(k, best.0, width))
            .iter()
            .map(|l| l.exp())
            .collect(),
        kl: best.2,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Two equal bumps at 5 and 15 over 21 categories.
    fn bimodal_teacher() -> Vec<f64> {
        let logits_a = gaussian_logits(21, 5.0, 1.5);
        let logits_b = gaussian_logits(21, 15.0, 1.5);
        let mix: Vec<f64> = logits_a
            .iter()
            .zip(&logits_b)
            .map(|(a, b)| a.exp() + b.exp())
            .collect();
        let total: f64 = mix.iter().sum();
        mix.iter().map(|m| (m / total).ln()).collect()
    }

    fn finite_difference(f: impl Fn(&[f64]) -> f64, z: &[f64], k: usize) -> f64 {
        let h = 1e-6;
        let (mut up, mut down) = (z.to_vec(), z.to_vec());
        up[k] += h;
        down[k] -= h;
        (f(&up) - f(&down)) / (2.0 * h)
    }

    #[test]
    fn gradients_match_finite_differences() {
        let log_p = log_softmax(&[0.4, -1.0, 2.0, 0.1]);
        let z = [1.0, 0.5, -0.3, 0.2];
        let log_q = log_softmax(&z);
        let forward = |z: &[f64]| kl_from_log_probs(&log_p, &log_softmax(z), "student").unwrap();
        let reverse = |z: &[f64]| kl_from_log_probs(&log_softmax(z), &log_p, "teacher").unwrap();
        let forward_grad = forward_kl_gradient(&log_p, &log_q);
        let reverse_grad = reverse_kl_gradient(&log_p, &log_q, reverse(&z));
        for k in 0..z.len() {
            assert!((finite_difference(forward, &z, k) - forward_grad[k]).abs() < 1e-7);
            assert!((finite_difference(reverse, &z, k) - reverse_grad[k]).abs() < 1e-7);
        }
    }

    #[test]
    fn kl_of_a_distribution_with_itself_is_zero() {
        let log_p = log_probs_from_probs("teacher", &[0.5, 0.5, 0.0]).unwrap();
        assert_eq!(kl_from_log_probs(&log_p, &log_p, "student").unwrap(), 0.0);
    }

    #[test]
    fn infinite_kl_names_the_zero_entry() {
        let teacher = log_probs_from_probs("teacher", &[0.5, 0.5]).unwrap();
        let student = log_probs_from_probs("student", &[1.0, 0.0]).unwrap();
        let err = kl_from_log_probs(&teacher, &student, "student").unwrap_err();
        assert_eq!(err.field, "student[1]");
        // The reverse direction is finite: the student has no mass where it is zero.
        let reverse = kl_from_log_probs(&student, &teacher, "teacher").unwrap();
        assert!((reverse - 2f64.ln()).abs() < 1e-15);
    }

    #[test]
    fn forward_kl_fit_covers_both_modes() {
        let fit = fit_gaussian_student(&bimodal_teacher(), Direction::Forward).unwrap();
        assert!((fit.mean - 10.0).abs() < 0.25, "{fit:?}");
        assert!(fit.width > 4.0, "{fit:?}");
    }

    #[test]
    fn reverse_kl_fit_locks_onto_one_mode() {
        let fit = fit_gaussian_student(&bimodal_teacher(), Direction::Reverse).unwrap();
        let nearest_mode = (fit.mean - 5.0).abs().min((fit.mean - 15.0).abs());
        assert!(nearest_mode < 0.5, "{fit:?}");
        assert!(fit.width < 2.0, "{fit:?}");
    }

    #[test]
    fn fitting_a_unimodal_teacher_recovers_it() {
        let teacher = log_softmax(&gaussian_logits(15, 6.3, 2.2));
        for direction in [Direction::Forward, Direction::Reverse] {
            let fit = fit_gaussian_student(&teacher, direction).unwrap();
            assert!(
                (fit.mean - 6.3).abs() < 1e-4 && (fit.width - 2.2).abs() < 1e-4,
                "{fit:?}"
            );
            assert!(fit.kl < 1e-9);
        }
    }

    proptest! {
        #[test]
        fn kl_is_non_negative_and_forward_gradient_sums_to_zero(
            a in proptest::collection::vec(-3.0f64..3.0, 2..8),
            b in proptest::collection::vec(-3.0f64..3.0, 8),
        ) {
            let log_p = log_softmax(&a);
            let log_q = log_softmax(&b[..a.len()]);
            prop_assert!(kl_from_log_probs(&log_p, &log_q, "student").unwrap() >= 0.0);
            let reverse = kl_from_log_probs(&log_q, &log_p, "teacher").unwrap();
            prop_assert!(reverse >= 0.0);
            // Softmax gradients sum to zero: shifting every logit changes nothing.
            prop_assert!(forward_kl_gradient(&log_p, &log_q).iter().sum::<f64>().abs() < 1e-12);
            prop_assert!(reverse_kl_gradient(&log_p, &log_q, reverse).iter().sum::<f64>().abs() < 1e-12);
        }
    }
}

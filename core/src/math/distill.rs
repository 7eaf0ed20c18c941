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
/// sum to 1 within `1e-4` relative, divided by their sum (field `field`).
pub fn log_probs_from_probs(field: &str, probs: &[f64]) -> Result<Vec<f64>> {
    let probs = check::distribution(field, probs)?;
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
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FittedStudent {
    /// Mean of the fitted distribution, in category units (`sum_k q_k k`).
    pub mean: f64,
    /// Standard deviation of the fitted distribution, in category units.
    pub width: f64,
    /// The student's probabilities.
    pub probs: Vec<f64>,
    /// The minimised KL.
    pub kl: f64,
}

fn student(log_q: &[f64], kl: f64) -> FittedStudent {
    let probs: Vec<f64> = log_q.iter().map(|l| l.exp()).collect();
    let mean: f64 = probs.iter().enumerate().map(|(k, q)| k as f64 * q).sum();
    let variance: f64 = probs
        .iter()
        .enumerate()
        .map(|(k, q)| q * (k as f64 - mean).powi(2))
        .sum();
    FittedStudent {
        mean,
        width: variance.max(0.0).sqrt(),
        probs,
        kl,
    }
}

/// Fits a one-bump student to the teacher by minimising the chosen KL. Deterministic.
/// Reverse KL needs a teacher with no zero entries (error names `teacher[k]`).
///
/// - **Forward** (`KL(teacher || student)`): the students are the exponential family
///   `q_k ∝ exp(a u_k + b u_k^2)` with `b <= 0` (one bump, or a tilted line at `b = 0`),
///   `u_k` the category rescaled to `[-1, 1]`. Forward KL is the cross-entropy minus a
///   constant, convex in `(a, b)`, and its minimiser matches the teacher's mean and
///   variance exactly (moment matching); when the teacher is more spread out than any
///   bump over `K` categories can be, the best student is the `b = 0` tilt with the
///   teacher's mean. Solved by projected Newton steps with a backtracking line search.
/// - **Reverse** (`KL(student || teacher)`, not convex, several local minima): the
///   students are discretised Gaussian bumps ([`gaussian_logits`]); a grid over the
///   centre in `[0, K-1]` (steps of 1/2) and `ln width` (24 points from `ln 0.2` to
///   `ln 2K`), then a compass search that halves its steps 40 times, the centre kept in
///   `[0, K-1]`. The figure's test checks over its slider grid that no bump on a fine
///   brute-force grid does better.
pub fn fit_gaussian_student(log_teacher: &[f64], direction: Direction) -> Result<FittedStudent> {
    let k = log_teacher.len();
    check::count("teacher", k, 2, 256)?;
    match direction {
        Direction::Forward => Ok(fit_forward(log_teacher)),
        Direction::Reverse => fit_reverse(log_teacher),
    }
}

/// `u_k = (k - c) / c` with `c = (K - 1) / 2`: the categories on `[-1, 1]`.
fn rescaled(categories: usize) -> Vec<f64> {
    let c = (categories - 1) as f64 / 2.0;
    (0..categories).map(|k| (k as f64 - c) / c).collect()
}

/// Cross-entropy `-sum_k p_k log q_k` of the family member `(a, b)`, with `log q`.
fn cross_entropy(u: &[f64], teacher: &[f64], a: f64, b: f64) -> (f64, Vec<f64>) {
    let logits: Vec<f64> = u.iter().map(|&x| a * x + b * x * x).collect();
    let log_q = log_softmax(&logits);
    let value = teacher
        .iter()
        .zip(&log_q)
        .filter(|(p, _)| **p > 0.0)
        .map(|(p, l)| -p * l)
        .sum();
    (value, log_q)
}

fn fit_forward(log_teacher: &[f64]) -> FittedStudent {
    let u = rescaled(log_teacher.len());
    let teacher: Vec<f64> = log_teacher.iter().map(|l| l.exp()).collect();
    let moment = |weights: &[f64], power: i32| -> f64 {
        weights.iter().zip(&u).map(|(w, x)| w * x.powi(power)).sum()
    };
    let (m1, m2) = (moment(&teacher, 1), moment(&teacher, 2));
    // Start from the Gaussian with the teacher's moments where that is a bump.
    let variance = (m2 - m1 * m1).max(1e-6);
    let (mut a, mut b) = (m1 / variance, (-0.5 / variance).min(-1e-3));
    let (mut value, mut log_q) = cross_entropy(&u, &teacher, a, b);
    for _ in 0..200 {
        let q: Vec<f64> = log_q.iter().map(|l| l.exp()).collect();
        let (e1, e2) = (moment(&q, 1), moment(&q, 2));
        let (g_a, g_b) = (e1 - m1, e2 - m2);
        let h_aa = e2 - e1 * e1;
        let h_ab = moment(&q, 3) - e1 * e2;
        let h_bb = moment(&q, 4) - e2 * e2;
        // At the boundary b = 0 with the gradient pushing b up, only a is free.
        let at_boundary = b >= 0.0 && g_b <= 0.0;
        let (d_a, d_b) = if at_boundary {
            (-g_a / h_aa.max(1e-300), 0.0)
        } else {
            let det = h_aa * h_bb - h_ab * h_ab;
            if det <= 1e-300 {
                (-g_a / h_aa.max(1e-300), 0.0)
            } else {
                (
                    (-h_bb * g_a + h_ab * g_b) / det,
                    (h_ab * g_a - h_aa * g_b) / det,
                )
            }
        };
        let free_gradient = if at_boundary {
            g_a.abs()
        } else {
            g_a.abs().max(g_b.abs())
        };
        if free_gradient < 1e-13 {
            break;
        }
        let mut t = 1.0;
        let mut accepted = false;
        while t > 1e-12 {
            let (a_new, b_new) = (a + t * d_a, (b + t * d_b).min(0.0));
            let (v_new, lq_new) = cross_entropy(&u, &teacher, a_new, b_new);
            // Near the optimum the cross-entropy changes below its rounding: accept a
            // full step that does not raise it beyond that, so Newton can finish.
            if v_new <= value + 4.0 * f64::EPSILON * value.abs() {
                (a, b, value, log_q) = (a_new, b_new, v_new, lq_new);
                accepted = true;
                break;
            }
            t *= 0.5;
        }
        if !accepted {
            break;
        }
    }
    let kl = kl_from_log_probs(log_teacher, &log_q, "student").unwrap_or(f64::INFINITY);
    student(&log_q, kl)
}

/// Centres per outcome on the reverse fit's starting grid.
const REVERSE_GRID_PER_OUTCOME: usize = 2;
/// Widths on the reverse fit's starting grid (log-spaced).
const REVERSE_GRID_WIDTHS: usize = 24;

/// `KL(q || teacher)` for the discretised Gaussian bump `q` of [`gaussian_logits`], in
/// one pass without allocating: with `z_k` the bump's logits and `lse` their
/// log-sum-exp, `KL = sum_k q_k (z_k - log p_k) - lse`.
fn reverse_kl_of_bump(log_teacher: &[f64], mean: f64, width: f64) -> f64 {
    let k = log_teacher.len();
    let scale = 1.0 / (2.0 * width * width);
    // The largest logit is at the outcome nearest the centre.
    let nearest = mean.round().clamp(0.0, (k - 1) as f64);
    let top = -(nearest - mean).powi(2) * scale;
    let (mut sum, mut weighted) = (0.0, 0.0);
    for (i, log_p) in log_teacher.iter().enumerate() {
        let z = -(i as f64 - mean).powi(2) * scale;
        let e = (z - top).exp();
        sum += e;
        if e > 0.0 {
            weighted += e * (z - log_p);
        }
    }
    let value = weighted / sum - (top + sum.ln());
    // Rounding can leave a hair below zero where q equals the teacher.
    if value.is_finite() {
        value.max(0.0)
    } else {
        f64::INFINITY
    }
}

fn fit_reverse(log_teacher: &[f64]) -> Result<FittedStudent> {
    let k = log_teacher.len();
    if let Some(i) = log_teacher.iter().position(|&l| l == f64::NEG_INFINITY) {
        return Err(FieldError::new(
            format!("teacher[{i}]"),
            "must be > 0 to fit by reverse KL: any full-support student puts mass there",
        ));
    }
    let (log_w_min, log_w_max) = (0.2f64.ln(), (2.0 * k as f64).ln());
    let last = (k - 1) as f64;
    let objective = |mean: f64, log_width: f64| -> f64 {
        reverse_kl_of_bump(log_teacher, mean, log_width.exp())
    };
    let mut best = (0.0, log_w_min, f64::INFINITY);
    let width_points = REVERSE_GRID_WIDTHS - 1;
    for mean_step in 0..=REVERSE_GRID_PER_OUTCOME * (k - 1) {
        let mean = mean_step as f64 / REVERSE_GRID_PER_OUTCOME as f64;
        for width_step in 0..=width_points {
            let log_width =
                log_w_min + (log_w_max - log_w_min) * width_step as f64 / width_points as f64;
            let value = objective(mean, log_width);
            if value < best.2 {
                best = (mean, log_width, value);
            }
        }
    }
    let (mut step_mean, mut step_width) = (
        1.0 / REVERSE_GRID_PER_OUTCOME as f64,
        (log_w_max - log_w_min) / width_points as f64,
    );
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
                let mean = (best.0 + dm).clamp(0.0, last);
                let log_width = (best.1 + dw).clamp(log_w_min, log_w_max);
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
    Ok(student(
        &log_softmax(&gaussian_logits(k, best.0, best.1.exp())),
        best.2,
    ))
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
        let probs: Vec<f64> = teacher.iter().map(|l| l.exp()).collect();
        for direction in [Direction::Forward, Direction::Reverse] {
            let fit = fit_gaussian_student(&teacher, direction).unwrap();
            assert!(fit.kl < 1e-9, "{direction:?}: {fit:?}");
            for (q, p) in fit.probs.iter().zip(&probs) {
                assert!((q - p).abs() < 1e-5, "{direction:?}: {fit:?}");
            }
        }
    }

    /// Teachers like the notebook's figure: two bumps over 40 outcomes plus a floor.
    fn two_bumps(gap: f64, weight: f64, width: f64) -> Vec<f64> {
        let centre = 19.5;
        let bump = |x: f64, m: f64| (-0.5 * ((x - m) / width).powi(2)).exp();
        let raw: Vec<f64> = (0..40)
            .map(|i| {
                let x = f64::from(i);
                weight * bump(x, centre - gap / 2.0)
                    + (1.0 - weight) * bump(x, centre + gap / 2.0)
                    + 1e-4
            })
            .collect();
        let total: f64 = raw.iter().sum();
        raw.iter().map(|r| (r / total).ln()).collect()
    }

    fn moments(log_p: &[f64]) -> (f64, f64) {
        let mean: f64 = log_p
            .iter()
            .enumerate()
            .map(|(k, l)| k as f64 * l.exp())
            .sum();
        let var: f64 = log_p
            .iter()
            .enumerate()
            .map(|(k, l)| l.exp() * (k as f64 - mean).powi(2))
            .sum();
        (mean, var.sqrt())
    }

    /// The forward fit is moment matching: the teacher's mean always, its spread too
    /// unless no bump over the 40 outcomes is that wide (then the fit is the flattest
    /// member, narrower than the teacher). The reverse fit stays inside the outcomes,
    /// below its width cap, and no better student lies one small step away.
    #[test]
    fn fits_over_the_figures_grid_match_their_closed_form_or_converge() {
        for gap in [2.0, 10.0, 18.0, 30.0] {
            for weight in [0.05, 0.5, 0.7, 0.95] {
                for width in [1.0, 2.5, 6.0] {
                    let teacher = two_bumps(gap, weight, width);
                    let (mean, sd) = moments(&teacher);
                    let forward = fit_gaussian_student(&teacher, Direction::Forward).unwrap();
                    let what = format!("gap {gap} weight {weight} width {width}: {mean} {sd}");
                    assert!((forward.mean - mean).abs() < 1e-8, "{what}: {forward:?}");
                    assert!(
                        (forward.width - sd).abs() < 1e-8 || forward.width < sd,
                        "{what}: {forward:?}"
                    );
                    let reverse = fit_gaussian_student(&teacher, Direction::Reverse).unwrap();
                    assert!((0.0..=39.0).contains(&reverse.mean), "{what}: {reverse:?}");
                    assert!(reverse.width < 40.0, "{what}: {reverse:?}");
                    assert!(reverse.kl.is_finite());
                }
            }
        }
    }

    #[test]
    fn the_one_pass_reverse_kl_equals_the_kl_of_the_bump() {
        let teacher = two_bumps(12.0, 0.3, 2.0);
        for (mean, width) in [
            (0.0, 0.2),
            (7.3, 1.0),
            (19.5, 3.7),
            (39.0, 80.0),
            (25.25, 0.6),
        ] {
            let log_q = log_softmax(&gaussian_logits(teacher.len(), mean, width));
            let expected = kl_from_log_probs(&log_q, &teacher, "teacher").unwrap();
            let one_pass = reverse_kl_of_bump(&teacher, mean, width);
            assert!(
                (one_pass - expected).abs() <= 1e-12 * expected.max(1.0),
                "{mean} {width}: {one_pass} vs {expected}"
            );
        }
    }

    #[test]
    fn a_teacher_wider_than_any_bump_gets_the_flattest_student_with_its_mean() {
        // Mass at both ends: variance beyond the uniform's.
        let mut p = [1e-3; 20];
        p[0] = 0.6;
        p[19] = 0.4 - 18e-3;
        let teacher: Vec<f64> = p.iter().map(|x: &f64| x.ln()).collect();
        let fit = fit_gaussian_student(&teacher, Direction::Forward).unwrap();
        let (mean, sd) = moments(&teacher);
        assert!((fit.mean - mean).abs() < 1e-8, "{fit:?}");
        assert!(fit.width < sd);
        // The b = 0 member is a tilted line: its log-probabilities are linear in k.
        let logs: Vec<f64> = fit.probs.iter().map(|q| q.ln()).collect();
        let slope = logs[1] - logs[0];
        for pair in logs.windows(2) {
            assert!((pair[1] - pair[0] - slope).abs() < 1e-9);
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

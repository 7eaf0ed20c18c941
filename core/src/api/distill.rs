//! `distill`: forward and reverse KL between a teacher and a student distribution over
//! `K` categories, their gradients with respect to the student's logits, and one-bump
//! students fitted to the teacher by each KL (see [`crate::math::distill`]).

use serde::{Deserialize, Serialize};

use super::Entry;
use super::renormalised::{Renormalised, renormalised};
use crate::error::{FieldError, Result, check};
use crate::math::distill::{self, Direction, FittedStudent};

/// Request for `distill`. Give the teacher as exactly one of `teacher_probs` and
/// `teacher_logits`; the student as at most one of `student_probs` and `student_logits`
/// (required unless `fit` is true).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// Teacher probabilities (sum to 1 within `1e-4` relative; then renormalised).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub teacher_probs: Option<Vec<f64>>,
    /// Teacher logits (softmax is applied).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub teacher_logits: Option<Vec<f64>>,
    /// Student probabilities (sum to 1 within `1e-4` relative; then renormalised), same
    /// length as the teacher.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub student_probs: Option<Vec<f64>>,
    /// Student logits, same length as the teacher.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub student_logits: Option<Vec<f64>>,
    /// Also fit a discretised-Gaussian student by each KL (`K <= 256`; the reverse fit
    /// needs a teacher with no zero entry). Default false.
    #[serde(default)]
    pub fit: bool,
}

/// Gradients w.r.t. the student's logits.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Gradients {
    /// Of `KL(teacher || student)`: `q - p`.
    pub forward: Vec<f64>,
    /// Of `KL(student || teacher)`: `q (log q - log p - KL)`.
    pub reverse: Vec<f64>,
}

/// Students fitted by each direction.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Fitted {
    /// Minimiser of the forward KL (covers the modes).
    pub forward: FittedStudent,
    /// Minimiser of the reverse KL (picks a mode).
    pub reverse: FittedStudent,
}

/// Response of `distill`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Response {
    /// The teacher's probabilities.
    pub teacher: Vec<f64>,
    /// `KL(teacher || student)` (with a student).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forward_kl: Option<f64>,
    /// `KL(student || teacher)` (with a student).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reverse_kl: Option<f64>,
    /// Gradients w.r.t. the student's logits (with a student).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gradients: Option<Gradients>,
    /// Fitted students (with `fit`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fitted: Option<Fitted>,
    /// The probability fields divided by their sum before computing
    /// ([`super::renormalised`]); absent when none was.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub renormalised: Vec<Renormalised>,
}

/// The `distill` entry.
pub struct Distill;

fn log_probs(
    name: &str,
    probs: Option<&Vec<f64>>,
    logits: Option<&Vec<f64>>,
) -> Result<Option<Vec<f64>>> {
    match (probs, logits) {
        (Some(_), Some(_)) => Err(FieldError::new(
            format!("{name}_probs"),
            format!("give either {name}_probs or {name}_logits, not both"),
        )),
        (Some(p), None) => distill::log_probs_from_probs(&format!("{name}_probs"), p).map(Some),
        (None, Some(z)) => distill::log_probs_from_logits(&format!("{name}_logits"), z).map(Some),
        (None, None) => Ok(None),
    }
}

impl Entry for Distill {
    const NAME: &'static str = "distill";
    const SUMMARY: &'static str = "Forward vs reverse KL between teacher and student, gradients, and mode-covering vs mode-seeking fits";
    type Request = Request;
    type Response = Response;

    fn compute(request: &Request) -> Result<Response> {
        let teacher_field = if request.teacher_probs.is_some() {
            "teacher_probs"
        } else {
            "teacher_logits"
        };
        let log_teacher = log_probs(
            "teacher",
            request.teacher_probs.as_ref(),
            request.teacher_logits.as_ref(),
        )?
        .ok_or_else(|| FieldError::new("teacher_probs", "give teacher_probs or teacher_logits"))?;
        let log_student = log_probs(
            "student",
            request.student_probs.as_ref(),
            request.student_logits.as_ref(),
        )?;
        let rename = |e: FieldError| {
            let field = e.field.replacen("teacher", teacher_field, 1);
            FieldError::new(field, e.message)
        };
        let (mut forward_kl, mut reverse_kl, mut gradients) = (None, None, None);
        if let Some(log_student) = &log_student {
            let student_field = if request.student_probs.is_some() {
                "student_probs"
            } else {
                "student_logits"
            };
            check::same_len(
                student_field,
                log_student.len(),
                teacher_field,
                log_teacher.len(),
            )?;
            let forward = distill::kl_from_log_probs(&log_teacher, log_student, student_field)?;
            let reverse = distill::kl_from_log_probs(log_student, &log_teacher, teacher_field)?;
            gradients = Some(Gradients {
                forward: distill::forward_kl_gradient(&log_teacher, log_student),
                reverse: distill::reverse_kl_gradient(&log_teacher, log_student, reverse),
            });
            forward_kl = Some(forward);
            reverse_kl = Some(reverse);
        } else if !request.fit {
            return Err(FieldError::new(
                "student_probs",
                "give a student, or set fit to true",
            ));
        }
        let fitted = if request.fit {
            Some(Fitted {
                forward: distill::fit_gaussian_student(&log_teacher, Direction::Forward)
                    .map_err(rename)?,
                reverse: distill::fit_gaussian_student(&log_teacher, Direction::Reverse)
                    .map_err(rename)?,
            })
        } else {
            None
        };
        Ok(Response {
            teacher: log_teacher.iter().map(|l| l.exp()).collect(),
            forward_kl,
            reverse_kl,
            gradients,
            fitted,
            renormalised: renormalised(&[
                ("teacher_probs", request.teacher_probs.as_deref()),
                ("student_probs", request.student_probs.as_deref()),
            ]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::compute;
    use serde_json::json;

    #[test]
    fn kl_of_half_half_against_a_skewed_student() {
        let out = compute(
            "distill",
            json!({"teacher_probs": [0.5, 0.5], "student_probs": [0.75, 0.25]}),
        )
        .unwrap();
        let forward = 0.5 * (0.5f64 / 0.75).ln() + 0.5 * (0.5f64 / 0.25).ln();
        let reverse = 0.75 * (0.75f64 / 0.5).ln() + 0.25 * (0.25f64 / 0.5).ln();
        assert!((out["forward_kl"].as_f64().unwrap() - forward).abs() < 1e-15);
        assert!((out["reverse_kl"].as_f64().unwrap() - reverse).abs() < 1e-15);
        assert_eq!(out["gradients"]["forward"], json!([0.25, -0.25]));
    }

    #[test]
    fn fit_reports_both_students() {
        let mut teacher = vec![0.0; 21];
        for (k, t) in teacher.iter_mut().enumerate() {
            let (a, b) = (k as f64 - 5.0, k as f64 - 15.0);
            *t = ((-a * a / 4.5).exp() + (-b * b / 4.5).exp()).ln();
        }
        let out = compute("distill", json!({"teacher_logits": teacher, "fit": true})).unwrap();
        let forward_mean = out["fitted"]["forward"]["mean"].as_f64().unwrap();
        let reverse_mean = out["fitted"]["reverse"]["mean"].as_f64().unwrap();
        assert!((forward_mean - 10.0).abs() < 0.5);
        assert!((reverse_mean - 5.0).abs() < 0.5 || (reverse_mean - 15.0).abs() < 0.5);
    }

    #[test]
    fn zero_student_mass_under_teacher_mass_names_the_student() {
        let err = compute(
            "distill",
            json!({"teacher_probs": [0.5, 0.5], "student_probs": [1.0, 0.0]}),
        )
        .unwrap_err();
        assert_eq!(err.field, "student_probs[1]");
    }

    #[test]
    fn reverse_fit_with_a_zero_teacher_entry_names_it() {
        let err = compute(
            "distill",
            json!({"teacher_probs": [0.5, 0.5, 0.0], "fit": true}),
        )
        .unwrap_err();
        assert_eq!(err.field, "teacher_probs[2]");
    }
}

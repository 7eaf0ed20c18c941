//! Forward vs reverse KL: fitting a one-bump student to a two-bump teacher.
//!
//! On `K` ordered outcomes, the student is a discretised Gaussian; minimising
//! `KL(teacher || student)` spreads it over both modes, minimising
//! `KL(student || teacher)` settles it on one (Bishop, "Pattern Recognition and Machine
//! Learning", section 10.1.2; Agarwal et al. 2024 on on-policy distillation). The forward
//! fit is moment matching, so its mean is the teacher's; the readouts are the fitted
//! distributions' means. Entry `distill` with `fit`.

use arlbook_core::api::distill::{Distill, Request};
use arlbook_core::error::FieldError;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::compute::compute;
use crate::figure::{DrawResult, Figure, Meta, Readout, State, slider};
use crate::plot::{self, BLUE, MUTED, ORANGE, Style};

/// The figure.
pub struct KlFit;

/// Outcomes of the toy distribution.
const OUTCOMES: usize = 40;

/// What the figure computes.
#[derive(Debug, Clone)]
pub struct Output {
    /// Teacher probabilities.
    pub teacher: Vec<f64>,
    /// Forward-KL student probabilities.
    pub forward: Vec<f64>,
    /// Reverse-KL student probabilities.
    pub reverse: Vec<f64>,
    /// `KL(teacher || forward student)`.
    pub forward_kl: f64,
    /// `KL(reverse student || teacher)`.
    pub reverse_kl: f64,
    /// Means of the two students.
    pub means: [f64; 2],
}

impl Figure for KlFit {
    type Output = Output;

    const META: Meta = Meta {
        id: "distill",
        title: "Forward vs reverse KL: one bump fitted to two",
        caption: "Pull the teacher's modes apart: the forward-KL student (blue) widens to \
                  cover both and puts mass between them where the teacher has almost none; \
                  the reverse-KL student (orange) picks one mode. Make one mode heavier to \
                  see which one the reverse fit prefers.",
        controls: &[
            slider("gap", "distance between modes", 2.0, 30.0, 1.0, "18"),
            slider("weight", "weight of the left mode", 0.05, 0.95, 0.05, "0.5"),
            slider("width", "width of each mode", 1.0, 6.0, 0.5, "2.5"),
        ],
        aspect: 0.42,
        panels: 1,
    };

    fn compute(state: &State) -> Result<Output, FieldError> {
        let gap = state.number("gap")?;
        let weight = state.number("weight")?;
        let width = state.number("width")?;
        let centre = (OUTCOMES - 1) as f64 / 2.0;
        let bump = |x: f64, mean: f64| (-0.5 * ((x - mean) / width).powi(2)).exp();
        let mut teacher: Vec<f64> = (0..OUTCOMES)
            .map(|i| {
                let x = i as f64;
                // A floor keeps every outcome possible, as the reverse fit requires.
                weight * bump(x, centre - gap / 2.0)
                    + (1.0 - weight) * bump(x, centre + gap / 2.0)
                    + 1e-4
            })
            .collect();
        let total: f64 = teacher.iter().sum();
        for p in &mut teacher {
            *p /= total;
        }
        let response = compute::<Distill>(&Request {
            teacher_probs: Some(teacher),
            teacher_logits: None,
            student_probs: None,
            student_logits: None,
            fit: true,
        })?;
        let fitted = response.fitted.ok_or_else(|| {
            FieldError::new("(response).fitted", "missing, though a fit was asked for")
        })?;
        let (forward, reverse) = (fitted.forward, fitted.reverse);
        Ok(Output {
            teacher: response.teacher,
            means: [forward.mean, reverse.mean],
            forward_kl: forward.kl,
            reverse_kl: reverse.kl,
            forward: forward.probs,
            reverse: reverse.probs,
        })
    }

    fn readouts(output: &Output) -> Vec<Readout> {
        let id = Self::META.id;
        vec![
            Readout::new(
                id,
                "forward-kl",
                "KL(teacher ‖ forward fit)",
                output.forward_kl,
            ),
            Readout::new(
                id,
                "reverse-kl",
                "KL(reverse fit ‖ teacher)",
                output.reverse_kl,
            ),
            Readout::new(id, "forward-mean", "forward fit: mean", output.means[0]),
            Readout::new(id, "reverse-mean", "reverse fit: mean", output.means[1]),
        ]
    }

    fn draw<DB: DrawingBackend>(
        output: &Output,
        area: &DrawingArea<DB, Shift>,
        style: &Style,
    ) -> DrawResult<DB> {
        let (_, top) = plot::extent(
            output
                .teacher
                .iter()
                .chain(&output.forward)
                .chain(&output.reverse)
                .copied(),
        );
        let title_height = plot::title(
            area,
            "teacher (bars), forward-KL fit (blue), reverse-KL fit (orange)",
            style,
        )?;
        let mut chart = ChartBuilder::on(area)
            .margin(style.margin())
            .margin_top(style.margin() + title_height)
            .x_label_area_size(style.px(plot::X_LABEL_AREA))
            .y_label_area_size(style.label_area())
            .build_cartesian_2d(-0.5..OUTCOMES as f64 - 0.5, 0.0..top.max(0.01) * 1.1)?;
        plot::mesh(&mut chart, style).x_desc("outcome").draw()?;
        chart.draw_series(output.teacher.iter().enumerate().map(|(i, p)| {
            let x = i as f64;
            Rectangle::new([(x - 0.4, 0.0), (x + 0.4, *p)], MUTED.mix(0.35).filled())
        }))?;
        for (probs, color) in [(&output.forward, BLUE), (&output.reverse, ORANGE)] {
            chart.draw_series(LineSeries::new(
                probs.iter().enumerate().map(|(i, p)| (i as f64, *p)),
                style.line(color, 2.5),
            ))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figure::compute_at_query;
    use crate::query;

    /// Forward KL is moment matching: the forward fit's mean is the teacher's, even
    /// where the teacher is wider than any bump over the outcomes.
    #[test]
    fn forward_fit_mean_is_the_teachers_mean_at_every_corner() {
        for query_text in [
            "gap=30&weight=0.7&width=1",
            "gap=30&weight=0.95&width=1",
            "gap=2&weight=0.05&width=6",
        ] {
            let state = State::from_pairs(KlFit::META.controls, &query::parse(query_text), "");
            let output = KlFit::compute(&state).unwrap();
            let mean: f64 = output
                .teacher
                .iter()
                .enumerate()
                .map(|(k, p)| k as f64 * p)
                .sum();
            assert!(
                (output.means[0] - mean).abs() < 1e-8,
                "{query_text}: {:?} vs {mean}",
                output.means
            );
            assert!(
                (0.0..=(OUTCOMES - 1) as f64).contains(&output.means[1]),
                "{query_text}"
            );
        }
    }

    /// The reverse fit converges at every setting of the sliders' sweep grid: no
    /// Gaussian bump on a fine brute-force grid (centres every 0.1 outcome, 80 widths
    /// from 0.2 to 2K on a log scale) has a lower `KL(student ‖ teacher)` than the fit.
    #[test]
    fn reverse_fit_reaches_the_best_bump_over_the_slider_grid() {
        use arlbook_core::math::distill::{gaussian_logits, kl_from_log_probs, log_softmax};
        let controls = KlFit::META.controls;
        let values: Vec<Vec<String>> = controls.iter().map(crate::sweep::values).collect();
        let mut settings = 0;
        for gap in &values[0] {
            for weight in &values[1] {
                for width in &values[2] {
                    let query_text = format!("gap={gap}&weight={weight}&width={width}");
                    let output = compute_at_query::<KlFit>(&query_text).unwrap();
                    let log_teacher: Vec<f64> = output.teacher.iter().map(|p| p.ln()).collect();
                    let (w_min, w_max) = (0.2_f64.ln(), (2.0 * OUTCOMES as f64).ln());
                    let mut best = f64::INFINITY;
                    for centre in 0..=(10 * (OUTCOMES - 1)) {
                        for w in 0..80 {
                            let log_width = w_min + (w_max - w_min) * f64::from(w) / 79.0;
                            let log_q = log_softmax(&gaussian_logits(
                                OUTCOMES,
                                centre as f64 / 10.0,
                                log_width.exp(),
                            ));
                            best = best.min(kl_from_log_probs(&log_q, &log_teacher, "t").unwrap());
                        }
                    }
                    assert!(
                        output.reverse_kl <= best + 1e-9,
                        "{query_text}: fit {} against {best} on the fine grid",
                        output.reverse_kl
                    );
                    settings += 1;
                }
            }
        }
        assert_eq!(settings, 125);
    }

    #[test]
    fn reverse_fit_picks_a_mode_and_forward_fit_sits_between() {
        let state = State::from_pairs(KlFit::META.controls, &query::parse("gap=18&weight=0.6"), "");
        let output = KlFit::compute(&state).unwrap();
        let centre = (OUTCOMES - 1) as f64 / 2.0;
        // The forward fit is centred near the mixture mean; the reverse fit near a mode.
        assert!((output.means[0] - centre).abs() < 3.0, "{:?}", output.means);
        assert!((output.means[1] - centre).abs() > 6.0, "{:?}", output.means);
    }
}

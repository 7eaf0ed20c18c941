//! PPO clipping with decoupled widths (Clip-Higher): the objective against the ratio.
//!
//! `L(rho) = min(rho A, clip(rho, 1 - eps_low, 1 + eps_high) A)`, drawn for `A > 0` and
//! `A < 0`, with the ranges of `rho` where the gradient is exactly zero shaded. The
//! readouts add the absolute-probability view of the upper clip: a token with old
//! probability `p_old` stops being pushed up after an increase of `eps_high * p_old`
//! (Schulman et al. 2017, section 3; DAPO, Yu et al. 2025, section 3.1; entry
//! `clip-surrogate`).

use arlbook_core::api::OneOrMany;
use arlbook_core::api::clip_surrogate::{ClipSurrogate, Request, Response};
use arlbook_core::error::FieldError;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::compute::compute;
use crate::figure::{DrawResult, Figure, Meta, Readout, State, slider, toggle};
use crate::plot::{self, BLUE, INK, MUTED, RED, SHADE, Style};

/// The figure.
pub struct Clip;

/// Ratios drawn: `0 ..= RATIO_MAX` in `RATIO_POINTS` steps.
const RATIO_MAX: f64 = 2.5;
const RATIO_POINTS: usize = 251;

/// One sign of the advantage.
#[derive(Debug, Clone)]
pub struct Side {
    /// The advantage used.
    pub advantage: f64,
    /// `(rho, objective)`.
    pub objective: Vec<(f64, f64)>,
    /// Where `d objective / d rho = 0`, as `rho` intervals.
    pub flat: Vec<(f64, f64)>,
}

/// What the figure computes.
#[derive(Debug, Clone)]
pub struct Output {
    /// `A > 0` then `A < 0`.
    pub sides: [Side; 2],
    /// `1 - eps_low`.
    pub ratio_low: f64,
    /// `1 + eps_high`.
    pub ratio_high: f64,
    /// Dual-clip constant, if on.
    pub dual_clip: Option<f64>,
    /// `p_old`.
    pub p_old: f64,
    /// `eps_high * p_old`.
    pub increment: f64,
    /// `(1 + eps_high) * p_old`.
    pub saturation: f64,
    /// Whether that bound is a probability (at most 1): above 1 the clip never binds on
    /// this token's probability, which stops at 1.
    pub reachable: bool,
}

impl Figure for Clip {
    type Output = Output;

    const META: Meta = Meta {
        id: "clip",
        title: "PPO clipping and Clip-Higher",
        caption: "Set ε_high above ε_low (DAPO uses 0.28 against 0.2) and watch only the \
                  A > 0 panel change: the flat, zero-gradient stretch starts later. Lower \
                  p_old to 0.01 and read how small an absolute increase already hits the \
                  upper clip. Turn on the dual clip to bound the A < 0 side for large ratios.",
        controls: &[
            slider("eps_low", "ε_low", 0.0, 0.5, 0.01, "0.2"),
            slider("eps_high", "ε_high", 0.0, 0.6, 0.01, "0.28"),
            slider("a", "|A|", 0.1, 2.0, 0.1, "1"),
            slider("p_old", "p_old of a token", 0.001, 1.0, 0.001, "0.01"),
            toggle("dual", "dual clip", "0"),
            slider("c", "dual-clip c", 1.1, 5.0, 0.1, "3"),
        ],
        aspect: 0.45,
        panels: 2,
    };

    fn compute(state: &State) -> Result<Output, FieldError> {
        let eps_low = state.number("eps_low")?;
        let eps_high = state.number("eps_high")?;
        let magnitude = state.number("a")?;
        let p_old = state.number("p_old")?;
        let dual_clip = state.flag("dual").then(|| state.number("c")).transpose()?;
        let ratios: Vec<f64> = (0..RATIO_POINTS)
            .map(|i| RATIO_MAX * i as f64 / (RATIO_POINTS - 1) as f64)
            .collect();
        let side = |advantage: f64| -> Result<(Side, Response), FieldError> {
            let response = compute::<ClipSurrogate>(&Request {
                ratio: ratios.clone(),
                advantage: OneOrMany::One(advantage),
                eps_low,
                eps_high: Some(eps_high),
                dual_clip,
                p_old: Some(vec![p_old]),
            })?;
            Ok((
                Side {
                    advantage,
                    objective: ratios
                        .iter()
                        .copied()
                        .zip(response.objective.iter().copied())
                        .collect(),
                    flat: intervals(&ratios, &response.gradient_zero),
                },
                response,
            ))
        };
        let (positive, response) = side(magnitude)?;
        let (negative, _) = side(-magnitude)?;
        let saturation = response
            .saturation
            .and_then(|s| s.first().copied())
            .ok_or_else(|| {
                FieldError::new("(response).saturation", "missing, though p_old was given")
            })?;
        Ok(Output {
            sides: [positive, negative],
            ratio_low: response.ratio_low,
            ratio_high: response.ratio_high,
            dual_clip,
            p_old,
            increment: saturation.increment,
            saturation: saturation.probability,
            reachable: saturation.reachable,
        })
    }

    fn readouts(output: &Output) -> Vec<Readout> {
        let id = Self::META.id;
        vec![
            Readout::new(id, "ratio-low", "lower clip 1 − ε_low", output.ratio_low),
            Readout::new(id, "ratio-high", "upper clip 1 + ε_high", output.ratio_high),
            Readout::new(id, "p-old", "p_old", output.p_old),
            Readout::new(
                id,
                "increment",
                "absolute increase before the clip: ε_high · p_old",
                output.increment,
            ),
            Readout::new(
                id,
                "saturation",
                if output.reachable {
                    "probability where it saturates: (1 + ε_high) p_old"
                } else {
                    "(1 + ε_high) p_old, above 1: never reached, the clip does not bind"
                },
                output.saturation,
            ),
        ]
    }

    fn draw<DB: DrawingBackend>(
        output: &Output,
        area: &DrawingArea<DB, Shift>,
        style: &Style,
    ) -> DrawResult<DB> {
        let columns = area.split_evenly(style.grid(2));
        for (side, column) in output.sides.iter().zip(columns.iter()) {
            let sign = if side.advantage > 0.0 {
                "A > 0"
            } else {
                "A < 0"
            };
            let color = if side.advantage > 0.0 { BLUE } else { RED };
            let (lo, hi) = plot::extent(
                side.objective
                    .iter()
                    .map(|(_, y)| *y)
                    .chain([0.0, RATIO_MAX * side.advantage]),
            );
            let y_range = plot::padded(lo, hi);
            let mut chart = plot::framed_chart(
                column,
                &format!("objective, {sign}"),
                style,
                0.0..RATIO_MAX,
                y_range.clone(),
            )?;
            plot::mesh(&mut chart, style)
                .x_labels(6)
                .y_labels(6)
                .draw()?;
            plot::x_title(column, &chart, "ratio ρ = π_θ / π_old", style)?;
            chart.draw_series(side.flat.iter().map(|(from, to)| {
                Rectangle::new(
                    [(*from, y_range.start), (*to, y_range.end)],
                    SHADE.mix(0.8).filled(),
                )
            }))?;
            for x in [output.ratio_low, output.ratio_high] {
                chart.draw_series(LineSeries::new(
                    [(x, y_range.start), (x, y_range.end)],
                    style.line(MUTED, 1.0),
                ))?;
            }
            chart.draw_series(LineSeries::new(
                [(0.0, 0.0), (RATIO_MAX, RATIO_MAX * side.advantage)],
                style.line(plot::LIGHT, 1.0),
            ))?;
            chart.draw_series(LineSeries::new(
                side.objective.iter().copied(),
                style.line(color, 2.5),
            ))?;
            chart.draw_series([Text::new(
                "shaded: zero gradient",
                (0.05, y_range.end - (y_range.end - y_range.start) * 0.04),
                style.text_colored(11.0, INK),
            )])?;
        }
        Ok(())
    }
}

/// Contiguous runs of `true` in `flags`, as `[x_from, x_to]` over `xs` (half a step
/// wider on each side, so a run of one point is still visible).
fn intervals(xs: &[f64], flags: &[bool]) -> Vec<(f64, f64)> {
    let step = xs.get(1).copied().unwrap_or(0.0) - xs.first().copied().unwrap_or(0.0);
    let mut runs = Vec::new();
    let mut start = None;
    for (i, flag) in flags.iter().enumerate() {
        match (flag, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                runs.push((xs[s] - step / 2.0, xs[i - 1] + step / 2.0));
                start = None;
            }
            _ => {}
        }
    }
    if let (Some(s), Some(last)) = (start, xs.last()) {
        runs.push((xs[s] - step / 2.0, *last));
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figure::compute_at_query;

    fn compute_at(query_text: &str) -> Output {
        compute_at_query::<Clip>(query_text).unwrap()
    }

    #[test]
    fn clip_higher_moves_only_the_positive_side() {
        let output = compute_at("eps_low=0.2&eps_high=0.28");
        assert!((output.ratio_low - 0.8).abs() < 1e-12);
        assert!((output.ratio_high - 1.28).abs() < 1e-12);
        // A > 0: flat from 1 + eps_high on; A < 0: flat below 1 - eps_low.
        let positive = &output.sides[0].flat;
        assert_eq!(positive.len(), 1);
        assert!((positive[0].0 - 1.28).abs() < 0.02);
        let negative = &output.sides[1].flat;
        assert_eq!(negative.len(), 1);
        assert!(negative[0].1 < 0.81 && negative[0].1 > 0.79);
    }

    #[test]
    fn a_bound_above_one_says_it_is_never_reached() {
        let output = compute_at("p_old=0.9&eps_high=0.6");
        assert!((output.saturation - 1.44).abs() < 1e-12);
        assert!(!output.reachable);
        let saturation = Clip::readouts(&output)
            .into_iter()
            .find(|r| r.id == "clip-saturation")
            .unwrap();
        assert!(
            saturation.label.contains("never reached"),
            "{}",
            saturation.label
        );
        assert!(compute_at("p_old=0.5&eps_high=0.6").reachable);
    }

    #[test]
    fn saturation_at_p_old_0_01_is_a_tiny_absolute_increase() {
        let output = compute_at("eps_high=0.2&p_old=0.01");
        assert!((output.increment - 0.002).abs() < 1e-12);
        assert!((output.saturation - 0.012).abs() < 1e-12);
    }

    #[test]
    fn intervals_find_runs() {
        let xs = [0.0, 1.0, 2.0, 3.0, 4.0];
        let flags = [true, false, true, true, true];
        assert_eq!(intervals(&xs, &flags), vec![(-0.5, 0.5), (1.5, 4.0)]);
    }
}

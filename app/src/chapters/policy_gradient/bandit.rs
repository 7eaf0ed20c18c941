//! Figure 2: the policy gradient of a two-action bandit, exact and sampled.
//!
//! With `pi(A) = p = sigma(z)` and success probabilities `q_A`, `q_B`, the exact gradient
//! of the expected reward in the logit is `(q_A - q_B) p (1 - p)`. Each dot is one
//! estimate: the average of `N` single-sample estimates `(R - b)(1{a = A} - p)`, drawn
//! in groups of `G`, repeated `M` times; the three panels use no baseline, the
//! self-inclusive group mean, and the leave-one-out mean (entry `bandit-gradient`).

use arlbook_core::api::bandit_gradient::{BanditGradient, Request};
use arlbook_core::error::FieldError;
use arlbook_core::math::bandit::Baseline;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::compute::compute;
use crate::figure::{DrawResult, Figure, Meta, Readout, State, slider};
use crate::plot::{self, INK, MUTED, SERIES, Style};

/// The figure.
pub struct Bandit;

/// The three baselines: the request's value, its API name and the panel title.
const BASELINES: [(Baseline, &str, &str); 3] = [
    (Baseline::None, "none", "no baseline"),
    (
        Baseline::GroupMean,
        "group-mean",
        "group mean (self-inclusive)",
    ),
    (Baseline::LeaveOneOut, "leave-one-out", "leave-one-out mean"),
];

/// Points of the exact curve over `p`.
const CURVE_POINTS: usize = 99;

/// One baseline's estimates.
#[derive(Debug, Clone)]
pub struct Panel {
    /// API name of the baseline.
    pub baseline: &'static str,
    /// Panel title.
    pub title: &'static str,
    /// The `M` estimates.
    pub estimates: Vec<f64>,
    /// Their mean.
    pub mean: f64,
    /// Their sample variance.
    pub variance: f64,
    /// The expected value of one estimate (exact gradient times the shrinkage).
    pub expected: f64,
}

/// What the figure computes.
#[derive(Debug, Clone)]
pub struct Output {
    /// `pi(A)`.
    pub p: f64,
    /// The exact gradient at `p`.
    pub exact: f64,
    /// `(p, exact gradient)` over `(0, 1)`.
    pub curve: Vec<(f64, f64)>,
    /// Samples per estimate, rounded to a multiple of `G`.
    pub samples: usize,
    /// One panel per baseline.
    pub panels: Vec<Panel>,
}

impl Figure for Bandit {
    type Output = Output;

    const META: Meta = Meta {
        id: "bandit",
        title: "Figure 2 · The policy gradient of a two-action bandit",
        caption: "Move p to see the exact gradient (the curve) peak at p = 0.5 and vanish at \
                  the ends. Lower N to see the dots spread; compare the spread (variance) \
                  of the three panels, and set G = 2 to see the self-inclusive group mean \
                  pull its dots' average below the curve by the factor (G−1)/G.",
        controls: &[
            slider("p", "p = π(A)", 0.01, 0.99, 0.01, "0.5"),
            slider("qa", "q_A", 0.0, 1.0, 0.05, "0.75"),
            slider("qb", "q_B", 0.0, 1.0, 0.05, "0.35"),
            slider("g", "group size G", 1.0, 16.0, 1.0, "4"),
            slider("n", "samples per estimate N", 4.0, 96.0, 4.0, "24"),
            slider("m", "estimates M", 10.0, 400.0, 10.0, "100"),
            slider("seed", "seed", 0.0, 999.0, 1.0, "7"),
        ],
        aspect: 0.42,
        panels: 3,
    };

    fn compute(state: &State) -> Result<Output, FieldError> {
        let p = state.number("p")?;
        let q = [state.number("qa")?, state.number("qb")?];
        let group_size = state.count("g")?.max(1);
        let requested = state.count("n")?;
        let samples = (requested.div_ceil(group_size)).max(1) * group_size;
        let estimates = state.count("m")?;
        let seed = state.count("seed")?;

        let mut curve = Vec::with_capacity(CURVE_POINTS);
        for i in 1..=CURVE_POINTS {
            let p_i = i as f64 / (CURVE_POINTS + 1) as f64;
            let response = compute::<BanditGradient>(&Request {
                p: Some(p_i),
                q: q.to_vec(),
                estimates: 0,
                ..Request::default()
            })?;
            curve.push((p_i, response.exact));
        }
        let mut panels = Vec::with_capacity(BASELINES.len());
        let mut exact = 0.0;
        for (baseline, name, title) in BASELINES {
            let response = compute::<BanditGradient>(&Request {
                p: Some(p),
                q: q.to_vec(),
                baseline,
                group_size,
                samples,
                estimates,
                seed: seed as u64,
                ..Request::default()
            })?;
            exact = response.exact;
            panels.push(Panel {
                baseline: name,
                title,
                estimates: response.estimates,
                mean: response.mean,
                variance: response.variance,
                expected: response.expected,
            });
        }
        Ok(Output {
            p,
            exact,
            curve,
            samples,
            panels,
        })
    }

    fn readouts(output: &Output) -> Vec<Readout> {
        let id = Self::META.id;
        let mut readouts = vec![
            Readout::new(
                id,
                "exact",
                "exact gradient (q_A − q_B) p (1 − p)",
                output.exact,
            ),
            Readout::new(id, "n", "N used (a multiple of G)", output.samples as f64),
        ];
        for panel in &output.panels {
            let b = panel.baseline;
            readouts.push(Readout::new(
                id,
                &format!("mean-{b}"),
                format!("mean, {}", panel.title),
                panel.mean,
            ));
            readouts.push(Readout::new(
                id,
                &format!("var-{b}"),
                format!("variance, {}", panel.title),
                panel.variance,
            ));
            readouts.push(Readout::new(
                id,
                &format!("expected-{b}"),
                format!("expected, {}", panel.title),
                panel.expected,
            ));
        }
        readouts
    }

    fn draw<DB: DrawingBackend>(
        output: &Output,
        area: &DrawingArea<DB, Shift>,
        style: &Style,
    ) -> DrawResult<DB> {
        let (lo, hi) = plot::extent(
            output
                .curve
                .iter()
                .map(|(_, g)| *g)
                .chain(
                    output
                        .panels
                        .iter()
                        .flat_map(|p| p.estimates.iter().copied()),
                )
                .chain([0.0]),
        );
        let y_range = plot::padded(lo, hi);
        let columns = area.split_evenly(style.grid(output.panels.len()));
        for (k, (panel, column)) in output.panels.iter().zip(columns.iter()).enumerate() {
            let color = SERIES[k % SERIES.len()];
            let mut chart =
                plot::framed_chart(column, panel.title, style, 0.0..1.0, y_range.clone())?;
            chart
                .configure_mesh()
                .light_line_style(WHITE)
                .bold_line_style(plot::SHADE)
                .axis_style(style.line(MUTED, 1.0))
                .label_style(style.text(11.0))
                .x_label_formatter(&plot::axis_label)
                .y_label_formatter(&plot::axis_label)
                .x_desc("p = π(A)")
                .x_labels(5)
                .y_labels(6)
                .draw()?;
            chart.draw_series(LineSeries::new(
                [(0.0, 0.0), (1.0, 0.0)],
                style.line(MUTED, 1.0),
            ))?;
            chart.draw_series(LineSeries::new(
                output.curve.iter().copied(),
                style.line(INK, 2.0),
            ))?;
            // Spread the dots sideways a little (golden-ratio jitter, deterministic)
            // so that repeated values stay visible.
            let dots = panel.estimates.iter().enumerate().map(|(i, g)| {
                let jitter = ((i as f64 * 0.618_034).fract() - 0.5) * 0.06;
                Circle::new(
                    (output.p + jitter, *g),
                    style.px(2.2),
                    color.mix(0.45).filled(),
                )
            });
            chart.draw_series(dots)?;
            chart.draw_series([Cross::new(
                (output.p, panel.mean),
                style.px(6.0),
                style.line(INK, 2.0),
            )])?;
            chart.draw_series([Circle::new(
                (output.p, panel.expected),
                style.px(5.0),
                style.line(color, 2.0),
            )])?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query;

    fn state(query_text: &str) -> State {
        State::from_pairs(Bandit::META.controls, &query::parse(query_text), "")
    }

    #[test]
    fn article_defaults_give_exact_gradient_0_1() {
        let output = Bandit::compute(&state("p=0.5&qa=0.75&qb=0.35")).unwrap();
        assert!((output.exact - 0.1).abs() < 1e-12);
        let readouts = Bandit::readouts(&output);
        let exact = readouts.iter().find(|r| r.id == "bandit-exact").unwrap();
        assert_eq!(exact.text(), "0.1");
    }

    #[test]
    fn group_mean_expected_value_shrinks_by_g_minus_1_over_g() {
        let output = Bandit::compute(&state("g=4")).unwrap();
        let group = output
            .panels
            .iter()
            .find(|p| p.baseline == "group-mean")
            .unwrap();
        assert!((group.expected - 0.1 * 3.0 / 4.0).abs() < 1e-12);
        let loo = output
            .panels
            .iter()
            .find(|p| p.baseline == "leave-one-out")
            .unwrap();
        assert!((loo.expected - 0.1).abs() < 1e-12);
    }

    #[test]
    fn samples_are_rounded_up_to_a_multiple_of_the_group() {
        let output = Bandit::compute(&state("g=5&n=24&m=10")).unwrap();
        assert_eq!(output.samples, 25);
        assert!(output.panels.iter().all(|p| p.estimates.len() == 10));
    }
}

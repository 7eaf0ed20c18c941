//! Importance sampling on two actions: reweighting samples from `mu` to estimate an
//! expectation under `pi`.
//!
//! Ordinary: `(1/N) sum_i w(a_i) f(a_i)` with `w = pi / mu`; self-normalised:
//! `sum_i w_i f_i / sum_i w_i`. Effective sample size `(sum w)^2 / sum w^2` (Kong 1992;
//! Owen, "Monte Carlo theory, methods and examples", ch. 9). Entry `importance-sampling`.

use arlbook_core::api::importance_sampling::{ImportanceSampling, Request, Response};
use arlbook_core::error::FieldError;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::compute::compute;
use crate::figure::{DrawResult, Figure, Meta, Readout, State, slider};
use crate::plot::{self, BLUE, INK, ORANGE, Style};

/// The figure.
pub struct Importance;

/// One estimator's estimates.
#[derive(Debug, Clone)]
pub struct Estimator {
    /// `ordinary` or `self-normalised`.
    pub name: &'static str,
    /// The `M` estimates.
    pub estimates: Vec<f64>,
    /// Their mean.
    pub mean: f64,
    /// Their variance.
    pub variance: f64,
}

/// What the figure computes.
#[derive(Debug, Clone)]
pub struct Output {
    /// `E_pi[f]`.
    pub exact: f64,
    /// `pi(A)/mu(A)`, `pi(B)/mu(B)`.
    pub weights: Vec<f64>,
    /// Mean effective sample size.
    pub ess: f64,
    /// Samples per estimate.
    pub samples: usize,
    /// Ordinary, then self-normalised.
    pub estimators: Vec<Estimator>,
}

impl Figure for Importance {
    type Output = Output;

    const META: Meta = Meta {
        id: "importance",
        title: "Importance sampling: reusing samples from another policy",
        caption: "At the defaults the exact value is 0.59 and the weights are 3 and 0.5. \
                  Slide μ(A) towards 0: A's weight explodes, the effective sample size \
                  collapses, and the ordinary estimates scatter while the self-normalised \
                  ones stay bounded but lean towards B's value.",
        controls: &[
            slider("mu", "μ(A), collecting", 0.01, 0.99, 0.01, "0.2"),
            slider("pi", "π(A), target", 0.0, 1.0, 0.01, "0.6"),
            slider("qa", "f(A) = q_A", 0.0, 1.0, 0.05, "0.75"),
            slider("qb", "f(B) = q_B", 0.0, 1.0, 0.05, "0.35"),
            slider("n", "samples N", 1.0, 200.0, 1.0, "24"),
            slider("m", "estimates M", 10.0, 1000.0, 10.0, "300"),
            slider("seed", "seed", 0.0, 999.0, 1.0, "7"),
        ],
        aspect: 0.42,
        panels: 2,
    };

    fn compute(state: &State) -> Result<Output, FieldError> {
        let mu = state.number("mu")?;
        let pi = state.number("pi")?;
        let values = [state.number("qa")?, state.number("qb")?];
        let samples = state.count("n")?;
        let (estimates, seed) = (state.count("m")?, state.count("seed")? as u64);
        let run = |self_normalized: bool| {
            compute::<ImportanceSampling>(&Request {
                mu: vec![mu, 1.0 - mu],
                pi: vec![pi, 1.0 - pi],
                values: values.to_vec(),
                samples,
                estimates,
                self_normalized,
                seed,
                draws: None,
            })
        };
        let ordinary = run(false)?;
        let normalised = run(true)?;
        let estimator = |name, response: &Response| Estimator {
            name,
            estimates: response.estimates.clone(),
            mean: response.mean,
            variance: response.variance,
        };
        Ok(Output {
            exact: ordinary.exact,
            weights: ordinary.weights.clone(),
            ess: ordinary.ess,
            samples,
            estimators: vec![
                estimator("ordinary", &ordinary),
                estimator("self-normalised", &normalised),
            ],
        })
    }

    fn readouts(output: &Output) -> Vec<Readout> {
        let id = Self::META.id;
        let mut readouts = vec![
            Readout::new(id, "exact", "exact E_π[f]", output.exact),
            Readout::new(id, "weight-a", "weight of A, π(A)/μ(A)", output.weights[0]),
            Readout::new(id, "weight-b", "weight of B, π(B)/μ(B)", output.weights[1]),
            Readout::new(
                id,
                "ess",
                format!("effective sample size (of N = {})", output.samples),
                output.ess,
            ),
        ];
        for e in &output.estimators {
            readouts.push(Readout::new(
                id,
                &format!("mean-{}", e.name),
                format!("mean, {}", e.name),
                e.mean,
            ));
            readouts.push(Readout::new(
                id,
                &format!("var-{}", e.name),
                format!("variance, {}", e.name),
                e.variance,
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
                .estimators
                .iter()
                .flat_map(|e| e.estimates.iter().copied())
                .chain([output.exact, 0.0, 1.0]),
        );
        let x_range = plot::padded(lo, hi);
        let columns = area.split_evenly(style.grid(2));
        for (k, (estimator, column)) in output.estimators.iter().zip(columns.iter()).enumerate() {
            let color = if k == 0 { BLUE } else { ORANGE };
            let bins = plot::histogram(&estimator.estimates, x_range.clone(), 30);
            let top = bins.iter().map(|b| b.2).max().unwrap_or(1).max(1) as f64;
            let mut chart = plot::framed_chart(
                column,
                &format!("{} estimates", estimator.name),
                style,
                x_range.clone(),
                0.0..top * 1.1,
            )?;
            plot::mesh(&mut chart, style)
                .x_desc("estimate")
                .y_desc("count")
                .x_labels(5)
                .draw()?;
            chart.draw_series(bins.iter().map(|(from, to, n)| {
                Rectangle::new([(*from, 0.0), (*to, *n as f64)], color.mix(0.75).filled())
            }))?;
            chart.draw_series(LineSeries::new(
                [(output.exact, 0.0), (output.exact, top * 1.1)],
                style.line(INK, 2.0),
            ))?;
            chart.draw_series(LineSeries::new(
                [(estimator.mean, 0.0), (estimator.mean, top * 1.1)],
                style.line(color, 1.0),
            ))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figure::compute_at_query;

    fn compute_at(query_text: &str) -> Output {
        compute_at_query::<Importance>(query_text).unwrap()
    }

    #[test]
    fn article_defaults_give_0_59_and_weights_3_and_a_half() {
        let output = compute_at("");
        assert!((output.exact - 0.59).abs() < 1e-12);
        assert!((output.weights[0] - 3.0).abs() < 1e-12);
        assert!((output.weights[1] - 0.5).abs() < 1e-12);
        assert_eq!(output.estimators[0].estimates.len(), 300);
    }

    #[test]
    fn rare_collection_shrinks_the_effective_sample_size() {
        let common = compute_at("mu=0.5&pi=0.5");
        let rare = compute_at("mu=0.05&pi=0.9");
        assert!((common.ess - 24.0).abs() < 1e-9);
        assert!(rare.ess < common.ess / 2.0);
    }
}

//! Generalised advantage estimation on a sampled trajectory, terminated or truncated.
//!
//! `delta_t = r_t + gamma V_{t+1} - V_t`, `\hat A_t = sum_l (gamma lambda)^l delta_{t+l}`,
//! with `V_T = 0` after a true terminal state and `V_T = bootstrap` after a cut-off
//! (Schulman et al. 2016, "High-dimensional continuous control using GAE", section 3;
//! Pardo et al. 2018 on time limits). Entry `gae`. The value estimates are drawn from
//! `RandomStream::new(seed, 0)`, one `uniform_f32` per step, in step order.

use arlbook_core::api::gae::{GaeEntry, Request, Series};
use arlbook_core::error::FieldError;
use arlbook_core::rng::RandomStream;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::compute::compute;
use crate::figure::{DrawResult, Figure, Meta, Readout, State, choice, slider, toggle};
use crate::plot::{self, BLUE, INK, ORANGE, Style};

/// The figure.
pub struct Gae;

/// What the figure computes.
#[derive(Debug, Clone)]
pub struct Output {
    /// `r_t`.
    pub rewards: Vec<f64>,
    /// `V_t`.
    pub values: Vec<f64>,
    /// `\hat A_t`.
    pub advantages: Vec<f64>,
    /// `\hat A_t + V_t`.
    pub returns: Vec<f64>,
    /// `V_T` used.
    pub final_value: f64,
}

impl Figure for Gae {
    type Output = Output;

    const META: Meta = Meta {
        id: "gae",
        title: "GAE: advantages from a value estimate",
        caption: "λ = 1 gives each step the whole remaining return minus its value; λ = 0 \
                  trusts the value of the next state after one reward. Switch the ending to \
                  truncated: the last steps now lean on the bootstrap value instead of \
                  zero, so a cut-off run is not scored as a failure.",
        controls: &[
            slider("steps", "steps T", 2.0, 30.0, 1.0, "8"),
            toggle("success", "final reward 1", "1"),
            choice("end", "ending", &["terminated", "truncated"], "terminated"),
            slider(
                "bootstrap",
                "bootstrap V_T (truncated)",
                0.0,
                1.0,
                0.05,
                "0.6",
            ),
            slider("gamma", "γ", 0.8, 1.0, 0.01, "1"),
            slider("lambda", "λ", 0.0, 1.0, 0.05, "0.95"),
            slider("seed", "seed of V", 0.0, 999.0, 1.0, "7"),
        ],
        aspect: 0.42,
        panels: 1,
    };

    fn compute(state: &State) -> Result<Output, FieldError> {
        let steps = state.count("steps")?.max(1);
        let mut rng = RandomStream::new(state.count("seed")? as u64, 0);
        // A value estimate that rises towards the end, with noise.
        let values: Vec<f64> = (0..steps)
            .map(|t| {
                let trend = 0.3 + 0.4 * t as f64 / steps as f64;
                (trend + 0.3 * (f64::from(rng.uniform_f32()) - 0.5)).clamp(0.0, 1.0)
            })
            .collect();
        let mut rewards = vec![0.0; steps];
        let truncated = state.get("end") == "truncated";
        if state.flag("success") && !truncated {
            rewards[steps - 1] = 1.0;
        }
        let response = compute::<GaeEntry>(&Request {
            rewards: Series::One(rewards.clone()),
            values: Series::One(values.clone()),
            gamma: state.number("gamma")?,
            lambda: Some(state.number("lambda")?),
            lam: None,
            terminated: (!truncated).then_some(true),
            truncated: truncated.then_some(true),
            bootstrap_value: truncated.then(|| state.number("bootstrap")).transpose()?,
            response_mask: None,
            padding_mask: None,
            whiten: None,
            shift_mean: None,
            convention: None,
        })?;
        Ok(Output {
            advantages: response.advantages.into_one(),
            returns: response.returns.into_one(),
            final_value: response.final_value.unwrap_or(0.0),
            rewards,
            values,
        })
    }

    fn readouts(output: &Output) -> Vec<Readout> {
        let id = Self::META.id;
        let last = output.advantages.len().saturating_sub(1);
        vec![
            Readout::new(
                id,
                "a-first",
                "Â_0",
                output.advantages.first().copied().unwrap_or(0.0),
            ),
            Readout::new(
                id,
                "a-last",
                format!("Â_{last}"),
                output.advantages.get(last).copied().unwrap_or(0.0),
            ),
            Readout::new(
                id,
                "return-first",
                "return target Â_0 + V_0",
                output.returns.first().copied().unwrap_or(0.0),
            ),
            Readout::new(
                id,
                "final-value",
                "V_T after the last step",
                output.final_value,
            ),
        ]
    }

    fn draw<DB: DrawingBackend>(
        output: &Output,
        area: &DrawingArea<DB, Shift>,
        style: &Style,
    ) -> DrawResult<DB> {
        let steps = output.values.len() as f64;
        let (lo, hi) = plot::extent(
            output
                .advantages
                .iter()
                .chain(&output.values)
                .chain(&output.returns)
                .copied()
                .chain([0.0, 1.0]),
        );
        let title_height = plot::title(
            area,
            "Â_t (bars), V_t (blue), return targets (orange)",
            style,
        )?;
        let mut chart = ChartBuilder::on(area)
            .margin(style.margin())
            .margin_top(style.margin() + title_height)
            .x_label_area_size(style.px(plot::X_LABEL_AREA))
            .y_label_area_size(style.label_area())
            .build_cartesian_2d(-0.5..steps - 0.5, plot::padded(lo, hi))?;
        plot::mesh(&mut chart, style).x_desc("step t").draw()?;
        chart.draw_series(output.advantages.iter().enumerate().map(|(t, a)| {
            let x = t as f64;
            Rectangle::new([(x - 0.3, 0.0), (x + 0.3, *a)], INK.mix(0.35).filled())
        }))?;
        chart.draw_series(LineSeries::new(
            output
                .values
                .iter()
                .enumerate()
                .map(|(t, v)| (t as f64, *v)),
            style.line(BLUE, 2.0),
        ))?;
        chart.draw_series(
            output
                .returns
                .iter()
                .enumerate()
                .map(|(t, r)| Circle::new((t as f64, *r), style.px(4.0), ORANGE.filled())),
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figure::compute_at_query;

    fn compute_at(query_text: &str) -> Output {
        compute_at_query::<Gae>(query_text).unwrap()
    }

    #[test]
    fn lambda_one_gamma_one_gives_return_minus_value() {
        let output = compute_at("lambda=1&gamma=1&success=1");
        for (a, v) in output.advantages.iter().zip(&output.values) {
            assert!((a - (1.0 - v)).abs() < 1e-12);
        }
    }

    #[test]
    fn lambda_zero_is_the_one_step_error() {
        let output = compute_at("lambda=0&gamma=1&end=truncated&bootstrap=0.6");
        let t = output.values.len() - 1;
        assert!((output.advantages[t] - (0.6 - output.values[t])).abs() < 1e-12);
        assert!((output.advantages[0] - (output.values[1] - output.values[0])).abs() < 1e-12);
        assert_eq!(output.final_value, 0.6);
    }
}

//! Potential-based shaping vs a naive bonus on a toy repair episode.
//!
//! Shaped reward `r'_t = r_t + gamma Phi(s_{t+1}) - Phi(s_t)`; along any trajectory the
//! added terms telescope to `gamma^T Phi(s_T) - Phi(s_0)`, so the ranking of policies
//! is unchanged (Ng, Harada & Russell 1999, theorem 1). A bonus per test call does not
//! telescope, and a policy that only repeats the tests can out-earn one that solves the
//! task. Entry `shaping` with `compare_horizon`.

use arlbook_core::api::shaping;
use arlbook_core::error::FieldError;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::compute::compute;
use crate::figure::{DrawResult, Figure, Meta, Readout, State, slider};
use crate::plot::{self, BLUE, GREEN, LIGHT, MUTED, ORANGE, SHADE, Style};

/// The figure.
pub struct Shaping;

/// The reward schemes, as named in the response.
const SCHEMES: [(&str, &str); 3] = [
    ("sparse", "sparse"),
    ("potential", "potential-based"),
    ("naive", "naive bonus"),
];

/// Returns of one policy under each scheme.
#[derive(Debug, Clone)]
pub struct PolicyRow {
    /// `solve` or `repeat-tests`.
    pub policy: String,
    /// Returns in the order of `SCHEMES`.
    pub returns: [f64; 3],
}

/// What the figure computes.
#[derive(Debug, Clone)]
pub struct Output {
    /// One row per policy.
    pub rows: Vec<PolicyRow>,
    /// Shaped minus (plain + telescoped offset) on the solve episode: zero.
    pub identity_gap: f64,
}

impl Figure for Shaping {
    type Output = Output;

    const META: Meta = Meta {
        id: "shaping",
        title: "Shaping: potential-based vs a naive bonus",
        caption: "Raise the bonus or the turn budget: under the naive bonus the policy that \
                  only reruns the tests overtakes the one that solves the task, while under \
                  potential-based shaping the solver stays ahead whatever the bonus, because \
                  the potential is paid back at the end.",
        controls: &[
            slider(
                "bonus",
                "bonus per test call / potential",
                0.0,
                0.5,
                0.01,
                "0.1",
            ),
            slider("horizon", "turn budget", 5.0, 40.0, 1.0, "12"),
            slider("gamma", "γ", 0.8, 1.0, 0.01, "1"),
        ],
        aspect: 0.42,
        panels: 1,
    };

    fn compute(state: &State) -> Result<Output, FieldError> {
        let bonus = state.number("bonus")?;
        let gamma = state.number("gamma")?;
        let horizon = state.count("horizon")?;
        // The solving episode: tests, read, edit, tests, finish (reward at the end).
        let response = compute::<shaping::Shaping>(&shaping::Request {
            rewards: vec![0.0, 0.0, 0.0, 0.0, 1.0],
            potentials: vec![0.0, bonus, bonus, bonus, bonus, 0.0],
            gamma,
            bonus_mask: None,
            bonus,
            compare_horizon: Some(horizon),
        })?;
        let rows = response
            .comparison
            .ok_or_else(|| {
                FieldError::new(
                    "(response).comparison",
                    "missing, though compare_horizon was given",
                )
            })?
            .into_iter()
            .map(|row| PolicyRow {
                policy: row.policy,
                returns: [row.sparse, row.potential, row.naive],
            })
            .collect();
        Ok(Output {
            rows,
            identity_gap: response.identity_gap,
        })
    }

    fn readouts(output: &Output) -> Vec<Readout> {
        let id = Self::META.id;
        let mut readouts = Vec::new();
        for row in &output.rows {
            for ((scheme, label), value) in SCHEMES.iter().zip(row.returns) {
                readouts.push(Readout::new(
                    id,
                    &format!("{}-{scheme}", row.policy),
                    format!("{}: return, {label}", row.policy),
                    value,
                ));
            }
        }
        readouts.push(Readout::new(
            id,
            "identity-gap",
            "telescoping identity gap",
            output.identity_gap,
        ));
        readouts
    }

    fn draw<DB: DrawingBackend>(
        output: &Output,
        area: &DrawingArea<DB, Shift>,
        style: &Style,
    ) -> DrawResult<DB> {
        let (lo, hi) = plot::extent(output.rows.iter().flat_map(|r| r.returns).chain([0.0, 1.0]));
        let groups = output.rows.len().max(1) as f64;
        let title_height = plot::title(
            area,
            "return of each policy: sparse (blue), potential (green), naive (orange)",
            style,
        )?;
        let mut chart = ChartBuilder::on(area)
            .margin(style.margin())
            .margin_top(style.margin() + title_height)
            .x_label_area_size(style.px(plot::X_LABEL_AREA))
            .y_label_area_size(style.label_area())
            .build_cartesian_2d(-0.5..groups - 0.5, plot::padded(lo, hi))?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .light_line_style(WHITE)
            .bold_line_style(SHADE)
            .axis_style(style.line(MUTED, 1.0))
            .label_style(style.text(11.0))
            .x_labels(output.rows.len().max(1))
            .x_label_formatter(&|x| {
                output
                    .rows
                    .get(x.round().max(0.0) as usize)
                    .map(|r| r.policy.clone())
                    .unwrap_or_default()
            })
            .y_label_formatter(&plot::axis_label)
            .draw()?;
        chart.draw_series(LineSeries::new(
            [(-0.5, 0.0), (groups - 0.5, 0.0)],
            style.line(LIGHT, 1.0),
        ))?;
        let colors = [BLUE, GREEN, ORANGE];
        chart.draw_series(output.rows.iter().enumerate().flat_map(|(g, row)| {
            row.returns.iter().enumerate().map(move |(k, value)| {
                let x = g as f64 - 0.3 + 0.2 * k as f64;
                Rectangle::new(
                    [(x - 0.09, 0.0), (x + 0.09, *value)],
                    colors[k].mix(0.8).filled(),
                )
            })
        }))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figure::compute_at_query;

    fn compute_at(query_text: &str) -> Output {
        compute_at_query::<Shaping>(query_text).unwrap()
    }

    #[test]
    fn potential_shaping_keeps_the_solver_ahead_and_the_naive_bonus_does_not() {
        let output = compute_at("bonus=0.2&horizon=30");
        let solve = output.rows.iter().find(|r| r.policy == "solve").unwrap();
        let repeat = output.rows.iter().find(|r| r.policy != "solve").unwrap();
        assert!(solve.returns[0] > repeat.returns[0]);
        assert!(solve.returns[1] > repeat.returns[1]);
        assert!(repeat.returns[2] > solve.returns[2]);
        assert!(output.identity_gap.abs() < 1e-12);
    }
}

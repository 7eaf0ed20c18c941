//! The optimum of the KL-regularised objective on six responses, and its frontier.
//!
//! `pi*(y) = pi_ref(y) exp(r(y) / beta) / Z(beta)` maximises
//! `E_pi[r] - beta KL(pi || pi_ref)`, reaching `beta log Z` (Rafailov et al. 2023,
//! eq. 4). Entry `kl-regularized-optimum`.

use arlbook_core::api::kl_regularized_optimum::{Frontier, KlRegularizedOptimum, Request};
use arlbook_core::error::FieldError;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::{LABELS, REFERENCE, REWARDS, response_bars};
use crate::compute::compute;
use crate::figure::{DrawResult, Figure, Meta, Readout, State, slider};
use crate::plot::{self, BLUE, INK, LIGHT, MUTED, ORANGE, Style};

/// The figure.
pub struct Optimum;

/// What the figure computes.
#[derive(Debug, Clone)]
pub struct Output {
    /// `beta`.
    pub beta: f64,
    /// `pi*`.
    pub policy: Vec<f64>,
    /// `E_{pi*}[r]`.
    pub expected_reward: f64,
    /// `KL(pi* || pi_ref)`.
    pub kl: f64,
    /// `beta log Z`.
    pub objective: f64,
    /// `E_{pi_ref}[r]`.
    pub reference_reward: f64,
    /// The best reward the reference can reach.
    pub best_reward: f64,
    /// `(KL, E[r])` along the frontier, `beta` from small to large.
    pub frontier: Vec<(f64, f64)>,
}

/// The six rewards with F's reward `best`.
pub fn rewards(best: f64) -> Vec<f64> {
    REWARDS.iter().copied().chain([best]).collect()
}

impl Figure for Optimum {
    type Output = Output;

    const META: Meta = Meta {
        id: "kl-optimum",
        title: "The optimum of reward minus β · KL",
        caption: "The reference (grey) rarely gives F, the best response. At β = 0.2 the \
                  optimal policy (blue) already puts most of its mass on D and F; raise β \
                  and it returns to the reference, lower it and it becomes F alone. On the \
                  right every β gives one point of the frontier: more reward always costs \
                  more KL. Lower F's reward below D's and watch the optimum switch.",
        controls: &[
            slider("beta", "β", 0.02, 2.0, 0.01, "0.2"),
            slider("best", "reward of F", 0.0, 1.5, 0.05, "1"),
        ],
        aspect: 0.42,
        panels: 2,
    };

    fn compute(state: &State) -> Result<Output, FieldError> {
        let beta = state.number("beta")?;
        let response = compute::<KlRegularizedOptimum>(&Request {
            reference: REFERENCE.to_vec(),
            rewards: rewards(state.number("best")?),
            beta,
            frontier: Frontier {
                beta_min: 0.01,
                beta_max: 100.0,
                points: 61,
            },
        })?;
        let frontier = response
            .frontier
            .iter()
            .map(|point| (point.kl, point.expected_reward))
            .collect();
        let policy = response.policy;
        if policy.len() != LABELS.len() {
            return Err(FieldError::new(
                "(response).policy",
                "expected six responses",
            ));
        }
        Ok(Output {
            beta,
            policy,
            expected_reward: response.expected_reward,
            kl: response.kl,
            objective: response.objective,
            reference_reward: response.reference_reward,
            best_reward: response.best_reachable_reward,
            frontier,
        })
    }

    fn readouts(output: &Output) -> Vec<Readout> {
        let id = Self::META.id;
        vec![
            Readout::new(
                id,
                "reward",
                "expected reward of π*",
                output.expected_reward,
            ),
            Readout::new(id, "kl", "KL(π* ‖ π_ref), nats", output.kl),
            Readout::new(
                id,
                "objective",
                "objective E[r] − β · KL = β log Z",
                output.objective,
            ),
            Readout::new(
                id,
                "reference-reward",
                "expected reward of π_ref",
                output.reference_reward,
            ),
            Readout::new(id, "p-best", "π*(F)", output.policy[5]),
        ]
    }

    fn draw<DB: DrawingBackend>(
        output: &Output,
        area: &DrawingArea<DB, Shift>,
        style: &Style,
    ) -> DrawResult<DB> {
        let panels = area.split_evenly(style.grid(2));
        let caption = format!(
            "π_ref (grey) and π* at β = {} (blue)",
            plot::axis_label(&output.beta)
        );
        response_bars(
            &panels[0],
            &caption,
            style,
            &[(&REFERENCE, LIGHT), (&output.policy, BLUE)],
        )?;
        let (_, kl_max) = plot::extent(output.frontier.iter().map(|p| p.0).chain([output.kl]));
        let (r_lo, r_hi) = plot::extent(
            output
                .frontier
                .iter()
                .map(|p| p.1)
                .chain([output.reference_reward, output.best_reward]),
        );
        let mut curve = plot::framed_chart(
            &panels[1],
            "frontier: reward against KL over β",
            style,
            0.0..kl_max.max(1e-3) * 1.05,
            plot::padded(r_lo, r_hi),
        )?;
        plot::mesh(&mut curve, style)
            .y_desc("expected reward")
            .x_labels(5)
            .draw()?;
        plot::x_title(&panels[1], &curve, "KL(π* ‖ π_ref), nats", style)?;
        curve.draw_series(LineSeries::new(
            [
                (0.0, output.best_reward),
                (kl_max.max(1e-3) * 1.05, output.best_reward),
            ],
            style.line(MUTED, 1.0),
        ))?;
        curve.draw_series(LineSeries::new(
            output.frontier.iter().copied(),
            style.line(INK, 2.0),
        ))?;
        curve.draw_series([Circle::new(
            (output.kl, output.expected_reward),
            style.px(5.0),
            ORANGE.filled(),
        )])?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figure::compute_at_query;

    #[test]
    fn large_beta_stays_at_the_reference_and_small_beta_takes_the_best() {
        let wide = compute_at_query::<Optimum>("beta=2").unwrap();
        let narrow = compute_at_query::<Optimum>("beta=0.02").unwrap();
        assert!(wide.kl < narrow.kl);
        assert!(narrow.policy[5] > 0.98, "{:?}", narrow.policy);
        assert!((narrow.expected_reward - narrow.best_reward).abs() < 0.01);
    }
}

//! The rollout budget of a training run, and what an acceptance rate below one adds.
//!
//! `K` collection rounds of `B` tasks with `G` rollouts each keep `B G K` trajectories
//! and `B G K L` generated tokens at `L` tokens per trajectory; when only a fraction
//! `alpha` of candidates is accepted (filtered groups, rejection-sampled demonstrations),
//! `ceil(N / alpha)` attempts are needed for `N` accepted ones. Entry `rollout-budget`
//! (`arlbook_core::math::budget`).

use arlbook_core::api::rollout_budget::{self, Request, Response};
use arlbook_core::error::FieldError;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::compute::compute;
use crate::figure::{DrawResult, Figure, Meta, Readout, State, slider};
use crate::plot::{self, BLUE, INK, ORANGE, Style};

/// The figure.
pub struct RolloutBudget;

/// What the figure computes.
#[derive(Debug, Clone)]
pub struct Output {
    /// Kept trajectories, `B G K`.
    pub trajectories: f64,
    /// Tokens in kept trajectories, `B G K L`.
    pub tokens: f64,
    /// Attempts for the kept trajectories at the acceptance rate.
    pub attempts: f64,
    /// Tokens generated including rejected attempts.
    pub tokens_with_rejections: f64,
    /// Attempts for the wanted demonstrations.
    pub demo_attempts: f64,
    /// Demonstrations wanted.
    pub demos: f64,
    /// Acceptance rate.
    pub acceptance: f64,
    /// `(round, kept tokens, tokens with rejections)` after each of a grid of rounds.
    pub tokens_by_round: Vec<(f64, f64, f64)>,
    /// `(acceptance, attempts for the demonstrations)` over acceptance rates.
    pub attempts_by_acceptance: Vec<(f64, f64)>,
}

/// `rollout-budget` at one schedule.
fn budget(
    (tasks, group, rounds, length): (usize, usize, usize, f64),
    acceptance: f64,
    demos: Option<usize>,
) -> Result<Response, FieldError> {
    compute::<rollout_budget::RolloutBudget>(&Request {
        tasks_per_batch: tasks as u64,
        group_size: group as u64,
        iterations: rounds as u64,
        mean_tokens: length,
        acceptance,
        demos: demos.map(|d| d as u64),
    })
}

impl Figure for RolloutBudget {
    type Output = Output;

    const META: Meta = Meta {
        id: "rollout-budget",
        title: "What a run costs in rollouts and tokens",
        caption: "At B = 32 tasks, G = 4 rollouts, K = 100 rounds and 2,000 tokens each, a \
                  run keeps 12,800 trajectories and 25.6 million generated tokens. Lower \
                  the acceptance rate to see the tokens spent on rejected attempts grow as \
                  1/α; on the right, 1,000 demonstrations at 25% acceptance take 4,000 \
                  attempts.",
        controls: &[
            slider("b", "tasks per batch B", 1.0, 256.0, 1.0, "32"),
            slider("g", "rollouts per task G", 1.0, 64.0, 1.0, "4"),
            slider("k", "collection rounds K", 1.0, 1000.0, 1.0, "100"),
            slider("l", "tokens per trajectory L", 50.0, 32000.0, 50.0, "2000"),
            slider("alpha", "acceptance rate α", 0.05, 1.0, 0.05, "1"),
            slider(
                "demos",
                "demonstrations wanted",
                100.0,
                10000.0,
                100.0,
                "1000",
            ),
            slider(
                "demo_alpha",
                "their acceptance rate",
                0.05,
                1.0,
                0.05,
                "0.25",
            ),
        ],
        aspect: 0.42,
        panels: 2,
    };

    fn compute(state: &State) -> Result<Output, FieldError> {
        let schedule = (
            state.count("b")?,
            state.count("g")?,
            state.count("k")?,
            state.number("l")?,
        );
        let acceptance = state.number("alpha")?;
        let demos = state.count("demos")?;
        let demo_acceptance = state.number("demo_alpha")?;
        let run = budget(schedule, acceptance, None)?;
        let for_demos = budget(schedule, demo_acceptance, Some(demos))
            .map_err(|e| FieldError::new("demo_alpha", e.message))?;

        let rounds = schedule.2;
        let mut tokens_by_round = Vec::new();
        for i in 0..=40 {
            let round = (rounds * i / 40).max(1);
            let point = budget(
                (schedule.0, schedule.1, round, schedule.3),
                acceptance,
                None,
            )?;
            tokens_by_round.push((
                round as f64,
                point.generated_tokens,
                point.generated_tokens_with_rejections,
            ));
        }
        let mut attempts_by_acceptance = Vec::new();
        for step in 1..=20 {
            let alpha = f64::from(step) * 0.05;
            let point = budget(schedule, alpha, Some(demos))?;
            attempts_by_acceptance.push((alpha, point.attempts_needed as f64));
        }
        Ok(Output {
            trajectories: run.trajectories as f64,
            tokens: run.generated_tokens,
            attempts: run.attempts_needed as f64,
            tokens_with_rejections: run.generated_tokens_with_rejections,
            demo_attempts: for_demos.attempts_needed as f64,
            demos: demos as f64,
            acceptance: demo_acceptance,
            tokens_by_round,
            attempts_by_acceptance,
        })
    }

    fn readouts(output: &Output) -> Vec<Readout> {
        let id = Self::META.id;
        vec![
            Readout::new(
                id,
                "trajectories",
                "kept trajectories B·G·K",
                output.trajectories,
            ),
            Readout::new(id, "tokens", "generated tokens B·G·K·L", output.tokens),
            Readout::new(id, "attempts", "attempts at acceptance α", output.attempts),
            Readout::new(
                id,
                "tokens-with-rejections",
                "tokens including rejected attempts",
                output.tokens_with_rejections,
            ),
            Readout::new(
                id,
                "demo-attempts",
                format!("attempts for {} demonstrations", output.demos),
                output.demo_attempts,
            ),
        ]
    }

    fn draw<DB: DrawingBackend>(
        output: &Output,
        area: &DrawingArea<DB, Shift>,
        style: &Style,
    ) -> DrawResult<DB> {
        let columns = area.split_evenly(style.grid(2));
        let millions = 1e6;
        let last_round = output.tokens_by_round.last().map_or(1.0, |p| p.0);
        let (_, top) = plot::extent(output.tokens_by_round.iter().map(|p| p.2 / millions));
        let mut left = plot::framed_chart(
            &columns[0],
            "generated tokens (millions): kept (blue), with rejections (orange)",
            style,
            0.0..last_round,
            0.0..top.max(1e-6) * 1.08,
        )?;
        plot::mesh(&mut left, style)
            .x_desc("collection round")
            .draw()?;
        left.draw_series(LineSeries::new(
            output.tokens_by_round.iter().map(|p| (p.0, p.2 / millions)),
            style.line(ORANGE, 2.0),
        ))?;
        left.draw_series(LineSeries::new(
            output.tokens_by_round.iter().map(|p| (p.0, p.1 / millions)),
            style.line(BLUE, 2.0),
        ))?;

        let (_, top) = plot::extent(output.attempts_by_acceptance.iter().map(|p| p.1));
        let mut right = plot::framed_chart(
            &columns[1],
            &format!("attempts for {} accepted demonstrations", output.demos),
            style,
            0.0..1.0,
            0.0..top.max(1.0) * 1.08,
        )?;
        plot::mesh(&mut right, style)
            .x_desc("acceptance rate")
            .draw()?;
        right.draw_series(LineSeries::new(
            output.attempts_by_acceptance.iter().copied(),
            style.line(INK, 2.0),
        ))?;
        right.draw_series([Circle::new(
            (output.acceptance, output.demo_attempts),
            style.px(5.0),
            style.line(BLUE, 2.0),
        )])?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figure::compute_at_query;

    #[test]
    fn article_budget_and_demo_attempts_at_the_defaults() {
        let output = compute_at_query::<RolloutBudget>("").unwrap();
        assert_eq!(output.trajectories, 12_800.0);
        assert_eq!(output.tokens, 25.6e6);
        assert_eq!(output.attempts, 12_800.0);
        assert_eq!(output.demo_attempts, 4_000.0);
    }

    #[test]
    fn rejections_cost_one_over_alpha_in_tokens() {
        let output = compute_at_query::<RolloutBudget>("alpha=0.25").unwrap();
        assert_eq!(output.tokens, 25.6e6);
        assert_eq!(output.tokens_with_rejections, 4.0 * 25.6e6);
        let (_, kept, all) = *output.tokens_by_round.last().unwrap();
        assert_eq!((kept, all), (25.6e6, 102.4e6));
    }
}

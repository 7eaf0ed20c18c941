//! Asynchronous collection with a staleness bound: which rollouts survive a maximum
//! lag, and what that does to throughput.
//!
//! `W` workers generate rollouts with random durations; the learner updates after
//! every `B` completed rollouts; a rollout started under policy version `k` and
//! consumed at version `k'` has lag `k' - k` and is kept only if that is at most
//! `max_lag` (the bounded-staleness rule of asynchronous RL systems such as `AReaL`, Fu et
//! al. 2025). Entry `lag-filter`, one call per bound for the right panel.

use arlbook_core::api::lag_filter;
use arlbook_core::error::FieldError;
use arlbook_core::math::lag::DurationDistribution;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::compute::compute;
use crate::figure::{DrawResult, Figure, Meta, Readout, State, slider};
use crate::plot::{self, BLUE, GREEN, RED, Style};

/// The figure.
pub struct LagFilter;

/// Bounds compared in the right panel.
const BOUNDS: u64 = 8;

/// What the figure computes.
#[derive(Debug, Clone)]
pub struct Output {
    /// The chosen bound.
    pub max_lag: u64,
    /// Completed rollouts per lag.
    pub histogram: Vec<u64>,
    /// Kept fraction at the chosen bound.
    pub kept_fraction: f64,
    /// Kept rollouts per unit time.
    pub throughput: f64,
    /// Rollouts discarded.
    pub discarded: u64,
    /// Mean lag of completed rollouts.
    pub mean_lag: f64,
    /// `(bound, kept fraction)` for bounds `0..=BOUNDS`.
    pub by_bound: Vec<(f64, f64)>,
}

impl Figure for LagFilter {
    type Output = Output;

    const META: Meta = Meta {
        id: "lag",
        title: "Policy lag under asynchronous collection",
        caption: "With more workers than the batch size, many rollouts finish several \
                  updates after they started. Lower the maximum lag to 0 and most of them \
                  are thrown away; raise it and almost all are kept, but they are older. \
                  Fewer workers mean fresher samples and a slower stream.",
        controls: &[
            slider("workers", "workers", 1.0, 64.0, 1.0, "16"),
            slider("batch", "rollouts per update", 1.0, 32.0, 1.0, "8"),
            slider("max_lag", "maximum lag kept", 0.0, 8.0, 1.0, "1"),
            slider("mean", "mean rollout duration", 0.5, 5.0, 0.5, "1"),
            slider("seed", "seed", 0.0, 999.0, 1.0, "7"),
        ],
        aspect: 0.42,
        panels: 2,
    };

    fn compute(state: &State) -> Result<Output, FieldError> {
        let max_lag = state.count("max_lag")? as u64;
        let response = compute::<lag_filter::LagFilter>(&lag_filter::Request {
            workers: state.count("workers")?,
            duration: DurationDistribution::Exponential {
                mean: state.number("mean")?,
            },
            batch_size: state.count("batch")?,
            max_lag,
            updates: 200,
            replicates: 2,
            seed: state.count("seed")? as u64,
        })?;
        // The run is the same for every bound; each bound's kept fraction is read off
        // its lag histogram.
        let by_bound = (0..=BOUNDS)
            .map(|bound| (bound as f64, response.kept_fraction_within(bound)))
            .collect();
        Ok(Output {
            max_lag,
            histogram: response.lag_histogram,
            kept_fraction: response.kept_fraction,
            throughput: response.throughput,
            discarded: response.discarded,
            mean_lag: response.mean_lag,
            by_bound,
        })
    }

    fn readouts(output: &Output) -> Vec<Readout> {
        let id = Self::META.id;
        vec![
            Readout::new(id, "kept", "kept fraction", output.kept_fraction),
            Readout::new(
                id,
                "discard-rate",
                "discard rate",
                1.0 - output.kept_fraction,
            ),
            Readout::new(
                id,
                "throughput",
                "kept rollouts per time unit",
                output.throughput,
            ),
            Readout::new(
                id,
                "discarded",
                "rollouts discarded",
                output.discarded as f64,
            ),
            Readout::new(id, "mean-lag", "mean lag (versions)", output.mean_lag),
        ]
    }

    fn draw<DB: DrawingBackend>(
        output: &Output,
        area: &DrawingArea<DB, Shift>,
        style: &Style,
    ) -> DrawResult<DB> {
        let panels = area.split_evenly(style.grid(2));
        let total: u64 = output.histogram.iter().sum::<u64>().max(1);
        let shares: Vec<f64> = output
            .histogram
            .iter()
            .map(|n| *n as f64 / total as f64)
            .collect();
        let (_, top) = plot::extent(shares.iter().copied());
        let lags = shares.len().max(1) as f64;
        let title_height = plot::title(
            &panels[0],
            "completed rollouts by lag (red: discarded)",
            style,
        )?;
        let mut left = ChartBuilder::on(&panels[0])
            .margin(style.margin())
            .margin_top(style.margin() + title_height)
            .x_label_area_size(style.px(plot::X_LABEL_AREA))
            .y_label_area_size(style.label_area())
            .build_cartesian_2d(-0.5..lags - 0.5, 0.0..top.max(0.01) * 1.1)?;
        plot::mesh(&mut left, style)
            .x_desc("lag (policy versions)")
            .draw()?;
        left.draw_series(shares.iter().enumerate().map(|(lag, share)| {
            let x = lag as f64;
            let color = if lag as u64 <= output.max_lag {
                GREEN
            } else {
                RED
            };
            Rectangle::new(
                [(x - 0.4, 0.0), (x + 0.4, *share)],
                color.mix(0.75).filled(),
            )
        }))?;
        let mut right = plot::framed_chart(
            &panels[1],
            "kept fraction by maximum lag",
            style,
            -0.2..BOUNDS as f64 + 0.2,
            0.0..1.05,
        )?;
        plot::mesh(&mut right, style).x_desc("maximum lag").draw()?;
        right.draw_series(LineSeries::new(
            output.by_bound.iter().copied(),
            style.line(BLUE, 2.0),
        ))?;
        right.draw_series([Circle::new(
            (output.max_lag as f64, output.kept_fraction),
            style.px(5.0),
            BLUE.filled(),
        )])?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query;

    #[test]
    fn a_looser_bound_never_keeps_less() {
        let state = State::from_pairs(
            LagFilter::META.controls,
            &query::parse("workers=16&batch=8"),
            "",
        );
        let output = LagFilter::compute(&state).unwrap();
        for pair in output.by_bound.windows(2) {
            assert!(pair[1].1 >= pair[0].1, "{:?}", output.by_bound);
        }
        let kept = output.histogram.iter().take(2).sum::<u64>() as f64;
        let total = output.histogram.iter().sum::<u64>() as f64;
        assert!((output.kept_fraction - kept / total).abs() < 1e-12);
    }
}

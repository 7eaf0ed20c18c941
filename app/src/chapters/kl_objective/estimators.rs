//! The three per-token KL estimators against the true KL as the policy moves away from
//! the reference.
//!
//! With `x = log pi(a) - log pi_ref(a)` at `a ~ pi`: `k1 = x`, `k2 = x^2 / 2`,
//! `k3 = e^{-x} - 1 + x` (Schulman 2020, "Approximating KL divergence"), each averaged
//! over `N` samples, over 1000 seeded replicates. The policy is the reference's logits
//! plus `shift` times a fixed direction. Entry `kl-estimators`.

use arlbook_core::api::kl_estimators::{Estimator, KlEstimators, Request};
use arlbook_core::error::FieldError;
use arlbook_core::math::distill::log_softmax;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::compute::compute;
use crate::figure::{DrawResult, Figure, Meta, Readout, State, slider};
use crate::plot::{self, BLUE, GREEN, INK, ORANGE, Style};

/// The figure.
pub struct Estimators;

/// Logits of the reference over eight actions.
const REFERENCE_LOGITS: [f64; 8] = [0.0, 0.4, -0.3, 0.8, -0.6, 0.2, -1.0, 0.5];
/// The direction the policy's logits move in.
const DIRECTION: [f64; 8] = [1.2, -0.8, 0.5, -1.0, 0.9, -0.4, 1.5, -0.6];
/// Replicates per point.
const REPLICATES: usize = 1000;
/// Shifts of the left panel's sweep.
const SWEEP_POINTS: usize = 13;
/// Largest shift on the slider and in the sweep.
const MAX_SHIFT: f64 = 3.0;
/// Names and colours of the estimators.
const NAMES: [(&str, RGBColor); 3] = [("k1", BLUE), ("k2", ORANGE), ("k3", GREEN)];

/// One estimator at one shift.
#[derive(Debug, Clone, PartialEq)]
pub struct Spread {
    /// Mean of the replicates.
    pub mean: f64,
    /// Standard deviation of the replicates.
    pub sd: f64,
    /// 5%, 25%, 50%, 75%, 95% quantiles.
    pub quantiles: Vec<f64>,
}

/// The estimators at one shift.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// The shift.
    pub shift: f64,
    /// `KL(pi || pi_ref)`.
    pub true_kl: f64,
    /// k1, k2, k3.
    pub spreads: Vec<Spread>,
    /// Share of replicates with a negative k1 estimate.
    pub k1_negative: f64,
}

/// What the figure computes.
#[derive(Debug, Clone)]
pub struct Output {
    /// Samples per estimate.
    pub samples: usize,
    /// At the slider's shift.
    pub current: Point,
    /// Over the sweep.
    pub sweep: Vec<Point>,
}

fn softmax(logits: &[f64]) -> Vec<f64> {
    log_softmax(logits).iter().map(|l| l.exp()).collect()
}

fn point(shift: f64, samples: usize, seed: usize) -> Result<Point, FieldError> {
    let moved: Vec<f64> = REFERENCE_LOGITS
        .iter()
        .zip(DIRECTION)
        .map(|(z, d)| z + shift * d)
        .collect();
    let response = compute::<KlEstimators>(&Request {
        policy: softmax(&moved),
        reference: softmax(&REFERENCE_LOGITS),
        samples,
        replicates: REPLICATES,
        seed: seed as u64,
    })?;
    // In the order of `NAMES`.
    let spread = |estimator: &Estimator| Spread {
        mean: estimator.mean,
        sd: estimator.variance.max(0.0).sqrt(),
        quantiles: estimator.quantiles.to_vec(),
    };
    Ok(Point {
        shift,
        true_kl: response.true_kl,
        spreads: vec![
            spread(&response.k1),
            spread(&response.k2),
            spread(&response.k3),
        ],
        k1_negative: response.k1_negative_share,
    })
}

impl Figure for Estimators {
    type Output = Output;

    const META: Meta = Meta {
        id: "kl-estimators",
        title: "Three ways to estimate the KL from samples",
        caption: "Each dot is the mean of 1000 estimates from N tokens, each bar ± one \
                  standard deviation; the black line is the true KL. Near the reference k2 \
                  (orange) and k3 (green) are far tighter than k1 (blue), whose estimates \
                  are often negative when N is small. As the policy moves away, k2 drifts \
                  above the true value, and k3, still centred, spreads wider than k1: its \
                  exp(−x) term is large on tokens the policy now rarely picks. Set N to 1 \
                  to see single tokens. (Eight actions: the reference is the softmax of \
                  0, 0.4, −0.3, 0.8, −0.6, 0.2, −1, 0.5; the policy adds shift × \
                  (1.2, −0.8, 0.5, −1, 0.9, −0.4, 1.5, −0.6) to those logits.)",
        controls: &[
            slider(
                "shift",
                "how far the policy moves",
                0.0,
                MAX_SHIFT,
                0.05,
                "1",
            ),
            slider("n", "tokens per estimate N", 1.0, 256.0, 1.0, "16"),
            slider("seed", "seed", 0.0, 999.0, 1.0, "7"),
        ],
        aspect: 0.42,
        panels: 2,
    };

    fn compute(state: &State) -> Result<Output, FieldError> {
        let samples = state.count("n")?;
        let seed = state.count("seed")?;
        let current = point(state.number("shift")?, samples, seed)?;
        let sweep = (0..SWEEP_POINTS)
            .map(|i| {
                point(
                    MAX_SHIFT * i as f64 / (SWEEP_POINTS - 1) as f64,
                    samples,
                    seed,
                )
            })
            .collect::<Result<Vec<_>, FieldError>>()?;
        Ok(Output {
            samples,
            current,
            sweep,
        })
    }

    fn readouts(output: &Output) -> Vec<Readout> {
        let id = Self::META.id;
        let point = &output.current;
        let mut readouts = vec![Readout::new(
            id,
            "true",
            "true KL(π ‖ π_ref), nats",
            point.true_kl,
        )];
        for ((name, _), spread) in NAMES.iter().zip(&point.spreads) {
            readouts.push(Readout::new(
                id,
                &format!("mean-{name}"),
                format!("{name}: mean of the estimates"),
                spread.mean,
            ));
            readouts.push(Readout::new(
                id,
                &format!("sd-{name}"),
                format!("{name}: standard deviation"),
                spread.sd,
            ));
        }
        readouts.push(Readout::new(
            id,
            "k1-negative",
            format!("share of k1 estimates below 0 (N = {})", output.samples),
            point.k1_negative,
        ));
        readouts
    }

    fn draw<DB: DrawingBackend>(
        output: &Output,
        area: &DrawingArea<DB, Shift>,
        style: &Style,
    ) -> DrawResult<DB> {
        let panels = area.split_evenly(style.grid(2));
        let (lo, hi) = plot::extent(output.sweep.iter().flat_map(|p| {
            p.spreads
                .iter()
                .flat_map(|s| [s.mean - s.sd, s.mean + s.sd])
                .chain([p.true_kl, 0.0])
        }));
        let mut chart = plot::framed_chart(
            &panels[0],
            "mean ± sd of each estimator, true KL (black)",
            style,
            -0.1..MAX_SHIFT + 0.1,
            plot::padded(lo, hi),
        )?;
        plot::mesh(&mut chart, style)
            .x_desc("shift of the policy")
            .y_desc("KL estimate, nats")
            .draw()?;
        chart.draw_series(LineSeries::new(
            output.sweep.iter().map(|p| (p.shift, p.true_kl)),
            style.line(INK, 2.0),
        ))?;
        for (k, (_, color)) in NAMES.iter().enumerate() {
            let offset = (k as f64 - 1.0) * 0.06;
            for p in &output.sweep {
                let s = &p.spreads[k];
                let x = p.shift + offset;
                chart.draw_series(LineSeries::new(
                    [(x, s.mean - s.sd), (x, s.mean + s.sd)],
                    style.line(*color, 1.5),
                ))?;
                chart.draw_series([Circle::new((x, s.mean), style.px(3.0), color.filled())])?;
            }
        }
        let current = &output.current;
        chart.draw_series(LineSeries::new(
            [(current.shift, lo), (current.shift, hi)],
            style.line(plot::LIGHT, 1.0),
        ))?;
        let (qlo, qhi) = plot::extent(
            current
                .spreads
                .iter()
                .flat_map(|s| s.quantiles.iter().copied())
                .chain([current.true_kl, 0.0]),
        );
        let mut boxes = plot::framed_chart(
            &panels[1],
            "at this shift: 5-25-50-75-95% of the estimates",
            style,
            -0.5..2.5,
            plot::padded(qlo, qhi),
        )?;
        plot::mesh(&mut boxes, style)
            .x_labels(3)
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 1e-9 && (0.0..3.0).contains(&i) {
                    NAMES[i as usize].0.to_owned()
                } else {
                    String::new()
                }
            })
            .y_desc("estimate, nats")
            .draw()?;
        boxes.draw_series(LineSeries::new(
            [(-0.5, current.true_kl), (2.5, current.true_kl)],
            style.line(INK, 2.0),
        ))?;
        for (k, ((_, color), s)) in NAMES.iter().zip(&current.spreads).enumerate() {
            let x = k as f64;
            let q = &s.quantiles;
            if q.len() < 5 {
                continue;
            }
            boxes.draw_series(LineSeries::new(
                [(x, q[0]), (x, q[4])],
                style.line(*color, 1.5),
            ))?;
            boxes.draw_series([Rectangle::new(
                [(x - 0.25, q[1]), (x + 0.25, q[3])],
                color.mix(0.35).filled(),
            )])?;
            boxes.draw_series(LineSeries::new(
                [(x - 0.25, q[2]), (x + 0.25, q[2])],
                style.line(*color, 2.5),
            ))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figure::compute_at_query;

    #[test]
    fn k1_goes_negative_and_k3_does_not() {
        let output = compute_at_query::<Estimators>("n=1&shift=1").unwrap();
        assert!(
            output.current.k1_negative > 0.1,
            "{}",
            output.current.k1_negative
        );
        assert!(output.current.spreads[2].quantiles[0] >= 0.0);
        // At shift 0 the policies are equal: every estimate is 0.
        let zero = &output.sweep[0];
        assert!(zero.true_kl.abs() < 1e-15);
        assert!(
            zero.spreads
                .iter()
                .all(|s| s.mean.abs() < 1e-12 && s.sd < 1e-9)
        );
    }
}

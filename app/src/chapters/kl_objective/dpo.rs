//! DPO fitted on sampled preference pairs, against the KL-regularised optimum it should
//! reach.
//!
//! Pairs of responses are drawn from `pi_ref`, labelled by Bradley-Terry with the
//! chapter's rewards, and the DPO sigmoid loss is minimised from the reference; with
//! infinitely many pairs the minimiser is `pi* ∝ pi_ref exp(r / beta)` (Rafailov et al.
//! 2023, section 4). Entry `dpo` with `fit`.

use arlbook_core::api::dpo::{self as entry, FitRequest, FitResponse, Request};
use arlbook_core::error::FieldError;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::optimum::rewards;
use super::{REFERENCE, response_bars};
use crate::compute::compute;
use crate::figure::{DrawResult, Figure, Meta, Readout, State, slider};
use crate::plot::{self, BLUE, INK, LIGHT, ORANGE, Style};

/// The figure.
pub struct Dpo;

/// Pair counts of the convergence curve.
const SWEEP: [u64; 11] = [
    10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000,
];

/// Smallest KL the log axis shows.
const KL_FLOOR: f64 = 1e-5;

/// What the figure computes.
#[derive(Debug, Clone)]
pub struct Output {
    /// Pairs drawn.
    pub pairs: u64,
    /// Pairs of two distinct responses among them.
    pub pairs_used: f64,
    /// The policy fitted on those pairs.
    pub fitted: Vec<f64>,
    /// The KL-regularised optimum.
    pub optimum: Vec<f64>,
    /// `KL(fit || optimum)`.
    pub kl: f64,
    /// `KL(expected-loss fit || optimum)`: DPO with infinitely many pairs.
    pub kl_expected: f64,
    /// Whether the sampled fit converged.
    pub converged: bool,
    /// `(pairs, KL(fit || optimum))` over [`SWEEP`].
    pub curve: Vec<(f64, f64)>,
}

/// The fit on `pairs` sampled pairs with the convergence curve over [`SWEEP`] (one
/// sample of the largest count gives every point), or on the expected loss.
fn fit(state: &State, pairs: Option<u64>) -> Result<FitResponse, FieldError> {
    let fit = match pairs {
        Some(n) => FitRequest {
            pairs: Some(n as usize),
            seed: state.count("seed")? as u64,
            curve: SWEEP.iter().map(|&n| n as usize).collect(),
            ..FitRequest::default()
        },
        None => FitRequest::default(),
    };
    let response = compute::<entry::Dpo>(&Request {
        reference: REFERENCE.to_vec(),
        beta: state.number("beta")?,
        rewards: Some(rewards(1.0)),
        fit: Some(fit),
        ..Request::default()
    })?;
    response
        .fit
        .ok_or_else(|| FieldError::new("(response).fit", "missing, though a fit was asked for"))
}

impl Figure for Dpo {
    type Output = Output;

    const META: Meta = Meta {
        id: "dpo",
        title: "DPO from preference pairs reaches the same optimum",
        caption: "Pairs of responses are drawn from the reference and labelled by the true \
                  rewards (F best). With 300 pairs the DPO fit (orange) is still far from the \
                  optimum (blue), about 0.8 nats: E, rarely compared, won most of its few \
                  pairs and is pushed past D and F. The curve on the right is the KL from \
                  the fit to the optimum as pairs accumulate; it falls below 0.01 by 20 000 \
                  pairs, and the fit on the expected loss (infinitely many pairs) is exact.",
        controls: &[
            slider("beta", "β", 0.05, 1.0, 0.05, "0.2"),
            slider("pairs", "preference pairs", 10.0, 20_000.0, 10.0, "300"),
            slider("seed", "seed", 0.0, 999.0, 1.0, "7"),
        ],
        aspect: 0.42,
        panels: 2,
    };

    fn compute(state: &State) -> Result<Output, FieldError> {
        let pairs = state.count("pairs")? as u64;
        let sampled = fit(state, Some(pairs))?;
        let expected = fit(state, None)?;
        let curve = sampled
            .curve
            .iter()
            .map(|point| (point.pairs as f64, point.kl_to_optimum))
            .collect();
        let pairs_used = sampled.fit.pairs_used.ok_or_else(|| {
            FieldError::new(
                "(response).fit.pairs_used",
                "missing, though pairs were sampled",
            )
        })?;
        Ok(Output {
            pairs,
            pairs_used: pairs_used as f64,
            fitted: sampled.fit.policy,
            optimum: sampled.optimum,
            kl: sampled.kl_to_optimum,
            kl_expected: expected.kl_to_optimum,
            converged: sampled.fit.converged,
            curve,
        })
    }

    fn readouts(output: &Output) -> Vec<Readout> {
        let id = Self::META.id;
        vec![
            Readout::new(
                id,
                "kl",
                format!("KL(fit ‖ π*) from {} pairs", output.pairs),
                output.kl,
            ),
            Readout::new(
                id,
                "pairs-used",
                "pairs of two different responses",
                output.pairs_used,
            ),
            Readout::new(id, "p-best-fit", "fit: π(F)", output.fitted[5]),
            Readout::new(id, "p-best-optimum", "optimum: π*(F)", output.optimum[5]),
            Readout::new(
                id,
                "converged",
                "fit converged (1 yes, 0 separable pairs)",
                f64::from(u8::from(output.converged)),
            ),
            Readout::new(
                id,
                "kl-expected",
                "KL(fit ‖ π*) with infinitely many pairs",
                output.kl_expected,
            ),
        ]
    }

    fn draw<DB: DrawingBackend>(
        output: &Output,
        area: &DrawingArea<DB, Shift>,
        style: &Style,
    ) -> DrawResult<DB> {
        let panels = area.split_evenly(style.grid(2));
        response_bars(
            &panels[0],
            "π_ref (grey), optimum π* (blue), DPO fit (orange)",
            style,
            &[
                (&REFERENCE, LIGHT),
                (&output.optimum, BLUE),
                (&output.fitted, ORANGE),
            ],
        )?;
        let log = |kl: f64| kl.max(KL_FLOOR).log10();
        let (_, high) = plot::extent(
            output
                .curve
                .iter()
                .map(|p| log(p.1))
                .chain([log(output.kl)]),
        );
        // Ticks such as `1e-3` are wider than the standard label area allows beside the
        // axis title.
        let mut chart = plot::framed_chart_with_labels(
            &panels[1],
            "KL(fit ‖ π*) as pairs accumulate (log-log)",
            style,
            0.9..4.4,
            KL_FLOOR.log10()..high.max(-1.0) + 0.3,
            style.px(54.0),
        )?;
        // Ticks at whole powers of ten only, written out (10, 100) or as 1e-3.
        let power = |v: &f64| {
            let exponent = v.round();
            if (v - exponent).abs() > 1e-9 {
                String::new()
            } else if exponent >= 0.0 {
                plot::format_number(10f64.powf(exponent), plot::DECIMALS)
            } else {
                format!("1e{exponent}")
            }
        };
        plot::mesh(&mut chart, style)
            .x_label_formatter(&power)
            .y_label_formatter(&power)
            .x_desc("preference pairs")
            .y_desc("KL, nats")
            .draw()?;
        chart.draw_series(LineSeries::new(
            output.curve.iter().map(|(n, kl)| (n.log10(), log(*kl))),
            style.line(INK, 2.0),
        ))?;
        chart.draw_series(
            output
                .curve
                .iter()
                .map(|(n, kl)| Circle::new((n.log10(), log(*kl)), style.px(2.5), INK.filled())),
        )?;
        chart.draw_series([Circle::new(
            ((output.pairs as f64).log10(), log(output.kl)),
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
    fn more_pairs_bring_the_fit_to_the_optimum() {
        let output = compute_at_query::<Dpo>("").unwrap();
        assert!(output.kl_expected < 1e-12, "{}", output.kl_expected);
        let first = output.curve.first().unwrap().1;
        let last = output.curve.last().unwrap().1;
        assert!(last < first / 10.0, "{:?}", output.curve);
        assert!(output.pairs_used <= output.pairs as f64);
    }
}

//! Evaluation: the unbiased pass@k estimator against the plug-in, and how wide a
//! success rate's interval is.
//!
//! `pass@k = 1 - C(n - c, k) / C(n, k)` (Chen et al. 2021, section 3.1) against the
//! plug-in `1 - (1 - c/n)^k`; the binomial standard error `sqrt(p (1 - p) / n)` with the
//! normal 95% half-width `1.96 se`. Entries `pass-at-k` and `binomial-se`.

use arlbook_core::api::{OneOrMany, binomial_se, pass_at_k};
use arlbook_core::error::FieldError;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::compute::compute;
use crate::figure::{DrawResult, Figure, Meta, Readout, State, slider};
use crate::plot::{self, BLUE, INK, ORANGE, Style};

/// The figure.
pub struct PassAtK;

/// What the figure computes.
#[derive(Debug, Clone)]
pub struct Output {
    /// Candidates `n`.
    pub n: u64,
    /// Passing candidates, at most `n`.
    pub c: u64,
    /// Chosen `k`, at most `n`.
    pub k: u64,
    /// Whether the sliders asked for a `c` or `k` above `n` (and got `n`).
    pub capped: bool,
    /// `(k, unbiased, plug-in)` for `k = 1 ..= n`.
    pub curve: Vec<(f64, f64, f64)>,
    /// The unbiased estimate at `k`.
    pub estimate: f64,
    /// The plug-in value at `k`.
    pub plug_in: f64,
    /// Success rate of the interval panel.
    pub rate: f64,
    /// Tasks of the interval panel.
    pub tasks: u64,
    /// Standard error at `(rate, tasks)`.
    pub se: f64,
    /// 95% half-width at `(rate, tasks)`.
    pub half_width: f64,
    /// `(tasks, half-width)` over a range of task counts.
    pub half_widths: Vec<(f64, f64)>,
}

impl Figure for PassAtK {
    type Output = Output;

    const META: Meta = Meta {
        id: "pass-at-k",
        title: "pass@k and the width of an evaluation",
        caption: "With n = 10 candidates of which c = 2 pass, pass@3 is 0.533 while the \
                  plug-in formula says 0.488: the gap is largest for small n. On the right, \
                  200 tasks at a 50% success rate give a 95% half-width of about 0.069 — \
                  doubling the precision takes four times the tasks.",
        controls: &[
            slider("n", "candidates n", 1.0, 50.0, 1.0, "10"),
            slider("c", "passing c", 0.0, 50.0, 1.0, "2"),
            slider("k", "k", 1.0, 50.0, 1.0, "3"),
            slider("rate", "success rate", 0.0, 1.0, 0.01, "0.5"),
            slider("tasks", "tasks evaluated", 10.0, 2000.0, 10.0, "200"),
        ],
        aspect: 0.42,
        panels: 2,
    };

    fn compute(state: &State) -> Result<Output, FieldError> {
        let n = state.count("n")? as u64;
        // The sliders for c and k reach 50 whatever n is; the figure reads them as at
        // most n (no more than n candidates can pass, or be drawn) and says so.
        let (c_asked, k_asked) = (state.count("c")? as u64, state.count("k")? as u64);
        let (c, k) = (c_asked.min(n), k_asked.min(n));
        let mut curve = Vec::with_capacity(n as usize);
        let (mut estimate, mut plug_in) = (0.0, 0.0);
        for kk in 1..=n {
            let response = compute::<pass_at_k::PassAtK>(&pass_at_k::Request {
                n: OneOrMany::One(n),
                c: OneOrMany::One(c),
                k: kk,
                resamples: 0,
                ..pass_at_k::Request::default()
            })?;
            let (e, p) = (response.estimate, response.plug_in);
            if kk == k {
                (estimate, plug_in) = (e, p);
            }
            curve.push((kk as f64, e, p));
        }
        let rate = state.number("rate")?;
        let tasks = state.count("tasks")? as u64;
        let se = |n: u64| compute::<binomial_se::BinomialSe>(&binomial_se::Request { p: rate, n });
        let point = se(tasks)?;
        let mut half_widths = Vec::new();
        for t in (10..=2000u64).step_by(10) {
            half_widths.push((t as f64, se(t)?.half_width_95));
        }
        Ok(Output {
            n,
            c,
            k,
            capped: c_asked > n || k_asked > n,
            curve,
            estimate,
            plug_in,
            rate,
            tasks,
            se: point.se,
            half_width: point.half_width_95,
            half_widths,
        })
    }

    fn readouts(output: &Output) -> Vec<Readout> {
        let id = Self::META.id;
        vec![
            Readout::new(
                id,
                "estimate",
                format!("pass@{} (unbiased)", output.k),
                output.estimate,
            ),
            Readout::new(
                id,
                "plug-in",
                format!("plug-in 1 − (1 − c/n){}", plot::superscript(output.k)),
                output.plug_in,
            ),
            Readout::new(
                id,
                "se",
                format!("standard error at {} tasks", output.tasks),
                output.se,
            ),
            Readout::new(
                id,
                "half-width",
                "95% half-width, 1.96 · se",
                output.half_width,
            ),
        ]
    }

    fn draw<DB: DrawingBackend>(
        output: &Output,
        area: &DrawingArea<DB, Shift>,
        style: &Style,
    ) -> DrawResult<DB> {
        let columns = area.split_evenly(style.grid(2));
        let n = output.curve.len().max(1) as f64;
        let title = if output.capped {
            format!(
                "pass@k, c and k capped at n = {}: unbiased (blue), plug-in (orange)",
                output.n
            )
        } else {
            "pass@k: unbiased (blue) vs plug-in (orange)".to_owned()
        };
        let mut left = plot::framed_chart(&columns[0], &title, style, 0.5..n + 0.5, 0.0..1.05)?;
        plot::mesh(&mut left, style).x_desc("k").draw()?;
        left.draw_series(LineSeries::new(
            output.curve.iter().map(|(k, e, _)| (*k, *e)),
            style.line(BLUE, 2.0),
        ))?;
        left.draw_series(LineSeries::new(
            output.curve.iter().map(|(k, _, p)| (*k, *p)),
            style.line(ORANGE, 2.0),
        ))?;
        let k = output.k as f64;
        left.draw_series([
            Circle::new((k, output.estimate), style.px(4.5), BLUE.filled()),
            Circle::new((k, output.plug_in), style.px(4.5), ORANGE.filled()),
        ])?;

        let (_, top) = plot::extent(output.half_widths.iter().map(|(_, h)| *h));
        let mut right = plot::framed_chart(
            &columns[1],
            &format!(
                "95% half-width at success rate {}",
                plot::format_number(output.rate, plot::DECIMALS)
            ),
            style,
            0.0..2000.0,
            0.0..top.max(0.01) * 1.1,
        )?;
        plot::mesh(&mut right, style)
            .x_desc("tasks")
            .x_labels(5)
            .draw()?;
        right.draw_series(LineSeries::new(
            output.half_widths.iter().copied(),
            style.line(INK, 2.0),
        ))?;
        right.draw_series([Circle::new(
            (output.tasks as f64, output.half_width),
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

    fn compute_at(query_text: &str) -> Result<Output, FieldError> {
        compute_at_query::<PassAtK>(query_text)
    }

    #[test]
    fn article_numbers_n10_c2_k3_and_200_tasks() {
        let output = compute_at("").unwrap();
        assert!((output.estimate - (1.0 - 56.0 / 120.0)).abs() < 1e-12);
        assert!((output.plug_in - (1.0 - 0.8_f64.powi(3))).abs() < 1e-12);
        assert!((output.se - (0.25_f64 / 200.0).sqrt()).abs() < 1e-12);
        assert!((output.half_width - 0.0693).abs() < 1e-4);
    }

    #[test]
    fn c_or_k_above_n_reads_as_n() {
        let output = compute_at("n=5&c=6&k=9").unwrap();
        assert_eq!((output.n, output.c, output.k), (5, 5, 5));
        assert!(output.capped);
        assert_eq!(output.estimate, 1.0);
        let output = compute_at("n=5&c=2&k=5").unwrap();
        assert!(!output.capped);
        // Every candidate drawn: one of the two passing ones is among them.
        assert_eq!(output.estimate, 1.0);
    }
}

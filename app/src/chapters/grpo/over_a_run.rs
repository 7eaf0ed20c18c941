//! GRPO over a run: a tabular policy on a toy token task trained for hundreds of steps
//! in the page, eight seeds at once, so that what a loss reduction, a clip width or the
//! KL anchor does to a whole run can be watched: response length, entropy, KL.
//!
//! The task, the policy and one step's update are `core::math::grpo_toy` (the
//! `grpo-toy` entry's math): responses over tokens `0..6` (0 ends a response) of at
//! most 8 tokens, reward 1 when the response contains the tokens `2, 3` in a row; each
//! step samples `G` responses in each of `B` groups, takes group advantages
//! `(r_i - mean) / (std + eps)`, and updates the logit table for `E` epochs on the
//! clipped surrogate `min(rho A, clip(rho, 1 - eps_low, 1 + eps_high) A)` with the
//! chosen reduction and `beta` times a KL estimate against the start.
//!
//! The figure does not call the entry in one piece: a run of 200 steps over eight seeds
//! takes longer than a frame, so it keeps the runs of the current settings
//! ([`core::math::grpo_toy::ToyRun`]) and advances them a few steps at a time, within
//! the page's frame budget ([`Figure::compute_within`]); exported and natively it runs
//! them to the end. The request is the entry's, and a test checks the curves equal
//! the entry's answer.

use std::cell::RefCell;

use arlbook_core::api::grpo_toy;
use arlbook_core::error::FieldError;
use arlbook_core::math::grpo_toy::{Curves, OptimizerKind, ToyRun};
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::figure::{
    DrawResult, Figure, Meta, Readout, State, choice, playable_slider, slider, toggle,
};
use crate::plot::{self, BLUE, LIGHT, RED, Style};

/// The figure.
pub struct GrpoRun;

/// Runs trained side by side for the bands (streams `0..RUNS` of the seed).
pub const RUNS: usize = 8;

/// The reductions offered, with the API's names.
const REDUCTIONS: &[&str] = &[
    "token-mean",
    "seq-mean-token-mean",
    "seq-mean-token-sum",
    "seq-mean-token-sum-norm",
    "dr_grpo",
];

/// Picks one curve out of a run's curves.
type CurveOf = fn(&Curves) -> &[f64];

/// One run as far as it is shown.
#[derive(Debug, Clone)]
pub struct RunPart {
    /// Its curves, one value per step shown.
    pub curves: Curves,
    /// The step its update left `f64` at, and why (its curves end before it).
    pub diverged: Option<(usize, String)>,
}

/// What the figure computes.
#[derive(Debug, Clone)]
pub struct Output {
    /// Steps of a whole run.
    pub steps: usize,
    /// The last step shown (the `shown` control's share of `steps`, at least 1).
    pub shown: usize,
    /// Whether every run has reached `shown` (or diverged before it).
    pub complete: bool,
    /// The runs, each cut at `shown`.
    pub runs: Vec<RunPart>,
    /// The learning rate used.
    pub learning_rate: f64,
}

/// One curve over the runs at each step: `(step, mean, min, max)` over the runs that
/// reached it (steps count from 1).
pub fn band(runs: &[RunPart], curve: impl Fn(&Curves) -> &[f64]) -> Vec<(f64, f64, f64, f64)> {
    let longest = runs
        .iter()
        .map(|r| curve(&r.curves).len())
        .max()
        .unwrap_or(0);
    (0..longest)
        .map(|i| {
            let values: Vec<f64> = runs
                .iter()
                .filter_map(|r| curve(&r.curves).get(i).copied())
                .collect();
            let mean = values.iter().sum::<f64>() / values.len() as f64;
            let (lo, hi) = plot::extent(values.iter().copied());
            ((i + 1) as f64, mean, lo, hi)
        })
        .collect()
}

impl Output {
    /// The mean over the runs of `curve` at the last step any run has, and that step
    /// (0 and 0 when no run finished a step).
    pub fn last(&self, curve: impl Fn(&Curves) -> &[f64]) -> (usize, f64) {
        let steps = self
            .runs
            .iter()
            .map(|r| curve(&r.curves).len())
            .max()
            .unwrap_or(0);
        let at_last: Vec<f64> = self
            .runs
            .iter()
            .filter_map(|r| curve(&r.curves).get(steps.wrapping_sub(1)).copied())
            .collect();
        if at_last.is_empty() {
            (0, 0.0)
        } else {
            (steps, at_last.iter().sum::<f64>() / at_last.len() as f64)
        }
    }

    /// Runs that diverged.
    pub fn diverged(&self) -> usize {
        self.runs.iter().filter(|r| r.diverged.is_some()).count()
    }
}

/// The entry's request for a state (its keys are the request's fields, less `shown`).
pub fn request(state: &State) -> Result<grpo_toy::Request, FieldError> {
    Ok(grpo_toy::Request {
        favoured_logit: state.number("favoured_logit")?,
        groups: state.count("groups")?,
        group_size: state.count("group_size")?,
        steps: state.count("steps")?,
        epochs: state.count("epochs")?,
        optimizer: OptimizerKind::Sgd,
        learning_rate: Some(state.number("learning_rate")?),
        eps_low: state.number("eps_low")?,
        eps_high: Some(state.number("eps_high")?),
        reduction: state.choice("reduction")?,
        beta: state.number("beta")?,
        kl_estimator: state.choice("kl_estimator")?,
        dynamic_sampling: state.flag("dynamic_sampling"),
        seed: state.count("seed")? as u64,
        seeds: RUNS,
        ..grpo_toy::Request::default()
    })
}

/// A run being trained, and where it stopped if it diverged.
struct Slot {
    run: ToyRun,
    diverged: Option<(usize, String)>,
}

impl Slot {
    fn done_at(&self, target: usize) -> bool {
        self.diverged.is_some() || self.run.steps_done() >= target
    }
}

/// The runs of the latest settings, kept between frames: the request's JSON and one
/// slot per stream.
struct Kept {
    key: String,
    slots: Vec<Slot>,
}

thread_local! {
    static KEPT: RefCell<Option<Kept>> = const { RefCell::new(None) };
}

/// Advances the runs of `request` to step `target` (one step of each run in turn, so
/// the bands grow together) until they are there or `out_of_time()` (one round only
/// when the settings are new); returns each run cut at `target` and whether all are
/// there.
fn advance(
    request: &grpo_toy::Request,
    target: usize,
    out_of_time: &dyn Fn() -> bool,
) -> Result<(Vec<RunPart>, bool), FieldError> {
    let key =
        serde_json::to_string(request).map_err(|e| FieldError::new("state", e.to_string()))?;
    KEPT.with(|kept| {
        let mut kept = kept.borrow_mut();
        // New settings show their first round at once (the reader sees the change in
        // the next frame); later calls go on until the frame's budget is spent. Every
        // call that has steps left takes at least one round, so the run always moves.
        let fresh = kept.as_ref().is_none_or(|k| k.key != key);
        if fresh {
            let settings = request.settings();
            let slots = (0..RUNS as u64)
                .map(|stream| {
                    ToyRun::new(&settings, request.seed, stream).map(|run| Slot {
                        run,
                        diverged: None,
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            *kept = Some(Kept { key, slots });
        }
        let slots = &mut kept.as_mut().expect("kept above").slots;
        while !slots.iter().all(|s| s.done_at(target)) {
            for slot in slots.iter_mut().filter(|s| !s.done_at(target)) {
                let step = slot.run.steps_done();
                if let Err(error) = slot.run.step() {
                    slot.diverged = Some((step + 1, error.message));
                }
            }
            if fresh || out_of_time() {
                break;
            }
        }
        let complete = slots.iter().all(|s| s.done_at(target));
        let parts = slots
            .iter()
            .map(|slot| RunPart {
                curves: slot.run.curves().truncated(target),
                diverged: slot.diverged.clone(),
            })
            .collect();
        Ok((parts, complete))
    })
}

impl Figure for GrpoRun {
    type Output = Output;

    const META: Meta = Meta {
        id: "grpo-run",
        title: "GRPO over a run: length, entropy and KL",
        caption: "Eight runs train in the page (line: their mean, band: lowest to \
                  highest). Reduction seq-mean-token-mean: answers shorten from about 6 \
                  tokens to about 4. Start bias 3: with ε_high = ε_low = 0.2 the entropy \
                  ends near 0.4 nats, with ε_high = 0.4 near 0.7. β = 0.2: the KL to the \
                  start settles near 0.36 instead of about 1, the pass rate near 0.85.",
        controls: &[
            choice("reduction", "reduction", REDUCTIONS, "token-mean"),
            slider("eps_low", "ε_low", 0.0, 0.5, 0.01, "0.2"),
            slider("eps_high", "ε_high", 0.0, 1.0, 0.01, "0.2"),
            slider("group_size", "group size G", 2.0, 16.0, 1.0, "8"),
            slider("groups", "groups per step B", 1.0, 8.0, 1.0, "4"),
            slider("epochs", "epochs E", 1.0, 8.0, 1.0, "8"),
            slider("learning_rate", "learning rate", 1.0, 40.0, 1.0, "10"),
            slider("beta", "β (KL)", 0.0, 1.0, 0.01, "0"),
            choice("kl_estimator", "KL estimator", &["k1", "k2", "k3"], "k3"),
            toggle("dynamic_sampling", "dynamic sampling", "0"),
            slider("favoured_logit", "start bias (token 1)", 0.0, 4.0, 0.5, "0"),
            slider("steps", "steps", 20.0, 400.0, 20.0, "200"),
            slider("seed", "seed", 0.0, 99.0, 1.0, "0"),
            playable_slider("shown", "run shown (%)", 1.0, 100.0, 1.0, "100"),
        ],
        aspect: 0.62,
        panels: 4,
    };

    fn compute(state: &State) -> Result<Output, FieldError> {
        // New settings stop after one round; the second call runs to the end.
        loop {
            let output = Self::compute_within(state, &|| false)?;
            if output.complete {
                return Ok(output);
            }
        }
    }

    fn compute_within(state: &State, out_of_time: &dyn Fn() -> bool) -> Result<Output, FieldError> {
        // The fields are checked where the runs start (`ToyRun::new`); settings that
        // fail are never kept, so every call with them checks them again. Not the
        // entry's work budget: the page trains in pieces, and the controls' ranges
        // bound a whole run (about two budgets at most, see the tests).
        let request = request(state)?;
        let share = state.number("shown")?.clamp(1.0, 100.0);
        let shown =
            ((request.steps as f64 * share / 100.0).ceil() as usize).clamp(1, request.steps);
        let (runs, complete) = advance(&request, shown, out_of_time)?;
        Ok(Output {
            steps: request.steps,
            shown,
            complete,
            runs,
            learning_rate: request.settings().learning_rate,
        })
    }

    fn complete(output: &Output) -> bool {
        output.complete
    }

    fn readouts(output: &Output) -> Vec<Readout> {
        let id = Self::META.id;
        let (step, pass) = output.last(|c| &c.pass_rate);
        let at = |curve: CurveOf| output.last(curve).1;
        vec![
            Readout::new(id, "step", "step shown", step as f64),
            Readout::new(id, "pass-rate", "pass rate (mean of runs)", pass),
            Readout::new(id, "length", "mean length (tokens)", at(|c| &c.length)),
            Readout::new(
                id,
                "entropy",
                "entropy (nats per token)",
                at(|c| &c.entropy),
            ),
            Readout::new(id, "kl", "KL to the start (nats per token)", at(|c| &c.kl)),
            Readout::new(id, "clip-low", "tokens clipped low", at(|c| &c.clip_low)),
            Readout::new(id, "clip-high", "tokens clipped high", at(|c| &c.clip_high)),
            Readout::new(
                id,
                "effective-groups",
                "groups with a signal",
                at(|c| &c.effective_groups),
            ),
            Readout::new(
                id,
                "diverged",
                format!("runs diverged (of {RUNS})"),
                output.diverged() as f64,
            ),
        ]
    }

    fn draw<DB: DrawingBackend>(
        output: &Output,
        area: &DrawingArea<DB, Shift>,
        style: &Style,
    ) -> DrawResult<DB> {
        let panels = if style.narrow {
            area.split_evenly(style.grid(4))
        } else {
            area.split_evenly((2, 2))
        };
        let progress = if output.complete {
            String::new()
        } else {
            let (step, _) = output.last(|c| &c.pass_rate);
            format!(" (training: step {step} of {})", output.shown)
        };
        let kl_top = band(&output.runs, |c| &c.kl)
            .iter()
            .map(|&(_, _, _, hi)| hi)
            .fold(0.0_f64, f64::max);
        let charts: [(String, CurveOf, f64); 4] = [
            (format!("pass rate{progress}"), |c| &c.pass_rate, 1.05),
            ("mean length (tokens)".to_owned(), |c| &c.length, 8.5),
            (
                "entropy (nats per token)".to_owned(),
                |c| &c.entropy,
                6f64.ln() * 1.05,
            ),
            (
                "KL to the start (nats per token)".to_owned(),
                |c| &c.kl,
                (kl_top * 1.1).max(0.05),
            ),
        ];
        let steps = output.steps as f64;
        for (panel, (title, curve, top)) in panels.iter().zip(charts) {
            let title = if output.diverged() > 0 && top == 1.05 {
                format!("{title}, {} of {RUNS} runs diverged", output.diverged())
            } else {
                title
            };
            let mut chart = plot::framed_chart(panel, &title, style, 0.0..steps + 1.0, 0.0..top)?;
            plot::mesh(&mut chart, style).x_desc("step").draw()?;
            let points = band(&output.runs, curve);
            if points.is_empty() {
                continue;
            }
            let mut outline: Vec<(f64, f64)> =
                points.iter().map(|&(x, _, _, hi)| (x, hi)).collect();
            outline.extend(points.iter().rev().map(|&(x, _, lo, _)| (x, lo)));
            chart.draw_series([Polygon::new(outline, plot::tint(BLUE, 0.22).filled())])?;
            chart.draw_series(LineSeries::new(
                points.iter().map(|&(x, mean, _, _)| (x, mean)),
                style.line(BLUE, 2.0),
            ))?;
            if output.shown < output.steps {
                let x = output.shown as f64;
                chart.draw_series(LineSeries::new(
                    [(x, 0.0), (x, top)],
                    style.line(LIGHT, 1.0),
                ))?;
            }
            for run in output.runs.iter().filter(|r| r.diverged.is_some()) {
                if let Some(&y) = curve(&run.curves).last() {
                    let x = curve(&run.curves).len() as f64;
                    chart.draw_series([Cross::new(
                        (x, y.min(top)),
                        style.px(4.0),
                        style.line(RED, 2.0),
                    )])?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;

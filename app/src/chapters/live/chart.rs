//! The live-training chart: the SFT loss across the top, then six GRPO panels (success
//! and reward, effective group fraction, clip fractions, KL, entropy, generated
//! length), each over the step. A run whose rollouts came from workers on a broker
//! (`arlbook train --nats`) also gets a panel of each worker's rollouts per second,
//! beside the SFT loss (under the others when stacked). Generic over plotters' `DrawingBackend`, like the
//! figures: the page draws it on a canvas, tests render it to SVG.

use std::ops::Range;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::metrics::{Row, Run, Stage};
use crate::figure::DrawResult;
use crate::plot::{self, BLUE, GREEN, MUTED, ORANGE, PURPLE, RED, SHADE, Style};

/// Height over width of the wide layout: the SFT strip and two rows of three panels.
const WIDE_ASPECT: f64 = 0.8;
/// Share of the wide layout's height taken by the SFT strip.
const SFT_SHARE: f64 = 0.3;
/// Panels in the stacked (narrow) layout, one under the other.
const PANELS: usize = 7;
/// Height over width of one stacked panel.
const STACKED_PANEL_ASPECT: f64 = 0.6;
/// Up to this many points per series, each point is marked with a dot.
const MAX_DOTTED: usize = 40;

/// Height divided by width of the chart in the wide or the stacked layout.
pub fn aspect(narrow: bool) -> f64 {
    if narrow {
        STACKED_PANEL_ASPECT * PANELS as f64
    } else {
        WIDE_ASPECT
    }
}

/// How a panel chooses its vertical range.
#[derive(Debug, Clone, Copy)]
enum Scale {
    /// At least `[0, 1]` (rates and fractions).
    Unit,
    /// From 0 to the largest value, at least to `min_top`.
    FromZero(f64),
    /// The values' extent, padded.
    Extent,
}

/// One line of a panel.
struct Line {
    label: String,
    color: RGBColor,
    points: Vec<(f64, f64)>,
    /// Dots only, no line (sparse rows such as validation).
    dots_only: bool,
    /// Line width in CSS pixels (wider lines go first, so equal series both show).
    width: f64,
}

impl Line {
    fn of(
        run: &Run,
        stage: Stage,
        label: &'static str,
        color: RGBColor,
        field: fn(&Row) -> Option<f64>,
    ) -> Self {
        Self {
            label: label.to_owned(),
            color,
            points: run.series(stage, field),
            dots_only: stage == Stage::Validation,
            width: 2.0,
        }
    }

    /// The same line drawn `width` CSS pixels wide.
    fn wide(mut self, width: f64) -> Self {
        self.width = width;
        self
    }
}

/// The vertical range of a panel showing `lines`.
fn y_range(lines: &[Line], scale: Scale) -> Range<f64> {
    let (lo, hi) = plot::extent(lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)));
    match scale {
        Scale::Unit => plot::padded(lo.min(0.0), hi.max(1.0)),
        Scale::FromZero(min_top) => plot::padded(lo.min(0.0), hi.max(min_top)),
        Scale::Extent => plot::padded(lo, hi),
    }
}

/// Share of a panel's width and height the legend's corner is taken to cover.
const LEGEND_CORNER: (f64, f64) = (0.5, 0.45);

/// Where a panel's legend goes, and the vertical range that leaves room for it: the
/// corner of the plotting area with no point of `lines` under it (a corner
/// `LEGEND_CORNER` of the ranges wide and tall; upper right first, then upper left,
/// lower right, lower left). When every corner has points, the range grows upwards
/// until the top `LEGEND_CORNER.1` of it is above every point, and the legend goes
/// upper right, so it never hides data.
fn legend_place(
    lines: &[Line],
    x: &Range<f64>,
    y: Range<f64>,
) -> (SeriesLabelPosition, Range<f64>) {
    let corner = legend_corner(lines, x, &y);
    if let Some(corner) = corner {
        return (corner, y);
    }
    let (_, top) = plot::extent(lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)));
    // The top share of [start, end] lies above `top` once
    // end - share (end - start) >= top.
    let share = LEGEND_CORNER.1;
    let end = (top - share * y.start) / (1.0 - share);
    (SeriesLabelPosition::UpperRight, y.start..end.max(y.end))
}

/// The first corner of the plotting area (upper right, upper left, lower right, lower
/// left) with no point of `lines` under it; `None` when every corner has points.
fn legend_corner(lines: &[Line], x: &Range<f64>, y: &Range<f64>) -> Option<SeriesLabelPosition> {
    let (width, height) = (x.end - x.start, y.end - y.start);
    let right = x.end - LEGEND_CORNER.0 * width;
    let left = x.start + LEGEND_CORNER.0 * width;
    let top = y.end - LEGEND_CORNER.1 * height;
    let bottom = y.start + LEGEND_CORNER.1 * height;
    let empty = |in_x: &dyn Fn(f64) -> bool, in_y: &dyn Fn(f64) -> bool| {
        !lines
            .iter()
            .flat_map(|l| &l.points)
            .any(|&(px, py)| in_x(px) && in_y(py))
    };
    if empty(&|px| px >= right, &|py| py >= top) {
        Some(SeriesLabelPosition::UpperRight)
    } else if empty(&|px| px <= left, &|py| py >= top) {
        Some(SeriesLabelPosition::UpperLeft)
    } else if empty(&|px| px >= right, &|py| py <= bottom) {
        Some(SeriesLabelPosition::LowerRight)
    } else if empty(&|px| px <= left, &|py| py <= bottom) {
        Some(SeriesLabelPosition::LowerLeft)
    } else {
        None
    }
}

/// Draws one panel: its title, axes over the steps present, the lines, and a legend
/// when there is more than one line; without any point (no rows yet, or rows without
/// these fields, as when a GRPO step had no mixed group to learn from), a note.
fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    lines: &[Line],
    scale: Scale,
    style: &Style,
) -> DrawResult<DB> {
    let empty = lines.iter().all(|l| l.points.is_empty());
    let (x_lo, x_hi) = plot::extent(lines.iter().flat_map(|l| l.points.iter().map(|p| p.0)));
    let x_range = if empty {
        0.0..1.0
    } else {
        plot::padded(x_lo, x_hi)
    };
    let y_range = if empty {
        0.0..1.0
    } else {
        y_range(lines, scale)
    };
    let title_height = plot::title(area, title, style)?;
    let (corner, y_range) = if lines.len() > 1 {
        legend_place(lines, &x_range, y_range)
    } else {
        (SeriesLabelPosition::UpperRight, y_range)
    };
    let mut chart = ChartBuilder::on(area)
        .margin(style.margin())
        .margin_top(style.margin() + title_height)
        .x_label_area_size(style.px(24.0))
        .y_label_area_size(style.px(44.0))
        .build_cartesian_2d(x_range, y_range)?;
    // Steps are whole numbers: ticks between them stay unlabelled.
    let x_label = |step: &f64| {
        if (step - step.round()).abs() < 1e-9 {
            plot::axis_label(step)
        } else {
            String::new()
        }
    };
    let mut mesh = chart.configure_mesh();
    mesh.light_line_style(WHITE)
        .bold_line_style(SHADE)
        .axis_style(style.line(MUTED, 1.0))
        .label_style(style.text(10.0))
        .x_label_formatter(&x_label)
        .y_label_formatter(&plot::axis_label)
        .x_labels(6)
        .y_labels(5);
    if empty {
        mesh.disable_x_axis().disable_y_axis();
    }
    mesh.draw()?;
    if empty {
        chart.plotting_area().draw(&Text::new(
            "no values yet",
            (0.5, 0.5),
            style.text_centered(12.0, MUTED),
        ))?;
        return Ok(());
    }
    for line in lines.iter().filter(|l| !l.points.is_empty()) {
        let color = line.color;
        let width = style.px(line.width);
        let legend_len = style.offset(14.0);
        let drawn = if line.dots_only {
            chart.draw_series(
                line.points
                    .iter()
                    .map(|p| Circle::new(*p, style.px(3.5), color.filled())),
            )?
        } else {
            chart.draw_series(LineSeries::new(
                line.points.iter().copied(),
                style.line(color, line.width),
            ))?
        };
        drawn.label(line.label.as_str()).legend(move |(x, y)| {
            PathElement::new(vec![(x, y), (x + legend_len, y)], color.stroke_width(width))
        });
        if !line.dots_only && line.points.len() <= MAX_DOTTED {
            chart.draw_series(
                line.points
                    .iter()
                    .map(|p| Circle::new(*p, style.px(2.5), color.filled())),
            )?;
        }
    }
    if lines.len() > 1 {
        chart
            .configure_series_labels()
            .position(corner)
            .background_style(WHITE.mix(0.85))
            .border_style(SHADE)
            .label_font(style.text(10.0))
            .draw()?;
    }
    Ok(())
}

/// One line per worker of `run`: its rollouts per second at each RL step it served.
fn worker_lines(run: &Run) -> Vec<Line> {
    run.workers()
        .into_iter()
        .enumerate()
        .map(|(i, worker)| Line {
            points: run.series(Stage::Rl, |r| {
                r.worker_rollouts_per_s
                    .as_ref()
                    .and_then(|m| m.get(&worker).copied())
            }),
            label: worker,
            color: plot::SERIES[i % plot::SERIES.len()],
            dots_only: false,
            width: 2.0,
        })
        .collect()
}

/// Draws the whole chart for `run` on `area` (stacked panels when `style.narrow`).
pub fn draw<DB: DrawingBackend>(
    run: &Run,
    area: &DrawingArea<DB, Shift>,
    style: &Style,
) -> DrawResult<DB> {
    let (_, height) = area.dim_in_pixel();
    let grpo = |label: &'static str, color: RGBColor, field: fn(&Row) -> Option<f64>| {
        Line::of(run, Stage::Rl, label, color, field)
    };
    let panels: [(&str, Vec<Line>, Scale); PANELS] = [
        (
            "SFT: loss per target token",
            vec![Line::of(run, Stage::Sft, "loss", BLUE, |r| r.loss)],
            Scale::Extent,
        ),
        (
            "RL: success and reward",
            vec![
                // A binary reward makes both series equal: the reward goes first, wider.
                grpo("reward", ORANGE, |r| r.reward).wide(4.0),
                grpo("success rate (kept groups)", BLUE, |r| r.success_rate),
                grpo("success rate (all sampled)", GREEN, |r| {
                    r.sampled_success_rate
                }),
                Line::of(run, Stage::Validation, "held-out success", RED, |r| {
                    r.val_success
                }),
            ],
            Scale::Unit,
        ),
        (
            "effective group fraction",
            vec![grpo("mixed groups", GREEN, |r| r.effective_group_fraction)],
            Scale::Unit,
        ),
        (
            "clip fractions",
            vec![
                grpo("low (ratio < 1 − ε)", RED, |r| r.clip_fraction_low).wide(4.0),
                grpo("high (ratio > 1 + ε)", BLUE, |r| r.clip_fraction_high),
            ],
            Scale::FromZero(0.05),
        ),
        (
            "KL to the reference",
            vec![grpo("KL", PURPLE, |r| r.kl)],
            Scale::FromZero(0.01),
        ),
        (
            "entropy (nats per token)",
            vec![grpo("entropy", ORANGE, |r| r.entropy)],
            Scale::Extent,
        ),
        (
            "generated length (mean tokens)",
            vec![grpo("mean length", GREEN, |r| r.gen_len_mean)],
            Scale::FromZero(1.0),
        ),
    ];
    let workers = worker_lines(run);
    let stacked = PANELS + usize::from(!workers.is_empty());
    let mut areas: Vec<DrawingArea<DB, Shift>> = if style.narrow {
        area.split_evenly((stacked, 1))
    } else {
        let sft_height = (f64::from(height) * SFT_SHARE).round() as u32;
        let (top, bottom) = area.split_vertically(sft_height);
        let mut top = vec![top];
        if !workers.is_empty() {
            let (width, _) = top[0].dim_in_pixel();
            let (left, right) = top[0].split_horizontally(width * 2 / 3);
            top = vec![left, right];
        }
        let first = top.remove(0);
        std::iter::once(first)
            .chain(bottom.split_evenly((2, 3)))
            .chain(top)
            .collect()
    };
    for ((title, lines, scale), cell) in panels.iter().zip(&areas) {
        panel(cell, title, lines, *scale, style)?;
    }
    if !workers.is_empty()
        && let Some(cell) = areas.pop()
    {
        panel(
            &cell,
            "rollout workers (rollouts/s)",
            &workers,
            Scale::FromZero(1.0),
            style,
        )?;
    }
    Ok(())
}

/// The chart as an SVG document `width` pixels wide (height from [`aspect`]).
pub fn svg(run: &Run, width: u32, narrow: bool) -> Result<String, String> {
    let height = (f64::from(width) * aspect(narrow)).round() as u32;
    plot::svg_document(width, height, |root| {
        draw(run, root, &Style::new(1.0).stacked(narrow)).map_err(|e| e.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chapters::live::RECORDED_RUN;

    fn recorded() -> Run {
        Run::from_jsonl(RECORDED_RUN).unwrap()
    }

    fn line(points: &[(f64, f64)]) -> Line {
        Line {
            label: "x".to_owned(),
            color: BLUE,
            points: points.to_vec(),
            dots_only: false,
            width: 2.0,
        }
    }

    #[test]
    fn the_legend_takes_an_empty_corner_or_room_above_the_data() {
        let x = 0.0..10.0;
        let place = |points: &[(f64, f64)]| {
            let (corner, y) = legend_place(&[line(points)], &x, 0.0..1.0);
            (format!("{corner:?}"), y)
        };
        // Nothing under any corner: upper right, the range as it was.
        assert_eq!(place(&[(5.0, 0.5)]), ("UpperRight".to_owned(), 0.0..1.0));
        // High values on the right: the upper left.
        assert_eq!(place(&[(8.0, 0.9), (9.0, 0.8)]).0, "UpperLeft");
        // High on both sides: the lower right, as empty as the lower left.
        assert_eq!(
            place(&[(1.0, 0.9), (2.0, 0.9), (8.0, 0.9), (9.0, 0.8)]).0,
            "LowerRight"
        );
        // Every corner taken: the range grows until its top 45% is above the data.
        let (corner, y) = place(&[(1.0, 0.9), (8.0, 0.9), (9.0, 0.1), (1.0, 0.1)]);
        assert_eq!(corner, "UpperRight");
        assert!((y.end - 0.9 / 0.55).abs() < 1e-12, "{y:?}");
        assert!(y.end - LEGEND_CORNER.1 * (y.end - y.start) >= 0.9 - 1e-12);
    }

    #[test]
    fn the_recorded_run_draws_every_panel() {
        let svg = svg(&recorded(), 900, false).unwrap();
        assert!(svg.starts_with("<svg"));
        for title in [
            "SFT: loss per target token",
            "RL: success and reward",
            "effective group fraction",
            "clip fractions",
            "KL to the reference",
            "entropy (nats per token)",
            "generated length (mean tokens)",
            "held-out success",
        ] {
            assert!(svg.contains(title), "{title}");
        }
        assert!(!svg.contains("no values yet"));
    }

    /// Two GRPO rows collected by workers `a` and `b`.
    const CLUSTER_ROWS: &str = "{\"stage\":\"sft\",\"step\":1,\"loss\":3.0}\n\
        {\"stage\":\"grpo\",\"step\":1,\"worker_rollouts_per_s\":{\"a\":40.0,\"b\":35.5},\"redeliveries\":1}\n\
        {\"stage\":\"grpo\",\"step\":2,\"worker_rollouts_per_s\":{\"a\":42.0},\"stale_dropped\":2}\n";

    #[test]
    fn a_run_with_workers_gets_their_panel_and_one_without_does_not() {
        let run = Run::from_jsonl(CLUSTER_ROWS).unwrap();
        let lines = worker_lines(&run);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].label, "a");
        assert_eq!(lines[0].points, [(1.0, 40.0), (2.0, 42.0)]);
        assert_eq!(lines[1].points, [(1.0, 35.5)], "b served step 1 only");
        for narrow in [false, true] {
            let svg = svg(&run, 600, narrow).unwrap();
            assert!(
                svg.contains("rollout workers (rollouts/s)"),
                "narrow {narrow}"
            );
        }
        let recorded = svg(&recorded(), 600, false).unwrap();
        assert!(!recorded.contains("rollout workers"));
    }

    #[test]
    fn the_stacked_layout_is_taller_and_draws_the_same_panels() {
        assert!(aspect(true) > aspect(false));
        let svg = svg(&recorded(), 360, true).unwrap();
        assert!(svg.contains("generated length (mean tokens)"));
        assert!(svg.contains(r#"height="1512""#), "7 panels of 0.6 × 360");
    }

    #[test]
    fn an_empty_run_and_an_sft_only_run_draw_notes_instead_of_lines() {
        let empty = svg(&Run::default(), 600, false).unwrap();
        assert_eq!(empty.matches("no values yet").count(), PANELS);
        let sft_only = Run::from_jsonl("{\"stage\":\"sft\",\"step\":1,\"loss\":3.0}\n").unwrap();
        let svg = svg(&sft_only, 600, false).unwrap();
        assert_eq!(svg.matches("no values yet").count(), PANELS - 1);
    }

    #[test]
    fn vertical_ranges_cover_the_values_and_keep_rates_on_zero_to_one() {
        let line = |points: Vec<(f64, f64)>| Line {
            label: "x".to_owned(),
            color: BLUE,
            points,
            dots_only: false,
            width: 2.0,
        };
        let rates = y_range(&[line(vec![(1.0, 0.2), (2.0, 0.4)])], Scale::Unit);
        assert!(rates.start < 0.0 && rates.end > 1.0);
        let zeros = y_range(&[line(vec![(1.0, 0.0)])], Scale::FromZero(0.05));
        assert!(zeros.start < 0.0 && zeros.end >= 0.05);
        let entropy = y_range(&[line(vec![(1.0, 0.3), (2.0, 0.5)])], Scale::Extent);
        assert!(entropy.start < 0.3 && entropy.start > 0.2 && entropy.end > 0.5);
    }
}

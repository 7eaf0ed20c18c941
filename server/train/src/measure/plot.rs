//! A picture of a run: the SFT loss, GRPO's training success with the held-out
//! validation success, and (when the run probed its SFT) the probe's validation success
//! and teacher-forced accuracy by action part, drawn from `metrics.jsonl` with plotters as SVG (and PNG through
//! the figure exporter's rasteriser).

use std::path::Path;

use anyhow::{Context, Result};
use arlbook_core::metrics::{MetricsRow, RowStage};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

/// A measurement of a row.
type Field = fn(&MetricsRow) -> Option<f64>;

/// Points `(step, value)` of `field` in the rows of `stage` (rows of a step that kept
/// no rollout left out unless `all_sampled`: runs written before such rows omitted
/// their statistics logged a mean over none as 0).
fn series(
    rows: &[MetricsRow],
    stage: RowStage,
    field: Field,
    all_sampled: bool,
) -> Vec<(f64, f64)> {
    rows.iter()
        .filter(|r| r.stage == stage)
        .filter(|r| all_sampled || r.rollouts_used != Some(0))
        .filter_map(|r| Some((r.step as f64, field(r)?)))
        .collect()
}

fn upper(points: &[(f64, f64)]) -> f64 {
    points.iter().map(|p| p.0).fold(1.0, f64::max)
}

type Panel<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// One panel with its caption, axes `[0, x_max] x [0, y_max]` and a mesh labelled by step.
fn panel<'a, 'b>(
    area: &'a DrawingArea<SVGBackend<'b>, plotters::coord::Shift>,
    caption: &str,
    x_max: f64,
    y_max: f64,
) -> Result<Panel<'a, 'b>> {
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 14))
        .margin(10)
        // Room for the last step's tick label at the right edge.
        .margin_right(24)
        .x_label_area_size(30)
        .y_label_area_size(40)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .x_desc("step")
        .x_label_formatter(&|step| format!("{step:.0}"))
        .draw()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(chart)
}

/// Registers the core's `DejaVu Sans` as plotters' `sans-serif`, which plotters measures
/// the plot's text with natively (`arlbook_core::font`).
fn register_font() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            arlbook_core::font::DEJAVU_SANS,
        );
    });
}

/// The SVG of the run whose metrics rows are `rows`.
pub fn svg(rows: &[MetricsRow], title: &str) -> Result<String> {
    register_font();
    let mut out = String::new();
    {
        let probed = rows.iter().any(|r| r.stage == RowStage::Probe);
        let height = if probed { 680 } else { 360 };
        let root = SVGBackend::with_string(&mut out, (900, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
        let root = root
            .titled(title, ("sans-serif", 18))
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let top_row = if probed {
            let (top_row, bottom_row) = root.split_vertically(330);
            probe_panel(&bottom_row, rows)?;
            top_row
        } else {
            root.clone()
        };
        let (left, right) = top_row.split_horizontally(440);
        let loss = series(rows, RowStage::Sft, |r| r.loss, false);
        let top = loss.iter().map(|p| p.1).fold(0.1, f64::max);
        let mut chart = panel(
            &left,
            "SFT: loss on generated tokens",
            upper(&loss),
            top * 1.05,
        )?;
        chart
            .draw_series(LineSeries::new(loss, &BLUE))
            .map_err(|e| anyhow::anyhow!("{e}"))?;

        // A run of the rejection-sampling arm has `rs` rows where GRPO's would be.
        let success: Field = |r| r.success_rate;
        let (arm, train) = match series(rows, RowStage::Grpo, success, false) {
            grpo if grpo.is_empty() => ("RS", series(rows, RowStage::Rs, success, false)),
            grpo => ("GRPO", grpo),
        };
        let validation = series(rows, RowStage::Validation, |r| r.val_success, false);
        let sampled = series(rows, RowStage::Grpo, |r| r.sampled_success_rate, true);
        let caption = format!("{arm}: success rate");
        let mut chart = panel(&right, &caption, upper(&train), 1.0)?;
        let kept = if sampled.is_empty() {
            "training rollouts (train split, T = 1)"
        } else {
            "kept training rollouts (mixed groups)"
        };
        chart
            .draw_series(LineSeries::new(train, &BLUE))
            .map_err(|e| anyhow::anyhow!("{e}"))?
            .label(kept)
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLUE));
        if !sampled.is_empty() {
            chart
                .draw_series(LineSeries::new(sampled, &GREEN))
                .map_err(|e| anyhow::anyhow!("{e}"))?
                .label("all sampled training rollouts")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], GREEN));
        }
        chart
            .draw_series(LineSeries::new(validation.clone(), &RED))
            .map_err(|e| anyhow::anyhow!("{e}"))?
            .label("validation (held-out problem keys, greedy)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], RED));
        chart
            .draw_series(
                validation
                    .into_iter()
                    .map(|p| Circle::new(p, 3, RED.filled())),
            )
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        root.present().map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    Ok(out)
}

/// The SFT probe's curves (`train::probe`): greedy validation success and the
/// teacher-forced accuracy of the tool name, the line number and the edit text.
fn probe_panel(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    rows: &[MetricsRow],
) -> Result<()> {
    let curves: [(&str, Field, RGBColor); 4] = [
        ("validation success (greedy)", |r| r.val_success, RED),
        ("teacher-forced: tool", |r| r.tf_tool_accuracy, BLACK),
        ("teacher-forced: line", |r| r.tf_line_accuracy, GREEN),
        ("teacher-forced: edit text exact", |r| r.tf_text_exact, BLUE),
    ];
    let x_max = upper(&series(rows, RowStage::Probe, |r| r.val_success, true));
    let mut chart = panel(area, "SFT probe on held-out validation tasks", x_max, 1.0)?;
    for (label, field, color) in curves {
        let points = series(rows, RowStage::Probe, field, true);
        chart
            .draw_series(LineSeries::new(points.clone(), &color))
            .map_err(|e| anyhow::anyhow!("{e}"))?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
        chart
            .draw_series(
                points
                    .into_iter()
                    .map(|p| Circle::new(p, 2, color.filled())),
            )
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(())
}

/// Writes the plot of the run in `run` (its `metrics.jsonl`) to `out` (`.svg`).
pub fn write(run: &Path, out: &Path) -> Result<()> {
    let rows = crate::run::metrics::read_rows(&run.join("metrics.jsonl"))?;
    let title = format!("arlbook train: {}", run.display());
    std::fs::write(out, svg(&rows, &title)?).with_context(|| format!("writing {}", out.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plot_draws_both_stages() {
        let rows: Vec<MetricsRow> = [
            r#"{"stage": "sft", "step": 1, "loss": 3.0}"#,
            r#"{"stage": "sft", "step": 2, "loss": 1.5}"#,
            r#"{"stage": "validation", "step": 0, "val_success": 0.1}"#,
            r#"{"stage": "grpo", "step": 1, "success_rate": 0.25}"#,
            r#"{"stage": "grpo", "step": 2, "success_rate": 0.5}"#,
        ]
        .iter()
        .map(|line| MetricsRow::parse(line).unwrap())
        .collect();
        let svg = svg(&rows, "test").unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("SFT: loss"));
        assert!(svg.contains("<polyline") || svg.contains("<path"));
        assert!(!svg.contains("SFT probe"), "no probe rows, no probe panel");
    }

    #[test]
    fn probe_rows_add_their_panel() {
        let rows: Vec<MetricsRow> = [
            r#"{"stage": "sft", "step": 1, "loss": 3.0}"#,
            r#"{"stage": "probe", "step": 1, "val_success": 0.0, "tf_tool_accuracy": 0.5, "tf_line_accuracy": 0.2, "tf_text_exact": 0.1}"#,
            r#"{"stage": "sft", "step": 2, "loss": 1.5}"#,
            r#"{"stage": "probe", "step": 2, "val_success": 0.1, "tf_tool_accuracy": 0.9, "tf_line_accuracy": 0.6, "tf_text_exact": 0.3}"#,
        ]
        .iter()
        .map(|line| MetricsRow::parse(line).unwrap())
        .collect();
        let svg = svg(&rows, "test").unwrap();
        assert!(svg.contains("SFT probe"));
        assert!(svg.contains("teacher-forced: edit text exact"));
    }
}

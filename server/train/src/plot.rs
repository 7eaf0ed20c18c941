//! A picture of a run: the SFT loss, and GRPO's training success with the held-out
//! validation success, drawn from `metrics.jsonl` with plotters as SVG (and PNG through
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
        .x_label_area_size(30)
        .y_label_area_size(40)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .x_desc("step")
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
        let root = SVGBackend::with_string(&mut out, (900, 360)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
        let root = root
            .titled(title, ("sans-serif", 18))
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let (left, right) = root.split_horizontally(440);
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

/// Writes the plot of the run in `run` (its `metrics.jsonl`) to `out` (`.svg`).
pub fn write(run: &Path, out: &Path) -> Result<()> {
    let rows = crate::metrics::read_rows(&run.join("metrics.jsonl"))?;
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
    }
}

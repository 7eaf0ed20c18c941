//! Mixed groups and dynamic sampling: how often a group carries a learning signal, and
//! what it costs to collect only such groups.
//!
//! With independent binary rewards of success probability `p`, a group of `G` is mixed
//! (not all equal) with probability `P = 1 - p^G - (1 - p)^G`. Dynamic sampling draws
//! groups until `B` mixed ones are found: `B / P` groups and `B G / P` rollouts on
//! average (DAPO, Yu et al. 2025, section 3.2). Entry `mixed-group`.

use arlbook_core::api::mixed_group::{Grid, MixedGroup, Request};
use arlbook_core::api::{MAX_DRAWS, OneOrMany};
use arlbook_core::error::FieldError;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::sync::OnceLock;

use crate::compute::compute;
use crate::figure::{DrawResult, Figure, Meta, Readout, State, slider};
use crate::plot::{self, BLUE, INK, MUTED, Style};

/// The figure.
pub struct MixedGroups;

/// Heatmap resolution: columns in `p`, rows in `G`.
const P_CELLS: usize = 50;
const G_MAX: u64 = 32;

/// What the figure computes.
#[derive(Debug, Clone)]
pub struct Output {
    /// Chosen `p`.
    pub p: f64,
    /// Chosen `G`.
    pub group_size: u64,
    /// `table[i][j]`: `P(mixed)` at `p_grid[i]`, `G = j + 1`.
    pub table: Vec<Vec<f64>>,
    /// The `p` of each heatmap column.
    pub p_grid: Vec<f64>,
    /// `P(mixed)` at the chosen point.
    pub probability: f64,
    /// Expected groups drawn for `B` mixed ones (none if `P = 0`).
    pub attempts: Option<f64>,
    /// Expected rollouts for `B` mixed groups (none if `P = 0`).
    pub rollouts: Option<f64>,
    /// Expected rollouts at the chosen `p` for `G = 1 ..= G_MAX`.
    pub rollouts_by_g: Vec<(f64, Option<f64>)>,
    /// Mean groups drawn in the simulation.
    pub simulated_groups: f64,
    /// Simulated runs: [`RUNS`], or fewer where that many would exceed the work limit
    /// of one request.
    pub runs: u64,
}

/// Simulated runs when the work limit allows.
const RUNS: u64 = 200;

impl Figure for MixedGroups {
    type Output = Output;

    const META: Meta = Meta {
        id: "mixed-groups",
        title: "Mixed groups and the cost of dynamic sampling",
        caption: "At p = 0.5 and G = 4, 87.5% of groups are mixed; at p = 0.01 only 3.94%, \
                  and G = 16 raises that to 14.85% at four times the rollouts per group. \
                  Move p and G and read the expected rollouts needed for B mixed groups; the \
                  right panel shows how that cost changes with G at the chosen p.",
        controls: &[
            slider("p", "success rate p", 0.001, 0.999, 0.001, "0.01"),
            slider("g", "group size G", 2.0, 32.0, 1.0, "4"),
            slider("b", "mixed groups wanted B", 1.0, 64.0, 1.0, "16"),
            slider("seed", "seed", 0.0, 999.0, 1.0, "7"),
        ],
        aspect: 0.45,
        panels: 2,
    };

    fn compute(state: &State) -> Result<Output, FieldError> {
        let p = state.number("p")?;
        let group_size = state.count("g")? as u64;
        let mixed_groups = state.count("b")?;
        let p_grid = heat_p_grid();
        let sizes: Vec<u64> = (1..=G_MAX).collect();
        let table = heat_table()?;
        let scalar_request = Request {
            p: OneOrMany::One(p),
            group_size: OneOrMany::One(group_size),
            mixed_groups: mixed_groups as u64,
            ..Request::default()
        };
        // A run draws up to 10 B / P + 100 groups of G (the entry's cap): fewer runs
        // where 200 would pass the entry's limit on random draws (rare p, large B).
        let closed = compute::<MixedGroup>(&scalar_request)?;
        let attempts =
            scalar_of(closed.expected_attempts, "expected_attempts")?.ok_or_else(|| {
                FieldError::new(
                    "(response).expected_attempts",
                    "no number of groups collects B mixed ones (P = 0)",
                )
            })?;
        let per_run = ((10.0 * attempts).ceil() + 100.0) * group_size as f64;
        let runs = ((MAX_DRAWS as f64 / per_run).floor() as u64).clamp(1, RUNS);
        let point = compute::<MixedGroup>(&Request {
            replicates: runs as usize,
            seed: state.count("seed")? as u64,
            ..scalar_request
        })?;
        let by_g = compute::<MixedGroup>(&Request {
            p: OneOrMany::Many(vec![p]),
            group_size: OneOrMany::Many(sizes.clone()),
            mixed_groups: mixed_groups as u64,
            ..Request::default()
        })?;
        let rollouts_row = table_of(by_g.expected_rollouts, "expected_rollouts")?
            .into_iter()
            .next()
            .ok_or_else(|| FieldError::new("(response).expected_rollouts", "the table is empty"))?;
        let simulated_groups = point.simulation.map_or(0.0, |s| s.mean_groups);
        Ok(Output {
            p,
            group_size,
            table,
            p_grid,
            probability: scalar_of(point.probability, "probability")?,
            attempts: scalar_of(point.expected_attempts, "expected_attempts")?,
            rollouts: scalar_of(point.expected_rollouts, "expected_rollouts")?,
            rollouts_by_g: sizes
                .iter()
                .zip(rollouts_row)
                .map(|(g, r)| (*g as f64, r))
                .collect(),
            simulated_groups,
            runs,
        })
    }

    fn readouts(output: &Output) -> Vec<Readout> {
        let id = Self::META.id;
        vec![
            Readout::new(
                id,
                "probability",
                "P(mixed) = 1 − pᴳ − (1 − p)ᴳ",
                output.probability,
            ),
            Readout::new(
                id,
                "attempts",
                "expected groups drawn, B / P",
                output.attempts.unwrap_or(f64::INFINITY),
            ),
            Readout::new(
                id,
                "rollouts",
                "expected rollouts, B G / P",
                output.rollouts.unwrap_or(f64::INFINITY),
            ),
            Readout::new(
                id,
                "simulated",
                format!("groups drawn, mean of {} simulated runs", output.runs),
                output.simulated_groups,
            ),
            Readout::new(id, "runs", "simulated runs", output.runs as f64),
        ]
    }

    fn draw<DB: DrawingBackend>(
        output: &Output,
        area: &DrawingArea<DB, Shift>,
        style: &Style,
    ) -> DrawResult<DB> {
        let (width, height) = area.dim_in_pixel();
        let (left, right) = if style.narrow {
            area.split_vertically(height / 2)
        } else {
            area.split_horizontally(width * 55 / 100)
        };
        // The heatmap, and beside it the scale its shades are read on.
        let legend_width = style.px(62.0).min(left.dim_in_pixel().0 / 4);
        let (left, legend) = left.split_horizontally(left.dim_in_pixel().0 - legend_width);
        let title_height = plot::title(&left, "P(mixed group) over p and G", style)?;
        let mut heat = ChartBuilder::on(&left)
            .margin(style.margin())
            .margin_top(style.margin() + title_height)
            .x_label_area_size(style.px(plot::X_LABEL_AREA))
            .y_label_area_size(style.px(34.0))
            .build_cartesian_2d(0.0..1.0, 0.5..(G_MAX as f64 + 0.5))?;
        // x ticks spaced as `plot::mesh` spaces them: `0.1` to `0.9` side by side run
        // together on a phone-width heatmap.
        let x_ticks = plot::tick_count(
            heat.plotting_area().dim_in_pixel().0,
            plot::X_TICK_SPACING,
            style,
        );
        heat.configure_mesh()
            .disable_mesh()
            .axis_style(style.line(MUTED, 1.0))
            .label_style(style.text(11.0))
            .x_labels(x_ticks)
            .x_label_formatter(&plot::axis_label)
            .y_label_formatter(&plot::axis_label)
            .x_desc("success rate p")
            .y_desc("G")
            .draw()?;
        heat.draw_series(heat_runs(output).into_iter().map(|run| {
            Rectangle::new(
                [(run.p_low, run.g - 0.5), (run.p_high, run.g + 0.5)],
                run.color.filled(),
            )
        }))?;
        colour_scale(&legend, style)?;
        let g = output.group_size as f64;
        heat.draw_series([Circle::new(
            (output.p, g),
            style.px(5.0),
            style.line(INK, 2.0),
        )])?;

        let finite: Vec<(f64, f64)> = output
            .rollouts_by_g
            .iter()
            .filter_map(|(g, r)| r.filter(|v| v.is_finite() && *v > 0.0).map(|v| (*g, v)))
            .collect();
        let (_, hi) = plot::extent(finite.iter().map(|(_, r)| *r));
        let title_height = plot::title(&right, "rollouts for B mixed groups, by G", style)?;
        let mut cost = ChartBuilder::on(&right)
            .margin(style.margin())
            .margin_top(style.margin() + title_height)
            .x_label_area_size(style.px(plot::X_LABEL_AREA))
            .y_label_area_size(style.px(48.0))
            .build_cartesian_2d(1.0..G_MAX as f64, 0.0..hi.max(1.0) * 1.1)?;
        plot::mesh(&mut cost, style)
            .x_desc("G")
            .y_labels(6)
            .draw()?;
        cost.draw_series(LineSeries::new(
            finite.iter().copied(),
            style.line(BLUE, 2.0),
        ))?;
        if let Some(r) = output.rollouts.filter(|r| r.is_finite() && *r > 0.0) {
            cost.draw_series([Circle::new((g, r), style.px(5.0), style.line(INK, 2.0))])?;
        }
        Ok(())
    }
}

/// The `p` of each heatmap column: the middles of [`P_CELLS`] equal cells of `[0, 1]`.
fn heat_p_grid() -> Vec<f64> {
    (0..P_CELLS)
        .map(|i| (i as f64 + 0.5) / P_CELLS as f64)
        .collect()
}

/// `P(mixed)` at `heat_p_grid()[i]` and `G = j + 1`: the heatmap's grid is the same for
/// every control setting, so the entry computes it on the first draw and the table is
/// kept.
fn heat_table() -> Result<Vec<Vec<f64>>, FieldError> {
    static TABLE: OnceLock<Vec<Vec<f64>>> = OnceLock::new();
    if let Some(table) = TABLE.get() {
        return Ok(table.clone());
    }
    let grid = compute::<MixedGroup>(&Request {
        p: OneOrMany::Many(heat_p_grid()),
        group_size: OneOrMany::Many((1..=G_MAX).collect()),
        ..Request::default()
    })?;
    let table = table_of(grid.probability, "probability")?;
    Ok(TABLE.get_or_init(|| table).clone())
}

/// Neighbouring heatmap cells of one row and one shade, as one rectangle.
#[derive(Debug, Clone, Copy, PartialEq)]
struct HeatRun {
    color: RGBColor,
    p_low: f64,
    p_high: f64,
    g: f64,
}

/// Bands of the heatmap's colour scale: a cell takes the shade of the band its
/// probability lies in, the shade the scale beside it shows for that band.
const SHADES: usize = 40;

/// The shade of the band of `probability` (band `k` covers `[k, k + 1) / SHADES`, the
/// last one includes 1).
fn shade(probability: f64) -> RGBColor {
    let band = ((probability * SHADES as f64).floor().max(0.0) as usize).min(SHADES - 1);
    plot::tint(BLUE, (band as f64 + 0.5) / SHADES as f64)
}

/// The heatmap's cells as runs, ordered by shade: the same picture as a rectangle per
/// cell, in far fewer drawing calls and colour changes (one per band), so the page
/// redraws it within a frame.
fn heat_runs(output: &Output) -> Vec<HeatRun> {
    let half = 0.5 / P_CELLS as f64;
    let mut runs: Vec<HeatRun> = Vec::new();
    for j in 0..G_MAX as usize {
        let g = (j + 1) as f64;
        let mut current: Option<HeatRun> = None;
        for (row, p) in output.table.iter().zip(&output.p_grid) {
            let Some(probability) = row.get(j) else {
                continue;
            };
            let color = shade(*probability);
            match current.as_mut() {
                Some(run) if run.color == color => run.p_high = p + half,
                _ => {
                    runs.extend(current.take());
                    current = Some(HeatRun {
                        color,
                        p_low: p - half,
                        p_high: p + half,
                        g,
                    });
                }
            }
        }
        runs.extend(current);
    }
    runs.sort_by_key(|run| (run.color.0, run.color.1, run.color.2));
    runs
}

/// The heatmap's colour scale: the shade of every probability from 0 to 1, labelled.
fn colour_scale<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    style: &Style,
) -> DrawResult<DB> {
    let mut scale = ChartBuilder::on(area)
        // Level with the heatmap's plot: below its caption, above its axis labels.
        .margin_top(style.margin() + style.px(20.0))
        .margin_bottom(style.margin() + style.px(plot::X_LABEL_AREA))
        .margin_right(style.px(4.0))
        .set_label_area_size(LabelAreaPosition::Right, style.px(30.0))
        .build_cartesian_2d(0.0..1.0, 0.0..1.0)?;
    scale
        .configure_mesh()
        .disable_mesh()
        .disable_x_axis()
        .axis_style(style.line(MUTED, 1.0))
        .label_style(style.text(10.0))
        .y_labels(3)
        .y_label_formatter(&plot::axis_label)
        .draw()?;
    scale.draw_series((0..SHADES).map(|k| {
        let (lo, hi) = (k as f64 / SHADES as f64, (k + 1) as f64 / SHADES as f64);
        Rectangle::new([(0.0, lo), (1.0, hi)], shade(0.5 * (lo + hi)).filled())
    }))?;
    Ok(())
}

/// The number of a response to scalar inputs; `field` names it in the error.
fn scalar_of<T>(grid: Grid<T>, field: &str) -> Result<T, FieldError> {
    grid.into_scalar()
        .ok_or_else(|| FieldError::new(format!("(response).{field}"), "a table, not a number"))
}

/// The table of a response to a grid of inputs; `field` names it in the error.
fn table_of<T>(grid: Grid<T>, field: &str) -> Result<Vec<Vec<T>>, FieldError> {
    grid.into_table()
        .ok_or_else(|| FieldError::new(format!("(response).{field}"), "a number, not a table"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figure::compute_at_query;

    fn compute_at(query_text: &str) -> Output {
        compute_at_query::<MixedGroups>(query_text).unwrap()
    }

    #[test]
    fn article_probabilities() {
        assert!((compute_at("p=0.5&g=4").probability - 0.875).abs() < 1e-12);
        let rare = compute_at("p=0.01&g=4").probability;
        assert!((rare - 0.0394).abs() < 5e-5, "{rare}");
        let rare16 = compute_at("p=0.01&g=16").probability;
        assert!((rare16 - 0.1485).abs() < 5e-5, "{rare16}");
    }

    /// Every corner of the sliders computes: rare success with many groups wanted runs
    /// fewer simulations instead of failing on the work limit.
    #[test]
    fn every_corner_of_the_sliders_gives_a_figure() {
        for p in ["0.001", "0.002", "0.5", "0.999"] {
            for g in ["2", "32"] {
                for b in ["1", "64"] {
                    let query_text = format!("p={p}&g={g}&b={b}");
                    let output = compute_at(&query_text);
                    assert!((1..=RUNS).contains(&output.runs), "{query_text}");
                    assert!(output.simulated_groups.is_finite(), "{query_text}");
                }
            }
        }
        // P(mixed) = 0.002 at p = 0.001 and G = 2: 200 runs would ask for 128 M draws.
        assert!(compute_at("p=0.001&g=2&b=64").runs < RUNS);
        assert_eq!(compute_at("").runs, RUNS);
    }

    #[test]
    fn expected_rollouts_are_b_g_over_p() {
        let output = compute_at("p=0.5&g=4&b=16");
        assert!((output.rollouts.unwrap() - 16.0 * 4.0 / 0.875).abs() < 1e-9);
        assert_eq!(output.table.len(), P_CELLS);
        assert_eq!(output.table[0].len(), G_MAX as usize);
    }

    #[test]
    fn the_heatmap_runs_cover_every_cell_once_in_its_own_shade() {
        let state = State::defaults(MixedGroups::META.controls);
        let output = MixedGroups::compute(&state).unwrap();
        let runs = heat_runs(&output);
        let cells = output.table.len() * G_MAX as usize;
        assert!(runs.len() < cells, "{} runs for {cells} cells", runs.len());
        // Drawn by shade: a colour change only where the shade changes.
        let changes = runs.windows(2).filter(|w| w[0].color != w[1].color).count();
        assert!(changes < SHADES, "{changes} colour changes");
        for (row, p) in output.table.iter().zip(&output.p_grid) {
            for (j, probability) in row.iter().enumerate() {
                let g = (j + 1) as f64;
                let covering: Vec<&HeatRun> = runs
                    .iter()
                    .filter(|r| r.g == g && r.p_low < *p && *p < r.p_high)
                    .collect();
                assert_eq!(covering.len(), 1, "p {p}, G {g}");
                assert_eq!(covering[0].color, shade(*probability));
            }
        }
    }

    #[test]
    fn a_cell_has_the_shade_the_scale_shows_for_its_probability() {
        // Band edges: 0 and 1 are the ends, a value just under a band's top stays in it.
        assert_eq!(shade(0.0), plot::tint(BLUE, 0.5 / SHADES as f64));
        assert_eq!(shade(1.0), plot::tint(BLUE, 1.0 - 0.5 / SHADES as f64));
        let width = 1.0 / SHADES as f64;
        for k in 0..SHADES {
            let middle = (k as f64 + 0.5) * width;
            let expected = plot::tint(BLUE, middle);
            assert_eq!(shade(k as f64 * width + 1e-9), expected, "band {k}");
            assert_eq!(shade(middle), expected, "band {k}");
            assert_eq!(shade((k + 1) as f64 * width - 1e-9), expected, "band {k}");
        }
        // Darker with the probability, band by band.
        let red = |c: RGBColor| c.0;
        assert!(
            (1..SHADES)
                .all(|k| red(shade((k as f64 + 0.5) * width))
                    <= red(shade((k as f64 - 0.5) * width)))
        );
    }
}

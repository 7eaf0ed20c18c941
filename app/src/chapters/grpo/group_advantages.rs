//! Group-relative advantages: each attempt's reward compared with its group's.
//!
//! `\hat A_i = (r_i - mean(r)) / (std(r) + eps)` per group (GRPO, Shao et al. 2024,
//! section 4.1.2), with the choices practitioners vary: divide by the group's std, the
//! batch's std, or nothing (Dr. GRPO, Liu et al. 2025); population or sample std; the
//! self-inclusive mean or the leave-one-out mean (RLOO, Ahmadian et al. 2024). Entry
//! `group-advantages`.

use arlbook_core::api::group_advantages::{GroupAdvantagesEntry, Request};
use arlbook_core::error::FieldError;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::compute::compute;
use crate::figure::{DrawResult, Figure, Meta, Readout, State, choice, rewards};
use crate::plot::{self, INK, LIGHT, MUTED, SERIES, SHADE, Style};

/// The figure.
pub struct GroupAdvantages;

/// What the figure computes.
#[derive(Debug, Clone)]
pub struct Output {
    /// Rewards per group.
    pub rewards: Vec<Vec<f64>>,
    /// Advantages per group.
    pub advantages: Vec<Vec<f64>>,
    /// Each group's mean reward.
    pub group_mean: Vec<f64>,
    /// Each group's std.
    pub group_std: Vec<f64>,
}

impl Figure for GroupAdvantages {
    type Output = Output;

    const META: Meta = Meta {
        id: "group-advantages",
        title: "Group-relative advantages",
        caption: "Edit the rewards (groups separated by ';'). With 1,0,0,0 the success gets \
                  √3 ≈ 1.732 and each failure −1/√3 ≈ −0.577. Make a group all zeros and its \
                  advantages vanish. Switch the scale to batch or none, and the baseline to \
                  leave-one-out, and compare the bar heights.",
        controls: &[
            rewards("rewards", "rewards (groups split by ;)", "1,0,0,0; 1,1,0,1"),
            choice("scale", "divide by", &["group", "batch", "none"], "group"),
            choice("std", "std", &["population", "sample"], "population"),
            choice("baseline", "baseline", &["mean", "leave-one-out"], "mean"),
        ],
        aspect: 0.4,
        panels: 1,
    };

    fn compute(state: &State) -> Result<Output, FieldError> {
        let rewards = state.groups("rewards")?;
        let response = compute::<GroupAdvantagesEntry>(&Request {
            rewards: rewards.clone().into(),
            scale: Some(state.choice("scale")?),
            std: Some(state.choice("std")?),
            baseline: Some(state.choice("baseline")?),
            eps: Some(0.0),
            ..Request::default()
        })?;
        Ok(Output {
            advantages: response.advantages.into(),
            group_mean: response.group_mean,
            group_std: response.group_std,
            rewards,
        })
    }

    fn readouts(output: &Output) -> Vec<Readout> {
        let id = Self::META.id;
        let mut readouts = Vec::new();
        for (g, advantages) in output.advantages.iter().enumerate() {
            readouts.push(Readout::new(
                id,
                &format!("mean-{g}"),
                format!("group {} mean", g + 1),
                output.group_mean.get(g).copied().unwrap_or(0.0),
            ));
            readouts.push(Readout::new(
                id,
                &format!("std-{g}"),
                format!("group {} std", g + 1),
                output.group_std.get(g).copied().unwrap_or(0.0),
            ));
            for (i, a) in advantages.iter().enumerate() {
                readouts.push(Readout::new(
                    id,
                    &format!("a-{g}-{i}"),
                    format!("Â, group {}, attempt {}", g + 1, i + 1),
                    *a,
                ));
            }
        }
        readouts
    }

    fn draw<DB: DrawingBackend>(
        output: &Output,
        area: &DrawingArea<DB, Shift>,
        style: &Style,
    ) -> DrawResult<DB> {
        // Bars laid out left to right, one gap between groups.
        let mut slots = Vec::new();
        let mut x = 0.0_f64;
        for (g, advantages) in output.advantages.iter().enumerate() {
            for (i, a) in advantages.iter().enumerate() {
                let reward = output.rewards[g].get(i).copied().unwrap_or(0.0);
                slots.push((x, g, *a, reward));
                x += 1.0;
            }
            x += 0.6;
        }
        let width = (x - 0.6).max(1.0);
        let (lo, hi) = plot::extent(slots.iter().map(|s| s.2).chain([-1.0, 1.0]));
        let y_range = plot::padded(lo, hi);
        let mut chart = ChartBuilder::on(area)
            .margin(style.margin())
            .x_label_area_size(style.px(12.0))
            .y_label_area_size(style.label_area())
            .build_cartesian_2d(-0.2..width + 0.2, y_range.clone())?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .disable_x_axis()
            .light_line_style(WHITE)
            .bold_line_style(SHADE)
            .axis_style(style.line(MUTED, 1.0))
            .label_style(style.text(11.0))
            .x_label_formatter(&plot::axis_label)
            .y_label_formatter(&plot::axis_label)
            .y_desc("advantage Â")
            .draw()?;
        chart.draw_series(LineSeries::new(
            [(-0.2, 0.0), (width + 0.2, 0.0)],
            style.line(LIGHT, 1.0),
        ))?;
        chart.draw_series(slots.iter().map(|(x, g, a, _)| {
            let color = SERIES[g % SERIES.len()];
            Rectangle::new([(x + 0.1, 0.0), (x + 0.9, *a)], color.mix(0.8).filled())
        }))?;
        let span = y_range.end - y_range.start;
        // One label format for every bar, the richest whose widest label fits a bar's
        // slot with a gap to the next: the reward and the advantage, the advantage at
        // fewer decimals, or none at all (the readouts list every value).
        let slot_px = f64::from(chart.plotting_area().dim_in_pixel().0) / (width + 0.4);
        let formats: [&dyn Fn(f64, f64) -> String; 4] = [
            &|reward, a| {
                format!(
                    "r={} Â={}",
                    plot::format_number(reward, plot::LABEL_DECIMALS),
                    plot::format_number(a, plot::LABEL_DECIMALS)
                )
            },
            &|_, a| plot::format_number(a, plot::LABEL_DECIMALS),
            &|_, a| plot::format_number(a, 2),
            &|_, a| plot::format_number(a, 1),
        ];
        let gap = f64::from(style.px(4.0));
        let mut chosen = None;
        for format in formats {
            let mut widest = 0;
            for (_, _, a, reward) in &slots {
                widest =
                    widest.max(plot::rich::measure(area, &format(*reward, *a), style, 11.0)?.0);
            }
            if f64::from(widest) + gap <= slot_px {
                chosen = Some(format);
                break;
            }
        }
        if let Some(format) = chosen {
            chart.draw_series(slots.iter().map(|(x, _, a, reward)| {
                let y = if *a >= 0.0 {
                    a + span * 0.05
                } else {
                    a - span * 0.05
                };
                Text::new(
                    format(*reward, *a),
                    (x + 0.5, y),
                    style.text_centered(11.0, INK),
                )
            }))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figure::compute_at_query;
    use crate::query;

    fn compute_at(query_text: &str) -> Output {
        compute_at_query::<GroupAdvantages>(query_text).unwrap()
    }

    #[test]
    fn one_success_in_four_gives_sqrt3_and_minus_one_over_sqrt3() {
        let output = compute_at("rewards=1,0,0,0");
        let a = &output.advantages[0];
        assert!((a[0] - 3.0_f64.sqrt()).abs() < 1e-12);
        for failure in &a[1..] {
            assert!((failure + 1.0 / 3.0_f64.sqrt()).abs() < 1e-12);
        }
        let readouts = GroupAdvantages::readouts(&output);
        let first = readouts
            .iter()
            .find(|r| r.id == "group-advantages-a-0-0")
            .unwrap();
        assert_eq!(first.text(), "1.7321");
    }

    #[test]
    fn a_group_without_variation_has_zero_advantages() {
        let output = compute_at("rewards=0,0,0,0;1,0");
        assert!(output.advantages[0].iter().all(|a| *a == 0.0));
    }

    #[test]
    fn leave_one_out_without_scaling_is_reward_minus_others_mean() {
        let output = compute_at("rewards=1,0,0,0&scale=none&baseline=leave-one-out");
        assert!((output.advantages[0][0] - 1.0).abs() < 1e-12);
        assert!((output.advantages[0][1] + 1.0 / 3.0).abs() < 1e-12);
    }

    /// The bar labels in an SVG drawing of the figure at `width` pixels.
    fn bar_labels(width: u32) -> Vec<String> {
        let state = State::from_pairs(
            GroupAdvantages::META.controls,
            &query::parse("rewards=1,0,0,0;1,1,0,1"),
            "",
        );
        let figure = crate::chapters::figure(GroupAdvantages::META.id).unwrap();
        let svg = crate::export::render_svg(figure, &state, width).unwrap();
        svg.split("</text>")
            .filter_map(|chunk| chunk.rfind('>').map(|at| chunk[at + 1..].trim().to_owned()))
            // A bar's label: the reward and the advantage, or a number that is no tick
            // (the axis ticks are multiples of 0.5).
            .filter(|t| {
                t.starts_with("r=")
                    || t.replace('−', "-")
                        .parse::<f64>()
                        .is_ok_and(|v| (2.0 * v).fract() != 0.0)
            })
            .collect()
    }

    #[test]
    fn every_bar_gets_a_label_of_one_format_or_none_does() {
        let wide = bar_labels(900);
        assert_eq!(wide.len(), 8, "{wide:?}");
        assert!(
            wide.iter().all(|t| t.starts_with("r=") && t.contains("Â=")),
            "{wide:?}"
        );
        let narrow = bar_labels(360);
        assert!(narrow.is_empty() || narrow.len() == 8, "{narrow:?}");
        // One number format: as many decimals on every bar.
        let decimals: Vec<usize> = narrow
            .iter()
            .map(|t| t.rsplit('.').next().map_or(0, str::len))
            .collect();
        assert!(decimals.windows(2).all(|w| w[0] == w[1]), "{narrow:?}");
    }

    #[test]
    fn a_bad_reward_names_its_place() {
        let state = State::from_pairs(
            GroupAdvantages::META.controls,
            &query::parse("rewards=1,0;1,x"),
            "",
        );
        let err = GroupAdvantages::compute(&state).unwrap_err();
        assert_eq!(err.field, "rewards[1][1]");
    }
}

//! Loss reductions: how per-token losses of sequences of different lengths become one
//! number, drawn as per-token weight maps.
//!
//! With per-token losses `l_ik = -rho_ik \hat A_i` and lengths `L_i`, the reductions are
//! `seq-mean-token-mean` `(1/N) sum_i (1/L_i) sum_k l_ik` (GRPO), `token-mean`
//! `sum_ik l_ik / sum_i L_i` (DAPO), `seq-mean-token-sum` `(1/N) sum_i sum_k l_ik`, and
//! `dr_grpo` `sum_ik l_ik / (N C)` with `C` the longest length (Dr. GRPO, Liu et al.
//! 2025; the names follow verl `core_algos.agg_loss` and TRL `GRPOTrainer`). The
//! advantages come from `group-advantages`, the losses from `policy-loss`.

use arlbook_core::api::{group_advantages, policy_loss};
use arlbook_core::error::FieldError;
use arlbook_core::math::advantage::{Baseline, Scale, StdKind};
use arlbook_core::math::reduction::Reduction;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::compute::compute;
use crate::figure::{DrawResult, Figure, Meta, Readout, State, list, rewards, slider};
use crate::plot::{self, MUTED, Style};

/// The figure.
pub struct Reductions;

/// The reductions drawn, with their API names.
pub const REDUCTIONS: [(Reduction, &str); 4] = [
    (Reduction::SeqMeanTokenMean, "seq-mean-token-mean"),
    (Reduction::TokenMean, "token-mean"),
    (Reduction::SeqMeanTokenSum, "seq-mean-token-sum"),
    (Reduction::DrGrpo, "dr_grpo"),
];

/// Longest sequence the figure accepts (tokens).
const MAX_LENGTH: f64 = 64.0;

/// One reduction's result.
#[derive(Debug, Clone)]
pub struct Map {
    /// API name.
    pub reduction: &'static str,
    /// The loss.
    pub loss: f64,
    /// Weight `w_ik` of each token in the loss.
    pub weights: Vec<Vec<f64>>,
    /// `d loss / d logp_ik`.
    pub gradient: Vec<Vec<f64>>,
}

/// What the figure computes.
#[derive(Debug, Clone)]
pub struct Output {
    /// Advantage of each sequence.
    pub advantages: Vec<f64>,
    /// One map per reduction.
    pub maps: Vec<Map>,
}

impl Figure for Reductions {
    type Output = Output;

    const META: Meta = Meta {
        id: "reductions",
        title: "Loss reductions as per-token weight maps",
        caption: "Each row is one sequence, each cell one token; the number is the token's \
                  weight in the loss and the colour its push (blue up, red down). At the \
                  defaults the losses are 0, 0.2887, 1.1547 and 0.1925. Make the successful \
                  sequence longer and see which reductions dilute its tokens.",
        controls: &[
            list("lengths", "lengths L_i", "2,4,4,6"),
            rewards("rewards", "rewards r_i", "1,0,0,0"),
            slider("rho", "ratio ρ at every token", 0.5, 1.5, 0.01, "1"),
        ],
        aspect: 0.62,
        panels: 4,
    };

    fn compute(state: &State) -> Result<Output, FieldError> {
        let lengths = state.list("lengths")?;
        let rewards = state.list("rewards")?;
        let rho = state.number("rho")?;
        if lengths.len() != rewards.len() {
            return Err(FieldError::new(
                "rewards",
                format!(
                    "give one reward per sequence ({} lengths, {} rewards)",
                    lengths.len(),
                    rewards.len()
                ),
            ));
        }
        for (i, length) in lengths.iter().enumerate() {
            if *length < 1.0 || *length > MAX_LENGTH || length.fract() != 0.0 {
                return Err(FieldError::new(
                    format!("lengths[{i}]"),
                    "each length is a whole number from 1 to 64",
                ));
            }
        }
        let response =
            compute::<group_advantages::GroupAdvantagesEntry>(&group_advantages::Request {
                rewards: vec![rewards].into(),
                scale: Some(Scale::Group),
                std: Some(StdKind::Population),
                baseline: Some(Baseline::Mean),
                eps: Some(0.0),
                ..group_advantages::Request::default()
            })?;
        let advantages = Vec::<Vec<f64>>::from(response.advantages)
            .into_iter()
            .next()
            .ok_or_else(|| FieldError::new("(response).advantages", "no group, for one asked"))?;
        let old_logp: Vec<Vec<f64>> = lengths.iter().map(|l| vec![-1.0; *l as usize]).collect();
        let logp: Vec<Vec<f64>> = old_logp
            .iter()
            .map(|row| row.iter().map(|lp| lp + rho.ln()).collect())
            .collect();
        let mut maps = Vec::with_capacity(REDUCTIONS.len());
        for (reduction, name) in REDUCTIONS {
            // Wide clip widths: this figure isolates the reduction, not the clipping.
            let response = compute::<policy_loss::PolicyLossEntry>(&policy_loss::Request {
                logp: logp.clone().into(),
                old_logp: old_logp.clone().into(),
                advantages: policy_loss::Advantages::PerSequence(advantages.clone()),
                eps_low: Some(1.0),
                eps_high: Some(10.0),
                reduction: Some(reduction),
                ..policy_loss::Request::default()
            })?;
            maps.push(Map {
                reduction: name,
                loss: response.loss,
                weights: response.token_weights.into(),
                gradient: response.gradient.into(),
            });
        }
        Ok(Output { advantages, maps })
    }

    fn readouts(output: &Output) -> Vec<Readout> {
        let id = Self::META.id;
        let mut readouts: Vec<Readout> = output
            .maps
            .iter()
            .map(|m| {
                Readout::new(
                    id,
                    &format!("loss-{}", m.reduction),
                    format!("loss, {}", plot::rich::verbatim(m.reduction)),
                    m.loss,
                )
            })
            .collect();
        for (i, a) in output.advantages.iter().enumerate() {
            readouts.push(Readout::new(
                id,
                &format!("a-{i}"),
                format!("Â of sequence {}", i + 1),
                *a,
            ));
        }
        readouts
    }

    fn draw<DB: DrawingBackend>(
        output: &Output,
        area: &DrawingArea<DB, Shift>,
        style: &Style,
    ) -> DrawResult<DB> {
        let limit = plot::extent(
            output
                .maps
                .iter()
                .flat_map(|m| m.gradient.iter().flatten())
                .map(|g| g.abs()),
        )
        .1;
        let panels = area.split_evenly(if style.narrow { (4, 1) } else { (2, 2) });
        for (map, panel) in output.maps.iter().zip(panels.iter()) {
            let title = format!(
                "{}: loss = {}",
                plot::rich::verbatim(map.reduction),
                plot::format_number(map.loss, plot::DECIMALS)
            );
            let inner = panel.margin(style.px(6.0), style.px(6.0), style.px(6.0), style.px(6.0));
            let inner = plot::titled(&inner, &title, style)?;
            let (width, height) = inner.dim_in_pixel();
            let rows = map.weights.len().max(1);
            let columns = map.weights.iter().map(Vec::len).max().unwrap_or(1).max(1);
            let label_width = style.px(46.0) as i32;
            let cell_w = ((width as i32 - label_width) / columns as i32).max(1);
            let cell_h = (height as i32 / rows as i32).max(1);
            for (i, (weights, gradient)) in map.weights.iter().zip(&map.gradient).enumerate() {
                let y = i as i32 * cell_h;
                let a = output.advantages.get(i).copied().unwrap_or(0.0);
                inner.draw(&Text::new(
                    format!("Â={a:.2}"),
                    (0, y + cell_h / 2),
                    style
                        .text_colored(10.0, MUTED)
                        .pos(plotters::style::text_anchor::Pos::new(
                            plotters::style::text_anchor::HPos::Left,
                            plotters::style::text_anchor::VPos::Center,
                        )),
                ))?;
                for (k, (w, g)) in weights.iter().zip(gradient).enumerate() {
                    let x = label_width + k as i32 * cell_w;
                    // The push on log-probability is minus the loss gradient.
                    let fill = plot::diverging(-g, limit);
                    inner.draw(&Rectangle::new(
                        [(x + 1, y + 1), (x + cell_w - 1, y + cell_h - 1)],
                        fill.filled(),
                    ))?;
                    if cell_w > style.px(26.0) as i32 {
                        inner.draw(&Text::new(
                            plot::format_number(*w, plot::LABEL_DECIMALS),
                            (x + cell_w / 2, y + cell_h / 2),
                            style.text_centered(10.0, plot::text_on(fill)),
                        ))?;
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figure::compute_at_query;

    fn compute_at(query_text: &str) -> Result<Output, FieldError> {
        compute_at_query::<Reductions>(query_text)
    }

    fn loss(output: &Output, reduction: &str) -> f64 {
        output
            .maps
            .iter()
            .find(|m| m.reduction == reduction)
            .unwrap()
            .loss
    }

    #[test]
    fn article_losses_at_lengths_2_4_4_6() {
        let output = compute_at("").unwrap();
        let root3 = 3.0_f64.sqrt();
        assert!(loss(&output, "seq-mean-token-mean").abs() < 1e-12);
        assert!((loss(&output, "token-mean") - 1.0 / (2.0 * root3)).abs() < 1e-12);
        assert!((loss(&output, "dr_grpo") - 1.0 / (3.0 * root3)).abs() < 1e-12);
        // Sum per sequence, mean over sequences: -(2 sqrt3 - 14/sqrt3) / 4 = 2/sqrt3.
        assert!((loss(&output, "seq-mean-token-sum") - 2.0 / root3).abs() < 1e-12);
    }

    #[test]
    fn token_mean_weights_every_token_equally() {
        let output = compute_at("").unwrap();
        let map = output
            .maps
            .iter()
            .find(|m| m.reduction == "token-mean")
            .unwrap();
        for w in map.weights.iter().flatten() {
            assert!((w - 1.0 / 16.0).abs() < 1e-12);
        }
    }

    #[test]
    fn mismatched_lists_and_bad_lengths_are_named() {
        assert_eq!(compute_at("rewards=1,0").unwrap_err().field, "rewards");
        assert_eq!(
            compute_at("lengths=2,0,4,4").unwrap_err().field,
            "lengths[1]"
        );
    }
}

//! Chapter: the KL-regularised objective, its optimal policy, DPO, and the KL
//! estimators a trainer uses for the penalty.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{Block, Chapter};
use crate::figure::DrawResult;
use crate::plot::{self, Style};

pub mod dpo;
pub mod estimators;
pub mod optimum;

/// The six responses every figure of the chapter uses: how likely the reference policy
/// is to give each, and the reward each earns. The best response (F) is the rarest.
pub const REFERENCE: [f64; 6] = [0.3, 0.25, 0.2, 0.12, 0.08, 0.05];
/// Rewards of responses A to E; F's reward is a control of the optimum figure.
pub const REWARDS: [f64; 5] = [0.1, 0.3, 0.2, 0.9, 0.5];
/// Labels of the six responses.
pub const LABELS: [&str; 6] = ["A", "B", "C", "D", "E", "F"];

/// Grouped bars over the six responses on `area`: one bar per series (probabilities
/// and a colour), side by side within each response.
///
/// # Errors
/// When the backend fails to draw.
pub fn response_bars<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    caption: &str,
    style: &Style,
    series: &[(&[f64], RGBColor)],
) -> DrawResult<DB> {
    let top = series
        .iter()
        .flat_map(|(values, _)| values.iter())
        .fold(0.0_f64, |m, p| m.max(*p));
    // Ticks such as `0.15` and the rotated title beside them need more than the
    // standard label area.
    let mut chart = plot::framed_chart_with_labels(
        area,
        caption,
        style,
        -0.5..LABELS.len() as f64 - 0.5,
        0.0..(top * 1.1).max(0.05),
        style.px(50.0),
    )?;
    plot::mesh(&mut chart, style)
        .x_labels(LABELS.len())
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 1e-9 && (0.0..LABELS.len() as f64).contains(&i) {
                LABELS[i as usize].to_owned()
            } else {
                String::new()
            }
        })
        .x_desc("response")
        .y_desc("probability")
        .draw()?;
    let slot = 0.78 / series.len().max(1) as f64;
    for (j, (values, color)) in series.iter().enumerate() {
        let offset = -0.39 + j as f64 * slot;
        chart.draw_series(values.iter().enumerate().map(|(i, &p)| {
            let x = i as f64 + offset;
            Rectangle::new(
                [(x + 0.01, 0.0), (x + slot - 0.01, p)],
                color.mix(0.85).filled(),
            )
        }))?;
    }
    Ok(())
}

/// The chapter.
pub const CHAPTER: Chapter = Chapter {
    id: "kl-objective",
    title: "The KL-regularised objective",
    summary: "Reward minus a price on leaving the reference: its optimal policy, DPO's shortcut to it, and how the penalty is estimated.",
    blocks: &[
        Block::Text(
            "Before any gradient estimator, it helps to know what a trainer is aiming at. \
             Most RL fine-tuning of language models maximises reward while charging the \
             policy for every nat it moves away from a reference policy $\\pi_{\\mathrm{ref}}$, \
             usually the supervised model training began from:",
        ),
        Block::Display(
            r"J(\pi) = \mathbb{E}_{y \sim \pi}[r(y)] - \beta \, \mathrm{KL}(\pi \,\|\, \pi_{\mathrm{ref}})",
        ),
        Block::Text(
            "For a single prompt and a finite set of responses this has an exact answer. \
             The best policy reweights the reference by the exponentiated reward, and the \
             objective it reaches is $\\beta$ times the log of the normaliser:",
        ),
        Block::Display(
            r"\pi^*(y) = \frac{\pi_{\mathrm{ref}}(y) \exp(r(y) / \beta)}{Z(\beta)}, \quad J(\pi^*) = \beta \log Z(\beta)",
        ),
        Block::Text(
            "Two things follow. The coefficient $\\beta$ is an exchange rate between reward \
             and divergence: large $\\beta$ keeps the optimum at the reference, small \
             $\\beta$ pushes it onto the best response the reference can produce. And a \
             response the reference never gives stays impossible at every $\\beta$, \
             however well it would score: the penalty cannot create behaviour, only \
             re-weight it. Drag $\\beta$ below and watch the optimum slide along the \
             frontier of reward against KL.",
        ),
        Block::Text(
            "The first two figures share one prompt with six responses A to F. The \
             reference gives them probabilities 0.30, 0.25, 0.20, 0.12, 0.08 and 0.05, and \
             they earn rewards 0.1, 0.3, 0.2, 0.9, 0.5 and 1 (F's reward is a control of \
             the first figure), so the best response is also the rarest. With these \
             numbers, arlbook compute kl-regularized-optimum and arlbook compute dpo on \
             the command line reproduce every readout.",
        ),
        Block::Figure("kl-optimum"),
        Block::Heading("DPO: the same optimum from preference pairs"),
        Block::Text(
            "Read the optimal policy backwards and the reward becomes a log-ratio of two \
             policies, $r(y) = \\beta \\log(\\pi^*(y) / \\pi_{\\mathrm{ref}}(y)) + \\beta \\log Z$. \
             Put that into the Bradley-Terry model of preferences, where response $a$ \
             beats $b$ with probability $\\sigma(r(a) - r(b))$, and the normaliser cancels. \
             What remains is a classification loss on pairs of a chosen response $y_w$ and a \
             rejected one $y_l$, with no reward model and no sampling during training:",
        ),
        Block::Display(
            r"L_{\mathrm{DPO}} = -\log \sigma(\beta \log \frac{\pi(y_w)}{\pi_{\mathrm{ref}}(y_w)} - \beta \log \frac{\pi(y_l)}{\pi_{\mathrm{ref}}(y_l)})",
        ),
        Block::Text(
            "The quantity $\\beta \\log(\\pi / \\pi_{\\mathrm{ref}})$ is the implicit reward that \
             TRL logs as chosen and rejected rewards. If pairs keep arriving from the \
             reference with labels drawn from the true rewards, minimising the loss lands \
             exactly on $\\pi^*$ for the same $\\beta$. With a few hundred pairs it does \
             not: a response that happened to win every comparison it was in is pushed \
             ever higher, because nothing in the loss stops it. The figure fits DPO on a \
             growing number of sampled pairs and measures how far the result is from the \
             optimum of the first figure.",
        ),
        Block::Figure("dpo"),
        Block::Text(
            "Fixed preference data covers only the responses someone collected. An agent's \
             own actions lead it into states no pair describes, which is why online \
             variants gather fresh pairs from the current policy; the loss and the data \
             collection are separate choices and both belong in a report.",
        ),
        Block::Heading("The penalty in a trainer: reference and estimator"),
        Block::Text(
            "Policy-gradient trainers such as GRPO add the same penalty to the loss, \
             $J_{\\mathrm{RL}} - \\beta \\, \\mathrm{KL}(\\pi_\\theta \\,\\|\\, \\pi_{\\mathrm{ref}})$. \
             It guards against something different from PPO's clip. The clip keeps one \
             update near the policy that collected the batch; the KL term keeps the whole \
             run near a chosen reference. That reference may stay frozen at the starting \
             model or be refreshed every so many steps, which turns the penalty into a \
             running leash rather than a fixed anchor, so the rule has to be stated with \
             the result. The penalty also survives batches where every reward in a group is \
             equal and the group advantage is zero.",
        ),
        Block::Text(
            "A trainer cannot sum over every response, so it estimates the KL from the \
             tokens it sampled. With $x = \\log \\pi_\\theta(a) - \\log \\pi_{\\mathrm{ref}}(a)$ \
             at a sampled token, three estimators are in use:",
        ),
        Block::Display(r"k_1 = x, \quad k_2 = \frac{x^2}{2}, \quad k_3 = e^{-x} - 1 + x"),
        Block::Text(
            "$k_1$ is unbiased but a single sample is often negative, which makes no sense \
             for a divergence. $k_2$ is never negative but biased once the policies differ. \
             $k_3$ is never negative and unbiased as long as the policy covers every \
             response the reference can give, and close to the reference its spread is \
             small; far from it, the $e^{-x}$ term grows on the tokens the policy has \
             learned to avoid, and so does its variance. It is what TRL's GRPO trainer \
             uses and what verl calls low_var_kl. Move the policies apart and compare the three spreads \
             with the true value; the trainer's kl_estimator setting chooses among them.",
        ),
        Block::Figure("kl-estimators"),
    ],
};

#[cfg(test)]
mod tests {
    use super::*;

    /// The paragraph that lists the figures' inputs lists the ones the code uses.
    #[test]
    fn the_text_states_the_figures_inputs() {
        let text = CHAPTER
            .blocks
            .iter()
            .find_map(|b| match b {
                Block::Text(t) if t.contains("six responses A to F") => Some(*t),
                _ => None,
            })
            .unwrap();
        let listed = |values: &[f64], decimals: usize| {
            values
                .iter()
                .map(|v| format!("{v:.decimals$}"))
                .collect::<Vec<_>>()
        };
        let probabilities = listed(&REFERENCE, 2).join(", ");
        let (head, last) = probabilities.rsplit_once(", ").unwrap();
        assert!(text.contains(&format!("{head} and {last}")), "{text}");
        let rewards = listed(&REWARDS, 1).join(", ");
        assert!(text.contains(&format!("rewards {rewards} and 1")), "{text}");
    }
}

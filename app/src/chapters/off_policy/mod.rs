//! Chapter: learning from data another policy collected; importance weights.

use super::{Block, Chapter};

pub mod importance;

/// The chapter.
pub const CHAPTER: Chapter = Chapter {
    id: "off-policy",
    title: "Off-policy data and importance sampling",
    summary: "Reweighting samples from the collecting policy so they say something about the policy being trained.",
    blocks: &[
        Block::Text(
            "The policy gradient is an average over the policy's own samples. After one \
             update, the samples in hand come from a slightly different policy. Four \
             distributions are worth keeping apart: the policy being trained \
             $\\pi_\\theta$, the snapshot that was current at collection $\\pi_{\\mathrm{old}}$, \
             the distribution the tokens were actually sampled from $\\mu$ (temperature, \
             top-p and the inference engine can make it differ from $\\pi_{\\mathrm{old}}$), \
             and a fixed reference $\\pi_{\\mathrm{ref}}$ used only to measure drift.",
        ),
        Block::Text(
            "Samples from $\\mu$ can estimate an average under $\\pi$ if each one is weighted \
             by how much more (or less) likely $\\pi$ would have made it:",
        ),
        Block::Display(
            r"\mathbb{E}_{a \sim \pi}[f(a)] = \mathbb{E}_{a \sim \mu}\left[ \frac{\pi(a)}{\mu(a)} f(a) \right]",
        ),
        Block::Text(
            "The identity needs $\\mu(a) > 0$ wherever $\\pi(a) > 0$: an action never \
             collected cannot be reweighted. With $\\mu(A) = 0.2$ and $\\pi(A) = 0.6$, A's \
             weight is 3 and B's is 0.5, and with $f(A) = 0.75$, $f(B) = 0.35$ the target is \
             $0.6 \\times 0.75 + 0.4 \\times 0.35 = 0.59$. Any finite sample only scatters \
             around it; the less the two policies overlap, the wider the scatter.",
        ),
        Block::Text(
            "The effective sample size $(\\sum_i w_i)^2 / \\sum_i w_i^2$ says how many \
             unweighted samples the weighted ones are worth. Dividing by the sum of the \
             weights instead of $N$ (self-normalisation) bounds the estimate between the \
             smallest and largest $f$, at the price of a small bias. Over a whole trajectory \
             the weight is a product of per-step ratios, which is why its variance can grow \
             so quickly, and why PPO works with per-token ratios and a clip instead.",
        ),
        Block::Figure("importance"),
    ],
};

//! Chapter: GRPO's group-relative advantages and the loss reductions.

use super::{Block, Chapter};

pub mod group_advantages;
pub mod over_a_run;
pub mod reductions;

/// The chapter.
pub const CHAPTER: Chapter = Chapter {
    id: "grpo",
    title: "GRPO and loss reductions",
    summary: "Advantages from a group of attempts at the same task, and the quiet choice of how token losses are averaged.",
    blocks: &[
        Block::Text(
            "GRPO needs no value network. It samples a group of $G$ attempts at the same \
             task, scores each, and compares every reward with the others in its group:",
        ),
        Block::Display(
            r"\hat A_i = \frac{r_i - \mean(r_1, \ldots, r_G)}{\std(r_1, \ldots, r_G) + \varepsilon}",
        ),
        Block::Text(
            "Every token of attempt $i$ then carries the same $\\hat A_i$. With one success \
             among four attempts the mean is 0.25 and the population standard deviation \
             $\\sqrt{3}/4$, so the success gets $\\sqrt{3} \\approx 1.732$ and each failure \
             $-1/\\sqrt{3} \\approx -0.577$. A group whose attempts all score the same has \
             zero advantages: it teaches nothing.",
        ),
        Block::Text(
            "Variants differ in small ways that matter: dividing by the batch's standard \
             deviation instead of the group's, not dividing at all, or using the mean of the \
             other $G - 1$ rewards as the baseline (RLOO), which keeps the gradient unbiased.",
        ),
        Block::Figure("group-advantages"),
        Block::Heading("From token losses to one number"),
        Block::Text(
            "Attempts have different lengths, and the per-token losses \
             $\\ell_{ik} = -\\rho_{ik} \\hat A_i$ must be averaged somehow. Averaging within \
             each sequence first gives every sequence the same total weight, so a token of a \
             short answer counts more than a token of a long one. Averaging over all tokens \
             of the batch gives every token the same weight. Dividing the plain sum by a \
             constant $N C$ does the same without making the weight depend on the batch.",
        ),
        Block::Display(
            r"\text{seq-mean-token-mean:} \quad \frac{1}{N} \sum_i \frac{1}{L_i} \sum_k \ell_{ik}",
        ),
        Block::Display(r"\text{token-mean:} \quad \frac{\sum_{i,k} \ell_{ik}}{\sum_i L_i}"),
        Block::Display(r"\text{seq-mean-token-sum:} \quad \frac{1}{N} \sum_i \sum_k \ell_{ik}"),
        Block::Display(r"\text{dr_grpo (constant C):} \quad \frac{\sum_{i,k} \ell_{ik}}{N C}"),
        Block::Text(
            "With lengths 2, 4, 4, 6, rewards 1, 0, 0, 0 and $\\rho = 1$, the first gives 0, \
             the second $1/(2\\sqrt{3}) \\approx 0.2887$ and the last (with $C = 6$) \
             $1/(3\\sqrt{3}) \\approx 0.1925$. These numbers are not scores: a loss of zero \
             still has a non-zero gradient, and losses under different reductions cannot be \
             compared.",
        ),
        Block::Figure("reductions"),
        Block::Heading("GRPO over a run"),
        Block::Text(
            "One step of the loss says little about where a run goes. The figure below \
             trains a tiny policy for hundreds of steps with the same update the trainer \
             uses: a table of logits, one row per position and previous token, picks \
             tokens from six (token 0 ends the answer, at most eight tokens), and an \
             answer passes when it holds tokens 2 and 3 side by side. Each step samples \
             $B$ groups of $G$ answers, scores them, compares each reward with its \
             group, and takes $E$ clipped steps on the batch.",
        ),
        Block::Text(
            "Three choices argued over in practice show up within seconds. The reduction \
             decides how much each token of an answer weighs: under seq-mean-token-mean a \
             short passing answer puts more weight on each of its tokens than a long one, \
             so answers shrink once most of them pass (the bias Dr. GRPO removes by \
             dividing by a constant). The upper clip width decides how fast a rare token \
             that helped may grow: with $\\varepsilon_{\\mathrm{high}} = \\varepsilon_{\\mathrm{low}}$ \
             a policy that starts out sure of one token loses its spread faster than with \
             DAPO's wider upper bound. And $\\beta$ ties the policy to where it started: \
             the KL estimate in the loss keeps the distance small, at the price of \
             reward.",
        ),
        Block::Figure("grpo-run"),
    ],
};

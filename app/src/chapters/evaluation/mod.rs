//! Chapter: evaluation — pass@k, intervals and budgets.

use super::{Block, Chapter};

pub mod budget;
pub mod pass_at_k;

/// The chapter.
pub const CHAPTER: Chapter = Chapter {
    id: "evaluation",
    title: "Evaluation and budgets",
    summary: "Estimating pass@k without bias, how uncertain a success rate is, and what a run costs.",
    blocks: &[
        Block::Text(
            "If one attempt succeeds with probability $p$, at least one of $k$ independent \
             attempts succeeds with probability $1 - (1 - p)^k$. That is the chance a good \
             candidate exists — not the chance that a selector picks it, which has to be \
             measured on its own.",
        ),
        Block::Text(
            "To estimate it, generate $n \\ge k$ candidates per task, count the $c$ that \
             pass, and compute the probability that a random subset of $k$ contains at \
             least one of them:",
        ),
        Block::Display(
            r"\widehat{\operatorname{pass@k}} = 1 - \frac{\binom{n - c}{k}}{\binom{n}{k}}",
        ),
        Block::Text(
            "With $n = 10$, $c = 2$, $k = 3$ this is $1 - 56/120 \\approx 0.533$. Putting \
             the observed rate $c/n$ into $1 - (1 - c/n)^k$ instead gives 0.488, which is \
             biased low. Over many tasks, average the per-task estimates; do not apply the \
             formula to an averaged rate.",
        ),
        Block::Text(
            "A success rate measured on $n$ independent tasks has standard error \
             $\\sqrt{p(1 - p)/n}$: about 0.035 for 50% on 200 tasks, so a 95% interval \
             reaches about 7 points either side. Two policies evaluated on the same tasks \
             are better compared through their per-task differences, and repeated attempts \
             at one task are not independent tasks.",
        ),
        Block::Figure("pass-at-k"),
        Block::Heading("Budgets"),
        Block::Text(
            "Training cost is counted in rollouts and tokens, not optimiser steps. $K$ \
             collection rounds of $B$ tasks with $G$ rollouts each generate $K B G$ \
             trajectories; if only a fraction $\\alpha$ of groups is kept, about \
             $K B G / \\alpha$ must be generated to keep the same number.",
        ),
        Block::Figure("rollout-budget"),
    ],
};

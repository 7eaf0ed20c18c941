//! Chapter: the policy gradient, on the smallest problem that has one.

use super::{Block, Chapter};

pub mod bandit;

/// The chapter.
pub const CHAPTER: Chapter = Chapter {
    id: "policy-gradient",
    title: "Policy gradient on two actions",
    summary: "The score-function gradient, its noise, and what a baseline may and may not depend on.",
    blocks: &[
        Block::Text(
            "Reinforcement learning changes a policy so that the rewards it collects go up. \
             The policy gradient says how: raise the log-probability of what was done, in \
             proportion to how well it turned out.",
        ),
        Block::Display(
            r"\nabla_\theta J = \mathbb{E}_{\tau \sim \pi_\theta}\left[ R(\tau) \sum_t \nabla_\theta \log \pi_\theta(a_t \mid h_t) \right]",
        ),
        Block::Text(
            "To see every part of that formula at once, shrink the problem to one choice \
             between two actions. Action A is taken with probability $p = \\sigma(z)$, where \
             $z$ is a single logit, and succeeds with probability $q_A$; action B succeeds \
             with probability $q_B$. The expected reward is $p q_A + (1 - p) q_B$, so its \
             derivative in $z$ is known exactly:",
        ),
        Block::Display(r"\frac{d}{dz} \mathbb{E}[R] = (q_A - q_B)\, p (1 - p)"),
        Block::Text(
            "With $q_A = 0.75$, $q_B = 0.35$ and $p = 0.5$ this is $0.4 \\times 0.25 = 0.1$. \
             A single sample estimates it by $R (\\mathbf{1}\\{a = A\\} - p)$ — which, at \
             $p = 0.5$, is $+0.5$ for a success with A, $-0.5$ for a success with B, and 0 for \
             a failure. Each estimate is right only on average; the dots below are averages \
             of $N$ such samples, drawn again $M$ times.",
        ),
        Block::Heading("Baselines"),
        Block::Text(
            "Subtracting a baseline $b$ from the reward leaves the expected gradient alone \
             as long as $b$ does not depend on the action the sample took, because the \
             expected score is zero:",
        ),
        Block::Display(
            r"\mathbb{E}_{a \sim \pi}[\, b \, \nabla \log \pi(a) \,] = b \, \nabla \sum_a \pi(a) = 0",
        ),
        Block::Text(
            "A good baseline removes much of the noise. Group methods sample $G$ attempts \
             per task and use the attempts' mean reward. If that mean includes the sample's \
             own reward, it depends on the action, and the expected estimate shrinks by \
             $(G - 1)/G$ — a quarter for $G = 4$. The leave-one-out mean, built from the \
             other $G - 1$ rewards only, keeps the expectation exact.",
        ),
        Block::Figure("bandit"),
    ],
};

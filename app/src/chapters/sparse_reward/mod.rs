//! Chapter: sparse reward, dynamic sampling, and (next) reward shaping.

use super::{Block, Chapter};

pub mod mixed_groups;
pub mod shaping;

/// The chapter.
pub const CHAPTER: Chapter = Chapter {
    id: "sparse-reward",
    title: "Sparse reward, dynamic sampling and shaping",
    summary: "A group teaches only if its attempts disagree; what that means for hard tasks and for the collection budget.",
    blocks: &[
        Block::Text(
            "With a reward of 1 only at the very end, a task the policy never solves gives \
             nothing to compare. Group advantages make this concrete: a group whose \
             attempts all fail (or all succeed) has zero advantages and adds no gradient. \
             If the attempts succeed independently with probability $p$, a group of $G$ is \
             mixed with probability",
        ),
        Block::Display(r"P(\text{mixed}) = 1 - p^G - (1 - p)^G"),
        Block::Text(
            "That is 87.5% at $p = 0.5$ and $G = 4$, but only about 3.94% at $p = 0.01$; \
             quadrupling the group to 16 lifts it to about 14.85%, for four times the \
             rollouts per group. Before choosing an algorithm for a hard task, make sure the \
             policy succeeds sometimes.",
        ),
        Block::Text(
            "Dynamic sampling throws away groups without a signal and keeps drawing until \
             the batch holds $B$ mixed groups. The number of groups drawn is then a \
             negative-binomial count with mean $B / P$, so the expected number of rollouts \
             is $B G / P$. The batch looks full, but the cost hides in the discarded \
             rollouts — and the kept tasks no longer represent the task distribution, which \
             is worth reporting alongside any result.",
        ),
        Block::Figure("mixed-groups"),
        Block::Heading("Credit and shaping"),
        Block::Text(
            "A final reward gives every action of a successful run the same credit, the \
             useless repeated test run as much as the decisive edit. Adding intermediate \
             rewards can help, but a naive bonus (say, for every test run) changes which \
             policy is best: the agent learns to collect bonuses. A potential-based bonus \
             $\\gamma \\Phi(s') - \\Phi(s)$ telescopes along any trajectory, so it leaves the \
             ranking of policies unchanged while still guiding learning.",
        ),
        Block::Display(
            r"\sum_{t=0}^{T-1} \gamma^t \left( \gamma \Phi(s_{t+1}) - \Phi(s_t) \right) = \gamma^T \Phi(s_T) - \Phi(s_0)",
        ),
        Block::Figure("shaping"),
    ],
};

//! Chapter: learning from a teacher's distribution.

use super::{Block, Chapter};

pub mod kl_fit;

/// The chapter.
pub const CHAPTER: Chapter = Chapter {
    id: "distillation",
    title: "Distillation",
    summary: "Imitating a teacher: which direction of the KL divergence, and on whose samples.",
    blocks: &[
        Block::Text(
            "When a stronger model can solve the tasks, its behaviour is a denser signal \
             than a reward of 0 or 1: every token gets a target. Supervised fine-tuning on \
             the teacher's successful runs is the simplest form; it trains only on the \
             action tokens, while tool outputs stay context.",
        ),
        Block::Text(
            "With the teacher's full distribution available, the student can minimise a \
             divergence between the two. The forward direction averages over the teacher's \
             samples and punishes the student for missing anything the teacher does; the \
             reverse direction averages over the student's own samples and punishes it for \
             doing what the teacher would not:",
        ),
        Block::Display(r"\mathrm{KL}(p \,\|\, q) = \sum_x p(x) \log \frac{p(x)}{q(x)}"),
        Block::Text(
            "For a student too simple to copy a teacher with two modes, the forward \
             direction spreads the student over both (mass-covering), and the reverse \
             direction settles on one (mode-seeking). On-policy distillation uses the \
             reverse direction on sequences the student generated itself, so it learns to \
             recover from its own mistakes rather than only from states the teacher visits.",
        ),
        Block::Figure("distill"),
    ],
};

//! Chapter: training a small policy and watching it.

use super::{Block, Chapter};

/// The chapter.
pub const CHAPTER: Chapter = Chapter {
    id: "live-training",
    title: "Live training",
    summary: "A small policy trained with GRPO on the code-repair environment, its metrics streamed from the server.",
    blocks: &[
        Block::Text(
            "Everything in the previous chapters comes together in a training run: the \
             environment produces episodes, groups of them give advantages, the clipped \
             objective with a chosen reduction gives a loss, and the metrics tell whether \
             learning is healthy — the reward and success rate, the fraction of groups that \
             carried a signal, the clip fractions on each side, the KL to the reference, \
             the generated length and the entropy.",
        ),
        Block::Text(
            "Runs are started and watched through the server (`arlbook serve`) with a \
             training configuration; their metrics arrive as a stream of events. This \
             chapter's live charts are not part of this build of the notebook yet.",
        ),
    ],
};

//! Chapter: asynchronous collection and how stale its samples are.

use super::{Block, Chapter};

pub mod lag_filter;

/// The chapter.
pub const CHAPTER: Chapter = Chapter {
    id: "async",
    title: "Asynchronous collection and policy lag",
    summary: "Keeping the trainer busy with rollouts from slightly older policies, and bounding how old they may be.",
    blocks: &[
        Block::Text(
            "Agent episodes vary wildly in length: one run finishes in two tool calls, \
             another waits on a slow test suite. If the trainer waits for the slowest \
             episode of every batch, the accelerators sit idle. Asynchronous systems let \
             workers keep generating while the trainer updates, and take whatever episodes \
             have finished.",
        ),
        Block::Text(
            "The price is lag: an episode started under policy version $k$ may finish after \
             the trainer reached $k + 3$. The ratio $\\rho$ then compares against an older \
             behaviour policy, the clip bites more often, and very stale samples mostly add \
             noise. A common rule keeps a sample only if its lag is at most a bound, and \
             discards the rest — trading collected work for freshness.",
        ),
        Block::Display(
            r"\mathrm{lag} = k_{\mathrm{train}} - k_{\mathrm{collect}} \le \Delta_{\max}",
        ),
        Block::Figure("lag"),
    ],
};

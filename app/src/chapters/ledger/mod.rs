//! Chapter: the episode record and its token ledger.

use super::{Block, Chapter};

pub mod token_ledger;

/// The chapter.
pub const CHAPTER: Chapter = Chapter {
    id: "ledger",
    title: "The episode record and the token ledger",
    summary: "Which tokens the policy produced, which the environment did, and which of them the loss may train on.",
    blocks: &[
        Block::Text(
            "A finished episode is one long token sequence: the prompt, then alternating \
             actions (tokens the policy sampled) and observations (tokens the harness \
             inserted: test logs, file contents). Only actions are the policy's choices, so \
             only they carry a loss. A loss mask marks them with 1 and everything else with 0.",
        ),
        Block::Text(
            "The record keeps the token ids actually used — not a re-tokenisation of the \
             text afterwards, which can split differently — together with the \
             log-probability each sampled token had under the collecting policy. Those \
             numbers are what the ratio $\\rho$ of a later chapter divides by.",
        ),
        Block::Text(
            "A language model predicts token $t + 1$ from the tokens up to $t$, so the logits \
             at position $t$ are scored against the label at $t + 1$. The mask has to move \
             with the labels: if it is applied to the logits without that one-step shift, \
             the first token of every tool result is trained as if the policy had chosen \
             it, and the first token of every action is skipped. The number of trainable tokens \
             is the sum of the shifted mask.",
        ),
        Block::Display(
            r"\ell = -\sum_{t} m_{t+1} \log \pi_\theta(x_{t+1} \mid x_{1}, \ldots, x_{t})",
        ),
        Block::Figure("token-ledger"),
    ],
};

//! Chapter: training a small policy and watching it.
//!
//! With `arlbook serve` behind the page, the chapter starts training jobs and streams
//! their metrics; opened as static files, it shows a recorded run instead. The parsing
//! ([`metrics`], [`jobs`]) and the chart ([`chart`]) compile natively and are tested
//! here; the browser half lives in `web::live`.

use super::{Block, Chapter};

pub mod chart;
pub mod jobs;
pub mod metrics;

/// A real run's metrics (`arlbook train --config configs/cpu-small.toml --seed 7`, with
/// the tool results as SFT targets at weight 0.5, demonstrations from 48,000 tasks and
/// GRPO sampling at 1.2; `configs/record/observation-loss/seed-7/`): every
/// tenth of its 6,000 SFT rows, its 600 GRPO rows and 25 validation rows (the probe,
/// selection and gate rows left out), reduced to the fields the chart reads.
pub const RECORDED_RUN: &str = include_str!("../../../data/recorded-run.jsonl");

/// The chapter.
pub const CHAPTER: Chapter = Chapter {
    id: "live-training",
    title: "Live training",
    summary: "A small policy trained with GRPO on the code-repair environment, its metrics streamed from the server.",
    blocks: &[
        Block::Text(
            "Here the pieces of the earlier chapters run together. A small transformer \
             first imitates teacher demonstrations (SFT), then improves by GRPO: it \
             samples groups of episodes, turns their rewards into advantages, and takes \
             clipped policy-gradient steps. Each step writes one row of metrics, and the \
             charts below plot them as they arrive.",
        ),
        Block::Live,
        Block::Heading("Reading the panels"),
        Block::Text(
            "SFT loss: the cross-entropy on the teacher's tokens. It should fall quickly \
             and then flatten; a curve that stays flat means the model is not learning \
             the format it will need for GRPO.",
        ),
        Block::Text(
            "Success and reward: the share of the step's rollouts that fixed their task, \
             and their mean reward, with held-out validation as dots. Two success lines: \
             every rollout the step sampled, and the ones kept for the update. With \
             dynamic sampling only groups with mixed outcomes are kept, so the kept line \
             counts successes inside those groups and can sit far above what the policy \
             manages; the policy's own rate is the line over all sampled rollouts. On a healthy run both drift upward; noise \
             from step to step is normal with small groups.",
        ),
        Block::Text(
            "Effective group fraction: the share of groups whose rewards were not all \
             equal. Only those groups have nonzero advantages, so this is the part of \
             the batch that teaches anything. Near zero, the task is too hard (all fail) \
             or already solved (all pass).",
        ),
        Block::Text(
            "Clip fractions: how many tokens had their ratio cut at the low or the high \
             bound. Small values mean the update stayed near the sampling policy; large \
             or growing ones mean steps that are too big or stale data. The recorded run \
             takes one optimiser step per batch of fresh rollouts, so every ratio is 1 \
             and both fractions stay at 0.",
        ),
        Block::Text(
            "KL, entropy and length: the KL to the reference should grow slowly, not \
             jump (the recorded run has no KL penalty and logs 0; the chapter on the \
             KL-regularised objective shows what the trainer's k1, k2 and k3 settings \
             estimate); entropy that collapses toward 0 means the policy stopped exploring, \
             and a generated length that runs to the token limit often means the model \
             found a way to ramble rather than to solve.",
        ),
    ],
};

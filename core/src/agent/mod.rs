//! The code-repair environment: a seeded world of small buggy functions, the tools an
//! agent repairs them with, the harness loop and the token-level trajectory record.
//!
//! It generalises the article's running example (fix `findMax`, whose candidate
//! maximum starts at 0, using `run_tests`, `read_code`, `write_code` and `finish`):
//!
//! - [`lang`], [`program`] and [`interp`]: a tiny line-oriented language over integer
//!   lists, its block structure, and a step-limited interpreter whose failures are
//!   observations, not panics.
//! - [`grammar`], [`key`] and [`task`]: a program grammar (loop form, guard, element
//!   map, aggregate) with six bug operators at any eligible site, problem keys,
//!   train / validation / test splits by key with two test tiers, and the seeded task
//!   generator.
//! - [`tokenizer`] and [`action`]: a fixed vocabulary of 473 tokens and the call
//!   syntax the policy emits.
//! - [`env`], [`harness`]: the tools and the loop with turn and token budgets,
//!   termination vs truncation, and injected environment faults.
//! - [`record`], [`batch`], [`reward`], [`stats`]: the token-in / token-out record, the
//!   padded `[N, S]` arrays with the shifted loss mask, per-turn reward schemes for the
//!   shaping figure, and summary statistics.
//! - [`failure`]: why a failed episode failed, one cause each (no edit, an unknown
//!   name, the wrong line, the wrong text, a budget, malformed calls).
//! - [`policy`] and [`derive`]: the trait the learned policy implements, a scripted
//!   teacher whose repair is derived from the specification and the listing, and a
//!   uniform-random baseline; [`replacement`]: the smallest `replace` call the teacher
//!   writes when the harness has that tool; [`mistake`]: the teacher with one refused
//!   edit before the right one (refused-edit demonstrations).
//!
//! ## Design
//! - Compiles for wasm32: no processes, threads, files or clocks; every random choice
//!   goes through [`crate::rng::RandomStream`] with documented stream ids, so a seed
//!   gives the same task and the same episode everywhere.
//! - Tool results, malformed calls and broken programs are observations the policy
//!   reads; nothing the policy does can panic the harness or hang the interpreter.

pub mod action;
pub mod batch;
pub mod derive;
pub mod env;
pub mod failure;
pub mod grammar;
pub mod harness;
pub mod interp;
pub mod key;
pub mod lang;
pub mod mistake;
pub mod policy;
pub mod program;
pub mod record;
pub mod replacement;
pub mod reward;
pub mod stats;
pub mod task;
pub mod tokenizer;

pub use action::{EditMode, ToolCall, parse_call};
pub use batch::{PaddedBatch, pad_records};
pub use failure::{Diagnosis, FailureCause, diagnose, has_refused_edit};
pub use harness::{EpisodeIds, EpisodeRun, HarnessConfig, run_episode};
pub use key::{ProblemKey, Split, Tier, catalogue};
pub use mistake::MistakenTeacher;
pub use policy::{Generation, Policy, PolicyInfo, SamplingSettings, Teacher, UniformRandom};
pub use record::{EndReason, EpisodeRecord, ModelCall, Span, SpanRole};
pub use reward::{RewardScheme, turn_rewards};
pub use stats::{EpisodeStats, TaskStats};
pub use task::{Task, TestCase, article_example, generate_task};
pub use tokenizer::{Tokenizer, tokenizer};

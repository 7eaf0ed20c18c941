//! The run: its state ([`trainer`]: device, model, optimizer, reference, lag pipeline,
//! position), the order of its stages ([`pipeline`]), the checkpoints chosen on
//! validation ([`selection`]), and what it leaves on disk: resumable [`checkpoint`]s,
//! the JSON-lines [`metrics`] file and the [`progress`] line.

pub mod checkpoint;
pub mod metrics;
pub mod pipeline;
pub mod progress;
pub mod selection;
pub mod trainer;

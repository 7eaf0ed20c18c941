//! The documents arlbook's processes hand each other: a training run's summary.json
//! and the job API's job views, typed once for the trainer, the server, the notebook
//! and xtask.
//!
//! - [`summary`]: `summary.json`, what `arlbook train` leaves in its run folder when it
//!   finishes (the checkpoints chosen on validation, the gate, each stage's cost). The
//!   trainer writes it; `cargo xtask experiment` and the tests read it.
//! - [`job`]: a training job as the job API (`/api/jobs`) shows it. The server writes
//!   it; the notebook's live chapter reads it.
//!
//! The crate depends on serde alone, so that xtask, which must not build the core a
//! second time with other features, can read what the trainer wrote with the same
//! types.

pub mod job;
pub mod summary;

//! The arlbook notebook in the browser: chapters, live figures and their controls
//! (Leptos, wasm32).
//!
//! ## Layout
//! - [`chapters`]: one module per chapter (its prose as data) and one file per figure
//!   (`chapters/<chapter>/<figure>.rs`): controls, computation through
//!   [`compute::compute`], readouts, and a drawing generic over plotters'
//!   `DrawingBackend`.
//! - [`figure`]: what a figure is ([`figure::Figure`]) and its state, read from and
//!   written to the URL query ([`query`]).
//! - [`plot`]: shared colours and sizes; [`mathml`]: formulas as MathML.
//! - [`export`]: one figure's state read strictly from a URL query and rendered to SVG
//!   (what `arlbook figure` runs).
//! - [`sweep`]: the settings a reader can reach with a figure's controls, for the tests
//!   that check each gives a figure.
//! - [`thumbnail`]: each chapter's picture on the contents page, drawn by the chapter's
//!   own drawing code.
//! - `web` (wasm32 only): the Leptos page — table of contents, chapter pages,
//!   `/embed/<figure>`, the figure frame with its controls, canvas and export buttons.
//!
//! Everything except `web` compiles natively, so `cargo test -p arlbook-app` checks the
//! figures' numbers and renders their SVG without building Leptos for the host.

pub mod chapters;
pub mod compute;
pub mod export;
pub mod figure;
pub mod mathml;
pub mod plot;
pub mod query;
pub mod sweep;
pub mod thumbnail;

#[cfg(target_arch = "wasm32")]
mod web;

#[cfg(target_arch = "wasm32")]
pub use web::App;

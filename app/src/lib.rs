//! The arlbook notebook in the browser: chapters, live figures and their controls.
//!
//! `main.rs` only mounts [`App`]; every component lives here so tests can mount them.
//! At this stage the notebook is a shell: a title, the list of computations the core
//! offers, and an explorer that runs any of them in the page (the core compiled to
//! wasm32, on the CPU) so a reader can check a number against the CLI.

use leptos::prelude::*;

mod explorer;

pub use explorer::ComputeExplorer;

/// The whole notebook page.
#[component]
pub fn App() -> impl IntoView {
    view! {
        <header class="masthead">
            <h1>"arlbook"</h1>
            <p class="tagline">
                "A live notebook on reinforcement learning for LLM agents. Every number on "
                "this page is computed as you read it, by the same Rust core that the "
                <code>"arlbook"</code> " command line and server use."
            </p>
        </header>
        <main>
            <ComputeExplorer/>
        </main>
    }
}

//! The compute explorer: pick a computation, edit its JSON request, read the response.
//!
//! It calls the core in the page, on the same path as the figures (WebGPU for entries
//! with a kernel when it is ready), so the answer is the one `arlbook compute <name>`
//! prints for the same request, up to the GPU's `f32` rounding.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use arlbook_core::api;
use arlbook_core::error::FieldError;
use leptos::prelude::*;
use serde_json::Value;

use super::gpu::{Backend, evaluate_on};
use crate::compute::Answers;

/// Runs the request text through the core and formats the response (or the error).
fn evaluate(name: &str, request_text: &str) -> (bool, String) {
    let request: Value = match serde_json::from_str(request_text) {
        Ok(v) => v,
        Err(e) => return (false, format!("request is not valid JSON: {e}")),
    };
    // The untyped call: the request is whatever JSON the reader typed.
    match crate::compute::compute_json(name, request) {
        Ok(response) => (
            true,
            serde_json::to_string_pretty(&response).unwrap_or_else(|_| response.to_string()),
        ),
        Err(err) => (false, err.to_string()),
    }
}

fn example_text(name: &str) -> String {
    api::examples::example(name)
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| "{}".to_owned())
}

/// A select of the API's computations, an editable request and the live response.
#[component]
pub fn ComputeExplorer() -> impl IntoView {
    let first = api::ENTRIES.first().map_or("", |e| e.name);
    let (name, set_name) = signal(first.to_owned());
    let (request, set_request) = signal(example_text(first));
    let outcome = RwSignal::new((true, String::new()));
    let badge = RwSignal::new(String::new());
    let backend = use_context::<Backend>().unwrap_or_else(Backend::cpu_only);
    let answers = Rc::new(RefCell::new(Answers::default()));
    let generation = Rc::new(Cell::new(0_u64));
    Effect::new(move |_| {
        let (name, text) = (name.get(), request.get());
        let waiting = !evaluate_on(
            backend.plan(),
            &answers,
            &generation,
            move || Ok::<_, FieldError>(evaluate(&name, &text)),
            move |evaluation, gpu| {
                let adapter = gpu.map_or("", |g| g.name.as_str());
                badge.set(evaluation.summary.label(adapter));
                if let Ok(shown) = evaluation.result {
                    outcome.set(shown);
                }
            },
        );
        if waiting {
            badge.set("waiting for WebGPU".to_owned());
        }
    });
    let summary = move || {
        let current = name.get();
        api::ENTRIES
            .iter()
            .find(|e| e.name == current)
            .map_or("", |e| e.summary)
    };

    view! {
        <section class="explorer" id="explorer">
            <h2>"Compute explorer"</h2>
            <p>
                "Choose a computation, edit its request, and the response below is recomputed "
                "on every keystroke. "
                <span class="badge" id="explorer-backend">{move || badge.get()}</span>
            </p>
            <label>
                "Computation "
                <select
                    id="entry-select"
                    on:change=move |ev| {
                        let chosen = event_target_value(&ev);
                        set_request.set(example_text(&chosen));
                        set_name.set(chosen);
                    }
                >
                    {api::ENTRIES
                        .iter()
                        .map(|e| view! { <option value=e.name>{e.name}</option> })
                        .collect_view()}
                </select>
            </label>
            <p class="summary">{summary}</p>
            <div class="columns">
                <textarea
                    id="request"
                    spellcheck="false"
                    prop:value=move || request.get()
                    on:input=move |ev| set_request.set(event_target_value(&ev))
                ></textarea>
                <pre
                    id="response"
                    class:error=move || !outcome.get().0
                >{move || outcome.get().1}</pre>
            </div>
        </section>
    }
}

//! The run's chart on a canvas and its readouts. Rows can arrive hundreds at a time
//! (a stream replays the whole file first), so redraws wait for the next animation
//! frame and one frame draws whatever has arrived by then.

use std::cell::Cell;
use std::rc::Rc;

use leptos::prelude::*;

use crate::chapters::live::chart;
use crate::chapters::live::metrics::Run;
use crate::figure::is_narrow;
use crate::plot::Style;
use crate::web::frame::{readout_items, size_canvas};
use crate::web::width::CanvasWidth;

/// Sizes the canvas for its CSS width (`css_width`) and the device pixel ratio, and
/// draws `run`.
fn draw(run: &Run, canvas: &web_sys::HtmlCanvasElement, css_width: i32) -> Result<(), String> {
    let dpr = window().device_pixel_ratio();
    let css_width = f64::from(css_width.max(240));
    let narrow = is_narrow(css_width);
    let aspect = chart::aspect(narrow);
    size_canvas(
        canvas,
        &format!("aspect-ratio: 1 / {aspect}"),
        (css_width * dpr).round() as u32,
        (css_width * aspect * dpr).round() as u32,
    );
    let style = Style::new(dpr).stacked(narrow);
    crate::web::canvas::draw_on(canvas, |root| {
        chart::draw(run, root, &style).map_err(|e| e.to_string())
    })
}

/// The canvas (`live-canvas`) and the readouts (`live-rows`, `live-step`,
/// `live-success`) of `run`.
#[component]
pub fn LiveChart(run: RwSignal<Run>) -> impl IntoView {
    let canvas_ref = NodeRef::<leptos::html::Canvas>::new();
    let error = RwSignal::new(None::<String>);
    // Redrawn when the canvas's width changes (it is hidden, 0 wide, until rows come).
    let resized = RwSignal::new(0_u32);
    let canvas_width = CanvasWidth::default();
    let pending = Rc::new(Cell::new(false));
    Effect::new(move |_| {
        run.track();
        resized.track();
        let Some(canvas) = canvas_ref.get() else {
            return;
        };
        canvas_width.watch(&canvas, move || resized.update(|n| *n = n.wrapping_add(1)));
        if pending.replace(true) {
            return;
        }
        let pending = Rc::clone(&pending);
        let canvas_width = canvas_width.clone();
        request_animation_frame(move || {
            pending.set(false);
            if let Some(canvas) = canvas_ref.get_untracked() {
                let width = canvas_width.of(&canvas);
                let drawn = run.with_untracked(|r| draw(r, &canvas, width));
                error.set(drawn.err().map(|e| format!("drawing failed: {e}")));
            }
        });
    });

    // Until a run has rows there is nothing to chart: one line says so instead of
    // seven empty panels.
    let empty = move || run.with(|r| r.rows.is_empty());
    view! {
        <p class="summary" id="live-empty" hidden=move || !empty()>
            "No run is being watched yet: start one above, or watch one from the list, and "
            "its metrics appear here as they are written."
        </p>
        <canvas
            node_ref=canvas_ref
            hidden=empty
            class="plot"
            id="live-canvas"
            style=format!("aspect-ratio: 1 / {}", chart::aspect(false))
            role="img"
            aria-label="Training metrics: SFT loss, then GRPO success and reward, effective groups, clip fractions, KL, entropy and generated length, over the steps"
        ></canvas>
        <p class="error" id="live-canvas-error" hidden=move || error.get().is_none()>
            {move || error.get().unwrap_or_default()}
        </p>
        <dl class="readouts">{move || readout_items(run.with(Run::readouts))}</dl>
    }
}

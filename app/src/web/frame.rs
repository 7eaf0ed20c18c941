//! The frame every figure sits in: title, backend badge, controls, the canvas, the
//! readouts, the caption, and the export and sharing buttons.
//!
//! Moving a control updates the figure's [`State`] signal and the URL; one effect
//! recomputes (through [`crate::compute`], on the path [`Backend::plan`] gives),
//! refreshes the readouts and the badge and redraws the canvas at the device pixel
//! ratio. Through WebGPU the result arrives later; the previous numbers stay until the
//! whole new evaluation is done, and a result overtaken by a newer state is dropped.
//! The figure element carries `data-draws` (evaluations shown so far) and
//! `data-redraw-ms` (the last one's compute-and-draw time) with `data-draw-ms` (the part
//! spent showing it: readouts and canvas), which the browser tests read.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use leptos::prelude::*;

use super::browser;
use super::gpu::{Backend, Gpu, evaluate_on};
use super::width::CanvasWidth;
use crate::chapters;
use crate::compute::{Answers, Evaluation, Summary};
use crate::figure::{
    AnyFigure, Control, ControlKind, EMBED_HEIGHT_LISTENER, EMBED_WIDTH, Evaluated, Meta, Readout,
    State, is_narrow, list_cells, reader_message, slider_step_attribute, snap_to_step, toggle_cell,
};
use crate::plot::{DECIMALS, format_number, rich};

/// What one evaluation of a figure that computes over several frames (a training run)
/// may spend before it shows what it has, in milliseconds: with the drawing it fits a
/// 60 Hz frame, and the next frame goes on where it stopped.
const FRAME_WORK_MS: f64 = 4.0;

/// Width of the SVG export, in pixels (the default of `arlbook figure` too).
const EXPORT_WIDTH: u32 = crate::export::DEFAULT_WIDTH;

/// The embed code's `<iframe>` at the suggested width, with the fallback height of
/// `Meta::embed_height`.
fn embed_frame_tag(url: &str, meta: &Meta) -> String {
    format!(
        "<iframe src=\"{url}\" width=\"{EMBED_WIDTH}\" height=\"{}\" \
         style=\"border:0;max-width:100%\" title=\"{}\"></iframe>",
        meta.embed_height(),
        crate::mathml::escape(meta.title)
    )
}

/// The URL prefix of a figure's keys: none on its embed page, `id.` in a chapter.
fn prefix(id: &str, embed: bool) -> String {
    if embed {
        String::new()
    } else {
        format!("{id}.")
    }
}

/// The figure's backend badge.
#[derive(Clone)]
struct Badge {
    label: String,
    detail: String,
    /// `gpu`, `cpu`, `mixed`, `none` or `waiting`.
    kind: &'static str,
}

impl Badge {
    fn waiting() -> Self {
        Self {
            label: "waiting for WebGPU".to_owned(),
            detail: "?backend=gpu: the figure computes once WebGPU is ready".to_owned(),
            kind: "waiting",
        }
    }

    fn of(summary: &Summary, gpu: Option<&Gpu>) -> Self {
        Self {
            label: summary.label(gpu.map_or("", |g| g.name.as_str())),
            detail: summary.detail(),
            kind: summary.kind(),
        }
    }
}

/// Sizes the canvas for its CSS width (`css_width`, pixels) and the device pixel ratio,
/// and draws.
fn draw(
    evaluated: &dyn Evaluated,
    canvas: &web_sys::HtmlCanvasElement,
    css_width: i32,
    meta: &'static Meta,
    error: RwSignal<Option<String>>,
) {
    let dpr = window().device_pixel_ratio();
    let css_width = f64::from(css_width.max(240));
    let aspect = meta.aspect_at(css_width);
    let css_height = (css_width * aspect).round();
    size_canvas(
        canvas,
        &format!("aspect-ratio: 1 / {aspect}"),
        (css_width * dpr).round() as u32,
        (css_height * dpr).round() as u32,
    );
    match evaluated.draw_canvas(canvas.clone(), dpr, is_narrow(css_width)) {
        Ok(()) => error.set(None),
        Err(message) => error.set(Some(format!("drawing failed: {message}"))),
    }
}

/// Gives `canvas` its CSS `style` and its pixel size, each only when it changes: setting a
/// canvas's size, even to the same value, clears and reallocates it, and a new style
/// makes the page compute its layout again.
pub(super) fn size_canvas(
    canvas: &web_sys::HtmlCanvasElement,
    style: &str,
    width: u32,
    height: u32,
) {
    if canvas.get_attribute("style").as_deref() != Some(style) {
        let _ = canvas.set_attribute("style", style);
    }
    if canvas.width() != width {
        canvas.set_width(width);
    }
    if canvas.height() != height {
        canvas.set_height(height);
    }
}

/// The tooltip of the figure drawn on `canvas` (`shown`) where the pointer of `event`
/// is: what [`Evaluated::hover`] says for that point, or nothing.
fn tooltip_at(
    canvas: &web_sys::HtmlCanvasElement,
    event: &web_sys::MouseEvent,
    shown: &RefCell<Option<Box<dyn Evaluated>>>,
) -> String {
    let rect = canvas.get_bounding_client_rect();
    let point = (
        f64::from(event.client_x()) - rect.left(),
        f64::from(event.client_y()) - rect.top(),
    );
    let size = (rect.width(), rect.height());
    shown
        .borrow()
        .as_ref()
        .and_then(|e| e.hover(point, size, is_narrow(size.0)))
        .unwrap_or_default()
}

/// Readouts as the items of a definition list: the label, the formatted value, and the
/// full-precision value in `data-value` (what the browser tests read).
pub(super) fn readout_items(readouts: Vec<Readout>) -> impl IntoView {
    readouts
        .into_iter()
        .map(|r| {
            let text = r.text();
            view! {
                <div class="readout">
                    <dt inner_html=rich::html(&r.label)></dt>
                    <dd id=r.id data-value=r.value.to_string()>{text}</dd>
                </div>
            }
        })
        .collect_view()
}

/// One figure with its frame. With `controls_shown` (the contents page's small
/// figure) only those controls are shown, and neither the caption nor the buttons.
#[component]
pub fn FigureFrame(
    figure: &'static dyn AnyFigure,
    embed: bool,
    #[prop(optional)] controls_shown: Option<&'static [&'static str]>,
) -> impl IntoView {
    let meta = figure.meta();
    let id = meta.id;
    let state = RwSignal::new(State::from_pairs(
        meta.controls,
        &browser::query_pairs(),
        &prefix(id, embed),
    ));
    let readouts = RwSignal::new(Vec::<Readout>::new());
    let error = RwSignal::new(None::<String>);
    let redraw_ms = RwSignal::new(0.0_f64);
    // Of which showing it: the readouts and the canvas.
    let draw_ms = RwSignal::new(0.0_f64);
    // How many evaluations have been shown: browser tests wait for it to move.
    let draws = RwSignal::new(0_u64);
    // Whether the figure on the canvas is whole; while it is not, each frame asks for
    // the next part by bumping `more`.
    let complete = RwSignal::new(true);
    let more = RwSignal::new(0_u32);
    let resized = RwSignal::new(0_u32);
    let canvas_ref = NodeRef::<leptos::html::Canvas>::new();

    // The canvas's width, watched once the canvas exists: a change redraws.
    let canvas_width = CanvasWidth::default();

    let backend = use_context::<Backend>().unwrap_or_else(Backend::cpu_only);
    let badge = RwSignal::new(Badge::waiting());
    let answers = Rc::new(RefCell::new(Answers::default()));
    // The evaluation on the canvas, for its tooltips.
    let shown: Rc<RefCell<Option<Box<dyn Evaluated>>>> = Rc::new(RefCell::new(None));
    let tooltip = RwSignal::new(String::new());
    let generation = Rc::new(Cell::new(0_u64));

    let for_effect = Rc::clone(&shown);
    Effect::new(move |_| {
        let shown = Rc::clone(&for_effect);
        let current = state.get();
        resized.track();
        more.track();
        let plan = backend.plan();
        let Some(canvas) = canvas_ref.get() else {
            return;
        };
        canvas_width.watch(&canvas, move || resized.update(|n| *n = n.wrapping_add(1)));
        let canvas_width = canvas_width.clone();
        let started = browser::now_ms();
        let show = move |evaluation: Evaluation<Box<dyn Evaluated>>, gpu: Option<&Gpu>| {
            let computed = browser::now_ms();
            badge.set(Badge::of(&evaluation.summary, gpu));
            match evaluation.result {
                Ok(evaluated) => {
                    ask_for_the_rest(evaluated.complete(), complete, more);
                    readouts.set(evaluated.readouts());
                    if let Some(canvas) = canvas_ref.get_untracked() {
                        draw(&*evaluated, &canvas, canvas_width.of(&canvas), meta, error);
                    }
                    *shown.borrow_mut() = Some(evaluated);
                }
                Err(err) => error.set(Some(reader_message(&err))),
            }
            let finished = browser::now_ms();
            redraw_ms.set(finished - started);
            draw_ms.set(finished - computed);
            draws.update(|n| *n += 1);
            if embed {
                browser::post_height_to_parent();
            }
        };
        let started_work = evaluate_on(
            plan,
            &answers,
            &generation,
            move || {
                let begun = browser::now_ms();
                figure.evaluate_within(&current, &move || browser::now_ms() - begun > FRAME_WORK_MS)
            },
            show,
        );
        if !started_work {
            badge.set(Badge::waiting());
        }
    });

    view! {
        <figure
            class=if controls_shown.is_some() { "figure compact" } else { "figure" }
            id=id
            data-redraw-ms=move || format!("{:.2}", redraw_ms.get())
            data-draw-ms=move || format!("{:.2}", draw_ms.get())
            data-draws=move || draws.get().to_string()
            data-complete=move || if complete.get() { "1" } else { "0" }
            data-backend=move || badge.with(|b| b.kind)
        >
            <header class="figure-head">
                <h3>{meta.title}</h3>
                <span
                    class="badge"
                    id=format!("{id}-backend")
                    data-backend=move || badge.with(|b| b.kind)
                    title=move || badge.with(|b| b.detail.clone())
                >
                    {move || badge.with(|b| b.label.clone())}
                </span>
            </header>
            <div class="controls">
                {controls_view(meta, embed, controls_shown, state)}
            </div>
            <canvas
                node_ref=canvas_ref
                class="plot"
                id=format!("{id}-canvas")
                style=format!("aspect-ratio: 1 / {}", meta.aspect)
                role="img"
                aria-label=meta.title
                title=move || tooltip.get()
                on:mousemove=move |event: web_sys::MouseEvent| {
                    let text = canvas_ref.get_untracked().map(|c| tooltip_at(&c, &event, &shown));
                    tooltip.set(text.unwrap_or_default());
                }
                on:mouseleave=move |_| tooltip.set(String::new())
            ></canvas>
            <p class="error" id=format!("{id}-error") hidden=move || error.get().is_none()>
                {move || error.get().unwrap_or_default()}
            </p>
            <dl class="readouts">{move || readout_items(readouts.get())}</dl>
            {controls_shown.is_none().then(|| caption_and_actions(figure, embed, state, canvas_ref, error))}
        </figure>
    }
}

/// Export and sharing buttons, and the embed code.
#[component]
fn Actions(
    figure: &'static dyn AnyFigure,
    embed: bool,
    state: RwSignal<State>,
    canvas_ref: NodeRef<leptos::html::Canvas>,
    error: RwSignal<Option<String>>,
) -> impl IntoView {
    let meta = figure.meta();
    let id = meta.id;
    let export_svg = move |_| {
        let current = state.get_untracked();
        let height = (f64::from(EXPORT_WIDTH) * meta.aspect).round() as u32;
        let result = figure
            .evaluate(&current)
            .map_err(|e| e.to_string())
            .and_then(|evaluated| evaluated.svg(EXPORT_WIDTH, height))
            .and_then(|svg| {
                browser::download_text(&svg, "image/svg+xml", &format!("{id}.svg"))
                    .map_err(|_| "the browser refused the download".to_owned())
            });
        if let Err(message) = result {
            error.set(Some(message));
        }
    };
    let export_png = move |_| {
        if let Some(canvas) = canvas_ref.get_untracked()
            && let Ok(url) = canvas.to_data_url()
        {
            browser::download_url(&url, &format!("{id}.png"));
        }
    };
    let embed_url = move || {
        // The figure's state, and the backend the reader chose (`?backend=cpu`).
        let mut pairs = state.get().to_pairs("");
        pairs.extend(
            browser::query_pairs()
                .into_iter()
                .filter(|(key, _)| key == crate::compute::Choice::KEY),
        );
        let query = crate::query::format(&pairs);
        format!("{}/embed/{id}?{query}", browser::origin())
    };
    let embed_code = move || {
        format!(
            "{}\n{}",
            embed_frame_tag(&embed_url(), meta),
            EMBED_HEIGHT_LISTENER
        )
    };
    let back_link = move || {
        let chapter = chapters::chapter_of(id).map_or("", |c| c.id);
        let query = crate::query::format(&state.get().to_pairs(&prefix(id, false)));
        format!("/chapter/{chapter}?{query}#{id}")
    };

    view! {
            <div class="actions">
            <button type="button" on:click=export_svg>"Export SVG"</button>
            <button type="button" on:click=export_png>"Export PNG"</button>
            <button type="button" on:click=move |_| browser::copy_text(&embed_url())>
                "Copy link"
            </button>
            <button type="button" on:click=move |_| browser::copy_text(&embed_code())>
                "Copy embed code"
            </button>
            {embed.then(|| view! {
                // Outside the frame: the chapter is a page, not an embed.
                <a class="back" href=back_link target="_top">"Read it in its chapter"</a>
            })}
        </div>
        <details class="embed-code">
            <summary>"Embed code"</summary>
            <textarea readonly id=format!("{id}-embed-code") prop:value=embed_code></textarea>
        </details>
    }
}

/// One button per cell of a list control; a click flips the cell between 0 and 1.
fn cells_view(id: &'static str, embed: bool, key: &'static str, state: RwSignal<State>) -> AnyView {
    let groups = state.with(|s| list_cells(s.get(key)));
    groups
        .into_iter()
        .enumerate()
        .map(|(g, cells)| {
            view! {
                <span class="cell-group">
                    {cells
                        .into_iter()
                        .enumerate()
                        .map(|(i, cell)| {
                            let label = format!("group {}, item {}: {cell}", g + 1, i + 1);
                            view! {
                                <button
                                    type="button"
                                    class="cell"
                                    id=format!("{id}-cell-{key}-{g}-{i}")
                                    aria-label=label
                                    on:click=move |_| {
                                        let text = state.with_untracked(|s| toggle_cell(s.get(key), g, i));
                                        update(id, embed, state, key, text);
                                    }
                                >
                                    {cell}
                                </button>
                            }
                        })
                        .collect_view()}
                </span>
            }
        })
        .collect_view()
        .into_any()
}

/// Sets control `key` and mirrors the figure's state in the URL.
fn update(id: &str, embed: bool, state: RwSignal<State>, key: &str, value: String) {
    state.update(|s| s.set(key, value));
    let pairs = state.with_untracked(|s| s.to_pairs(&prefix(id, embed)));
    browser::write_query(&prefix(id, embed), pairs);
}

/// Notes whether the figure shown is whole and, while it is not, asks for its next
/// part on the next frame (bumping `more`, which the redraw effect tracks).
fn ask_for_the_rest(whole: bool, complete: RwSignal<bool>, more: RwSignal<u32>) {
    complete.set(whole);
    if !whole {
        request_animation_frame(move || more.update(|n| *n = n.wrapping_add(1)));
    }
}

/// The figure's controls, or only those in `shown`.
fn controls_view(
    meta: &'static Meta,
    embed: bool,
    shown: Option<&'static [&'static str]>,
    state: RwSignal<State>,
) -> impl IntoView + use<> {
    meta.controls
        .iter()
        .filter(|control| shown.is_none_or(|keys| keys.contains(&control.key)))
        .map(|control| control_view(meta.id, embed, control, state))
        .collect_view()
}

/// The caption ("What to try") and the export and sharing buttons.
fn caption_and_actions(
    figure: &'static dyn AnyFigure,
    embed: bool,
    state: RwSignal<State>,
    canvas_ref: NodeRef<leptos::html::Canvas>,
    error: RwSignal<Option<String>>,
) -> impl IntoView + use<> {
    view! {
        <figcaption>
            <strong>"What to try. "</strong>
            <span inner_html=rich::html(figure.meta().caption)></span>
        </figcaption>
        <Actions figure=figure embed=embed state=state canvas_ref=canvas_ref error=error/>
    }
}

/// One frame of a slider's playback: sets it to `value` and, unless that was its end,
/// asks for the next frame at `value + step`. A reader who moves the slider (or a
/// second playback) changes its value, and this playback then stops.
fn play_frame(
    id: &'static str,
    embed: bool,
    state: RwSignal<State>,
    key: &'static str,
    value: f64,
    (min, max, step): (f64, f64, f64),
) {
    let text = snap_to_step(&value.to_string(), min, max, step);
    update(id, embed, state, key, text.clone());
    if value + step <= max + step * 1e-9 {
        request_animation_frame(move || {
            if state.with_untracked(|s| s.get(key) == text) {
                play_frame(id, embed, state, key, value + step, (min, max, step));
            }
        });
    }
}

fn control_view(
    id: &'static str,
    embed: bool,
    control: &'static Control,
    state: RwSignal<State>,
) -> AnyView {
    let key = control.key;
    let element_id = format!("{id}-input-{key}");
    let value = move || state.with(|s| s.get(key).to_owned());
    match control.kind {
        ControlKind::Slider {
            min,
            max,
            step,
            play,
        } => view! {
            <div class="control">
                <label for=element_id.clone() inner_html=rich::html(control.label)></label>
                <input
                    type="range"
                    id=element_id.clone()
                    min=format_number(min, DECIMALS)
                    max=format_number(max, DECIMALS)
                    step=move || slider_step_attribute(&value(), min, step)
                    prop:value=value
                    on:input=move |ev| {
                        let dragged = snap_to_step(&event_target_value(&ev), min, max, step);
                        update(id, embed, state, key, dragged);
                    }
                />
                <output for=element_id>{value}</output>
                {play.then(|| view! {
                    <button
                        type="button"
                        class="play"
                        id=format!("{id}-play-{key}")
                        title="Move the slider from its start to its end, one step per frame"
                        on:click=move |_| play_frame(id, embed, state, key, min, (min, max, step))
                    >
                        "▶ play"
                    </button>
                })}
            </div>
        }
        .into_any(),
        ControlKind::Toggle => view! {
            <div class="control">
                <label>
                    <input
                        type="checkbox"
                        id=element_id
                        prop:checked=move || state.with(|s| s.flag(key))
                        on:change=move |ev| {
                            let on = event_target_checked(&ev);
                            update(id, embed, state, key, if on { "1" } else { "0" }.to_owned());
                        }
                    />
                    " "
                    <span inner_html=rich::html(control.label)></span>
                </label>
            </div>
        }
        .into_any(),
        ControlKind::Choice(options) => view! {
            <div class="control">
                <label for=element_id.clone() inner_html=rich::html(control.label)></label>
                <select
                    id=element_id
                    prop:value=value
                    on:change=move |ev| update(id, embed, state, key, event_target_value(&ev))
                >
                    {options
                        .iter()
                        .map(|o| view! { <option value=*o selected=move || state.with(|s| s.get(key) == *o)>{*o}</option> })
                        .collect_view()}
                </select>
            </div>
        }
        .into_any(),
        ControlKind::List | ControlKind::Rewards => view! {
            <div class="control list">
                <label for=element_id.clone() inner_html=rich::html(control.label)></label>
                <input
                    type="text"
                    id=element_id
                    inputmode="decimal"
                    spellcheck="false"
                    prop:value=value
                    on:input=move |ev| update(id, embed, state, key, event_target_value(&ev))
                />
                {(control.kind == ControlKind::Rewards).then(|| view! {
                    <div class="cells" role="group" aria-label=format!("{}: click to flip 0 and 1", rich::plain(control.label))>
                        {move || cells_view(id, embed, key, state)}
                    </div>
                })}
            </div>
        }
        .into_any(),
    }
}

//! What every figure is made of: its controls, its state, its readouts, its drawing.
//!
//! A figure is a unit type implementing [`Figure`]: a static description ([`Meta`]:
//! id, title, controls with their defaults, the caption), a computation from a
//! [`State`] (which goes through [`crate::compute::compute`]), the numbers it reads
//! out, and a drawing generic over plotters' `DrawingBackend`. The browser draws on a
//! canvas; tests and the export button render the same drawing to SVG.
//!
//! The state is the controls' values as text, exactly as they appear in the URL, so
//! writing and reading the query string is lossless.

use arlbook_core::error::FieldError;
use plotters::coord::Shift;
use plotters::prelude::*;
use serde::de::DeserializeOwned;

use crate::plot::{DECIMALS, Style, format_number};

/// How a control is shown and what values it accepts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ControlKind {
    /// A range slider; values are clamped to `[min, max]`.
    Slider {
        /// Smallest value.
        min: f64,
        /// Largest value.
        max: f64,
        /// Step of the slider (values in the URL may be finer).
        step: f64,
        /// Whether a play button beside it moves it from `min` to `max`, one step per
        /// frame (a figure that shows a run up to a point in it).
        play: bool,
    },
    /// A checkbox; `1` or `0`.
    Toggle,
    /// One of a fixed list of values.
    Choice(&'static [&'static str]),
    /// A comma-separated list of numbers, edited as text.
    List,
    /// A list of 0/1 rewards (groups split by `;`): text, plus one button per reward
    /// that flips it.
    Rewards,
}

/// One control of a figure.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Control {
    /// Key in the state and the URL (`p`, `qa`).
    pub key: &'static str,
    /// Label shown next to it.
    pub label: &'static str,
    /// Its kind.
    pub kind: ControlKind,
    /// Default value, as text.
    pub default: &'static str,
}

/// A slider control.
pub const fn slider(
    key: &'static str,
    label: &'static str,
    min: f64,
    max: f64,
    step: f64,
    default: &'static str,
) -> Control {
    any_slider(key, label, (min, max, step), default, false)
}

/// A slider with a play button that moves it from `min` to `max`, one step per frame.
pub const fn playable_slider(
    key: &'static str,
    label: &'static str,
    min: f64,
    max: f64,
    step: f64,
    default: &'static str,
) -> Control {
    any_slider(key, label, (min, max, step), default, true)
}

const fn any_slider(
    key: &'static str,
    label: &'static str,
    (min, max, step): (f64, f64, f64),
    default: &'static str,
    play: bool,
) -> Control {
    Control {
        key,
        label,
        kind: ControlKind::Slider {
            min,
            max,
            step,
            play,
        },
        default,
    }
}

/// A checkbox control (`default` is `"0"` or `"1"`).
pub const fn toggle(key: &'static str, label: &'static str, default: &'static str) -> Control {
    Control {
        key,
        label,
        kind: ControlKind::Toggle,
        default,
    }
}

/// A choice among fixed values.
pub const fn choice(
    key: &'static str,
    label: &'static str,
    options: &'static [&'static str],
    default: &'static str,
) -> Control {
    Control {
        key,
        label,
        kind: ControlKind::Choice(options),
        default,
    }
}

/// A comma-separated list of numbers.
pub const fn list(key: &'static str, label: &'static str, default: &'static str) -> Control {
    Control {
        key,
        label,
        kind: ControlKind::List,
        default,
    }
}

/// A list of 0/1 rewards with clickable cells.
pub const fn rewards(key: &'static str, label: &'static str, default: &'static str) -> Control {
    Control {
        key,
        label,
        kind: ControlKind::Rewards,
        default,
    }
}

/// The static description of a figure.
#[derive(Debug, Clone, Copy)]
pub struct Meta {
    /// Identifier used in element ids and in `/embed/<id>`.
    pub id: &'static str,
    /// Title above the figure.
    pub title: &'static str,
    /// "What to try": a short caption under the figure.
    pub caption: &'static str,
    /// The controls, in the order they are shown.
    pub controls: &'static [Control],
    /// Height divided by width of the drawing.
    pub aspect: f64,
    /// Panels side by side (stacked on narrow screens).
    pub panels: usize,
}

/// The width the embed code suggests for a figure's frame, in CSS pixels.
pub const EMBED_WIDTH: u32 = 760;

/// The embed code's second line: the parent page sets an arlbook frame's height to what
/// the frame reports (`arlbook-height:<px>`, posted after every redraw), so the frame
/// fits its figure at any width.
pub const EMBED_HEIGHT_LISTENER: &str = "<script>addEventListener(\"message\",e=>{const m=/^arlbook-height:(\\d+)$/.exec(e.data);if(m)for(const f of document.querySelectorAll(\"iframe\"))if(f.contentWindow===e.source)f.height=m[1]})</script>";

impl Meta {
    /// The embed code's fallback frame height at [`EMBED_WIDTH`], for pages that leave
    /// the listener out: the canvas at that width (less the frame's padding) plus room
    /// for the header, the controls, the readouts, the caption and the buttons, and 30
    /// px for each row of controls past five (two controls a row at that width). The
    /// browser test checks every figure's content fits in it.
    pub fn embed_height(&self) -> u32 {
        let rows = self.controls.len().div_ceil(2);
        let extra_rows = u32::try_from(rows.saturating_sub(5)).unwrap_or(u32::MAX);
        (728.0 * self.aspect).round() as u32 + 620 + 30 * extra_rows
    }

    /// Height divided by width at a CSS width of `css_width` pixels: the wide layout,
    /// or below [`NARROW_WIDTH`] panels stacked, each [`NARROW_PANEL_ASPECT`] of the
    /// width tall (a single panel at least that tall, so a phone-width chart keeps room
    /// for its plot under a title broken in two).
    pub fn aspect_at(&self, css_width: f64) -> f64 {
        if !is_narrow(css_width) {
            self.aspect
        } else if self.panels > 1 {
            NARROW_PANEL_ASPECT * self.panels as f64
        } else {
            self.aspect.max(NARROW_PANEL_ASPECT)
        }
    }
}

/// Below this CSS width, multi-panel figures stack their panels.
pub const NARROW_WIDTH: f64 = 560.0;

/// Height divided by width of one panel in the narrow (stacked) layout.
pub const NARROW_PANEL_ASPECT: f64 = 0.62;

/// Whether a figure `css_width` pixels wide uses the stacked layout.
pub fn is_narrow(css_width: f64) -> bool {
    css_width < NARROW_WIDTH
}

/// The values of a figure's controls, as text, in the order of its controls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    values: Vec<(&'static str, String)>,
}

impl State {
    /// Every control at its default.
    pub fn defaults(controls: &'static [Control]) -> Self {
        Self {
            values: controls
                .iter()
                .map(|c| (c.key, c.default.to_owned()))
                .collect(),
        }
    }

    /// Reads the controls from URL pairs whose keys start with `prefix` (`""` for none).
    /// Unknown keys are ignored; a value a control cannot take keeps the default, and a
    /// slider value outside its range is clamped, so any link opens some valid view.
    pub fn from_pairs(
        controls: &'static [Control],
        pairs: &[(String, String)],
        prefix: &str,
    ) -> Self {
        let mut state = Self::defaults(controls);
        for (key, value) in pairs {
            let Some(bare) = key.strip_prefix(prefix) else {
                continue;
            };
            if let Some(control) = controls.iter().find(|c| c.key == bare)
                && let Some(accepted) = accept(control.kind, value)
            {
                state.set(control.key, accepted);
            }
        }
        state
    }

    /// The pairs to write into the URL, keys prefixed with `prefix`.
    pub fn to_pairs(&self, prefix: &str) -> Vec<(String, String)> {
        self.values
            .iter()
            .map(|(key, value)| (format!("{prefix}{key}"), value.clone()))
            .collect()
    }

    /// The text value of control `key` (empty if there is no such control).
    pub fn get(&self, key: &str) -> &str {
        self.values
            .iter()
            .find(|(k, _)| *k == key)
            .map_or("", |(_, v)| v.as_str())
    }

    /// Sets control `key` (ignored if there is no such control).
    pub fn set(&mut self, key: &str, value: String) {
        if let Some(slot) = self.values.iter_mut().find(|(k, _)| *k == key) {
            slot.1 = value;
        }
    }

    /// Control `key` as a number; a slider's value was validated on the way in.
    pub fn number(&self, key: &str) -> Result<f64, FieldError> {
        let text = self.get(key).trim();
        text.parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| FieldError::new(key, format!("`{text}` is not a number")))
    }

    /// Control `key` as a count (a slider with integer steps).
    pub fn count(&self, key: &str) -> Result<usize, FieldError> {
        let value = self.number(key)?;
        if value < 0.0 || value.fract() != 0.0 {
            return Err(FieldError::new(key, "must be a whole number >= 0"));
        }
        Ok(value as usize)
    }

    /// Control `key` as a checkbox.
    pub fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), "1" | "true" | "on")
    }

    /// Control `key` (a choice whose options are an API's names: `group`,
    /// `leave-one-out`) as the value of the API's type that its text names.
    pub fn choice<T: DeserializeOwned>(&self, key: &str) -> Result<T, FieldError> {
        serde_json::from_value(serde_json::Value::String(self.get(key).to_owned()))
            .map_err(|e| FieldError::new(key, e.to_string()))
    }

    /// Control `key` as a comma-separated list of numbers; the error names the element
    /// (`rewards[2]`).
    pub fn list(&self, key: &str) -> Result<Vec<f64>, FieldError> {
        let text = self.get(key);
        if text.trim().is_empty() {
            return Err(FieldError::new(key, "the list is empty"));
        }
        text.split(',')
            .enumerate()
            .map(|(i, item)| {
                let item = item.trim();
                item.parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite())
                    .ok_or_else(|| {
                        FieldError::new(format!("{key}[{i}]"), format!("`{item}` is not a number"))
                    })
            })
            .collect()
    }
}

impl State {
    /// Control `key` as groups of numbers: groups separated by `;`, numbers by `,`
    /// (`1,0,0,0; 1,1,0,1`). The error names the element (`rewards[1][2]`).
    pub fn groups(&self, key: &str) -> Result<Vec<Vec<f64>>, FieldError> {
        let text = self.get(key);
        text.split(';')
            .enumerate()
            .map(|(g, group)| {
                if group.trim().is_empty() {
                    return Err(FieldError::new(format!("{key}[{g}]"), "the group is empty"));
                }
                group
                    .split(',')
                    .enumerate()
                    .map(|(i, item)| {
                        let item = item.trim();
                        item.parse::<f64>()
                            .ok()
                            .filter(|v| v.is_finite())
                            .ok_or_else(|| {
                                FieldError::new(
                                    format!("{key}[{g}][{i}]"),
                                    format!("`{item}` is not a number"),
                                )
                            })
                    })
                    .collect()
            })
            .collect()
    }
}

/// The cells of a list control's text: groups split by `;`, items by `,`, trimmed.
pub fn list_cells(text: &str) -> Vec<Vec<String>> {
    text.split(';')
        .map(|group| {
            group
                .split(',')
                .map(|item| item.trim().to_owned())
                .collect()
        })
        .collect()
}

/// The list text with cell `(group, index)` flipped between 0 and 1 (any value other
/// than 0 becomes 0), so rewards can be clicked; other cells keep their text.
pub fn toggle_cell(text: &str, group: usize, index: usize) -> String {
    let mut cells = list_cells(text);
    if let Some(cell) = cells.get_mut(group).and_then(|g| g.get_mut(index)) {
        let is_zero = cell.parse::<f64>().is_ok_and(|v| v == 0.0);
        if is_zero { "1" } else { "0" }.clone_into(cell);
    }
    cells
        .iter()
        .map(|g| g.join(","))
        .collect::<Vec<_>>()
        .join("; ")
}

/// What a reader sees when a figure cannot compute its setting: the message, without
/// the name of the API field it concerns (a name the page never shows).
pub fn reader_message(error: &FieldError) -> String {
    format!("This setting cannot be computed: {}", error.message)
}

/// The `step` attribute of a slider showing `value`: its own step, or `any` when the
/// value lies between steps (a finer value from a link), so that the thumb sits where
/// the number beside it says.
pub fn slider_step_attribute(value: &str, min: f64, step: f64) -> String {
    match value.trim().parse::<f64>() {
        Ok(v) if step > 0.0 && !on_grid(v, min, step) => "any".to_owned(),
        _ => step.to_string(),
    }
}

/// A dragged slider value moved to the nearest step in `[min, max]` (after a link's
/// finer value the slider's step is `any`, and the first drag returns it to its grid).
pub fn snap_to_step(value: &str, min: f64, max: f64, step: f64) -> String {
    let Ok(v) = value.trim().parse::<f64>() else {
        return value.to_owned();
    };
    if !(v.is_finite() && step > 0.0) {
        return value.to_owned();
    }
    let snapped = (min + ((v - min) / step).round() * step).clamp(min, max);
    format_number(snapped, DECIMALS)
}

fn on_grid(value: f64, min: f64, step: f64) -> bool {
    let steps = (value - min) / step;
    (steps - steps.round()).abs() < 1e-6
}

/// The value a control stores for URL text `value`, or `None` to keep the default.
fn accept(kind: ControlKind, value: &str) -> Option<String> {
    let value = value.trim();
    match kind {
        ControlKind::Slider { min, max, .. } => {
            let number = value.parse::<f64>().ok().filter(|v| v.is_finite())?;
            if number < min {
                Some(format_number(min, DECIMALS))
            } else if number > max {
                Some(format_number(max, DECIMALS))
            } else {
                Some(value.to_owned())
            }
        }
        ControlKind::Toggle => match value {
            "1" | "true" | "on" => Some("1".to_owned()),
            "0" | "false" | "off" => Some("0".to_owned()),
            _ => None,
        },
        ControlKind::Choice(options) => options
            .iter()
            .find(|o| **o == value)
            .map(|o| (*o).to_owned()),
        ControlKind::List | ControlKind::Rewards => Some(value.to_owned()),
    }
}

/// A number read out under a figure, with a stable element id for tests.
#[derive(Debug, Clone, PartialEq)]
pub struct Readout {
    /// Element id (`bandit-exact`).
    pub id: String,
    /// What it is, in words or symbols.
    pub label: String,
    /// The value, at full precision (shown rounded; kept whole in `data-value`).
    pub value: f64,
}

impl Readout {
    /// A readout of figure `figure` named `name`: its id is `figure-name`.
    pub fn new(figure: &str, name: &str, label: impl Into<String>, value: f64) -> Self {
        Self {
            id: format!("{figure}-{name}"),
            label: label.into(),
            value,
        }
    }

    /// The value as shown.
    pub fn text(&self) -> String {
        format_number(self.value, DECIMALS)
    }
}

/// The result of drawing on backend `DB`.
pub type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;
/// Test support: computes figure `F` at the state a URL query gives (missing keys take
/// their defaults), as an embed page would.
#[cfg(test)]
pub(crate) fn compute_at_query<F: Figure>(query_text: &str) -> Result<F::Output, FieldError> {
    F::compute(&State::from_pairs(
        F::META.controls,
        &crate::query::parse(query_text),
        "",
    ))
}

/// A figure: description, computation, readouts and drawing.
pub trait Figure: Sync + 'static {
    /// What its computation produces and its drawing reads.
    type Output;
    /// Its static description.
    const META: Meta;
    /// Computes the figure's numbers for a state (through the compute API).
    fn compute(state: &State) -> Result<Self::Output, FieldError>;
    /// Computes as much as fits before `out_of_time()` says stop, for a figure whose
    /// numbers take longer than a frame (a training run): the page draws the part and
    /// calls again on the next frame until [`Figure::complete`] says the output is
    /// whole. The default computes everything at once, as [`Figure::compute`].
    fn compute_within(
        state: &State,
        _out_of_time: &dyn Fn() -> bool,
    ) -> Result<Self::Output, FieldError> {
        Self::compute(state)
    }
    /// Whether `output` is the whole figure (always, by default).
    fn complete(_output: &Self::Output) -> bool {
        true
    }
    /// The key numbers shown under the figure.
    fn readouts(output: &Self::Output) -> Vec<Readout>;
    /// Draws the figure on `area`.
    fn draw<DB: DrawingBackend>(
        output: &Self::Output,
        area: &DrawingArea<DB, Shift>,
        style: &Style,
    ) -> DrawResult<DB>;
    /// The tooltip at `point` (CSS pixels from the drawing's top-left corner) of a
    /// drawing `size` CSS pixels large (`narrow`: panels stacked): the whole of what the
    /// drawing abbreviates there. None by default.
    fn hover(
        _output: &Self::Output,
        _point: (f64, f64),
        _size: (f64, f64),
        _narrow: bool,
    ) -> Option<String> {
        None
    }
}

/// A computed figure, ready to be read out and drawn on any backend.
pub trait Evaluated {
    /// The readouts.
    fn readouts(&self) -> Vec<Readout>;
    /// Whether the figure is whole (see [`Figure::complete`]).
    fn complete(&self) -> bool;
    /// The tooltip at a point of the drawing (see [`Figure::hover`]).
    fn hover(&self, point: (f64, f64), size: (f64, f64), narrow: bool) -> Option<String>;
    /// The drawing as an SVG document of `width` × `height` pixels, its panels stacked
    /// below [`NARROW_WIDTH`] as on the page.
    fn svg(&self, width: u32, height: u32) -> Result<String, String>;
    /// Draws on a canvas whose pixel size is already set; `scale` is its device pixel
    /// ratio, `narrow` selects the stacked layout.
    #[cfg(target_arch = "wasm32")]
    fn draw_canvas(
        &self,
        canvas: web_sys::HtmlCanvasElement,
        scale: f64,
        narrow: bool,
    ) -> Result<(), String>;
    /// Draws its lines and shapes, not its text, in the wide layout (a thumbnail).
    #[cfg(target_arch = "wasm32")]
    fn draw_shapes(&self, canvas: &web_sys::HtmlCanvasElement, scale: f64) -> Result<(), String>;
}

/// A figure without its type: what the page and the exporter hold.
pub trait AnyFigure: Sync {
    /// Its static description.
    fn meta(&self) -> &'static Meta;
    /// Computes it.
    fn evaluate(&self, state: &State) -> Result<Box<dyn Evaluated>, FieldError>;
    /// Computes what fits before `out_of_time()` (see [`Figure::compute_within`]).
    fn evaluate_within(
        &self,
        state: &State,
        out_of_time: &dyn Fn() -> bool,
    ) -> Result<Box<dyn Evaluated>, FieldError>;
}

/// Wraps a [`Figure`] type as an [`AnyFigure`] value.
pub struct Registered<F>(pub std::marker::PhantomData<F>);

impl<F: Figure> AnyFigure for Registered<F> {
    fn meta(&self) -> &'static Meta {
        &F::META
    }

    fn evaluate(&self, state: &State) -> Result<Box<dyn Evaluated>, FieldError> {
        Ok(Box::new(Evaluation::<F> {
            output: F::compute(state)?,
        }))
    }

    fn evaluate_within(
        &self,
        state: &State,
        out_of_time: &dyn Fn() -> bool,
    ) -> Result<Box<dyn Evaluated>, FieldError> {
        Ok(Box::new(Evaluation::<F> {
            output: F::compute_within(state, out_of_time)?,
        }))
    }
}

struct Evaluation<F: Figure> {
    output: F::Output,
}

impl<F: Figure> Evaluated for Evaluation<F> {
    fn readouts(&self) -> Vec<Readout> {
        F::readouts(&self.output)
    }

    fn complete(&self) -> bool {
        F::complete(&self.output)
    }

    fn hover(&self, point: (f64, f64), size: (f64, f64), narrow: bool) -> Option<String> {
        F::hover(&self.output, point, size, narrow)
    }

    fn svg(&self, width: u32, height: u32) -> Result<String, String> {
        let style = Style::new(1.0).stacked(is_narrow(f64::from(width)));
        crate::plot::svg_document(width, height, |root| {
            F::draw(&self.output, root, &style).map_err(|e| e.to_string())
        })
    }

    #[cfg(target_arch = "wasm32")]
    fn draw_canvas(
        &self,
        canvas: web_sys::HtmlCanvasElement,
        scale: f64,
        narrow: bool,
    ) -> Result<(), String> {
        let style = Style::new(scale).stacked(narrow);
        crate::web::canvas::draw_on(&canvas, |root| {
            F::draw(&self.output, root, &style).map_err(|e| e.to_string())
        })
    }

    #[cfg(target_arch = "wasm32")]
    fn draw_shapes(&self, canvas: &web_sys::HtmlCanvasElement, scale: f64) -> Result<(), String> {
        let style = Style::new(scale);
        crate::web::canvas::draw_shapes_on(canvas, |root| {
            F::draw(&self.output, root, &style).map_err(|e| e.to_string())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONTROLS: &[Control] = &[
        Control {
            key: "p",
            label: "p",
            kind: ControlKind::Slider {
                min: 0.0,
                max: 1.0,
                step: 0.01,
                play: false,
            },
            default: "0.5",
        },
        Control {
            key: "loo",
            label: "leave one out",
            kind: ControlKind::Toggle,
            default: "0",
        },
        Control {
            key: "scale",
            label: "scale",
            kind: ControlKind::Choice(&["group", "batch"]),
            default: "group",
        },
        Control {
            key: "rewards",
            label: "rewards",
            kind: ControlKind::List,
            default: "1,0,0,0",
        },
    ];

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn state_reads_prefixed_keys_and_ignores_others() {
        let state = State::from_pairs(
            CONTROLS,
            &pairs(&[("fig.p", "0.25"), ("p", "0.9"), ("other.scale", "batch")]),
            "fig.",
        );
        assert_eq!(state.number("p").unwrap(), 0.25);
        assert_eq!(state.get("scale"), "group");
    }

    #[test]
    fn bad_values_keep_defaults_and_sliders_clamp() {
        let state = State::from_pairs(
            CONTROLS,
            &pairs(&[("p", "7"), ("loo", "maybe"), ("scale", "galaxy")]),
            "",
        );
        assert_eq!(state.get("p"), "1");
        assert!(!state.flag("loo"));
        assert_eq!(state.get("scale"), "group");
        let state = State::from_pairs(CONTROLS, &pairs(&[("p", "NaN")]), "");
        assert_eq!(state.get("p"), "0.5");
    }

    #[test]
    fn state_round_trips_through_pairs() {
        let mut state = State::defaults(CONTROLS);
        state.set("rewards", "1, 1,0".to_owned());
        state.set("loo", "1".to_owned());
        let back = State::from_pairs(CONTROLS, &state.to_pairs("x."), "x.");
        assert_eq!(back, state);
        assert_eq!(back.list("rewards").unwrap(), vec![1.0, 1.0, 0.0]);
    }

    #[test]
    fn groups_split_on_semicolons_and_name_bad_elements() {
        let mut state = State::defaults(CONTROLS);
        state.set("rewards", "1,0; 0.5 ,1,1".to_owned());
        assert_eq!(
            state.groups("rewards").unwrap(),
            vec![vec![1.0, 0.0], vec![0.5, 1.0, 1.0]]
        );
        state.set("rewards", "1,0;1,y".to_owned());
        assert_eq!(state.groups("rewards").unwrap_err().field, "rewards[1][1]");
        state.set("rewards", "1,0;".to_owned());
        assert_eq!(state.groups("rewards").unwrap_err().field, "rewards[1]");
    }

    #[test]
    fn a_reader_sees_the_message_without_the_field() {
        let err = FieldError::new("replicates", "asks for too many draws");
        let shown = reader_message(&err);
        assert!(!shown.contains("replicates"), "{shown}");
        assert!(shown.ends_with("asks for too many draws"), "{shown}");
    }

    #[test]
    fn a_value_between_steps_frees_the_thumb_and_a_drag_snaps_it_back() {
        assert_eq!(slider_step_attribute("0.35", 0.0, 0.05), "0.05");
        assert_eq!(slider_step_attribute("0.37", 0.0, 0.05), "any");
        assert_eq!(slider_step_attribute("3", 1.0, 1.0), "1");
        assert_eq!(slider_step_attribute("2.5", 1.0, 1.0), "any");
        assert_eq!(snap_to_step("0.3712", 0.0, 1.0, 0.05), "0.35");
        assert_eq!(snap_to_step("0.99", 0.0, 0.9, 0.05), "0.9");
        assert_eq!(snap_to_step("7.6", 2.0, 30.0, 1.0), "8");
    }

    #[test]
    fn clicking_a_cell_flips_it_between_zero_and_one() {
        assert_eq!(toggle_cell("1,0,0,0; 1,1", 0, 1), "1,1,0,0; 1,1");
        assert_eq!(toggle_cell("1,0,0,0; 1,1", 1, 0), "1,0,0,0; 0,1");
        assert_eq!(toggle_cell("0.5,0", 0, 0), "0,0");
        // Out of range: nothing changes but the spacing.
        assert_eq!(toggle_cell("1,0", 3, 0), "1,0");
    }

    #[test]
    fn list_error_names_the_element() {
        let mut state = State::defaults(CONTROLS);
        state.set("rewards", "1,0,x".to_owned());
        assert_eq!(state.list("rewards").unwrap_err().field, "rewards[2]");
    }
}

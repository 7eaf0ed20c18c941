//! plotters' drawing backend on a canvas's 2D context, written for redraws within a
//! frame (what `plotters-canvas` does, without its two costs measured in the page):
//!
//! - **Text is measured by the canvas** (`measureText`), and each measurement is kept.
//!   plotters' own measurement in the browser appends a `<span>` to the document, reads
//!   its `offsetWidth` (a layout of the whole page) and removes it, for every label
//!   it places; a figure measures dozens per redraw. The size given back is the one
//!   that span had: the advance width rounded to a pixel, and the font's line height
//!   (its bounding ascent plus descent).
//! - **Context state is set only when it changes.** Every fill and stroke colour, line
//!   width, font and text alignment is a string the browser parses; a figure's
//!   hundreds of cells or ticks mostly repeat the previous one's.
//!
//! It also notes where each text's ink lies (the canvas's `actualBoundingBox` metrics,
//! kept like the sizes), so the page can tell the browser tests which labels it drew
//! and where ([`draw_on`]): text drawn at the browser's size, which the SVG export
//! draws smaller, can be checked for overlaps only here.

use std::cell::RefCell;
use std::collections::HashMap;

use plotters::coord::Shift;
use plotters::prelude::{DrawingArea, IntoDrawingArea, WHITE};
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingBackend, DrawingErrorKind,
    FontTransform,
};
use wasm_bindgen::{JsCast, JsValue};
use web_sys::{CanvasRenderingContext2d, HtmlCanvasElement};

/// A failed call into the canvas.
#[derive(Debug)]
pub struct CanvasError(String);

impl std::fmt::Display for CanvasError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "canvas: {}", self.0)
    }
}

impl std::error::Error for CanvasError {}

// `map_err` hands the error over by value.
#[allow(clippy::needless_pass_by_value)]
fn failed(error: JsValue) -> DrawingErrorKind<CanvasError> {
    DrawingErrorKind::DrawingError(CanvasError(format!("{error:?}")))
}

thread_local! {
    /// Text sizes measured so far, by CSS font and text.
    static MEASURED: RefCell<HashMap<(String, String), (u32, u32)>> = RefCell::new(HashMap::new());
}

/// Most measurements kept; past it the table starts again (a figure needs far fewer).
const MAX_MEASURED: usize = 20_000;

/// Where a text's ink lies around its anchor point, device pixels: left of it, right
/// of it, above and below it (the canvas's `actualBoundingBox*` for the font, alignment
/// and baseline it was drawn with).
#[derive(Debug, Clone, Copy)]
struct Ink {
    left: f64,
    right: f64,
    ascent: f64,
    descent: f64,
}

/// A text drawn on the canvas and the box of its ink, device pixels from the canvas's
/// top-left corner.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Label {
    /// What it says.
    pub text: String,
    /// Its ink's left, top, right and bottom edges.
    pub ink: [f64; 4],
}

/// What a text's ink extents depend on: CSS font, alignment, baseline and the text.
type InkKey = (String, &'static str, &'static str, String);

thread_local! {
    /// Ink extents measured so far.
    static INK: RefCell<HashMap<InkKey, Ink>> = RefCell::new(HashMap::new());
    /// The labels drawn since the last [`take_labels`].
    static LABELS: RefCell<Vec<Label>> = const { RefCell::new(Vec::new()) };
}

/// The labels drawn on canvases since the last call (or since the last backend was
/// made), in drawing order.
fn take_labels() -> Vec<Label> {
    LABELS.with(|labels| std::mem::take(&mut *labels.borrow_mut()))
}

/// Draws on `canvas` (its pixel size already set) with `draw` on a white ground, then
/// writes the labels drawn to its `data-labels` (a JSON list of `{text, ink: [left,
/// top, right, bottom]}`, device pixels), which the browser tests read.
///
/// # Errors
/// When the canvas has no 2D context, or `draw` or the backend fails.
pub fn draw_on(
    canvas: &HtmlCanvasElement,
    draw: impl FnOnce(&DrawingArea<Canvas2d, Shift>) -> Result<(), String>,
) -> Result<(), String> {
    draw_with(canvas, true, draw)
}

/// [`draw_on`] without the text: a thumbnail's lines and shapes (its `data-labels`
/// stays empty).
///
/// # Errors
/// As [`draw_on`].
pub fn draw_shapes_on(
    canvas: &HtmlCanvasElement,
    draw: impl FnOnce(&DrawingArea<Canvas2d, Shift>) -> Result<(), String>,
) -> Result<(), String> {
    draw_with(canvas, false, draw)
}

fn draw_with(
    canvas: &HtmlCanvasElement,
    text: bool,
    draw: impl FnOnce(&DrawingArea<Canvas2d, Shift>) -> Result<(), String>,
) -> Result<(), String> {
    let mut backend =
        Canvas2d::new(canvas.clone()).ok_or_else(|| "the canvas has no 2D context".to_owned())?;
    backend.text = text;
    let root = backend.into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    draw(&root)?;
    root.present().map_err(|e| e.to_string())?;
    let labels = serde_json::to_string(&take_labels()).map_err(|e| e.to_string())?;
    canvas
        .set_attribute("data-labels", &labels)
        .map_err(|e| format!("{e:?}"))
}

/// Looks `key` up in `table`, or measures it and keeps the result (the table starts
/// again past [`MAX_MEASURED`] entries).
fn remembered<K: std::hash::Hash + Eq, V: Copy, E>(
    table: &'static std::thread::LocalKey<RefCell<HashMap<K, V>>>,
    key: K,
    measure: impl FnOnce() -> Result<V, E>,
) -> Result<V, E> {
    if let Some(value) = table.with(|t| t.borrow().get(&key).copied()) {
        return Ok(value);
    }
    let value = measure()?;
    table.with(|t| {
        let mut t = t.borrow_mut();
        if t.len() >= MAX_MEASURED {
            t.clear();
        }
        t.insert(key, value);
    });
    Ok(value)
}

/// What the context was last set to.
#[derive(Default)]
struct State {
    fill: Option<Rgba>,
    stroke: Option<Rgba>,
    line_width: f64,
    font: String,
    align: &'static str,
    baseline: &'static str,
}

/// plotters' backend on `canvas` (see the module docs).
pub struct Canvas2d {
    canvas: HtmlCanvasElement,
    context: CanvasRenderingContext2d,
    state: State,
    /// Whether text is drawn (a thumbnail leaves it out: at a third of its size it
    /// would be unreadable specks).
    text: bool,
}

impl Canvas2d {
    /// The backend on `canvas`, or `None` when it has no 2D context.
    pub fn new(canvas: HtmlCanvasElement) -> Option<Self> {
        let context = canvas
            .get_context("2d")
            .ok()
            .flatten()?
            .dyn_into::<CanvasRenderingContext2d>()
            .ok()?;
        // A new drawing: labels of an earlier one nobody took are dropped.
        take_labels();
        Some(Self {
            canvas,
            context,
            state: State::default(),
            text: true,
        })
    }

    fn fill_style(&mut self, color: BackendColor) {
        let color = Rgba::of(color);
        if self.state.fill != Some(color) {
            self.context.set_fill_style_str(&color.css());
            self.state.fill = Some(color);
        }
    }

    fn line_style(&mut self, style: &impl BackendStyle) {
        let color = Rgba::of(style.color());
        if self.state.stroke != Some(color) {
            self.context.set_stroke_style_str(&color.css());
            self.state.stroke = Some(color);
        }
        let width = f64::from(style.stroke_width());
        if width != self.state.line_width {
            self.context.set_line_width(width);
            self.state.line_width = width;
        }
    }

    /// Begins a path through `points`; returns whether it has any.
    fn trace(&self, points: impl IntoIterator<Item = BackendCoord>) -> bool {
        let mut points = points.into_iter();
        self.context.begin_path();
        let Some(start) = points.next() else {
            return false;
        };
        self.context.move_to(f64::from(start.0), f64::from(start.1));
        for next in points {
            self.context.line_to(f64::from(next.0), f64::from(next.1));
        }
        true
    }

    /// The ink extents of `text` in the context's current `font`, `align` and
    /// `baseline` (measured once for each).
    fn ink(
        &self,
        font: String,
        align: &'static str,
        baseline: &'static str,
        text: &str,
    ) -> Result<Ink, DrawingErrorKind<CanvasError>> {
        remembered(&INK, (font, align, baseline, text.to_owned()), || {
            let metrics = self.context.measure_text(text).map_err(failed)?;
            Ok(Ink {
                left: metrics.actual_bounding_box_left(),
                right: metrics.actual_bounding_box_right(),
                ascent: metrics.actual_bounding_box_ascent(),
                descent: metrics.actual_bounding_box_descent(),
            })
        })
    }

    fn font(&mut self, css: &str) {
        if css != self.state.font {
            self.context.set_font(css);
            css.clone_into(&mut self.state.font);
        }
    }
}

/// A colour as the context was given it: compared as numbers, written as CSS only
/// when it changes.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Rgba {
    rgb: (u8, u8, u8),
    alpha: f64,
}

impl Rgba {
    fn of(color: BackendColor) -> Self {
        Self {
            rgb: color.rgb,
            alpha: color.alpha,
        }
    }

    /// `#rrggbb` when opaque (the cheapest form to write and for the browser to parse),
    /// `rgba(r,g,b,a)` otherwise.
    fn css(self) -> String {
        let (r, g, b) = self.rgb;
        if self.alpha >= 1.0 {
            format!("#{r:02x}{g:02x}{b:02x}")
        } else {
            format!("rgba({r},{g},{b},{})", self.alpha)
        }
    }
}

fn css_font(style: &impl BackendTextStyle) -> String {
    format!(
        "{} {}px {}",
        style.style().as_str(),
        style.size(),
        style.family().as_str()
    )
}

/// Moves a horizontal or vertical line onto the middle of its pixels, so it is drawn
/// sharp rather than across two half-covered rows.
fn sharp(from: BackendCoord, to: BackendCoord) -> ((f64, f64), (f64, f64)) {
    let (mut a, mut b) = (
        (f64::from(from.0), f64::from(from.1)),
        (f64::from(to.0), f64::from(to.1)),
    );
    if from.0 == to.0 {
        a.0 -= 0.5;
        b.0 -= 0.5;
    }
    if from.1 == to.1 {
        a.1 += 0.5;
        b.1 += 0.5;
    }
    (a, b)
}

impl DrawingBackend for Canvas2d {
    type ErrorType = CanvasError;

    fn get_size(&self) -> (u32, u32) {
        (self.canvas.width(), self.canvas.height())
    }

    fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<CanvasError>> {
        Ok(())
    }

    fn present(&mut self) -> Result<(), DrawingErrorKind<CanvasError>> {
        Ok(())
    }

    fn draw_pixel(
        &mut self,
        point: BackendCoord,
        color: BackendColor,
    ) -> Result<(), DrawingErrorKind<CanvasError>> {
        if color.alpha == 0.0 {
            return Ok(());
        }
        self.fill_style(color);
        self.context
            .fill_rect(f64::from(point.0), f64::from(point.1), 1.0, 1.0);
        Ok(())
    }

    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), DrawingErrorKind<CanvasError>> {
        if style.color().alpha == 0.0 {
            return Ok(());
        }
        let (a, b) = sharp(from, to);
        self.line_style(style);
        self.context.begin_path();
        self.context.move_to(a.0, a.1);
        self.context.line_to(b.0, b.1);
        self.context.stroke();
        Ok(())
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<CanvasError>> {
        if style.color().alpha == 0.0 {
            return Ok(());
        }
        let (x, y) = (f64::from(upper_left.0), f64::from(upper_left.1));
        let (w, h) = (
            f64::from(bottom_right.0 - upper_left.0),
            f64::from(bottom_right.1 - upper_left.1),
        );
        if fill {
            self.fill_style(style.color());
            self.context.fill_rect(x, y, w, h);
        } else {
            self.line_style(style);
            self.context.stroke_rect(x, y, w, h);
        }
        Ok(())
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<CanvasError>> {
        if style.color().alpha == 0.0 {
            return Ok(());
        }
        self.line_style(style);
        self.trace(path);
        self.context.stroke();
        Ok(())
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<CanvasError>> {
        if style.color().alpha == 0.0 {
            return Ok(());
        }
        self.fill_style(style.color());
        if self.trace(path) {
            self.context.close_path();
        }
        self.context.fill();
        Ok(())
    }

    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<CanvasError>> {
        if style.color().alpha == 0.0 {
            return Ok(());
        }
        if fill {
            self.fill_style(style.color());
        } else {
            self.line_style(style);
        }
        self.context.begin_path();
        self.context
            .arc(
                f64::from(center.0),
                f64::from(center.1),
                f64::from(radius),
                0.0,
                std::f64::consts::TAU,
            )
            .map_err(failed)?;
        if fill {
            self.context.fill();
        } else {
            self.context.stroke();
        }
        Ok(())
    }

    fn draw_text<S: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        pos: BackendCoord,
    ) -> Result<(), DrawingErrorKind<CanvasError>> {
        let color = style.color();
        if color.alpha == 0.0 || !self.text {
            return Ok(());
        }
        let turn = match style.transform() {
            FontTransform::None => 0.0,
            FontTransform::Rotate90 => 0.5,
            FontTransform::Rotate180 => 1.0,
            FontTransform::Rotate270 => 1.5,
        } * std::f64::consts::PI;
        let (mut x, mut y) = (f64::from(pos.0), f64::from(pos.1));
        if turn != 0.0 {
            self.context.save();
            self.context.translate(x, y).map_err(failed)?;
            self.context.rotate(turn).map_err(failed)?;
            (x, y) = (0.0, 0.0);
        }
        let baseline = match style.anchor().v_pos {
            VPos::Top => "top",
            VPos::Center => "middle",
            VPos::Bottom => "bottom",
        };
        if baseline != self.state.baseline {
            self.context.set_text_baseline(baseline);
            self.state.baseline = baseline;
        }
        let align = match style.anchor().h_pos {
            HPos::Left => "start",
            HPos::Right => "end",
            HPos::Center => "center",
        };
        if align != self.state.align {
            self.context.set_text_align(align);
            self.state.align = align;
        }
        self.fill_style(color);
        let font = css_font(style);
        self.font(&font);
        let drawn = self.context.fill_text(text, x, y).map_err(failed);
        let ink = self.ink(font, align, baseline, text)?;
        let (left, right, top, bottom) =
            (x - ink.left, x + ink.right, y - ink.ascent, y + ink.descent);
        // The box on the canvas: turned with the text about its anchor.
        let (ox, oy) = (f64::from(pos.0), f64::from(pos.1));
        let ink = match style.transform() {
            FontTransform::None => [left, top, right, bottom],
            FontTransform::Rotate90 => [ox - bottom, oy + left, ox - top, oy + right],
            FontTransform::Rotate180 => [ox - right, oy - bottom, ox - left, oy - top],
            FontTransform::Rotate270 => [ox + top, oy - right, ox + bottom, oy - left],
        };
        LABELS.with(|labels| {
            labels.borrow_mut().push(Label {
                text: text.to_owned(),
                ink: ink.map(|edge| (edge * 10.0).round() / 10.0),
            });
        });
        if turn != 0.0 {
            // `restore` brings back the state saved before the rotation: forget what
            // this backend believes the context holds.
            self.context.restore();
            self.state = State::default();
        }
        drawn
    }

    fn estimate_text_size<S: BackendTextStyle>(
        &self,
        text: &str,
        style: &S,
    ) -> Result<(u32, u32), DrawingErrorKind<CanvasError>> {
        remembered(&MEASURED, (css_font(style), text.to_owned()), || {
            // Measuring needs the font set; put the drawing's font back afterwards.
            self.context.set_font(&css_font(style));
            let metrics = self.context.measure_text(text).map_err(failed)?;
            if !self.state.font.is_empty() {
                self.context.set_font(&self.state.font);
            }
            let width = metrics.width().round().max(0.0) as u32;
            let height = (metrics.font_bounding_box_ascent() + metrics.font_bounding_box_descent())
                .round()
                .max(0.0) as u32;
            Ok((width, height))
        })
    }
}

//! A canvas's CSS width, kept by a `ResizeObserver`.
//!
//! Every redraw sizes the canvas for its width. Reading `clientWidth` in the redraw
//! makes the browser lay the page out on the spot, because the redraw has just changed
//! the readouts and the slider's value: about 0.7 ms of a 5-8 ms redraw, measured with
//! Chromium's profiler on every figure. The observer is called after the browser's own
//! layout whenever the canvas's box changes, keeps the width, and asks for a redraw when
//! the width changed (a window resized, a scroll bar appearing, a font loading).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::Closure;
use web_sys::{HtmlCanvasElement, ResizeObserver};

/// The width of one canvas, while it is observed; stops observing when dropped.
pub struct WidthWatch {
    width: Rc<Cell<i32>>,
    observer: ResizeObserver,
    _callback: Closure<dyn FnMut(js_sys::Array)>,
}

impl WidthWatch {
    /// Starts watching `canvas` (reading its width once now); `changed` runs after a
    /// layout that changed it. `None` where the browser has no `ResizeObserver`.
    pub fn new(canvas: &HtmlCanvasElement, changed: impl Fn() + 'static) -> Option<Self> {
        let width = Rc::new(Cell::new(canvas.client_width()));
        let (kept, observed) = (Rc::clone(&width), canvas.clone());
        let callback = Closure::<dyn FnMut(js_sys::Array)>::new(move |_entries| {
            // Inside the observer's callback the layout is fresh: reading it costs nothing.
            let now = observed.client_width();
            if kept.replace(now) != now {
                changed();
            }
        });
        let observer = ResizeObserver::new(callback.as_ref().unchecked_ref()).ok()?;
        observer.observe(canvas);
        Some(Self {
            width,
            observer,
            _callback: callback,
        })
    }

    /// The canvas's CSS width in pixels after the last layout.
    pub fn width(&self) -> i32 {
        self.width.get()
    }
}

impl Drop for WidthWatch {
    fn drop(&mut self) {
        self.observer.disconnect();
    }
}

/// A figure's canvas width: watched from the first redraw on, read by every redraw.
#[derive(Clone, Default)]
pub struct CanvasWidth(Rc<RefCell<Option<WidthWatch>>>);

impl CanvasWidth {
    /// Starts watching `canvas` unless already watching; `changed` runs when its width
    /// changes.
    pub fn watch(&self, canvas: &HtmlCanvasElement, changed: impl Fn() + 'static) {
        if self.0.borrow().is_none() {
            *self.0.borrow_mut() = WidthWatch::new(canvas, changed);
        }
    }

    /// The width of `canvas` in CSS pixels: the watched one, or read from the page when
    /// there is no watch or the watch last saw it hidden (0 wide: a canvas just shown is
    /// drawn at its new width before the observer reports it).
    pub fn of(&self, canvas: &HtmlCanvasElement) -> i32 {
        self.0
            .borrow()
            .as_ref()
            .map(WidthWatch::width)
            .filter(|&width| width > 0)
            .unwrap_or_else(|| canvas.client_width())
    }
}

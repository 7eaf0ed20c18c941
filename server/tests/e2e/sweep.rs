//! The reader's controls over their whole range, in the page: every figure's embed page
//! on the CPU path, its controls set as a reader sets them (the slider's `input`, the
//! checkbox's and the list's `change`/`input` events) to each setting of
//! `arlbook_app::sweep` but the seeded joint draws: every control's ends and grid one at
//! a time, and the sliders' corners. After each redraw the figure must show no error,
//! only finite readouts, and a canvas with a drawing on it.
//!
//! After each redraw, and on every page at 320 px, the labels a figure drew (the ink
//! boxes its canvas notes, at the size the browser draws text) must lie inside the
//! canvas without overlapping one another.
//!
//! The layout at the narrowest width the page supports as well: at 320 px no chapter or
//! embed scrolls sideways, and no two controls of a figure overlap.

use std::time::Duration;

use arlbook_app::chapters::{CHAPTERS, FIGURES};
use arlbook_app::figure::EMBED_WIDTH;
use arlbook_app::sweep::settings;
use arlbook_tests::browser::Gpu;
use arlbook_tests::webdriver::Browser;
use serde_json::{Value, json};

use super::Checks;

/// Waiting for one figure's first drawing.
const FIRST_DRAW: Duration = Duration::from_secs(60);
/// Most time one setting may take to compute and draw.
const ONE_SETTING_MS: u64 = 20_000;

/// What is wrong with the labels a canvas drew, from the ink boxes the page notes in
/// its `data-labels` (device pixels): a label that leaves the canvas, and two labels
/// whose ink overlaps by more than a pixel and a half each way (the runs of one label,
/// a subscript and its base, only touch).
pub const LABELS: &str = r"
function labelProblems(canvas, where) {
  const raw = canvas.dataset.labels;
  if (!raw) return [where + ': the canvas noted no labels'];
  const dpr = window.devicePixelRatio || 1;
  const labels = JSON.parse(raw).filter(l => l.ink[2] - l.ink[0] > 0 && l.ink[3] - l.ink[1] > 0);
  const problems = [];
  const slack = dpr;
  for (const l of labels) {
    const [x0, y0, x1, y1] = l.ink;
    if (x0 < -slack || y0 < -slack || x1 > canvas.width + slack || y1 > canvas.height + slack) {
      problems.push(where + ': label ' + JSON.stringify(l.text) + ' leaves the ' + canvas.width + 'x' + canvas.height + ' canvas: ' + l.ink.join(','));
    }
  }
  const least = 1.5 * dpr;
  for (let i = 0; i < labels.length; i++) {
    for (let j = i + 1; j < labels.length; j++) {
      const a = labels[i].ink, b = labels[j].ink;
      if (Math.min(a[2], b[2]) - Math.max(a[0], b[0]) > least && Math.min(a[3], b[3]) - Math.max(a[1], b[1]) > least) {
        problems.push(where + ': labels overlap: ' + JSON.stringify(labels[i].text) + ' at ' + a.join(',') + ' / ' + JSON.stringify(labels[j].text) + ' at ' + b.join(','));
      }
    }
  }
  return problems;
}
";

/// Applies each setting in turn (`[[key, value], …]` per setting) and reports what is
/// wrong after its redraw: an error shown, a readout that is not finite, an empty canvas,
/// labels that overlap or leave the canvas ([`LABELS`]).
const SWEEP: &str = r"
const [id, settings, limitMs, done] = arguments;
const figure = document.getElementById(id);
const canvas = document.getElementById(id + '-canvas');
const failures = [];
function apply(pairs) {
  let changed = false;
  for (const [key, value] of pairs) {
    const input = document.getElementById(id + '-input-' + key);
    if (input === null) { failures.push('no control ' + key); continue; }
    if (input.type === 'checkbox') {
      const on = value === '1';
      if (input.checked !== on) {
        input.checked = on; changed = true;
        input.dispatchEvent(new Event('change', { bubbles: true }));
      }
    } else if (input.value !== value || (input.type === 'range' && Number(input.value) !== Number(value))) {
      input.value = value; changed = true;
      const kind = input.tagName === 'SELECT' ? 'change' : 'input';
      input.dispatchEvent(new Event(kind, { bubbles: true }));
    }
  }
  return changed;
}
function inked() {
  const context = canvas.getContext('2d');
  const { width, height } = canvas;
  if (width === 0 || height === 0) return 0;
  const data = context.getImageData(0, 0, width, height).data;
  let count = 0;
  for (let i = 0; i < data.length; i += 16) {
    if (data[i] < 200 || data[i + 1] < 200 || data[i + 2] < 200) count++;
  }
  return count;
}
function check(label) {
  const error = document.getElementById(id + '-error');
  if (error !== null && !error.hidden) failures.push(label + ': shows ' + JSON.stringify(error.textContent));
  for (const dd of figure.querySelectorAll('.readouts dd')) {
    const value = Number(dd.dataset.value);
    if (!Number.isFinite(value)) failures.push(label + ': readout ' + dd.id + ' = ' + dd.dataset.value);
  }
  if (inked() < 200) failures.push(label + ': the canvas is nearly blank');
  failures.push(...labelProblems(canvas, label));
}
function next(i) {
  if (i === settings.length) { done(failures); return; }
  const pairs = settings[i];
  const label = pairs.map(([k, v]) => k + '=' + v).join('&');
  const before = Number(figure.dataset.draws);
  if (!apply(pairs)) { check(label); setTimeout(() => next(i + 1), 0); return; }
  const started = performance.now();
  (function wait() {
    if (Number(figure.dataset.draws) > before) {
      requestAnimationFrame(() => { check(label); setTimeout(() => next(i + 1), 0); });
    } else if (performance.now() - started > limitMs) {
      failures.push(label + ': no redraw within ' + limitMs + ' ms');
      setTimeout(() => next(i + 1), 0);
    } else {
      setTimeout(wait, 5);
    }
  })();
}
next(0);
";

fn wait_for_first_draw(browser: &Browser, id: &str) -> bool {
    browser
        .wait_for(
            "const f = document.getElementById(arguments[0]); \
             return f !== null && Number(f.dataset.draws) >= 1 ? true : null;",
            &[json!(id)],
            FIRST_DRAW,
        )
        .is_some()
}

/// Every figure's controls over the sweep, on the CPU path.
pub fn every_control_setting_gives_a_figure(checks: &mut Checks) {
    let browser = Browser::start(Gpu::Disabled, 1100, 1400);
    let mut total = 0;
    for figure in FIGURES {
        let meta = figure.meta();
        let id = meta.id;
        let sweep: Vec<Value> = settings(meta.controls)
            .into_iter()
            .filter(|s| s.origin != "grid")
            .map(|s| json!(s.state.to_pairs("")))
            .collect();
        total += sweep.len();
        let path = format!("/embed/{id}?backend=cpu");
        browser.goto(&format!("{}{path}", checks.base));
        if !wait_for_first_draw(&browser, id) {
            checks.failures.push(format!("{path}: never drew"));
            continue;
        }
        let count = u32::try_from(sweep.len()).unwrap_or(u32::MAX);
        let answer = browser.execute_async(
            &format!("{LABELS}{SWEEP}"),
            &[json!(id), Value::Array(sweep), json!(ONE_SETTING_MS)],
            Duration::from_millis(ONE_SETTING_MS) * count.max(1),
        );
        match answer {
            Value::Array(failures) => checks.failures.extend(
                failures
                    .iter()
                    .map(|f| format!("{path} swept: {}", f.as_str().unwrap_or_default())),
            ),
            other => checks
                .failures
                .push(format!("{path}: the sweep did not finish: {other}")),
        }
    }
    eprintln!("e2e: swept {total} settings over {} figures", FIGURES.len());
}

/// What overflows at the page's width: the page's own sideways scroll, pairs of a
/// figure's controls whose boxes overlap, and display formulas that spill past their
/// box's left edge or are cut without scrolling.
const LAYOUT: &str = r"
const problems = [];
const root = document.documentElement;
if (root.scrollWidth > window.innerWidth + 1) {
  problems.push('the page is ' + root.scrollWidth + ' px wide in a ' + window.innerWidth + ' px window');
}
for (const controls of document.querySelectorAll('.controls')) {
  const boxes = [...controls.querySelectorAll('.control')].map(c => [c, c.getBoundingClientRect()]);
  for (let i = 0; i < boxes.length; i++) {
    const [a, ra] = boxes[i];
    if (ra.right > window.innerWidth + 1) problems.push(a.textContent.trim() + ': ends at ' + Math.round(ra.right) + ' px');
    for (let j = i + 1; j < boxes.length; j++) {
      const [b, rb] = boxes[j];
      const overlap = Math.min(ra.right, rb.right) - Math.max(ra.left, rb.left) > 1
        && Math.min(ra.bottom, rb.bottom) - Math.max(ra.top, rb.top) > 1;
      if (overlap) problems.push('controls overlap: ' + a.textContent.trim() + ' / ' + b.textContent.trim());
    }
  }
}
// A display formula starts inside its box (a part left of it could not be scrolled to),
// and one wider than its box scrolls.
for (const box of document.querySelectorAll('.display-math')) {
  const math = box.querySelector('math');
  if (!math) continue;
  // The formula's ink: the boxes of its parts (the <math> box itself is the column's).
  const parts = [...math.querySelectorAll('*')].map(e => e.getBoundingClientRect()).filter(r => r.width > 0);
  if (parts.length === 0) continue;
  const left = Math.min(...parts.map(r => r.left)), right = Math.max(...parts.map(r => r.right));
  const rb = box.getBoundingClientRect();
  const text = box.textContent.trim().slice(0, 40);
  if (left < rb.left - 1) problems.push('formula ' + text + ' starts ' + Math.round(rb.left - left) + ' px left of its box');
  if (right - left > rb.width + 1 && box.scrollWidth <= box.clientWidth) problems.push('formula ' + text + ' is cut without scrolling');
}
for (const canvas of document.querySelectorAll('canvas[data-labels]')) {
  problems.push(...labelProblems(canvas, canvas.id));
}
return problems;
";

/// The narrowest width the page supports, in CSS pixels.
const NARROWEST: u32 = 320;

/// Window widths the layout is checked at, CSS pixels: the narrowest, a large phone, a
/// small tablet (figures a little over the 560 px that puts their panels side by side),
/// the embed code's, a laptop's.
const LAYOUT_WIDTHS: [u32; 5] = [NARROWEST, 414, 640, EMBED_WIDTH, 1280];

/// The contents, every chapter and every embed at each of [`LAYOUT_WIDTHS`]: nothing wider than the
/// window, no two controls on top of each other, no display formula cut
/// at its left edge or without a scroll, no figure's labels overlapping or leaving its
/// canvas.
pub fn the_narrowest_layout_holds(checks: &mut Checks) {
    for width in LAYOUT_WIDTHS {
        layout_holds_at(checks, width);
    }
}

/// The checks of [`the_narrowest_layout_holds`] in a window `width` CSS pixels wide.
fn layout_holds_at(checks: &mut Checks, width: u32) {
    let browser = Browser::start(Gpu::Disabled, width, 900);
    browser.emulate_viewport(width, 900);
    let inner = browser
        .execute("return window.innerWidth;", &[])
        .as_u64()
        .unwrap_or(0);
    if inner != u64::from(width) {
        eprintln!("e2e: the window's inner width is {inner} px (asked for {width})");
    }
    let mut pages: Vec<(String, Option<&str>)> = vec![("/?backend=cpu".to_owned(), None)];
    pages.extend(
        CHAPTERS
            .iter()
            .map(|c| (format!("/chapter/{}?backend=cpu", c.id), None)),
    );
    pages.extend(FIGURES.iter().map(|f| {
        (
            format!("/embed/{}?backend=cpu", f.meta().id),
            Some(f.meta().id),
        )
    }));
    for (path, figure) in pages {
        browser.goto(&format!("{}{path}", checks.base));
        let ready = match figure {
            Some(id) => wait_for_first_draw(&browser, id),
            None => browser
                .wait_for(
                    "return document.querySelector('h1') !== null && \
                       [...document.querySelectorAll('figure.figure')] \
                         .every(f => Number(f.dataset.draws) >= 1) && \
                       [...document.querySelectorAll('canvas.thumb')] \
                         .every(c => c.dataset.drawn === '1') ? true : null;",
                    &[],
                    FIRST_DRAW,
                )
                .is_some(),
        };
        if !ready {
            checks
                .failures
                .push(format!("{path} at {width} px: never rendered"));
            continue;
        }
        if let Value::Array(problems) = browser.execute(&format!("{LABELS}{LAYOUT}"), &[]) {
            checks.failures.extend(
                problems
                    .iter()
                    .map(|p| format!("{path} at {width} px: {}", p.as_str().unwrap_or_default())),
            );
        }
    }
}

/// The ledger's cells show what fits of a token; the pointer over a cell shows
/// the whole of it as the canvas's tooltip.
pub fn a_hovered_token_is_shown_whole(checks: &mut Checks) {
    let browser = Browser::start(Gpu::Disabled, 1100, 1400);
    let path = "/embed/token-ledger?backend=cpu";
    browser.goto(&format!("{}{path}", checks.base));
    if !wait_for_first_draw(&browser, "token-ledger") {
        checks.failures.push(format!("{path}: never drew"));
        return;
    }
    // The first cell of the second row of cells, below the title band.
    let title = browser.execute(
        "const c = document.getElementById('token-ledger-canvas'); \
         const r = c.getBoundingClientRect(); \
         const x = r.left + r.width / 64, y = r.top + 26 + (r.height - 26) * 1.5 / 8; \
         c.dispatchEvent(new MouseEvent('mousemove', { clientX: x, clientY: y, bubbles: true })); \
         return new Promise(done => requestAnimationFrame(() => done(c.title)));",
        &[],
    );
    let title = title.as_str().unwrap_or_default();
    if !title.starts_with("token 32: ") {
        checks.failures.push(format!(
            "{path}: the pointer over the second row's first cell shows {title:?}, not token 32"
        ));
    }
}

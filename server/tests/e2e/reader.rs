//! The notebook used like a reader uses it, through `chromedriver`: keys pressed on
//! sliders, cells clicked, numbers typed, and the page's numbers checked after each
//! step; then the redraw latency of every figure (control change to figure drawn),
//! printed as p50/p95 per figure. The latency is a measurement, never a pass/fail
//! threshold.

use std::time::Duration;

use arlbook_app::chapters::FIGURES;
use arlbook_tests::browser::Gpu;
use arlbook_tests::webdriver::{Browser, Element, keys};
use serde_json::{Value, json};

use super::Checks;

/// How long a figure may take to show its first numbers (WebGPU start-up included).
const FIRST_DRAW: Duration = Duration::from_secs(30);
/// How long one change may take to be drawn before it counts as lost.
const ONE_REDRAW: Duration = Duration::from_secs(20);
/// Time given to a figure to redraw on the GPU path after WebGPU has started.
const SETTLE_AFTER_START: Duration = Duration::from_millis(500);
/// Control changes timed per figure, unless `ARLBOOK_LATENCY_SAMPLES` says otherwise
/// (`cargo xtask bench web` asks for more: the p95 of 20 changes is their
/// second-slowest).
const LATENCY_SAMPLES: usize = 20;

/// The control changes to time per figure: `ARLBOOK_LATENCY_SAMPLES` (5 to 1000) or
/// [`LATENCY_SAMPLES`].
fn latency_samples() -> usize {
    std::env::var("ARLBOOK_LATENCY_SAMPLES")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .map_or(LATENCY_SAMPLES, |n| n.clamp(5, 1000))
}

/// Waits until figure `figure` has drawn at least `draws` times; returns whether it did.
fn wait_for_draws(browser: &Browser, figure: &str, draws: u64, timeout: Duration) -> bool {
    browser
        .wait_for(
            "const f = document.getElementById(arguments[0]); \
             return f !== null && Number(f.dataset.draws) >= arguments[1];",
            &[json!(figure), json!(draws)],
            timeout,
        )
        .is_some()
}

fn draws(browser: &Browser, figure: &str) -> u64 {
    browser
        .execute(
            "const f = document.getElementById(arguments[0]); \
             return f === null ? 0 : Number(f.dataset.draws);",
            &[json!(figure)],
        )
        .as_u64()
        .unwrap_or(0)
}

/// One reader action on `figure` and the numbers expected after it.
struct Step<'a> {
    what: &'a str,
    act: &'a dyn Fn(&Browser, &Element),
    control: &'a str,
    expect: &'a [(&'a str, f64)],
    url_has: &'a str,
}

/// Performs `step` on the chapter page already open and checks its numbers.
fn perform(checks: &mut Checks, browser: &Browser, page: &str, figure: &str, step: &Step<'_>) {
    let Some(control) = browser.find(step.control, FIRST_DRAW) else {
        checks
            .failures
            .push(format!("{page}: no control {}", step.control));
        return;
    };
    let before = draws(browser, figure);
    (step.act)(browser, &control);
    // Each key press or keystroke is one change: wait for the numbers to settle on
    // the expected ones rather than for a draw count.
    let settled = browser.wait_for(
        "for (const [id, want] of arguments[0]) { \
           const e = document.getElementById(id); \
           if (e === null || Math.abs(Number(e.dataset.value) - want) > 1e-9) return false; } \
         return true;",
        &[json!(step.expect)],
        ONE_REDRAW,
    );
    if settled.is_none() {
        for (id, want) in step.expect {
            let got = browser.readout(id);
            checks.failures.push(format!(
                "{page}: after {}: {id} = {got:?}, expected {want}",
                step.what
            ));
        }
    }
    if draws(browser, figure) <= before {
        checks.failures.push(format!(
            "{page}: after {}: {figure} did not redraw",
            step.what
        ));
    }
    let search = browser.execute("return location.search;", &[]);
    let search = search.as_str().unwrap_or_default();
    if !search.contains(step.url_has) {
        checks.failures.push(format!(
            "{page}: after {}: the URL query {search:?} lacks {:?}",
            step.what, step.url_has
        ));
    }
}

fn press(browser: &Browser, element: &Element, key: &str, times: usize) {
    browser.send_keys(element, &key.repeat(times));
}

/// Keys on sliders, clicks on reward cells and typed lists move the numbers to the
/// article's values (and away from them), and the URL follows.
pub fn controls_move_the_numbers(checks: &mut Checks) {
    let browser = Browser::start(Gpu::Disabled, 1100, 1400);
    sliders(checks, &browser);
    cells_and_lists(checks, &browser);
}

/// Arrow keys on the bandit's `p` and the importance figure's `pi`.
fn sliders(checks: &mut Checks, browser: &Browser) {
    let page = "/chapter/policy-gradient";
    browser.goto(&format!("{}{page}", checks.base));
    if wait_for_draws(browser, "bandit", 1, FIRST_DRAW) {
        let steps = [
            Step {
                what: "20 presses of ← on p",
                act: &|b, e| press(b, e, keys::LEFT, 20),
                control: "bandit-input-p",
                // (q_A - q_B) p (1 - p) at p = 0.3
                expect: &[("bandit-exact", 0.4 * 0.3 * 0.7)],
                url_has: "bandit.p=0.3",
            },
            Step {
                what: "20 presses of → on p",
                act: &|b, e| press(b, e, keys::RIGHT, 20),
                control: "bandit-input-p",
                expect: &[("bandit-exact", 0.1)],
                url_has: "bandit.p=0.5",
            },
        ];
        for step in &steps {
            perform(checks, browser, page, "bandit", step);
        }
    } else {
        checks.failures.push(format!("{page}: bandit never drew"));
    }

    let page = "/chapter/off-policy";
    browser.goto(&format!("{}{page}", checks.base));
    if wait_for_draws(browser, "importance", 1, FIRST_DRAW) {
        let steps = [
            Step {
                what: "10 presses of → on π(A)",
                act: &|b, e| press(b, e, keys::RIGHT, 10),
                control: "importance-input-pi",
                expect: &[
                    ("importance-exact", 0.7 * 0.75 + 0.3 * 0.35),
                    ("importance-weight-a", 0.7 / 0.2),
                ],
                url_has: "importance.pi=0.7",
            },
            Step {
                what: "10 presses of ← on π(A)",
                act: &|b, e| press(b, e, keys::LEFT, 10),
                control: "importance-input-pi",
                expect: &[
                    ("importance-exact", 0.59),
                    ("importance-weight-a", 3.0),
                    ("importance-weight-b", 0.5),
                ],
                url_has: "importance.pi=0.6",
            },
        ];
        for step in &steps {
            perform(checks, browser, page, "importance", step);
        }
    } else {
        checks
            .failures
            .push(format!("{page}: importance never drew"));
    }

    // On an embed page the figure's keys are bare: moving a control keeps the others.
    let page = "/embed/importance?backend=cpu";
    browser.goto(&format!("{}{page}", checks.base));
    if wait_for_draws(browser, "importance", 1, FIRST_DRAW) {
        let step = Step {
            what: "10 presses of → on π(A) in an embed",
            act: &|b, e| press(b, e, keys::RIGHT, 10),
            control: "importance-input-pi",
            expect: &[("importance-exact", 0.7 * 0.75 + 0.3 * 0.35)],
            url_has: "pi=0.7",
        };
        perform(checks, browser, page, "importance", &step);
        let search = browser.execute("return location.search;", &[]);
        let search = search.as_str().unwrap_or_default();
        if !search.contains("backend=cpu") {
            checks.failures.push(format!(
                "{page}: moving a control dropped backend=cpu from the query {search:?}"
            ));
        }
        let code = browser.execute(
            "return document.getElementById('importance-embed-code').value;",
            &[],
        );
        if !code.as_str().unwrap_or_default().contains("backend=cpu") {
            checks.failures.push(format!(
                "{page}: the embed code {code} does not keep backend=cpu"
            ));
        }
    } else {
        checks
            .failures
            .push(format!("{page}: importance never drew"));
    }
}

/// Clicks on reward cells and lengths typed into a list.
fn cells_and_lists(checks: &mut Checks, browser: &Browser) {
    let root3 = 3.0_f64.sqrt();
    let page = "/chapter/grpo";
    browser.goto(&format!("{}{page}", checks.base));
    if wait_for_draws(browser, "group-advantages", 1, FIRST_DRAW)
        && wait_for_draws(browser, "reductions", 1, FIRST_DRAW)
    {
        let select_all = format!("{}a{}", keys::CONTROL, keys::NULL);
        let retype = |text: &'static str| {
            let select_all = select_all.clone();
            move |b: &Browser, e: &Element| {
                b.send_keys(e, &format!("{select_all}{}{text}", keys::BACKSPACE));
            }
        };
        let equal_lengths = retype("4,4,4,4");
        let article_lengths = retype("2,4,4,6");
        let steps = [
            Step {
                what: "a click on the second reward of group 1",
                act: &|b, e| b.click(e),
                control: "group-advantages-cell-rewards-0-1",
                // rewards 1,1,0,0: mean 0.5, population std 0.5
                expect: &[
                    ("group-advantages-a-0-0", 1.0),
                    ("group-advantages-a-0-1", 1.0),
                ],
                url_has: "group-advantages.rewards=1,1,0,0",
            },
            Step {
                what: "a second click on it",
                act: &|b, e| b.click(e),
                control: "group-advantages-cell-rewards-0-1",
                expect: &[
                    ("group-advantages-a-0-0", root3),
                    ("group-advantages-a-0-1", -1.0 / root3),
                ],
                url_has: "group-advantages.rewards=1,0,0,0",
            },
            Step {
                what: "typing lengths 4,4,4,4",
                act: &equal_lengths,
                control: "reductions-input-lengths",
                // Equal lengths: every reduction weighs the zero-sum advantages equally.
                expect: &[
                    ("reductions-loss-token-mean", 0.0),
                    ("reductions-loss-seq-mean-token-mean", 0.0),
                ],
                url_has: "reductions.lengths=4,4,4,4",
            },
            Step {
                what: "typing lengths 2,4,4,6",
                act: &article_lengths,
                control: "reductions-input-lengths",
                expect: &[
                    ("reductions-loss-seq-mean-token-mean", 0.0),
                    ("reductions-loss-token-mean", 1.0 / (2.0 * root3)),
                    ("reductions-loss-dr_grpo", 1.0 / (3.0 * root3)),
                ],
                url_has: "reductions.lengths=2,4,4,6",
            },
        ];
        for step in &steps {
            let figure = if step.control.starts_with("reductions") {
                "reductions"
            } else {
                "group-advantages"
            };
            perform(checks, browser, page, figure, step);
        }
    } else {
        checks.failures.push(format!("{page}: a figure never drew"));
    }
}

/// In the page: changes the figure's first slider, choice or toggle `count` times. Each
/// change is made at the start of an animation frame (in a `requestAnimationFrame`
/// callback), the clock runs until the figure's draw counter moves (the input handled,
/// the figure computed and drawn), and then until the next frame starts. Calls back
/// with `[drawn, work, draw, frame]` in ms per change: `drawn` from the change to the
/// figure drawn; `work` the figure's own compute and draw (`data-redraw-ms`); `draw`
/// the part spent on readouts and canvas (`data-draw-ms`); `frame` from the start of
/// the frame the change was made in to the start of the frame that shows it (one frame
/// interval when the redraw fits in the frame), or an error text.
const TIME_REDRAWS: &str = r"
const [figureId, count, limitMs, done] = arguments;
const figure = document.getElementById(figureId);
const control = figure && figure.querySelector(
  '.controls input[type=range], .controls select, .controls input[type=checkbox]');
if (!control) { done('no slider, choice or toggle'); return; }
const start = control.value;
function change(i) {
  if (control.type === 'range') {
    const step = Number(control.step), max = Number(control.max);
    const base = Number(start);
    const other = base + step <= max ? base + step : base - step;
    control.value = String(i % 2 === 0 ? other : base);
    control.dispatchEvent(new Event('input', { bubbles: true }));
  } else if (control.type === 'checkbox') {
    control.checked = !control.checked;
    control.dispatchEvent(new Event('change', { bubbles: true }));
  } else {
    control.selectedIndex = (control.selectedIndex + 1) % control.options.length;
    control.dispatchEvent(new Event('change', { bubbles: true }));
  }
}
const times = [];
function next(i) {
  if (i === count) { done(times); return; }
  requestAnimationFrame((frameStart) => {
    const before = Number(figure.dataset.draws);
    const t0 = performance.now();
    const timer = setTimeout(() => { observer.disconnect(); done('no redraw within ' + limitMs + ' ms'); }, limitMs);
    const observer = new MutationObserver(() => {
      if (Number(figure.dataset.draws) === before) return;
      observer.disconnect();
      clearTimeout(timer);
      const drawn = performance.now() - t0;
      const work = [Number(figure.dataset.redrawMs), Number(figure.dataset.drawMs)];
      requestAnimationFrame((shown) => {
        times.push([drawn, ...work, shown - frameStart]);
        setTimeout(() => next(i + 1), 0);
      });
    });
    observer.observe(figure, { attributes: true, attributeFilter: ['data-draws'] });
    change(i);
  });
}
next(0);
";

/// The frame interval of the browser's animation frames, in ms (median of 30).
const FRAME_INTERVAL: &str = r"
const done = arguments[arguments.length - 1];
const stamps = [];
function tick(t) {
  stamps.push(t);
  if (stamps.length < 31) { requestAnimationFrame(tick); return; }
  const gaps = stamps.slice(1).map((s, i) => s - stamps[i]).sort((a, b) => a - b);
  done(gaps[15]);
}
requestAnimationFrame(tick);
";

fn percentile(sorted: &[f64], q: f64) -> f64 {
    let rank = (q * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// Times [`latency_samples`] control changes on every figure's embed page and prints, per
/// figure, the change-to-drawn time's p50/p95/max, the figure's own work, and the share
/// of changes shown at the very next frame: once on the CPU path (`?backend=cpu`), once
/// with WebGPU exposed (SwiftShader) and the default backend choice.
pub fn redraw_latency(checks: &mut Checks) {
    let samples_per_figure = latency_samples();
    for (gpu, query, label) in [
        (Gpu::Disabled, "?backend=cpu", "CPU"),
        (
            Gpu::Webgpu,
            "",
            "WebGPU where a kernel exists (SwiftShader)",
        ),
    ] {
        let browser = Browser::start(gpu, 1100, 1400);
        browser.goto(&format!("{}/embed/bandit{query}", checks.base));
        let frame_ms = browser
            .execute_async(FRAME_INTERVAL, &[], ONE_REDRAW)
            .as_f64()
            .unwrap_or(f64::NAN);
        eprintln!(
            "redraw latency, {label}: a control changed at the start of a frame -> figure drawn; \
             {samples_per_figure} changes; frame interval {frame_ms:.1} ms"
        );
        eprintln!(
            "  {:<18} {:>9} {:>9} {:>9} {:>9} {:>9} {:>11}  backend",
            "figure", "p50 ms", "p95 ms", "max ms", "work p95", "draw p95", "next frame"
        );
        for figure in FIGURES {
            let id = figure.meta().id;
            let path = format!("/embed/{id}{query}");
            browser.goto(&format!("{}{path}", checks.base));
            if !wait_for_draws(&browser, id, 1, FIRST_DRAW) {
                checks.failures.push(format!("{path}: never drew"));
                continue;
            }
            // With WebGPU the first numbers come from the CPU while the device starts;
            // the figure recomputes once it is ready. Time the steady state after that.
            let started = browser.wait_for(
                "const b = document.getElementById(arguments[0] + '-backend'); \
                 return b !== null && b.dataset.backend !== 'waiting' \
                   && !b.textContent.includes('starting');",
                &[json!(id)],
                FIRST_DRAW,
            );
            if started.is_none() {
                checks
                    .failures
                    .push(format!("{path}: WebGPU never finished starting"));
                continue;
            }
            std::thread::sleep(SETTLE_AFTER_START);
            let limit_ms = u64::try_from(ONE_REDRAW.as_millis()).unwrap_or(u64::MAX);
            let answer = browser.execute_async(
                TIME_REDRAWS,
                &[json!(id), json!(samples_per_figure), json!(limit_ms)],
                ONE_REDRAW * u32::try_from(samples_per_figure).unwrap_or(u32::MAX),
            );
            let Value::Array(samples) = answer else {
                checks
                    .failures
                    .push(format!("{path}: timing redraws failed: {answer}"));
                continue;
            };
            let column = |i: usize| {
                let mut values: Vec<f64> = samples.iter().filter_map(|s| s[i].as_f64()).collect();
                values.sort_by(f64::total_cmp);
                values
            };
            let (drawn, work, draw, shown) = (column(0), column(1), column(2), column(3));
            if drawn.is_empty() || work.is_empty() || draw.is_empty() {
                continue;
            }
            // Shown at the next frame: within one and a half frame intervals of the start
            // of the frame the change was made in.
            let next_frame = shown.iter().filter(|&&t| t < 1.5 * frame_ms).count();
            let backend = browser
                .execute(
                    "return document.getElementById(arguments[0]).dataset.backend;",
                    &[json!(id)],
                )
                .as_str()
                .unwrap_or_default()
                .to_owned();
            eprintln!(
                "  {id:<18} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>8}/{:<2}  {backend}",
                percentile(&drawn, 0.5),
                percentile(&drawn, 0.95),
                drawn.last().copied().unwrap_or(f64::NAN),
                percentile(&work, 0.95),
                percentile(&draw, 0.95),
                next_frame,
                shown.len()
            );
        }
    }
}

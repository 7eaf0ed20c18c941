//! The GRPO-run figure plays its run, and the pages a reader lands on say nothing in
//! the browser console.
//!
//! The play button moves the `shown` slider from 1 % to 100 % one step per frame: the
//! step readout drops to the start and climbs back to the whole run, and the figure is
//! whole again at the end. Then the contents page (the same figure, small, and every
//! chapter's thumbnail) and each chapter are opened and the console's errors read.

use std::time::Duration;

use arlbook_app::chapters::CHAPTERS;
use arlbook_tests::browser::Gpu;
use arlbook_tests::webdriver::Browser;
use serde_json::json;

use super::Checks;

/// How long a page may take to finish its first drawing (or a run to play out).
const PATIENCE: Duration = Duration::from_secs(60);

/// Whether figure `id` shows a whole run at step `step` (`data-complete` and its step
/// readout).
const WHOLE_AT: &str = "const f = document.getElementById(arguments[0]); \
    const s = document.getElementById(arguments[0] + '-step'); \
    return f !== null && s !== null && f.dataset.complete === '1' \
        && Number(s.dataset.value) === arguments[1] ? true : null;";

pub fn the_run_plays_and_pages_are_quiet(checks: &mut Checks) {
    let browser = Browser::start(Gpu::Disabled, 1100, 1400);
    play(checks, &browser);
    quiet_console(checks, &browser);
}

fn play(checks: &mut Checks, browser: &Browser) {
    let page = "/embed/grpo-run?backend=cpu";
    browser.goto(&format!("{}{page}", checks.base));
    if browser
        .wait_for(WHOLE_AT, &[json!("grpo-run"), json!(200)], PATIENCE)
        .is_none()
    {
        checks
            .failures
            .push(format!("{page}: the run never reached step 200"));
        return;
    }
    let Some(button) = browser.find("grpo-run-play-shown", Duration::from_secs(5)) else {
        checks.failures.push(format!("{page}: no play button"));
        return;
    };
    let draws_before = browser
        .data_attribute("grpo-run", "draws")
        .and_then(|d| d.parse::<u64>().ok())
        .unwrap_or(0);
    // The smallest step the readout shows is kept, read on every animation frame from
    // here on, so the check below does not depend on polling fast enough to catch the
    // ten frames that show the run's first steps.
    browser.execute(
        "window.__earliestStep = Infinity; \
         const sample = () => { \
             const s = document.getElementById('grpo-run-step'); \
             if (s !== null) \
                 window.__earliestStep = Math.min(window.__earliestStep, Number(s.dataset.value)); \
             requestAnimationFrame(sample); \
         }; \
         requestAnimationFrame(sample); \
         return true;",
        &[],
    );
    browser.click(&button);
    // Play has begun once a frame shows less than the whole run.
    let begun = browser.wait_for(
        "return window.__earliestStep < 200 ? true : null;",
        &[],
        Duration::from_secs(10),
    );
    if begun.is_none() {
        checks
            .failures
            .push(format!("{page}: play never left step 200"));
    }
    // The last frames show the whole run again, with the slider at its end.
    if browser
        .wait_for(WHOLE_AT, &[json!("grpo-run"), json!(200)], PATIENCE)
        .is_none()
    {
        checks
            .failures
            .push(format!("{page}: play did not end on the whole run"));
    }
    // The first frames showed the run's start.
    let earliest = browser.execute(
        "return Number.isFinite(window.__earliestStep) ? window.__earliestStep : null;",
        &[],
    );
    if !earliest.as_f64().is_some_and(|step| step <= 20.0) {
        checks.failures.push(format!(
            "{page}: play never showed the run's first steps (earliest step shown: {earliest})"
        ));
    }
    let slider = browser.execute(
        "return document.getElementById('grpo-run-input-shown').value;",
        &[],
    );
    if slider != json!("100") {
        checks
            .failures
            .push(format!("{page}: after play the slider reads {slider}"));
    }
    let draws_after = browser
        .data_attribute("grpo-run", "draws")
        .and_then(|d| d.parse::<u64>().ok())
        .unwrap_or(0);
    // One drawing per frame of the 100-step playback, give or take frames merged.
    if draws_after < draws_before + 50 {
        checks.failures.push(format!(
            "{page}: play drew {} times, expected about 100",
            draws_after - draws_before
        ));
    }
    let url = browser.execute("return location.search;", &[]);
    if !url.as_str().unwrap_or_default().contains("shown=100") {
        checks
            .failures
            .push(format!("{page}: the URL does not keep the slider: {url}"));
    }
}

fn quiet_console(checks: &mut Checks, browser: &Browser) {
    let _ = browser.console_errors();
    let mut pages = vec!["/?backend=cpu".to_owned()];
    pages.extend(
        CHAPTERS
            .iter()
            .map(|c| format!("/chapter/{}?backend=cpu", c.id)),
    );
    for page in pages {
        browser.goto(&format!("{}{page}", checks.base));
        let drawn = browser.wait_for(
            "return document.querySelector('h1') !== null && \
               [...document.querySelectorAll('figure.figure')] \
                 .every(f => Number(f.dataset.draws) >= 1 && f.dataset.complete === '1') && \
               [...document.querySelectorAll('canvas.thumb')] \
                 .every(c => c.dataset.drawn === '1') ? true : null;",
            &[],
            PATIENCE,
        );
        if drawn.is_none() {
            checks
                .failures
                .push(format!("{page}: never finished drawing"));
        }
        for error in browser.console_errors() {
            checks
                .failures
                .push(format!("{page}: console error: {error}"));
        }
    }
}

//! Embeds as a course page holds them: every figure's `/embed/` page in an iframe of the
//! suggested width on another origin, with the embed code's listener. Each frame must
//! report its content height (the listener then sets it), and that height must fit in
//! the embed code's fallback height, so a page without the script still shows the
//! whole figure.

use std::fmt::Write as _;
use std::time::Duration;

use arlbook_app::chapters::FIGURES;
use arlbook_app::figure::{EMBED_HEIGHT_LISTENER, EMBED_WIDTH};
use arlbook_tests::browser::Gpu;
use arlbook_tests::http;
use arlbook_tests::webdriver::Browser;

use super::Checks;

/// The frames' height before their pages report: smaller than any figure.
const INITIAL_HEIGHT: u32 = 120;
/// Every figure's page loading and drawing once, all at the same time.
const SETTLE: Duration = Duration::from_secs(180);

/// The course page: one frame per figure, then the listener.
fn course_page(base: &str) -> String {
    let mut frames = String::new();
    for figure in FIGURES {
        let id = figure.meta().id;
        let _ = writeln!(
            frames,
            "<iframe id=\"frame-{id}\" src=\"{base}/embed/{id}\" width=\"{EMBED_WIDTH}\" \
             height=\"{INITIAL_HEIGHT}\" style=\"border:0\" title=\"{id}\"></iframe>"
        );
    }
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>course</title></head>\
         <body style=\"margin:0\">\n{frames}{EMBED_HEIGHT_LISTENER}\n</body></html>\n"
    )
}

pub fn every_embed_fits_its_frame(checks: &mut Checks) {
    let dir = std::env::temp_dir().join(format!("arlbook-course-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("creating the course page's folder");
    std::fs::write(dir.join("course.html"), course_page(&checks.base))
        .expect("writing the course page");
    let course = http::serve_static(&dir);
    let browser = Browser::start(Gpu::Disabled, EMBED_WIDTH + 40, 1000);
    browser.goto(&format!("http://{course}/course.html"));
    let all_reported = format!(
        "const f = [...document.querySelectorAll('iframe')]; \
         return f.every(x => Number(x.height) !== {INITIAL_HEIGHT}) \
           ? f.map(x => [x.id, Number(x.height)]) : null;"
    );
    let heights = browser
        .wait_for(&all_reported, &[], SETTLE)
        .unwrap_or_else(|| {
            browser.execute(
            "return [...document.querySelectorAll('iframe')].map(x => [x.id, Number(x.height)]);",
            &[],
        )
        });
    eprintln!("e2e: the frames' reported heights: {heights}");
    for figure in FIGURES {
        let meta = figure.meta();
        let frame = format!("frame-{}", meta.id);
        let height = heights
            .as_array()
            .and_then(|all| all.iter().find(|h| h[0] == frame.as_str()))
            .and_then(|h| h[1].as_u64());
        match height {
            Some(h) if h == u64::from(INITIAL_HEIGHT) => checks.failures.push(format!(
                "/embed/{}: never reported its height to the page around it",
                meta.id
            )),
            Some(h) if h > u64::from(meta.embed_height()) => checks.failures.push(format!(
                "/embed/{}: its content is {h} px tall, the embed code's frame {} px",
                meta.id,
                meta.embed_height()
            )),
            Some(_) => {}
            None => checks
                .failures
                .push(format!("/embed/{}: no frame on the course page", meta.id)),
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

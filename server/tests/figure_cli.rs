//! `arlbook figure`: the exported SVG is the page's drawing at the URL's state, with the
//! core's numbers in it; the PNG is a real image of the asked size; bad input exits 2
//! naming what was wrong, without a panic and without writing a file.

use std::path::PathBuf;
use std::process::Output;

use arlbook_app::chapters::{FIGURES, figure};
use arlbook_app::export;
use arlbook_app::plot::{DECIMALS, format_number};
use arlbook_core::api;
use arlbook_tests::cli::Arlbook;
use resvg::tiny_skia::Pixmap;
use serde_json::json;

const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

fn arlbook() -> Arlbook {
    Arlbook::new(env!("CARGO_BIN_EXE_arlbook"))
}

fn run(args: &[&str]) -> Output {
    arlbook().run(args, "")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A scratch folder for one test, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("arlbook-figure-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("creating a scratch folder");
        Self(dir)
    }

    fn file(&self, name: &str) -> String {
        self.0.join(name).to_string_lossy().into_owned()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Width and height from a PNG's IHDR chunk.
fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert!(bytes.starts_with(PNG_SIGNATURE), "not a PNG");
    assert_eq!(&bytes[12..16], b"IHDR");
    let word = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().expect("four bytes"));
    (word(16), word(20))
}

/// Asserts a rejected input: exit 2, a message naming `field`, no panic.
fn assert_rejected(out: &Output, field: &str) {
    let text = stderr(out);
    assert_eq!(out.status.code(), Some(2), "expected exit 2: {text}");
    assert!(
        text.contains(&format!("error: {field}:")),
        "should name `{field}`: {text}"
    );
    assert!(!text.contains("panicked"), "{text}");
    assert!(out.stdout.is_empty(), "nothing on stdout after an error");
}

#[test]
fn list_names_every_figure_with_its_title() {
    let out = run(&["figure", "--list"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    for fig in FIGURES {
        let meta = fig.meta();
        let line = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(meta.id))
            .unwrap_or_else(|| panic!("--list lacks {}", meta.id));
        assert!(line.contains(meta.title), "{line}");
    }
    assert_eq!(text.lines().count(), FIGURES.len());
}

#[test]
fn controls_lists_every_state_key_with_its_default() {
    let out = run(&["figure", "bandit", "--controls"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    for control in figure("bandit").unwrap().meta().controls {
        let line = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(control.key))
            .unwrap_or_else(|| panic!("--controls lacks {}", control.key));
        assert!(
            line.contains(&format!("(default {})", control.default)),
            "{line}"
        );
    }
}

#[test]
fn svg_carries_the_loss_the_core_computes_at_the_url_state() {
    let state = "lengths=3,4,4,6&rewards=1,0,1,0";
    let out = run(&[
        "figure",
        "reductions",
        "--format",
        "svg",
        "--out",
        "-",
        "--state",
        state,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let svg = String::from_utf8(out.stdout).unwrap();
    assert!(svg.starts_with("<svg width=\"900\""), "{svg:.80}");
    assert!(svg.trim_end().ends_with("</svg>"));

    // The same numbers straight from the core: group-relative advantages of the
    // rewards, then the token-mean loss at ratio 1 over sequences of those lengths.
    let advantages = api::compute(
        "group-advantages",
        json!({"rewards": [[1.0, 0.0, 1.0, 0.0]], "scale": "group", "std": "population",
               "eps": 0.0}),
    )
    .unwrap()["advantages"][0]
        .clone();
    let logp: Vec<Vec<f64>> = [3, 4, 4, 6].iter().map(|l| vec![-1.0; *l]).collect();
    let loss = api::compute(
        "policy-loss",
        json!({"logp": logp, "old_logp": logp, "advantages": advantages,
               "eps_low": 1.0, "eps_high": 10.0, "reduction": "token-mean"}),
    )
    .unwrap()["loss"]
        .as_f64()
        .unwrap();
    // Hand check: advantages ±1, so the loss is -(3 - 4 + 4 - 6) / 17.
    assert!((loss - 3.0 / 17.0).abs() < 1e-12, "{loss}");
    // Each text element's content sits on its own line; the newline keeps
    // `seq-mean-token-mean: loss = ...` from matching.
    let label = format!("\ntoken-mean: loss = {}\n", format_number(loss, DECIMALS));
    assert!(svg.contains(&label), "the SVG lacks `{label}`");
    // The state took effect: the default state's loss (0.2887) is not drawn.
    assert!(!svg.contains("\ntoken-mean: loss = 0.2887\n"));

    // And it is byte for byte the drawing the app renders for that state.
    let fig = figure("reductions").unwrap();
    let expected = export::render_svg(
        fig,
        &export::state_from_query(fig, state).unwrap(),
        export::DEFAULT_WIDTH,
    )
    .unwrap();
    assert_eq!(svg, expected);
}

#[test]
fn chapter_url_bare_query_and_positional_state_give_the_same_svg() {
    let bare = run(&["figure", "bandit", "--out", "-", "--state", "p=0.3&g=8"]);
    let positional = run(&["figure", "bandit", "--out", "-", "p=0.3&g=8"]);
    let url = run(&[
        "figure",
        "bandit",
        "--out",
        "-",
        "http://127.0.0.1:8080/chapter/policy-gradient?bandit.p=0.3&clip.dual=1&bandit.g=8",
    ]);
    let defaults = run(&["figure", "bandit", "--out", "-"]);
    for out in [&bare, &positional, &url, &defaults] {
        assert!(out.status.success(), "{}", stderr(out));
    }
    assert_eq!(bare.stdout, positional.stdout);
    assert_eq!(bare.stdout, url.stdout);
    assert_ne!(
        bare.stdout, defaults.stdout,
        "the state changes the drawing"
    );
}

#[test]
fn png_file_has_the_signature_and_the_asked_size() {
    let scratch = Scratch::new("png");
    let path = scratch.file("bandit.png");
    let out = run(&[
        "figure", "bandit", "--format", "png", "--out", &path, "--width", "600", "p=0.3",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let bytes = std::fs::read(&path).unwrap();
    let height = (600.0 * figure("bandit").unwrap().meta().aspect).round() as u32;
    assert_eq!(png_size(&bytes), (600, height));

    // Something is drawn: dark pixels (text, axes) on the white ground.
    let pixmap = Pixmap::decode_png(&bytes).unwrap();
    let dark = pixmap
        .pixels()
        .iter()
        .filter(|p| u16::from(p.red()) + u16::from(p.green()) + u16::from(p.blue()) < 200)
        .count();
    assert!(dark > 500, "only {dark} dark pixels");

    // --scale multiplies the pixels; the extension alone picks PNG.
    let path2 = scratch.file("bandit-2x.png");
    let out = run(&[
        "figure", "bandit", "--out", &path2, "--width", "600", "--scale", "2", "p=0.3",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        png_size(&std::fs::read(&path2).unwrap()),
        (1200, 2 * height)
    );
}

#[test]
fn png_to_stdout_equals_the_file() {
    let scratch = Scratch::new("stdout");
    let path = scratch.file("clip.png");
    let to_file = run(&["figure", "clip", "--format", "png", "--out", &path]);
    let to_stdout = run(&["figure", "clip", "--format", "png", "--out", "-"]);
    assert!(to_file.status.success() && to_stdout.status.success());
    assert_eq!(std::fs::read(&path).unwrap(), to_stdout.stdout);
}

#[test]
fn unknown_figure_is_named_with_the_list() {
    let out = run(&["figure", "no-such-figure", "--out", "-"]);
    assert_rejected(&out, "name");
    assert!(stderr(&out).contains("bandit"));
}

#[test]
fn bad_state_values_name_the_key() {
    assert_rejected(&run(&["figure", "bandit", "--out", "-", "p=abc"]), "p");
    assert_rejected(&run(&["figure", "bandit", "--out", "-", "p=7"]), "p");
    assert_rejected(
        &run(&["figure", "bandit", "--out", "-", "colour=red"]),
        "colour",
    );
    assert_rejected(
        &run(&["figure", "clip", "--out", "-", "dual=maybe"]),
        "dual",
    );
    assert_rejected(&run(&["figure", "gae", "--out", "-", "end=later"]), "end");
    // A list is checked element by element when the figure computes.
    assert_rejected(
        &run(&["figure", "reductions", "--out", "-", "lengths=2,x,4,6"]),
        "lengths[1]",
    );
}

#[test]
fn bad_width_and_scale_are_named() {
    assert_rejected(
        &run(&["figure", "bandit", "--out", "-", "--width", "5"]),
        "width",
    );
    assert_rejected(
        &run(&[
            "figure", "bandit", "--format", "png", "--out", "-", "--scale", "100",
        ]),
        "scale",
    );
}

#[test]
fn bad_format_is_a_usage_error_and_writes_nothing() {
    let scratch = Scratch::new("format");
    let path = scratch.file("bandit.gif");
    let out = run(&["figure", "bandit", "--format", "gif", "--out", &path]);
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("gif") && text.contains("svg") && text.contains("png"),
        "{text}"
    );
    assert!(!std::path::Path::new(&path).exists());
}

#[test]
fn error_writes_no_file() {
    let scratch = Scratch::new("nofile");
    let path = scratch.file("bandit.svg");
    assert_rejected(&run(&["figure", "bandit", "--out", &path, "p=2"]), "p");
    assert!(!std::path::Path::new(&path).exists());
}

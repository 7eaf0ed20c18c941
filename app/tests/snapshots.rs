//! Snapshot tests: every figure at its defaults, rendered to SVG by the same drawing
//! code the browser runs on a canvas, compared with the file committed under
//! `tests/snapshots/<figure>.svg`.
//!
//! The chapters' formulas likewise: every display formula and every inline `$…$` span,
//! its TeX and the MathML the page renders, in `tests/snapshots/formulas.txt`.
//!
//! A drawing or formula change shows up as a diff of those files. To accept one, run
//! `UPDATE_SNAPSHOTS=1 cargo test -p arlbook-app --test snapshots` and review them.

use std::path::PathBuf;

use arlbook_app::chapters::FIGURES;
use arlbook_app::figure::State;

const WIDTH: u32 = 900;

fn snapshot_path(id: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("snapshots")
        .join(format!("{id}.svg"))
}

#[test]
fn every_figure_matches_its_svg_snapshot() {
    let update = std::env::var("UPDATE_SNAPSHOTS").is_ok_and(|v| v == "1");
    let mut changed = Vec::new();
    for figure in FIGURES {
        let meta = figure.meta();
        let evaluated = figure
            .evaluate(&State::defaults(meta.controls))
            .unwrap_or_else(|e| panic!("{}: {}", meta.id, e.message));
        let height = (f64::from(WIDTH) * meta.aspect).round() as u32;
        let svg = evaluated.svg(WIDTH, height).expect("rendering SVG");
        assert!(
            svg.contains("<svg") && svg.contains("</svg>"),
            "{}",
            meta.id
        );
        let path = snapshot_path(meta.id);
        if update {
            std::fs::write(&path, &svg).expect("writing the snapshot");
            continue;
        }
        match std::fs::read_to_string(&path) {
            Ok(expected) if expected == svg => {}
            Ok(_) => changed.push(format!("{} differs from {}", meta.id, path.display())),
            Err(_) => changed.push(format!("{} has no snapshot at {}", meta.id, path.display())),
        }
    }
    assert!(
        changed.is_empty(),
        "{}\n(re-run with UPDATE_SNAPSHOTS=1 to accept the new drawings)",
        changed.join("\n")
    );
}

#[test]
fn the_recorded_live_training_run_matches_its_svg_snapshot() {
    use arlbook_app::chapters::live::{RECORDED_RUN, chart, metrics::Run};
    let run = Run::from_jsonl(RECORDED_RUN).expect("the recorded run parses");
    let svg = chart::svg(&run, WIDTH, false).expect("rendering SVG");
    let path = snapshot_path("live-training");
    if std::env::var("UPDATE_SNAPSHOTS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &svg).expect("writing the snapshot");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        expected == svg,
        "live-training differs from {} (re-run with UPDATE_SNAPSHOTS=1 to accept)",
        path.display()
    );
}

/// Each formula of each chapter: `chapter: TeX` on one line, its MathML on the next.
fn formula_listing() -> String {
    use arlbook_app::chapters::{Block, CHAPTERS};
    use arlbook_app::mathml::to_mathml;
    use std::fmt::Write as _;
    let mut out = String::new();
    for chapter in CHAPTERS {
        for block in chapter.blocks {
            let formulas: Vec<(&str, bool)> = match block {
                Block::Display(tex) => vec![(tex, true)],
                Block::Text(text) => text
                    .split('$')
                    .skip(1)
                    .step_by(2)
                    .map(|tex| (tex, false))
                    .collect(),
                _ => Vec::new(),
            };
            for (tex, display) in formulas {
                let math = to_mathml(tex, display)
                    .unwrap_or_else(|e| panic!("chapter {}: {e} in {tex}", chapter.id));
                let kind = if display { "display" } else { "inline" };
                let _ = write!(out, "{} ({kind}): {tex}\n{math}\n\n", chapter.id);
            }
        }
    }
    out
}

#[test]
fn every_chapter_formula_matches_its_mathml_snapshot() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("snapshots")
        .join("formulas.txt");
    let listing = formula_listing();
    assert!(listing.matches("(display)").count() >= 20, "{listing:.400}");
    if std::env::var("UPDATE_SNAPSHOTS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &listing).expect("writing the snapshot");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        expected == listing,
        "the chapters' MathML differs from {} (re-run with UPDATE_SNAPSHOTS=1 to accept it)",
        path.display()
    );
}

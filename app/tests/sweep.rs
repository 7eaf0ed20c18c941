//! Every setting a reader can reach with a figure's controls gives a figure: the sweep
//! of `arlbook_app::sweep` (each control over its ends and grid, the sliders' corners,
//! seeded joint draws) computes without an error, reads out finite numbers, and draws
//! a non-empty picture at the export width and at a phone's width (stacked panels).
//!
//! The browser test sweeps the controls in the page as well (its `sweep` group); this
//! one covers far more settings, natively, through the same figure code.

use arlbook_app::chapters::FIGURES;
use arlbook_app::export::render_svg;
use arlbook_app::sweep::settings;

/// Drawing elements (text included) a figure has at least, beyond its background: the
/// shortest episode's few lines of text and cells. A figure that stopped drawing has
/// none, one that drew only a title has one.
const MIN_MARKS: usize = 5;

fn marks(svg: &str) -> usize {
    [
        "<polyline",
        "<path",
        "<circle",
        "<line",
        "<rect",
        "<polygon",
        "<text",
    ]
    .iter()
    .map(|tag| svg.matches(tag).count())
    .sum::<usize>()
    .saturating_sub(1)
}

/// The contents of the drawing's `<text>` elements.
fn texts(svg: &str) -> impl Iterator<Item = &str> {
    svg.split("</text>")
        .filter_map(|chunk| chunk.rfind('>').map(|at| &chunk[at + 1..]))
}

/// Whether a label shows a value that is not a number: Rust's `NaN`/`inf`, or the `—`
/// that `plot::format_number` writes for them.
fn shows_non_finite(text: &str) -> bool {
    text.contains("NaN") || text.contains("inf") || text.contains('—')
}

#[test]
fn every_reachable_setting_of_every_figure_gives_a_figure() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for figure in FIGURES {
        let meta = figure.meta();
        for setting in settings(meta.controls) {
            checked += 1;
            let at = format!("{} ({}) ?{}", meta.id, setting.origin, setting.query());
            let evaluated = match figure.evaluate(&setting.state) {
                Ok(evaluated) => evaluated,
                Err(err) => {
                    failures.push(format!("{at}: {err}"));
                    continue;
                }
            };
            for readout in evaluated.readouts() {
                if !readout.value.is_finite() {
                    failures.push(format!("{at}: readout {} is {}", readout.id, readout.value));
                }
            }
            for width in [900, 360] {
                match render_svg(*figure, &setting.state, width) {
                    Ok(svg) if marks(&svg) < MIN_MARKS => {
                        failures.push(format!("{at}: {width} px drawing is nearly empty"));
                    }
                    Ok(svg) if texts(&svg).any(shows_non_finite) => {
                        failures.push(format!("{at}: {width} px drawing shows a non-finite value"));
                    }
                    Ok(_) => {}
                    Err(err) => failures.push(format!("{at}: {width} px drawing: {err}")),
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {checked} settings fail:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

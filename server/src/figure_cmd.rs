//! `arlbook figure <name>`: one notebook figure exported as SVG or PNG.
//!
//! The state is the query string of the page's URL (`p=0.3&g=8`, `bandit.p=0.3` from a
//! chapter page, or the whole URL), so a view in the browser can be reproduced for a
//! slide or a handout. The SVG is the drawing the page shows, rendered natively by the
//! app's drawing code (`arlbook_app::export`); the PNG is that SVG rasterised by resvg
//! with an embedded font (`DejaVu Sans`), so text renders on a machine without fonts.
//!
//! A bad figure name, state value, width or scale prints `error: <field>: <message>` on
//! stderr and exits with status 2, like a rejected `arlbook compute` request.

use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use arlbook_app::chapters::{FIGURES, figure};
use arlbook_app::export::{self, DEFAULT_WIDTH, describe_control, render_svg, state_from_query};
// The font every text of a PNG is drawn with (the SVG asks for `sans-serif`): the one
// the app measured the drawing's labels with natively.
use arlbook_app::plot::font::{FONT, FONT_FAMILY};
use arlbook_core::FieldError;
use clap::{Args, ValueEnum};
use resvg::{tiny_skia, usvg};

use crate::output::outln;

/// Exit status for a rejected input (as `arlbook compute`).
const EXIT_BAD_INPUT: u8 = 2;

/// Largest PNG, in pixels (width × height): about 400 MB of RGBA while drawing.
const MAX_PNG_PIXELS: f64 = 100e6;

/// Arguments of `arlbook figure`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  arlbook figure --list
  arlbook figure bandit --controls
  arlbook figure bandit --format svg --out bandit.svg --state 'p=0.3&g=8'
  arlbook figure clip --format png --out clip.png --scale 2 'eps_low=0.2&eps_high=0.28'
  arlbook figure bandit --out - 'http://127.0.0.1:8080/chapter/policy-gradient?bandit.p=0.3'")]
pub struct FigureArgs {
    /// The figure to export (see --list).
    #[arg(required_unless_present = "list")]
    name: Option<String>,
    /// The figure's state: the page URL's query (`p=0.3&g=8`), with or without `?`, keys
    /// bare or prefixed with the figure id (`bandit.p=0.3`), or the whole URL. Controls
    /// not named keep their defaults.
    #[arg(value_name = "STATE", conflicts_with = "state")]
    state_positional: Option<String>,
    /// The same as the positional STATE.
    #[arg(long, value_name = "QUERY")]
    state: Option<String>,
    /// Output format; when absent, `png` if --out ends in `.png`, else `svg`.
    #[arg(long, value_enum)]
    format: Option<Format>,
    /// Where to write the file; `-` writes to stdout.
    #[arg(long, value_name = "FILE", required_unless_present_any = ["list", "controls"])]
    out: Option<PathBuf>,
    /// Width of the drawing in pixels (200 to 8000); the height follows the figure's
    /// aspect ratio.
    #[arg(long, value_name = "PX", default_value_t = DEFAULT_WIDTH)]
    width: u32,
    /// PNG only: pixels per drawing pixel (2 for a sharp image on slides), 0.25 to 8.
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// List the figures with a one-line description each.
    #[arg(long)]
    list: bool,
    /// Print the figure's state keys: what each accepts and its default.
    #[arg(long)]
    controls: bool,
}

/// Output format of `arlbook figure`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// The SVG document the page's drawing code renders.
    Svg,
    /// The SVG rasterised (resvg, embedded font).
    Png,
}

/// Runs the command; `Ok` carries the exit status to use.
pub fn run(args: &FigureArgs) -> anyhow::Result<ExitCode> {
    if args.list {
        let width = FIGURES.iter().map(|f| f.meta().id.len()).max().unwrap_or(0);
        for fig in FIGURES {
            let meta = fig.meta();
            outln!("{:width$}  {}", meta.id, meta.title);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let Some(name) = args.name.as_deref() else {
        anyhow::bail!("name a figure, or pass --list");
    };
    let Some(fig) = figure(name) else {
        let names: Vec<&str> = FIGURES.iter().map(|f| f.meta().id).collect();
        return Ok(reject(&FieldError::new(
            "name",
            format!("no figure `{name}`; the figures are: {}", names.join(", ")),
        )));
    };
    if args.controls {
        let meta = fig.meta();
        let width = meta.controls.iter().map(|c| c.key.len()).max().unwrap_or(0);
        for control in meta.controls {
            outln!(
                "{:width$}  {} (default {}): {}",
                control.key,
                describe_control(control),
                control.default,
                control.label
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    let Some(out) = args.out.as_ref() else {
        anyhow::bail!("--out FILE is required (`-` for stdout)");
    };
    let query = args
        .state
        .as_deref()
        .or(args.state_positional.as_deref())
        .unwrap_or("");
    let format = args.format.unwrap_or_else(|| {
        if out
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("png"))
        {
            Format::Png
        } else {
            Format::Svg
        }
    });
    let bytes = match state_from_query(fig, query)
        .and_then(|state| render_svg(fig, &state, args.width))
        .and_then(|svg| match format {
            Format::Svg => Ok(svg.into_bytes()),
            Format::Png => rasterize(&svg, args.scale),
        }) {
        Ok(bytes) => bytes,
        Err(err) => return Ok(reject(&err)),
    };
    write_output(out, &bytes)?;
    if out.as_os_str() != "-" {
        eprintln!(
            "arlbook: wrote {} ({} bytes, {}×{} drawing)",
            out.display(),
            bytes.len(),
            args.width,
            export::height_for(fig, args.width)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Rasterises an SVG document at `scale` pixels per SVG pixel, text in [`FONT`].
fn rasterize(svg: &str, scale: f64) -> Result<Vec<u8>, FieldError> {
    if !(scale.is_finite() && (0.25..=8.0).contains(&scale)) {
        return Err(FieldError::new(
            "scale",
            format!("{scale} is outside [0.25, 8]"),
        ));
    }
    let tree = parse_svg(svg)?;
    let size = tree.size();
    let width_px = (f64::from(size.width()) * scale).ceil();
    let height_px = (f64::from(size.height()) * scale).ceil();
    if width_px * height_px > MAX_PNG_PIXELS {
        return Err(FieldError::new(
            "scale",
            format!("a {width_px}×{height_px} PNG is too large; lower --scale or --width"),
        ));
    }
    let mut pixmap = tiny_skia::Pixmap::new(width_px as u32, height_px as u32)
        .ok_or_else(|| FieldError::new("width", "the image has no pixels"))?;
    pixmap.fill(tiny_skia::Color::WHITE);
    resvg::render(
        &tree,
        tiny_skia::Transform::from_scale(scale as f32, scale as f32),
        &mut pixmap.as_mut(),
    );
    pixmap
        .encode_png()
        .map_err(|e| FieldError::new("(drawing)", format!("encoding the PNG: {e}")))
}

/// Parses an SVG document with [`FONT`] as its only font, text laid out.
fn parse_svg(svg: &str) -> Result<usvg::Tree, FieldError> {
    let mut options = usvg::Options {
        font_family: FONT_FAMILY.to_owned(),
        ..usvg::Options::default()
    };
    let fonts = options.fontdb_mut();
    fonts.load_font_data(FONT.to_vec());
    fonts.set_sans_serif_family(FONT_FAMILY);
    usvg::Tree::from_str(svg, &options)
        .map_err(|e| FieldError::new("(drawing)", format!("the SVG does not parse: {e}")))
}

/// Writes `bytes` to `out`, or to stdout for `-` (a closed pipe ends quietly).
fn write_output(out: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    if out.as_os_str() == "-" {
        let mut stdout = std::io::stdout().lock();
        return match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
            Err(err) if err.kind() != ErrorKind::BrokenPipe => {
                Err(err).context("writing the figure to stdout")
            }
            _ => Ok(()),
        };
    }
    std::fs::write(out, bytes).with_context(|| format!("writing {}", out.display()))
}

/// Reports a rejected input on stderr; the exit status says it was the input.
fn reject(err: &FieldError) -> ExitCode {
    eprintln!("error: {err}");
    ExitCode::from(EXIT_BAD_INPUT)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dark_pixels(png: &[u8]) -> usize {
        let pixmap = tiny_skia::Pixmap::decode_png(png).expect("a PNG");
        pixmap
            .pixels()
            .iter()
            .filter(|p| u16::from(p.red()) + u16::from(p.green()) + u16::from(p.blue()) < 200)
            .count()
    }

    /// Every text of a drawing and its box on the canvas, laid out in [`FONT`].
    fn text_boxes(svg: &str) -> Vec<(String, usvg::Rect)> {
        fn walk(group: &usvg::Group, out: &mut Vec<(String, usvg::Rect)>) {
            for node in group.children() {
                match node {
                    usvg::Node::Group(inner) => walk(inner, out),
                    usvg::Node::Text(text) => {
                        let content: String =
                            text.chunks().iter().map(usvg::TextChunk::text).collect();
                        out.push((content, text.abs_bounding_box()));
                    }
                    usvg::Node::Path(_) | usvg::Node::Image(_) => {}
                }
            }
        }
        let tree = parse_svg(svg).expect("the drawing parses");
        let mut out = Vec::new();
        walk(tree.root(), &mut out);
        out
    }

    /// Widths a figure is checked at: the export's, the embed's, the narrowest wide
    /// layout, a phone's and the narrowest the page supports.
    const WIDTHS: [u32; 5] = [DEFAULT_WIDTH, 760, 560, 360, 320];

    #[test]
    fn every_label_of_every_figure_lies_inside_its_canvas() {
        use arlbook_app::sweep::settings;
        // Half a pixel of slack for rounding in the layout.
        const SLACK: f32 = 0.5;
        let mut outside = Vec::new();
        let mut labels = 0;
        for fig in FIGURES {
            let meta = fig.meta();
            for setting in settings(meta.controls)
                .into_iter()
                .filter(|s| matches!(s.origin, "default" | "corner"))
            {
                let widths: &[u32] = if setting.origin == "default" {
                    &WIDTHS
                } else {
                    &[DEFAULT_WIDTH, 320]
                };
                for &width in widths {
                    let Ok(svg) = render_svg(*fig, &setting.state, width) else {
                        // A setting that does not compute is the sweep test's failure.
                        continue;
                    };
                    let height = export::height_for(*fig, width) as f32;
                    for (text, rect) in text_boxes(&svg) {
                        labels += 1;
                        let inside = rect.left() >= -SLACK
                            && rect.top() >= -SLACK
                            && rect.right() <= width as f32 + SLACK
                            && rect.bottom() <= height + SLACK;
                        if !inside {
                            outside.push(format!(
                                "{} at {width} px ({}, ?{}): {text:?} spans x {:.0}..{:.0}, \
                                 y {:.0}..{:.0} of {width}×{height}",
                                meta.id,
                                setting.origin,
                                setting.query(),
                                rect.left(),
                                rect.right(),
                                rect.top(),
                                rect.bottom()
                            ));
                        }
                    }
                }
            }
        }
        assert!(labels > 1000, "only {labels} labels found");
        assert!(
            outside.is_empty(),
            "{} of {labels} labels leave the canvas:\n{}",
            outside.len(),
            outside.join("\n")
        );
    }

    #[test]
    fn a_label_past_the_edge_is_found() {
        let svg = r#"<svg width="100" height="40" xmlns="http://www.w3.org/2000/svg">
<text x="80" y="30" font-family="sans-serif" font-size="16">2000</text>
</svg>"#;
        let boxes = text_boxes(svg);
        assert_eq!(boxes.len(), 1);
        assert_eq!(boxes[0].0, "2000");
        assert!(boxes[0].1.right() > 100.0, "{:?}", boxes[0].1);
    }

    #[test]
    fn embedded_font_is_the_family_the_svg_text_resolves_to() {
        let mut fonts = usvg::fontdb::Database::new();
        fonts.load_font_data(FONT.to_vec());
        let face = fonts.faces().next().expect("the embedded font loads");
        assert!(face.families.iter().any(|(name, _)| name == FONT_FAMILY));
    }

    #[test]
    fn text_renders_without_any_system_font() {
        let with_text = r##"<svg width="240" height="40" xmlns="http://www.w3.org/2000/svg">
<rect x="0" y="0" width="240" height="40" fill="#FFFFFF"/>
<text x="8" y="30" font-family="sans-serif" font-size="24" fill="#000000">loss ρ = 0.29</text>
</svg>"##;
        let without_text = r##"<svg width="240" height="40" xmlns="http://www.w3.org/2000/svg">
<rect x="0" y="0" width="240" height="40" fill="#FFFFFF"/>
</svg>"##;
        assert!(dark_pixels(&rasterize(with_text, 1.0).unwrap()) > 100);
        assert_eq!(dark_pixels(&rasterize(without_text, 1.0).unwrap()), 0);
    }

    #[test]
    fn scale_outside_its_range_is_named() {
        let svg = r#"<svg width="10" height="10" xmlns="http://www.w3.org/2000/svg"/>"#;
        for scale in [0.0, 0.1, 9.0, f64::NAN] {
            assert_eq!(rasterize(svg, scale).unwrap_err().field, "scale");
        }
    }
}

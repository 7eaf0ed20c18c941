//! Labels with subscripts, written as in TeX: `π_θ / π_old`, `q_A`, `ε_{high}`.
//!
//! `_` followed by `{…}` lowers what the braces hold; `_` followed by letters or digits
//! lowers that run of them (`π_old`: "old"); any other `_` stays. In the page's HTML a
//! lowered run is a `<sub>`; on a canvas or in SVG ([`draw`]) it is drawn smaller
//! ([`SUB_SCALE`]) and lower ([`SUB_DROP`]), each run placed after the width its
//! backend measures for the one before. `\_` is an underscore kept as it is, for the
//! names of API settings (`dr_grpo`, see [`verbatim`]).

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::Style;

/// Size of a subscript relative to its text.
pub const SUB_SCALE: f64 = 0.72;
/// How far a subscript's top sits below its text's top, in text sizes.
pub const SUB_DROP: f64 = 0.42;

/// A piece of a label: plain or lowered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run<'a> {
    /// Its characters.
    pub text: &'a str,
    /// Whether it is a subscript.
    pub sub: bool,
}

/// `text` split into plain and subscript runs (see the module docs).
pub fn runs(text: &str) -> Vec<Run<'_>> {
    let mut out = Vec::new();
    let mut plain_start = 0;
    let mut at = 0;
    while let Some(offset) = text[at..].find('_') {
        let underscore = at + offset;
        let after = underscore + 1;
        if text[..underscore].ends_with('\\') {
            // `\_`: an underscore kept, its backslash dropped.
            if plain_start < underscore - 1 {
                out.push(Run {
                    text: &text[plain_start..underscore - 1],
                    sub: false,
                });
            }
            plain_start = underscore;
            at = after;
            continue;
        }
        let rest = &text[after..];
        let (sub_range, next) = if let Some(inner) = rest.strip_prefix('{') {
            match inner.find('}') {
                Some(close) => ((after + 1, after + 1 + close), after + 2 + close),
                None => ((after, after), after),
            }
        } else {
            let len: usize = rest
                .chars()
                .take_while(|c| c.is_alphanumeric())
                .map(char::len_utf8)
                .sum();
            ((after, after + len), after + len)
        };
        if sub_range.0 == sub_range.1 {
            // A bare `_`: part of the plain text.
            at = after;
            continue;
        }
        if plain_start < underscore {
            out.push(Run {
                text: &text[plain_start..underscore],
                sub: false,
            });
        }
        out.push(Run {
            text: &text[sub_range.0..sub_range.1],
            sub: true,
        });
        plain_start = next;
        at = next;
    }
    if plain_start < text.len() {
        out.push(Run {
            text: &text[plain_start..],
            sub: false,
        });
    }
    out
}

/// `name` (an API setting such as `dr_grpo`) written so that a label shows it as it is.
pub fn verbatim(name: &str) -> String {
    name.replace('_', "\\_")
}

/// The label as HTML: escaped, subscripts in `<sub>`.
pub fn html(text: &str) -> String {
    runs(text)
        .iter()
        .map(|run| {
            let escaped = crate::mathml::escape(run.text);
            if run.sub {
                format!("<sub>{escaped}</sub>")
            } else {
                escaped
            }
        })
        .collect()
}

/// The label as plain text, subscripts run in (`π_old` → `πold`): for `title`
/// attributes and accessible names, where no markup goes.
pub fn plain(text: &str) -> String {
    runs(text).iter().map(|run| run.text).collect()
}

/// The fonts of a label of `size` CSS pixels in `color`: its text and its subscripts.
fn fonts(style: &Style, size: f64, color: RGBColor) -> (TextStyle<'static>, TextStyle<'static>) {
    let top = Pos::new(HPos::Left, VPos::Top);
    (
        style.text_colored(size, color).pos(top),
        style.text_colored(size * SUB_SCALE, color).pos(top),
    )
}

/// The size in device pixels of the label `text` at `size` CSS pixels on `area`.
///
/// # Errors
/// When the backend cannot measure text.
pub fn measure<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    text: &str,
    style: &Style,
    size: f64,
) -> Result<(u32, u32), DrawingAreaErrorKind<DB::ErrorType>> {
    let (plain_font, sub_font) = fonts(style, size, super::INK);
    let (mut width, mut height) = (0_u32, 0_u32);
    for run in runs(text) {
        let (w, h) = if run.sub {
            let (w, h) = area.estimate_text_size(run.text, &sub_font)?;
            (w, h + style.px(size * SUB_DROP))
        } else {
            area.estimate_text_size(run.text, &plain_font)?
        };
        width += super::font::rendered_width(w);
        height = height.max(h);
    }
    Ok((width, height))
}

/// Draws the label `text` at `size` CSS pixels in `color` on `area`, its top at `top`
/// and horizontally at `x` as `h` says (its left end, centre or right end). Returns its
/// size in device pixels.
///
/// # Errors
/// When the backend fails to draw.
#[allow(clippy::too_many_arguments)] // a label's position, anchor and font
pub fn draw<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    text: &str,
    (x, top): (i32, i32),
    h: HPos,
    style: &Style,
    size: f64,
    color: RGBColor,
) -> Result<(u32, u32), DrawingAreaErrorKind<DB::ErrorType>> {
    let (width, height) = measure(area, text, style, size)?;
    let width_i = i32::try_from(width).unwrap_or(i32::MAX);
    let mut left = match h {
        HPos::Left => x,
        HPos::Center => x - width_i / 2,
        HPos::Right => x - width_i,
    };
    let (plain_font, sub_font) = fonts(style, size, color);
    for run in runs(text) {
        let (font, y) = if run.sub {
            (&sub_font, top + style.offset(size * SUB_DROP))
        } else {
            (&plain_font, top)
        };
        // SVG drops a text element's leading and trailing spaces; non-breaking ones
        // keep the gap between runs (`π_θ / π_old`).
        area.draw_text(&keep_edge_spaces(run.text), font, (left, y))?;
        let (w, _) = area.estimate_text_size(run.text, font)?;
        left += i32::try_from(super::font::rendered_width(w)).unwrap_or(i32::MAX);
    }
    Ok((width, height))
}

/// `text` with the spaces at its ends made non-breaking (inner spaces unchanged).
fn keep_edge_spaces(text: &str) -> String {
    let core = text.trim_matches(' ');
    let leading = text.len() - text.trim_start_matches(' ').len();
    let trailing = text.len() - text.trim_end_matches(' ').len();
    if core.is_empty() {
        return "\u{a0}".repeat(text.len());
    }
    format!(
        "{}{core}{}",
        "\u{a0}".repeat(leading),
        "\u{a0}".repeat(trailing)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(text: &str) -> Vec<(&str, bool)> {
        runs(text).iter().map(|r| (r.text, r.sub)).collect()
    }

    #[test]
    fn underscores_lower_the_run_after_them() {
        assert_eq!(
            split("ratio ρ = π_θ / π_old"),
            [
                ("ratio ρ = π", false),
                ("θ", true),
                (" / π", false),
                ("old", true)
            ]
        );
        assert_eq!(
            split("q_A − q_B"),
            [("q", false), ("A", true), (" − q", false), ("B", true)]
        );
        assert_eq!(
            split("ε_{high} p"),
            [("ε", false), ("high", true), (" p", false)]
        );
        assert_eq!(
            split("KL(π* ‖ π_ref), nats"),
            [("KL(π* ‖ π", false), ("ref", true), ("), nats", false)]
        );
    }

    #[test]
    fn a_bare_underscore_stays() {
        assert_eq!(split("a _ b"), [("a _ b", false)]);
        assert_eq!(split("x_"), [("x_", false)]);
        assert_eq!(split("x_{"), [("x_{", false)]);
        assert_eq!(split("plain"), [("plain", false)]);
        assert!(runs("").is_empty());
    }

    #[test]
    fn an_escaped_underscore_is_kept() {
        assert_eq!(
            split(&verbatim("loss, dr_grpo")),
            [("loss, dr", false), ("_grpo", false)]
        );
        assert_eq!(
            plain(&format!("{}: π_old", verbatim("dr_grpo"))),
            "dr_grpo: πold"
        );
        assert_eq!(html("a\\_b_c"), "a_b<sub>c</sub>");
    }

    #[test]
    fn html_escapes_and_uses_sub() {
        assert_eq!(html("p_old < 1"), "p<sub>old</sub> &lt; 1");
        assert_eq!(plain("(1 + ε_high) p_old"), "(1 + εhigh) pold");
    }

    #[test]
    fn a_drawn_label_is_as_wide_as_its_runs() {
        super::super::font::register();
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (400, 60)).into_drawing_area();
            let style = Style::new(1.0);
            let (width, height) = draw(
                &root,
                "π_old",
                (200, 10),
                HPos::Center,
                &style,
                20.0,
                super::super::INK,
            )
            .unwrap();
            let (pi, _) = root.estimate_text_size("π", &style.text(20.0)).unwrap();
            let (old, _) = root
                .estimate_text_size("old", &style.text(20.0 * SUB_SCALE))
                .unwrap();
            let rendered = super::super::font::rendered_width;
            assert_eq!(width, rendered(pi) + rendered(old));
            assert!(height >= 16, "{height}");
        }
        assert_eq!(svg.matches("<text").count(), 2, "{svg}");
        assert!(svg.contains("\nold\n</text>"), "{svg}");
    }
}

//! The font the drawings are measured and exported in: `DejaVu Sans`, embedded.
//!
//! In the browser plotters measures text with the canvas, in the page's own
//! `sans-serif`. Natively (the SVG export, `arlbook figure`, the snapshot and layout
//! tests) it measures with the font registered here, so a native drawing lays its
//! labels out by the widths of real glyphs, and the PNG export renders the same font
//! those widths came from. The font is `arlbook_core::font`'s `DejaVu Sans`, which the
//! trainer's run plot registers too.

pub use arlbook_core::font::{DEJAVU_SANS as FONT, DEJAVU_SANS_FAMILY as FONT_FAMILY};

/// plotters measures natively (with `ab_glyph`) at a scale where a text style's size is
/// the font's height, ascent to descent: 2384 of `DejaVu Sans`'s units. Its SVG backend
/// writes that size divided by 1.24 as the `font-size`, the em of 2048 units. So a
/// native measurement is off from the rendered text by this factor. (On the canvas the
/// size is the em in CSS pixels, and the canvas measures the text itself.)
pub const NATIVE_WIDTH_CORRECTION: f64 = 2384.0 / (2048.0 * 1.24);

/// The width text renders at, from the width plotters measured for it on this target
/// (natively corrected by [`NATIVE_WIDTH_CORRECTION`]; the canvas measures exactly).
pub fn rendered_width(measured: u32) -> u32 {
    if cfg!(target_arch = "wasm32") {
        measured
    } else {
        (f64::from(measured) * NATIVE_WIDTH_CORRECTION).round() as u32
    }
}

/// Registers [`FONT`] as plotters' `sans-serif` (the family every drawing uses), once;
/// later calls do nothing. Natively, before the first drawing.
#[cfg(not(target_arch = "wasm32"))]
pub fn register() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // The bytes are a valid TrueType font (checked by the test below), so this
        // cannot fail; were it to, plotters would report the missing font on drawing.
        let _ =
            plotters::style::register_font("sans-serif", plotters::style::FontStyle::Normal, FONT);
    });
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use plotters::prelude::*;

    #[test]
    fn the_embedded_font_measures_text_by_its_glyphs() {
        super::register();
        let mut text = String::new();
        let root = SVGBackend::with_string(&mut text, (400, 100)).into_drawing_area();
        let style = ("sans-serif", 20.0).into_font().color(&BLACK);
        let narrow = super::rendered_width(root.estimate_text_size("iiii", &style).unwrap().0);
        let wide = super::rendered_width(root.estimate_text_size("WWWW", &style).unwrap().0);
        // A size of 20 is an SVG font-size of 20 / 1.24 = 16.13 px: `DejaVu Sans`'s `i`
        // advances 0.278 em, `W` 0.989 em.
        assert!((17..=19).contains(&narrow), "{narrow}");
        assert!((63..=65).contains(&wide), "{wide}");
    }
}

//! The font the native drawings are measured and rendered in: `DejaVu Sans`, embedded.
//!
//! The app's figures (exported as SVG and PNG by `arlbook figure`) and the trainer's run
//! plot are drawn with plotters natively; plotters measures their text with the font
//! registered as `sans-serif`, and the PNG rasteriser draws it with the same one, so a
//! label is laid out by the widths of the glyphs it is drawn in. In the browser the
//! canvas measures text itself and this font is not shipped. The font is `DejaVu Sans`,
//! unmodified; its licence is in `core/assets/fonts/DejaVuSans-LICENSE.txt`.

/// The font file (TrueType).
pub const DEJAVU_SANS: &[u8] = include_bytes!("../assets/fonts/DejaVuSans.ttf");
/// The family name inside [`DEJAVU_SANS`].
pub const DEJAVU_SANS_FAMILY: &str = "DejaVu Sans";

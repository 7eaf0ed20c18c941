//! Shared drawing style: colours, font sizes and line widths scaled for the target.
//!
//! The browser draws in device pixels (a canvas of `css width × devicePixelRatio`), so
//! every size goes through [`Style::px`]; SVG export uses a scale of 1.

use plotters::chart::MeshStyle;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Dark text and axes.
pub const INK: RGBColor = RGBColor(0x1d, 0x23, 0x30);
/// Secondary text.
pub const MUTED: RGBColor = RGBColor(0x5b, 0x64, 0x73);
/// First series (blue).
pub const BLUE: RGBColor = RGBColor(0x24, 0x56, 0xc9);
/// Second series (orange).
pub const ORANGE: RGBColor = RGBColor(0xd9, 0x6c, 0x1e);
/// Third series (green).
pub const GREEN: RGBColor = RGBColor(0x2e, 0x8b, 0x57);
/// Fourth series, and warnings (red).
pub const RED: RGBColor = RGBColor(0xb3, 0x26, 0x1e);
/// Fifth series (purple).
pub const PURPLE: RGBColor = RGBColor(0x7b, 0x3f, 0xb0);
/// Reference lines.
pub const LIGHT: RGBColor = RGBColor(0xa0, 0xa6, 0xb2);
/// Light shading.
pub const SHADE: RGBColor = RGBColor(0xe6, 0xe8, 0xee);

/// The series colours in order.
pub const SERIES: [RGBColor; 5] = [BLUE, ORANGE, GREEN, RED, PURPLE];

/// Sizes for one rendering target.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Style {
    /// Device pixels per CSS pixel.
    pub scale: f64,
    /// A phone-width target: side-by-side panels are stacked instead.
    pub narrow: bool,
}

impl Style {
    /// A style for `scale` device pixels per CSS pixel (1 for SVG).
    pub fn new(scale: f64) -> Self {
        Self {
            scale: if scale.is_finite() && scale > 0.0 {
                scale
            } else {
                1.0
            },
            narrow: false,
        }
    }

    /// The same style for a narrow target (panels stacked).
    #[must_use]
    pub fn stacked(mut self, narrow: bool) -> Self {
        self.narrow = narrow;
        self
    }

    /// Rows and columns for `panels` panels side by side (stacked when narrow).
    pub fn grid(&self, panels: usize) -> (usize, usize) {
        let panels = panels.max(1);
        if self.narrow {
            (panels, 1)
        } else {
            (1, panels)
        }
    }

    /// `css_px` CSS pixels in device pixels.
    pub fn px(&self, css_px: f64) -> u32 {
        (css_px * self.scale).round().max(1.0) as u32
    }

    /// `css_px` as a signed device-pixel offset.
    pub fn offset(&self, css_px: f64) -> i32 {
        (css_px * self.scale).round() as i32
    }

    /// Body text of `size` CSS pixels.
    pub fn text(&self, size: f64) -> TextStyle<'static> {
        ("sans-serif", size * self.scale).into_font().color(&INK)
    }

    /// Body text in `color`.
    pub fn text_colored(&self, size: f64, color: RGBColor) -> TextStyle<'static> {
        ("sans-serif", size * self.scale).into_font().color(&color)
    }

    /// Centred text (for labels inside cells).
    pub fn text_centered(&self, size: f64, color: RGBColor) -> TextStyle<'static> {
        self.text_colored(size, color)
            .pos(Pos::new(HPos::Center, VPos::Center))
    }

    /// A line of `width` CSS pixels.
    pub fn line(&self, color: RGBColor, width: f64) -> ShapeStyle {
        color.stroke_width(self.px(width))
    }

    /// Margin around a chart, in device pixels.
    pub fn margin(&self) -> u32 {
        self.px(10.0)
    }

    /// Room for axis labels, in device pixels.
    pub fn label_area(&self) -> u32 {
        self.px(42.0)
    }
}

/// The coordinates of a plain numeric chart.
pub type NumericChart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// A numeric chart in the notebook's frame on `area`: `caption` above, the standard
/// margin and label areas, axes over `x` and `y`.
///
/// # Errors
/// When the backend fails to draw.
pub fn framed_chart<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, plotters::coord::Shift>,
    caption: &str,
    style: &Style,
    x: std::ops::Range<f64>,
    y: std::ops::Range<f64>,
) -> Result<NumericChart<'a, DB>, DrawingAreaErrorKind<DB::ErrorType>> {
    ChartBuilder::on(area)
        .caption(caption, style.text(13.0))
        .margin(style.margin())
        .x_label_area_size(style.px(30.0))
        .y_label_area_size(style.label_area())
        .build_cartesian_2d(x, y)
}

/// The notebook's grid, axes and tick labels for `chart`; the caller adds axis
/// descriptions or tick counts and draws it.
pub fn mesh<'a, 'b, DB: DrawingBackend>(
    chart: &'b mut NumericChart<'a, DB>,
    style: &Style,
) -> MeshStyle<'a, 'b, RangedCoordf64, RangedCoordf64, DB> {
    let mut mesh = chart.configure_mesh();
    mesh.light_line_style(WHITE)
        .bold_line_style(SHADE)
        .axis_style(style.line(MUTED, 1.0))
        .label_style(style.text(11.0))
        .x_label_formatter(&axis_label)
        .y_label_formatter(&axis_label);
    mesh
}

/// Decimals of the numbers the page shows: readouts, slider bounds, axis ticks.
pub const DECIMALS: usize = 4;
/// Decimals of the small labels inside a drawing (cell and bar labels).
pub const LABEL_DECIMALS: usize = 3;

/// A number as the notebook writes it, the one formatter of the app: at most
/// `decimals` decimals ([`DECIMALS`] for readouts, bounds and ticks, [`LABEL_DECIMALS`]
/// for labels inside a drawing), trailing zeros dropped, `-0` written `0`, and `—` for
/// a value that is not finite.
pub fn format_number(value: f64, decimals: usize) -> String {
    if !value.is_finite() {
        return "—".to_owned();
    }
    let text = format!("{value:.decimals$}");
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        &text
    };
    if text == "-0" {
        "0".to_owned()
    } else {
        text.to_owned()
    }
}

/// An axis tick label: [`format_number`] with [`DECIMALS`].
#[allow(clippy::trivially_copy_pass_by_ref)] // plotters passes tick values by reference
pub fn axis_label(value: &f64) -> String {
    format_number(*value, DECIMALS)
}

/// A colour between white (t = 0) and `color` (t = 1).
pub fn tint(color: RGBColor, t: f64) -> RGBColor {
    let t = t.clamp(0.0, 1.0);
    let mix = |c: u8| (255.0 - (255.0 - f64::from(c)) * t).round() as u8;
    RGBColor(mix(color.0), mix(color.1), mix(color.2))
}

/// A diverging colour for `value` in `[-limit, limit]`: blue for positive, red for
/// negative, white at 0.
pub fn diverging(value: f64, limit: f64) -> RGBColor {
    if limit <= 0.0 || !value.is_finite() {
        return WHITE;
    }
    let t = (value / limit).clamp(-1.0, 1.0);
    if t >= 0.0 {
        tint(BLUE, t)
    } else {
        tint(RED, -t)
    }
}

/// Text that reads on a cell of colour `fill`: [`INK`] on light fills, white on dark
/// ones. The choice is by relative luminance (WCAG 2.x): white where it gives the
/// higher contrast ratio.
pub fn text_on(fill: RGBColor) -> RGBColor {
    let contrast_with_white = 1.05 / (relative_luminance(fill) + 0.05);
    let contrast_with_ink = (relative_luminance(fill) + 0.05) / (relative_luminance(INK) + 0.05);
    if contrast_with_white > contrast_with_ink {
        WHITE
    } else {
        INK
    }
}

/// WCAG 2.x relative luminance of an sRGB colour, in `[0, 1]`.
pub fn relative_luminance(color: RGBColor) -> f64 {
    let linear = |c: u8| {
        let c = f64::from(c) / 255.0;
        if c <= 0.040_45 {
            c / 12.92
        } else {
            ((c + 0.055) / 1.055).powf(2.4)
        }
    };
    0.2126 * linear(color.0) + 0.7152 * linear(color.1) + 0.0722 * linear(color.2)
}

/// `[lo, hi]` widened by 8% on each side (and made non-empty).
pub fn padded(lo: f64, hi: f64) -> std::ops::Range<f64> {
    let (lo, hi) = if hi > lo {
        (lo, hi)
    } else {
        (lo - 0.5, lo + 0.5)
    };
    let pad = (hi - lo) * 0.08;
    (lo - pad)..(hi + pad)
}

/// The smallest and largest finite values (`(0, 0)` if none).
pub fn extent(values: impl IntoIterator<Item = f64>) -> (f64, f64) {
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    for v in values.into_iter().filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if lo > hi { (0.0, 0.0) } else { (lo, hi) }
}

/// Counts of `values` in `bins` equal bins over `range`: `(bin start, bin end, count)`.
/// Values outside the range go to the nearest end bin.
pub fn histogram(
    values: &[f64],
    range: std::ops::Range<f64>,
    bins: usize,
) -> Vec<(f64, f64, usize)> {
    let bins = bins.max(1);
    let width = (range.end - range.start) / bins as f64;
    let mut counts = vec![0_usize; bins];
    for v in values.iter().filter(|v| v.is_finite()) {
        let index = if width > 0.0 {
            ((v - range.start) / width)
                .floor()
                .clamp(0.0, (bins - 1) as f64) as usize
        } else {
            0
        };
        counts[index] += 1;
    }
    counts
        .into_iter()
        .enumerate()
        .map(|(i, n)| {
            let from = range.start + width * i as f64;
            (from, from + width, n)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn cell_text_keeps_a_readable_contrast_on_every_diverging_fill() {
        // The better of ink and white on every tint of both hues: at least 3.9:1, the
        // most that choice allows at the worst tint (WCAG asks 3:1 of large text and
        // 4.5:1 of body text; the saturated ends, where the old dark labels vanished,
        // now get white at 6:1 or more).
        let ratio = |a: RGBColor, b: RGBColor| {
            let (la, lb) = (relative_luminance(a), relative_luminance(b));
            (la.max(lb) + 0.05) / (la.min(lb) + 0.05)
        };
        for step in -100..=100 {
            let value = f64::from(step) / 100.0;
            let fill = diverging(value, 1.0);
            let text = text_on(fill);
            assert!(
                ratio(text, fill) >= 3.9,
                "{value}: {:.2}",
                ratio(text, fill)
            );
        }
        for end in [-1.0, 1.0] {
            let fill = diverging(end, 1.0);
            assert!(ratio(text_on(fill), fill) >= 6.0, "{end}");
        }
        assert_eq!(text_on(WHITE), INK);
        assert_eq!(text_on(BLUE), WHITE);
    }

    #[test]
    fn numbers_are_shown_with_at_most_four_decimals() {
        let format_number = |value| format_number(value, DECIMALS);
        assert_eq!(format_number(0.1), "0.1");
        assert_eq!(format_number(0.288_675_134_594_812_9), "0.2887");
        assert_eq!(format_number(-0.000_01), "0");
        assert_eq!(format_number(24.0), "24");
        assert_eq!(format_number(f64::NAN), "—");
    }

    #[test]
    fn labels_have_at_most_three_decimals_and_whole_numbers_keep_their_zeros() {
        assert_eq!(
            format_number(0.288_675_134_594_812_9, LABEL_DECIMALS),
            "0.289"
        );
        assert_eq!(format_number(-0.000_4, LABEL_DECIMALS), "0");
        assert_eq!(format_number(-1.5, LABEL_DECIMALS), "-1.5");
        assert_eq!(format_number(120.0, 0), "120");
        assert_eq!(format_number(f64::INFINITY, 0), "—");
    }

    #[test]
    fn histogram_counts_every_value_once() {
        let bins = histogram(&[0.0, 0.1, 0.5, 0.99, 2.0, -1.0], 0.0..1.0, 4);
        assert_eq!(bins.iter().map(|b| b.2).sum::<usize>(), 6);
        assert_eq!(bins[0].2, 3);
        assert_eq!(bins[3].2, 2);
    }

    use super::*;

    #[test]
    fn diverging_is_white_at_zero_and_saturates() {
        assert_eq!(diverging(0.0, 1.0), WHITE);
        assert_eq!(diverging(5.0, 1.0), BLUE);
        assert_eq!(diverging(-5.0, 1.0), RED);
    }

    #[test]
    fn padded_range_is_never_empty() {
        let r = padded(1.0, 1.0);
        assert!(r.start < 1.0 && r.end > 1.0);
    }

    #[test]
    fn extent_skips_non_finite() {
        assert_eq!(extent([1.0, f64::NAN, -2.0, f64::INFINITY]), (-2.0, 1.0));
        assert_eq!(extent([]), (0.0, 0.0));
    }
}

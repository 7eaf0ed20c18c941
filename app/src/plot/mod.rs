//! Shared drawing style: colours, font sizes and line widths scaled for the target.
//!
//! The browser draws in device pixels (a canvas of `css width × devicePixelRatio`), so
//! every size goes through [`Style::px`]; SVG export uses a scale of 1.

pub mod font;
pub mod rich;

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
    framed_chart_with_labels(area, caption, style, x, y, style.label_area())
}

/// [`framed_chart`] with `y_label_area` device pixels left of the plot for the y ticks
/// and the y axis's title (wide ticks such as `1e-3` need more than the standard).
///
/// The right margin leaves room for half of a tick label centred on the plot's right
/// end (a 4-digit `2000`): the browser draws text at the nominal size, wider than the
/// SVG export's.
///
/// # Errors
/// When the backend fails to draw.
pub fn framed_chart_with_labels<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, plotters::coord::Shift>,
    caption: &str,
    style: &Style,
    x: std::ops::Range<f64>,
    y: std::ops::Range<f64>,
    y_label_area: u32,
) -> Result<NumericChart<'a, DB>, DrawingAreaErrorKind<DB::ErrorType>> {
    let title_height = title(area, caption, style)?;
    ChartBuilder::on(area)
        .margin(style.margin())
        .margin_top(style.margin() + title_height)
        .margin_right(style.px(RIGHT_MARGIN))
        .x_label_area_size(style.px(X_LABEL_AREA))
        .y_label_area_size(y_label_area)
        .build_cartesian_2d(x, y)
}

/// Height of the band under a chart's x axis, CSS pixels: the tick labels and below
/// them the axis title, each 11 px text. The browser draws that text about 13 px tall
/// (15 px with a subscript) below a 5 px gap, 1.24 times the SVG export's size, so the
/// band is sized for the browser.
pub const X_LABEL_AREA: f64 = 36.0;

/// Right margin of a framed chart, CSS pixels: half of `2000` at 11 px and a little.
const RIGHT_MARGIN: f64 = 18.0;

/// An SVG document of `width` × `height` pixels on a white ground, drawn by `draw`,
/// its text measured natively in [`font::FONT`].
///
/// # Errors
/// What `draw` or the backend reports, as text.
pub fn svg_document(
    width: u32,
    height: u32,
    draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, plotters::coord::Shift>) -> Result<(), String>,
) -> Result<String, String> {
    #[cfg(not(target_arch = "wasm32"))]
    font::register();
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        draw(&root)?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(text)
}

/// Size of a panel's title, in CSS pixels.
pub const TITLE_SIZE: f64 = 13.0;

/// Draws `text` (subscripts as in [`rich`]) centred at the top of `area`, as a chart
/// caption; returns the height it takes, padding included, in device pixels. A title
/// wider than the area is broken in two at the separator (`: `, `, `, ` vs `) nearest
/// its middle, and a line still too wide is shortened with `…`.
///
/// # Errors
/// When the backend fails to draw.
pub fn title<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    text: &str,
    style: &Style,
) -> Result<u32, DrawingAreaErrorKind<DB::ErrorType>> {
    let (width, _) = area.dim_in_pixel();
    let room = width.saturating_sub(2 * style.px(4.0));
    let (full_width, height) = rich::measure(area, text, style, TITLE_SIZE)?;
    let lines = if full_width <= room {
        vec![text.to_owned()]
    } else {
        let mut lines = Vec::new();
        for line in split_in_two(text) {
            lines.push(fit_text(area, &line, style, TITLE_SIZE, room)?);
        }
        lines
    };
    let padding = (height / 2).min(style.px(5.0));
    let center = i32::try_from(width / 2).unwrap_or(i32::MAX);
    let mut top = i32::try_from(padding).unwrap_or(i32::MAX);
    let line_height = i32::try_from(height).unwrap_or(0) + style.offset(2.0);
    for line in &lines {
        rich::draw(
            area,
            line,
            (center, top),
            HPos::Center,
            style,
            TITLE_SIZE,
            INK,
        )?;
        top += line_height;
    }
    let drawn = u32::try_from(line_height).unwrap_or(0) * lines.len() as u32;
    Ok(drawn - style.px(2.0).min(drawn) + 2 * padding)
}

/// `text` broken at the separator nearest its middle (the separator's space dropped,
/// its punctuation kept on the first line); the whole text when it has none.
fn split_in_two(text: &str) -> Vec<String> {
    let middle = text.chars().count() / 2;
    let best = [": ", ", ", " vs ", "; "]
        .iter()
        .flat_map(|sep| {
            text.match_indices(sep).map(move |(at, _)| {
                let keep = sep.trim_end().len();
                (at + keep, at + sep.len())
            })
        })
        .min_by_key(|(end, _)| text[..*end].chars().count().abs_diff(middle));
    match best {
        Some((end, next)) => vec![text[..end].to_owned(), text[next..].to_owned()],
        None => vec![text.to_owned()],
    }
}

/// The label `text` (subscripts as in [`rich`]) as it fits in `room` device pixels at
/// `size` CSS pixels: whole, or its longest beginning that fits followed by `…`.
///
/// # Errors
/// When the backend cannot measure text.
pub fn fit_text<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    text: &str,
    style: &Style,
    size: f64,
    room: u32,
) -> Result<String, DrawingAreaErrorKind<DB::ErrorType>> {
    shorten_to_fit(text, room, |t| Ok(rich::measure(area, t, style, size)?.0))
}

/// [`fit_text`] for text drawn as it is (code, an observation), underscores included.
///
/// # Errors
/// When the backend cannot measure text.
pub fn fit_plain<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    text: &str,
    font: &TextStyle<'_>,
    room: u32,
) -> Result<String, DrawingAreaErrorKind<DB::ErrorType>> {
    shorten_to_fit(text, room, |t| {
        Ok(font::rendered_width(area.estimate_text_size(t, font)?.0))
    })
}

/// `text`, or its longest beginning followed by `…` whose `width` is within `room`
/// (widths grow with the beginning's length, so a bisection finds it).
fn shorten_to_fit<E>(
    text: &str,
    room: u32,
    width: impl Fn(&str) -> Result<u32, E>,
) -> Result<String, E> {
    if width(text)? <= room {
        return Ok(text.to_owned());
    }
    let chars: Vec<char> = text.chars().collect();
    let (mut fits, mut too_long) = (0, chars.len());
    while too_long - fits > 1 {
        let mid = usize::midpoint(fits, too_long);
        let candidate: String = chars[..mid].iter().collect::<String>() + "…";
        if width(&candidate)? <= room {
            fits = mid;
        } else {
            too_long = mid;
        }
    }
    Ok(chars[..fits]
        .iter()
        .collect::<String>()
        .trim_end()
        .to_owned()
        + "…")
}

/// [`title`] at the top of `area`, and the area below it.
///
/// # Errors
/// When the backend fails to draw.
pub fn titled<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    text: &str,
    style: &Style,
) -> Result<DrawingArea<DB, plotters::coord::Shift>, DrawingAreaErrorKind<DB::ErrorType>> {
    let height = title(area, text, style)?;
    Ok(area
        .split_vertically(i32::try_from(height).unwrap_or(i32::MAX))
        .1)
}

/// Draws an axis title under `chart`'s x axis (in its tick-label band, as plotters'
/// `x_desc` would), with subscripts as in [`rich`]. `area` is the panel the chart was
/// built on with [`framed_chart`].
///
/// # Errors
/// When the backend fails to draw.
pub fn x_title<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    chart: &NumericChart<'_, DB>,
    text: &str,
    style: &Style,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let (x, y) = chart.plotting_area().get_pixel_range();
    let (panel_x, panel_y) = area.get_pixel_range();
    let (_, height) = rich::measure(area, text, style, AXIS_TITLE_SIZE)?;
    let band = i32::try_from(style.px(X_LABEL_AREA)).unwrap_or(i32::MAX);
    let top = y.end + band - i32::try_from(height).unwrap_or(0) - panel_y.start;
    let center = i32::midpoint(x.start, x.end) - panel_x.start;
    rich::draw(
        area,
        text,
        (center, top),
        HPos::Center,
        style,
        AXIS_TITLE_SIZE,
        INK,
    )?;
    Ok(())
}

/// Least room per x tick label along the axis, CSS pixels (a label such as `0.25`
/// at 11 px is about 24 wide).
pub const X_TICK_SPACING: f64 = 40.0;
/// Least room per y tick label, CSS pixels (11 px digits are about 8 tall).
pub const Y_TICK_SPACING: f64 = 18.0;

/// Size of axis titles and tick labels, in CSS pixels.
pub const AXIS_TITLE_SIZE: f64 = 11.0;

/// Most tick labels along an axis `length` device pixels long with `spacing` CSS pixels
/// for each (2 to 10, plotters' default): what [`mesh`] asks for.
pub fn tick_count(length: u32, spacing: f64, style: &Style) -> usize {
    ((f64::from(length) / style.scale / spacing) as usize).clamp(2, 10)
}

/// The notebook's grid, axes and tick labels for `chart`; the caller adds axis
/// descriptions or tick counts and draws it. At most one x tick per
/// [`X_TICK_SPACING`] and one y tick per [`Y_TICK_SPACING`] of the plot (plotters then
/// picks round values), so a phone-width or short chart does not pile its labels up.
pub fn mesh<'a, 'b, DB: DrawingBackend>(
    chart: &'b mut NumericChart<'a, DB>,
    style: &Style,
) -> MeshStyle<'a, 'b, RangedCoordf64, RangedCoordf64, DB> {
    let (width, height) = chart.plotting_area().dim_in_pixel();
    let (x_ticks, y_ticks) = (
        tick_count(width, X_TICK_SPACING, style),
        tick_count(height, Y_TICK_SPACING, style),
    );
    let mut mesh = chart.configure_mesh();
    mesh.x_labels(x_ticks)
        .y_labels(y_ticks)
        .light_line_style(WHITE)
        .bold_line_style(SHADE)
        .axis_style(style.line(MUTED, 1.0))
        .label_style(style.text(11.0))
        .x_label_formatter(&axis_label)
        .y_label_formatter(&axis_label);
    mesh
}

/// `n` in superscript digits (`3` → `³`), for a power in a label: `(1 − c/n)³`.
pub fn superscript(n: impl std::fmt::Display) -> String {
    n.to_string()
        .chars()
        .map(|c| match c {
            '0' => '⁰',
            '1' => '¹',
            '2' => '²',
            '3' => '³',
            '4' => '⁴',
            '5' => '⁵',
            '6' => '⁶',
            '7' => '⁷',
            '8' => '⁸',
            '9' => '⁹',
            '-' => '⁻',
            other => other,
        })
        .collect()
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
    let v = *value;
    if v.is_finite() && v.abs() >= AXIS_EXPONENT_FROM {
        // Ticks of millions in the label band's width: `2.5e6`, `1e7`.
        let exponent = v.abs().log10().floor();
        let mantissa = v / 10f64.powf(exponent);
        format!("{}e{exponent}", format_number(mantissa, 2))
    } else {
        format_number(v, DECIMALS)
    }
}

/// Tick values at least this large are written with an exponent ([`axis_label`]).
pub const AXIS_EXPONENT_FROM: f64 = 1e6;

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
    fn large_ticks_take_an_exponent_and_small_ones_do_not() {
        use super::axis_label;
        assert_eq!(axis_label(&10_000_000.0), "1e7");
        assert_eq!(axis_label(&2_500_000.0), "2.5e6");
        assert_eq!(axis_label(&-3_000_000.0), "-3e6");
        assert_eq!(axis_label(&999_999.0), "999999");
        assert_eq!(axis_label(&0.25), "0.25");
    }

    #[test]
    fn a_long_title_breaks_at_the_separator_nearest_its_middle() {
        assert_eq!(
            super::split_in_two("return of each policy: sparse (blue), potential (green)"),
            ["return of each policy:", "sparse (blue), potential (green)"]
        );
        assert_eq!(super::split_in_two("no separator"), ["no separator"]);
    }

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
    fn a_power_is_written_in_superscript_digits() {
        assert_eq!(superscript(3), "³");
        assert_eq!(superscript(50_u64), "⁵⁰");
        assert_eq!(superscript(-12), "⁻¹²");
    }

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

//! Static export of one figure: its state read strictly from a URL query, and its
//! drawing rendered to an SVG document, natively (`arlbook figure`).
//!
//! The page forgives a bad link (an unknown key is ignored, a bad value keeps the
//! default, a slider value is clamped) so that every link opens some view. An export
//! is asked for on purpose, so here every key must belong to the figure and every value
//! must be one its control takes; the error names the key, as the compute API names
//! the JSON field.

use arlbook_core::error::FieldError;

use crate::figure::{AnyFigure, Control, ControlKind, State};
use crate::plot::{DECIMALS, format_number};
use crate::query;

/// Width of an export when none is asked for (the snapshot tests' width), in pixels.
pub const DEFAULT_WIDTH: u32 = 900;
/// Narrowest export, in pixels: below it the labels overlap the plots.
pub const MIN_WIDTH: u32 = 200;
/// Widest export, in pixels.
pub const MAX_WIDTH: u32 = 8000;

/// The state of `figure` given by `text`, which may be a bare query (`p=0.3&g=8`), one
/// with the leading `?`, or a whole URL of a chapter or embed page (the part after `?`
/// is read, a `#fragment` dropped).
///
/// Keys may be bare (`p`, as on `/embed/<id>`) or carry the figure's id as a prefix
/// (`bandit.p`, as on a chapter page). Keys of other figures on the same chapter page
/// (`clip.eps_low` when exporting `bandit`) are skipped, so a chapter URL can be pasted
/// whole. Controls not named keep their defaults.
pub fn state_from_query(figure: &dyn AnyFigure, text: &str) -> Result<State, FieldError> {
    let meta = figure.meta();
    let query_text = query_part(text);
    let own_prefix = format!("{}.", meta.id);
    let mut state = State::defaults(meta.controls);
    for (key, value) in query::parse(query_text) {
        let bare = match key.strip_prefix(&own_prefix) {
            Some(bare) => bare,
            None if is_other_figures_key(&key) => continue,
            None => key.as_str(),
        };
        let control = meta
            .controls
            .iter()
            .find(|c| c.key == bare)
            .ok_or_else(|| {
                let keys: Vec<&str> = meta.controls.iter().map(|c| c.key).collect();
                FieldError::new(
                    bare,
                    format!(
                        "figure `{}` has no such control; its controls are: {}",
                        meta.id,
                        keys.join(", ")
                    ),
                )
            })?;
        state.set(control.key, checked_value(control, &value)?);
    }
    Ok(state)
}

/// The query of `text`: after the first `?` if there is one, before any `#`.
fn query_part(text: &str) -> &str {
    let text = text.trim();
    let text = text.split_once('#').map_or(text, |(before, _)| before);
    text.split_once('?').map_or(text, |(_, after)| after)
}

/// Whether `key` is prefixed with another figure's id (`clip.eps_low`).
fn is_other_figures_key(key: &str) -> bool {
    key.split_once('.')
        .is_some_and(|(prefix, _)| crate::chapters::figure(prefix).is_some())
}

/// The value control `control` stores for `value`, or an error naming its key.
fn checked_value(control: &Control, value: &str) -> Result<String, FieldError> {
    let value = value.trim();
    let key = control.key;
    match control.kind {
        ControlKind::Slider { min, max, .. } => {
            let number = value
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| FieldError::new(key, format!("`{value}` is not a number")))?;
            if number < min || number > max {
                return Err(FieldError::new(
                    key,
                    format!(
                        "{value} is outside [{}, {}]",
                        format_number(min, DECIMALS),
                        format_number(max, DECIMALS)
                    ),
                ));
            }
            Ok(value.to_owned())
        }
        ControlKind::Toggle => match value {
            "1" | "true" | "on" => Ok("1".to_owned()),
            "0" | "false" | "off" => Ok("0".to_owned()),
            _ => Err(FieldError::new(
                key,
                format!("`{value}` is not a switch value; use 1 or 0"),
            )),
        },
        ControlKind::Choice(options) => options
            .iter()
            .find(|o| **o == value)
            .map(|o| (*o).to_owned())
            .ok_or_else(|| {
                FieldError::new(
                    key,
                    format!("`{value}` is not one of: {}", options.join(", ")),
                )
            }),
        // Lists are checked element by element when the figure computes, and the error
        // names the element (`rewards[2]`).
        ControlKind::List | ControlKind::Rewards => Ok(value.to_owned()),
    }
}

/// What a control accepts, in words, for `arlbook figure <name> --controls`.
pub fn describe_control(control: &Control) -> String {
    match control.kind {
        ControlKind::Slider { min, max, step, .. } => format!(
            "number in [{}, {}], step {}",
            format_number(min, DECIMALS),
            format_number(max, DECIMALS),
            format_number(step, DECIMALS)
        ),
        ControlKind::Toggle => "1 or 0".to_owned(),
        ControlKind::Choice(options) => format!("one of: {}", options.join(", ")),
        ControlKind::List => "comma-separated numbers".to_owned(),
        ControlKind::Rewards => "0/1 rewards, comma-separated (groups split by `;`)".to_owned(),
    }
}

/// Height of an export `width` pixels wide: the figure's wide layout, as the snapshot
/// tests and the page's SVG button draw it, or its panels stacked below
/// [`crate::figure::NARROW_WIDTH`], as a phone shows it.
pub fn height_for(figure: &dyn AnyFigure, width: u32) -> u32 {
    (f64::from(width) * figure.meta().aspect_at(f64::from(width)))
        .round()
        .max(1.0) as u32
}

/// Computes `figure` at `state` and renders it as an SVG document `width` pixels wide
/// (height from the figure's aspect). The width is checked against
/// [`MIN_WIDTH`]..=[`MAX_WIDTH`]; a computation error names the state's field.
pub fn render_svg(figure: &dyn AnyFigure, state: &State, width: u32) -> Result<String, FieldError> {
    if !(MIN_WIDTH..=MAX_WIDTH).contains(&width) {
        return Err(FieldError::new(
            "width",
            format!("{width} is outside [{MIN_WIDTH}, {MAX_WIDTH}] pixels"),
        ));
    }
    let evaluated = figure.evaluate(state)?;
    evaluated
        .svg(width, height_for(figure, width))
        .map_err(|message| FieldError::new("(drawing)", message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chapters::{FIGURES, figure};

    fn bandit() -> &'static dyn AnyFigure {
        figure("bandit").unwrap()
    }

    #[test]
    fn bare_prefixed_and_url_forms_give_the_same_state() {
        let bare = state_from_query(bandit(), "p=0.3&g=8").unwrap();
        assert_eq!(bare.get("p"), "0.3");
        assert_eq!(bare.get("g"), "8");
        assert_eq!(
            bare.get("qa"),
            "0.75",
            "unnamed controls keep their defaults"
        );
        let chapter =
            "http://127.0.0.1:8080/chapter/policy-gradient?bandit.p=0.3&bandit.g=8#bandit";
        assert_eq!(state_from_query(bandit(), chapter).unwrap(), bare);
        assert_eq!(state_from_query(bandit(), "?p=0.3&g=8").unwrap(), bare);
    }

    #[test]
    fn other_figures_keys_on_a_chapter_url_are_skipped() {
        let state = state_from_query(bandit(), "clip.eps_low=0.1&bandit.p=0.2").unwrap();
        assert_eq!(state.get("p"), "0.2");
    }

    #[test]
    fn unknown_key_is_named_with_the_figures_controls() {
        let err = state_from_query(bandit(), "p=0.3&colour=blue").unwrap_err();
        assert_eq!(err.field, "colour");
        assert!(err.message.contains("qa"), "{}", err.message);
    }

    #[test]
    fn bad_values_are_named_not_replaced() {
        assert_eq!(state_from_query(bandit(), "p=abc").unwrap_err().field, "p");
        let err = state_from_query(bandit(), "p=7").unwrap_err();
        assert_eq!(err.field, "p");
        assert!(err.message.contains("0.99"), "{}", err.message);
        assert_eq!(state_from_query(bandit(), "g=NaN").unwrap_err().field, "g");
    }

    #[test]
    fn every_control_default_passes_the_strict_check() {
        for fig in FIGURES {
            for control in fig.meta().controls {
                let query = query::format(&[(control.key.to_owned(), control.default.to_owned())]);
                let state = state_from_query(*fig, &query)
                    .unwrap_or_else(|e| panic!("{}: {e}", fig.meta().id));
                assert_eq!(state, State::defaults(fig.meta().controls));
                assert!(!describe_control(control).is_empty());
            }
        }
    }

    #[test]
    fn svg_at_defaults_equals_the_snapshot_drawing() {
        let fig = bandit();
        let state = State::defaults(fig.meta().controls);
        let svg = render_svg(fig, &state, DEFAULT_WIDTH).unwrap();
        let direct = fig
            .evaluate(&state)
            .unwrap()
            .svg(DEFAULT_WIDTH, height_for(fig, DEFAULT_WIDTH))
            .unwrap();
        assert_eq!(svg, direct);
        assert!(svg.starts_with("<svg width=\"900\" height=\"378\""));
    }

    #[test]
    fn width_out_of_range_is_named() {
        let fig = bandit();
        let state = State::defaults(fig.meta().controls);
        assert_eq!(render_svg(fig, &state, 10).unwrap_err().field, "width");
        assert_eq!(
            render_svg(fig, &state, MAX_WIDTH + 1).unwrap_err().field,
            "width"
        );
    }
}

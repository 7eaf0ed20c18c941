//! The settings a reader can reach with a figure's controls, for the tests that check
//! every one of them gives a figure (`app/tests/sweep.rs`, the SVG text-box test of
//! `arlbook figure`, the browser test's control sweep).
//!
//! A slider reaches every step from `min` to `max`; the sweep takes its two ends and
//! [`GRID_POINTS`] points between them, on its step grid. A toggle takes both values,
//! a choice every option. Reward lists keep their shape and take their default, all
//! zeros and all ones; other lists (free text, checked field by field) keep their
//! default. [`settings`] combines these:
//! - every control at its default;
//! - one control at a time over its values, the others at their defaults;
//! - the corners: every combination of the sliders' ends (all of them up to
//!   [`MAX_CORNERS`], a seeded sample beyond), choices and toggles drawn with them;
//! - [`GRID_SAMPLES`] seeded draws of every control from its values at once.
//!
//! The draws come from a fixed-seed xorshift generator, so a failure names a state
//! that the next run reproduces.

use crate::figure::{Control, ControlKind, State, list_cells};
use crate::plot::{DECIMALS, format_number};

/// Points strictly between a slider's ends.
pub const GRID_POINTS: usize = 3;
/// Most corner combinations taken in full; beyond it, this many are sampled.
pub const MAX_CORNERS: usize = 64;
/// Random joint draws from the controls' values.
pub const GRID_SAMPLES: usize = 24;

/// A setting of a figure's controls and how the sweep reached it.
#[derive(Debug, Clone)]
pub struct Setting {
    /// `one-at-a-time`, `corner` or `grid` (and `default`).
    pub origin: &'static str,
    /// The controls' values.
    pub state: State,
}

impl Setting {
    /// The setting as a URL query (`p=0.5&g=8`), as an embed page reads it.
    pub fn query(&self) -> String {
        crate::query::format(&self.state.to_pairs(""))
    }
}

/// The values the sweep gives control `control`.
pub fn values(control: &Control) -> Vec<String> {
    match control.kind {
        ControlKind::Slider { min, max, step, .. } => slider_values(min, max, step),
        ControlKind::Toggle => vec!["0".to_owned(), "1".to_owned()],
        ControlKind::Choice(options) => options.iter().map(|o| (*o).to_owned()).collect(),
        ControlKind::Rewards => {
            let filled = |value: &str| {
                list_cells(control.default)
                    .iter()
                    .map(|group| vec![value; group.len()].join(","))
                    .collect::<Vec<_>>()
                    .join("; ")
            };
            vec![control.default.to_owned(), filled("0"), filled("1")]
        }
        ControlKind::List => vec![control.default.to_owned()],
    }
}

/// A slider's ends and the grid points between them, each on its step grid.
fn slider_values(min: f64, max: f64, step: f64) -> Vec<String> {
    let mut numbers = vec![min];
    for i in 1..=GRID_POINTS {
        let raw = min + (max - min) * i as f64 / (GRID_POINTS + 1) as f64;
        let on_grid = if step > 0.0 {
            min + ((raw - min) / step).round() * step
        } else {
            raw
        };
        numbers.push(on_grid.clamp(min, max));
    }
    numbers.push(max);
    let mut texts: Vec<String> = numbers
        .into_iter()
        .map(|v| format_number(v, DECIMALS))
        .collect();
    texts.dedup();
    texts
}

/// Every setting the sweep checks for a figure with `controls` (see the module docs).
pub fn settings(controls: &'static [Control]) -> Vec<Setting> {
    let defaults = State::defaults(controls);
    let values: Vec<Vec<String>> = controls.iter().map(values).collect();
    let mut out = vec![Setting {
        origin: "default",
        state: defaults.clone(),
    }];
    for (control, options) in controls.iter().zip(&values) {
        for value in options {
            let mut state = defaults.clone();
            state.set(control.key, value.clone());
            out.push(Setting {
                origin: "one-at-a-time",
                state,
            });
        }
    }
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let sliders: Vec<usize> = (0..controls.len())
        .filter(|&i| matches!(controls[i].kind, ControlKind::Slider { .. }))
        .collect();
    let all_corners = 1_usize
        .checked_shl(sliders.len() as u32)
        .unwrap_or(usize::MAX);
    let corner_count = all_corners.min(MAX_CORNERS);
    for corner in 0..corner_count {
        let bits = if all_corners <= MAX_CORNERS {
            corner
        } else {
            rng.below(usize::MAX)
        };
        let mut state = defaults.clone();
        for (i, (control, options)) in controls.iter().zip(&values).enumerate() {
            let value = match sliders.iter().position(|&s| s == i) {
                Some(bit) if bits >> bit & 1 == 1 => options.last(),
                Some(_) => options.first(),
                None => options.get(rng.below(options.len())),
            };
            if let Some(value) = value {
                state.set(control.key, value.clone());
            }
        }
        out.push(Setting {
            origin: "corner",
            state,
        });
    }
    for _ in 0..GRID_SAMPLES {
        let mut state = defaults.clone();
        for (control, options) in controls.iter().zip(&values) {
            if let Some(value) = options.get(rng.below(options.len())) {
                state.set(control.key, value.clone());
            }
        }
        out.push(Setting {
            origin: "grid",
            state,
        });
    }
    out
}

/// A small deterministic generator (xorshift64*), enough to pick settings.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A value in `0..n` (0 for `n = 0`).
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figure::{choice, rewards, slider, toggle};

    const CONTROLS: &[Control] = &[
        slider("n", "n", 1.0, 50.0, 1.0, "10"),
        slider("p", "p", 0.0, 1.0, 0.05, "0.5"),
        toggle("loo", "leave one out", "0"),
        choice("scale", "scale", &["group", "batch", "none"], "group"),
        rewards("r", "rewards", "1,0,0; 1,1"),
    ];

    #[test]
    fn sliders_take_their_ends_and_grid_points_on_their_steps() {
        assert_eq!(values(&CONTROLS[0]), ["1", "13", "26", "38", "50"]);
        assert_eq!(values(&CONTROLS[1]), ["0", "0.25", "0.5", "0.75", "1"]);
    }

    #[test]
    fn reward_lists_keep_their_shape() {
        assert_eq!(
            values(&CONTROLS[4]),
            ["1,0,0; 1,1", "0,0,0; 0,0", "1,1,1; 1,1"]
        );
    }

    #[test]
    fn the_sweep_reaches_every_value_and_every_corner() {
        let all = settings(CONTROLS);
        for control in CONTROLS {
            for value in values(control) {
                assert!(
                    all.iter().any(|s| s.state.get(control.key) == value),
                    "{} = {value}",
                    control.key
                );
            }
        }
        let corners: Vec<(&str, &str)> = all
            .iter()
            .filter(|s| s.origin == "corner")
            .map(|s| (s.state.get("n"), s.state.get("p")))
            .collect();
        for corner in [("1", "0"), ("1", "1"), ("50", "0"), ("50", "1")] {
            assert!(corners.contains(&corner), "{corner:?}");
        }
        // Deterministic: the same settings every run.
        let again = settings(CONTROLS);
        assert!(all.iter().zip(&again).all(|(a, b)| a.state == b.state));
    }
}

//! Figure 1: the token ledger of a real episode of the code-repair environment.
//!
//! The scripted teacher repairs a task in `arlbook_core::agent`; the record's tokens are
//! coloured by span role (prompt, action, observation). A model at position `t` is
//! scored on token `t + 1`, so the loss mask over targets is the generated mask shifted
//! by one: `m_t = generated[t + 1]` (`agent::batch::pad_records`). The toggle applies
//! the mask without the shift, `m_t = generated[t]`, and marks what that would train on.

use arlbook_core::agent::batch::pad_records;
use arlbook_core::agent::harness::{EpisodeIds, run_episode};
use arlbook_core::agent::policy::Teacher;
use arlbook_core::agent::record::SpanRole;
use arlbook_core::agent::task::{Split, article_example, generate_task};
use arlbook_core::agent::tokenizer::tokenizer;
use arlbook_core::error::FieldError;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::chapters::agents::episode::{EDITS, harness_for};
use crate::figure::{DrawResult, Figure, Meta, Readout, State, choice, slider, toggle};
use crate::plot::{self, BLUE, GREEN, INK, LIGHT, ORANGE, RED, SHADE, Style, tint};

/// The figure.
pub struct TokenLedger;

/// Tokens drawn per row and rows drawn (the window is `PER_ROW * ROWS` tokens; narrow
/// screens draw it as `NARROW_PER_ROW` per row).
const PER_ROW: usize = 32;
const ROWS: usize = 8;
const NARROW_PER_ROW: usize = 16;

/// One token of the episode.
#[derive(Debug, Clone)]
pub struct Token {
    /// Its text piece.
    pub piece: String,
    /// Its span role.
    pub role: SpanRole,
    /// Trained on as a target with the correct shift.
    pub trained: bool,
    /// Trained on as a target with the mask applied unshifted.
    pub trained_misshifted: bool,
}

/// What the figure computes.
#[derive(Debug, Clone)]
pub struct Output {
    /// The task's id.
    pub task_id: String,
    /// Every token of the episode.
    pub tokens: Vec<Token>,
    /// First token drawn.
    pub from: usize,
    /// Whether the mis-shifted mask is shown.
    pub misshift: bool,
    /// Tool calls made.
    pub turns: usize,
    /// The episode's reward.
    pub reward: f64,
    /// Trainable tokens (sum of the shifted loss mask).
    pub trainable: usize,
}

impl Output {
    fn count(&self, role: SpanRole) -> usize {
        self.tokens.iter().filter(|t| t.role == role).count()
    }
}

impl Figure for TokenLedger {
    type Output = Output;

    const META: Meta = Meta {
        id: "token-ledger",
        title: "Figure 1 · The token ledger of one episode",
        caption: "Grey is the prompt, blue the actions the policy generated, orange the tool \
                  results. A green bar under a token means it is a training target. Turn on \
                  the unshifted mask: the first token of every action loses its bar and the \
                  first token after every action (a tool result) gains a red one. Slide the \
                  window along the episode, pick a generated task, or let the edits address \
                  a line by number instead of a text.",
        controls: &[
            choice("task", "task", &["article", "generated"], "article"),
            slider("seed", "task seed", 0.0, 999.0, 1.0, "0"),
            choice("edits", "edits address", EDITS, "text"),
            toggle("misshift", "apply the mask without the shift", "0"),
            slider("from", "first token shown", 0.0, 2048.0, 32.0, "0"),
        ],
        aspect: 0.5,
        // One panel, but twice as many rows on a narrow screen.
        panels: 2,
    };

    fn compute(state: &State) -> Result<Output, FieldError> {
        let seed = state.count("seed")? as u64;
        let task = if state.get("task") == "generated" {
            generate_task(Split::Train, seed)
        } else {
            article_example()
        };
        let harness = harness_for(state);
        let mut teacher = Teacher::for_harness(&task, &harness);
        let record = run_episode(&task, &mut teacher, &harness, EpisodeIds::default(), seed);
        let batch = pad_records(std::slice::from_ref(&record));
        let generated = record.generated_mask();
        let pieces = tokenizer().pieces();
        let mut roles = vec![SpanRole::Prompt; record.tokens.len()];
        for span in &record.spans {
            for role in roles.iter_mut().take(span.end).skip(span.start) {
                *role = span.role;
            }
        }
        // Token t is a target of position t - 1: trained when loss_mask[t - 1] is set.
        let tokens = record
            .tokens
            .iter()
            .enumerate()
            .map(|(t, id)| Token {
                piece: pieces.get(*id as usize).cloned().unwrap_or_default(),
                role: roles[t],
                trained: t > 0 && batch.loss_mask.get(t - 1) == Some(&1),
                trained_misshifted: t > 0 && generated.get(t - 1) == Some(&1),
            })
            .collect::<Vec<_>>();
        let last_window = tokens.len().saturating_sub(1) / PER_ROW * PER_ROW;
        let from = state.count("from")?.min(last_window);
        Ok(Output {
            task_id: record.task_id.clone(),
            trainable: batch.loss_mask.iter().map(|m| usize::from(*m)).sum(),
            turns: record.calls.len(),
            reward: record.reward,
            misshift: state.flag("misshift"),
            from,
            tokens,
        })
    }

    fn readouts(output: &Output) -> Vec<Readout> {
        let id = Self::META.id;
        let wrong = output
            .tokens
            .iter()
            .filter(|t| t.trained_misshifted && t.role != SpanRole::Action)
            .count();
        let missed = output
            .tokens
            .iter()
            .filter(|t| t.trained && !t.trained_misshifted)
            .count();
        vec![
            Readout::new(
                id,
                "tokens",
                "tokens in the episode",
                output.tokens.len() as f64,
            ),
            Readout::new(
                id,
                "prompt",
                "prompt tokens",
                output.count(SpanRole::Prompt) as f64,
            ),
            Readout::new(
                id,
                "action",
                "action tokens (generated)",
                output.count(SpanRole::Action) as f64,
            ),
            Readout::new(
                id,
                "observation",
                "observation tokens",
                output.count(SpanRole::Observation) as f64,
            ),
            Readout::new(
                id,
                "trainable",
                "trainable tokens (shifted mask)",
                output.trainable as f64,
            ),
            Readout::new(
                id,
                "misshift-wrong",
                "unshifted: non-action tokens trained",
                wrong as f64,
            ),
            Readout::new(
                id,
                "misshift-missed",
                "unshifted: action tokens missed",
                missed as f64,
            ),
            Readout::new(id, "turns", "tool calls", output.turns as f64),
            Readout::new(id, "reward", "reward", output.reward),
        ]
    }

    fn draw<DB: DrawingBackend>(
        output: &Output,
        area: &DrawingArea<DB, Shift>,
        style: &Style,
    ) -> DrawResult<DB> {
        let title = format!(
            "{} · tokens {}–{} of {}",
            output.task_id,
            output.from,
            (output.from + PER_ROW * ROWS).min(output.tokens.len()),
            output.tokens.len()
        );
        let (band, area) = area.split_vertically(style.offset(TITLE_BAND));
        plot::title(&band, &title, style)?;
        let (width, height) = area.dim_in_pixel();
        let grid = Grid::new(f64::from(width), f64::from(height), style.narrow);
        let per_row = grid.per_row;
        let cell_w = (grid.cell_w as i32).max(1);
        let row_h = (grid.row_h as i32).max(1);
        let mark_h = (row_h / 6).max(2);
        let cell_h = row_h - mark_h - style.offset(4.0);
        let visible: Vec<(i32, i32, &Token)> = output
            .tokens
            .iter()
            .enumerate()
            .skip(output.from)
            .take(PER_ROW * ROWS)
            .map(|(index, token)| {
                let slot = index - output.from;
                let x = (slot % per_row) as i32 * cell_w;
                let y = (slot / per_row) as i32 * row_h;
                (x, y, token)
            })
            .collect();
        // Cells, then marks, then labels: the same picture as cell by cell (nothing
        // overlaps but a label on its own cell), with a colour change only where the
        // role or the mark changes rather than two or three per token.
        for &(x, y, token) in &visible {
            let fill = match token.role {
                SpanRole::Prompt => SHADE,
                SpanRole::Action => tint(BLUE, 0.55),
                SpanRole::Observation => tint(ORANGE, 0.45),
            };
            area.draw(&Rectangle::new(
                [(x + 1, y), (x + cell_w - 1, y + cell_h)],
                fill.filled(),
            ))?;
        }
        for &(x, y, token) in &visible {
            let trained = if output.misshift {
                token.trained_misshifted
            } else {
                token.trained
            };
            let mark_y = y + cell_h + style.offset(1.0);
            let mark = [(x + 1, mark_y), (x + cell_w - 1, mark_y + mark_h)];
            if trained {
                let wrong = output.misshift && token.role != SpanRole::Action;
                let color = if wrong { RED } else { GREEN };
                area.draw(&Rectangle::new(mark, color.filled()))?;
            } else if output.misshift && token.trained {
                area.draw(&Rectangle::new(mark, style.line(RED, 1.0)))?;
            } else {
                area.draw(&Rectangle::new(mark, LIGHT.mix(0.3).filled()))?;
            }
        }
        if cell_w >= style.px(22.0) as i32 {
            // What fits of each token (see `cell_label`); hovering a cell names the
            // whole token.
            let font = style.text_centered(9.0, INK);
            let room = u32::try_from(cell_w - style.offset(4.0)).unwrap_or(1);
            for &(x, y, token) in &visible {
                let label = cell_label(&token.piece, |text| {
                    plot::fit_plain(&area, text, &font, room)
                })?;
                area.draw(&Text::new(
                    label,
                    (x + cell_w / 2, y + cell_h / 2),
                    font.clone(),
                ))?;
            }
        }
        Ok(())
    }

    /// The whole token under the pointer (the cells show what fits of it).
    fn hover(
        output: &Output,
        (x, y): (f64, f64),
        (width, height): (f64, f64),
        narrow: bool,
    ) -> Option<String> {
        let grid = Grid::new(width, (height - TITLE_BAND).max(1.0), narrow);
        let index = output.from + grid.slot(x, y - TITLE_BAND)?;
        let token = output.tokens.get(index)?;
        let role = match token.role {
            SpanRole::Prompt => "prompt",
            SpanRole::Action => "action",
            SpanRole::Observation => "observation",
        };
        let target = if token.trained {
            "a training target"
        } else {
            "not trained on"
        };
        Some(format!(
            "token {index}: {:?} ({role}, {target})",
            token.piece
        ))
    }
}

/// Height of the band above the cells that holds the title, in CSS pixels.
const TITLE_BAND: f64 = 26.0;

/// How the window's tokens are laid out in cells, in the units of the area's size.
struct Grid {
    per_row: usize,
    rows: usize,
    cell_w: f64,
    row_h: f64,
}

impl Grid {
    fn new(width: f64, height: f64, narrow: bool) -> Self {
        let per_row = if narrow { NARROW_PER_ROW } else { PER_ROW };
        let rows = PER_ROW * ROWS / per_row;
        Self {
            per_row,
            rows,
            cell_w: (width / per_row as f64).floor(),
            row_h: (height / rows as f64).floor(),
        }
    }

    /// The window slot of the cell at `(x, y)`, if one is there.
    fn slot(&self, x: f64, y: f64) -> Option<usize> {
        if !(x >= 0.0 && y >= 0.0 && self.cell_w >= 1.0 && self.row_h >= 1.0) {
            return None;
        }
        let (column, row) = ((x / self.cell_w) as usize, (y / self.row_h) as usize);
        (column < self.per_row && row < self.rows).then_some(row * self.per_row + column)
    }
}

/// What a ledger cell shows of the token `piece`, given `fit` (the text as it fits the
/// cell: whole, or its beginning and `…`): the piece without its edge spaces (`↵` for
/// a line break, `␣` for spaces alone); a special token such as `<call>` as `‹call›`, or
/// `call` where the marks do not fit; otherwise what fits, ending in `…`.
fn cell_label<E>(piece: &str, fit: impl Fn(&str) -> Result<String, E>) -> Result<String, E> {
    let trimmed = piece.trim();
    let whole = if !trimmed.is_empty() {
        trimmed.to_owned()
    } else if piece.contains('\n') {
        "↵".to_owned()
    } else if piece.is_empty() {
        String::new()
    } else {
        "␣".to_owned()
    };
    let special = whole
        .strip_prefix('<')
        .and_then(|rest| rest.strip_suffix('>'))
        .filter(|name| !name.is_empty());
    let mut candidates = vec![whole.clone()];
    if let Some(name) = special {
        candidates.push(format!("‹{name}›"));
        candidates.push(name.to_owned());
    }
    for candidate in &candidates {
        if fit(candidate)? == *candidate {
            return Ok(candidate.clone());
        }
    }
    fit(candidates.last().map_or(&whole, |last| last))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `fit` for a cell `room` characters wide.
    fn chars(room: usize) -> impl Fn(&str) -> Result<String, ()> {
        move |text: &str| {
            Ok(if text.chars().count() <= room {
                text.to_owned()
            } else {
                text.chars().take(room - 1).collect::<String>() + "…"
            })
        }
    }

    #[test]
    fn a_cell_shows_the_token_without_its_spaces_and_names_special_ones() {
        assert_eq!(cell_label(" that", chars(4)), Ok("that".to_owned()));
        assert_eq!(cell_label(" tests", chars(4)), Ok("tes…".to_owned()));
        assert_eq!(cell_label("\n    ", chars(4)), Ok("↵".to_owned()));
        assert_eq!(cell_label("  ", chars(4)), Ok("␣".to_owned()));
        assert_eq!(cell_label("<call>", chars(6)), Ok("<call>".to_owned()));
        assert_eq!(cell_label("<end>", chars(4)), Ok("end".to_owned()));
        // Marks narrower than `<` and `>`, when only they fit.
        let marks_fit = |text: &str| -> Result<String, ()> {
            Ok(if text.starts_with('<') {
                "<…".to_owned()
            } else {
                text.to_owned()
            })
        };
        assert_eq!(cell_label("<end>", marks_fit), Ok("‹end›".to_owned()));
        assert_eq!(cell_label("<call>", chars(4)), Ok("call".to_owned()));
        assert_eq!(cell_label("<call>", chars(3)), Ok("ca…".to_owned()));
        assert_eq!(cell_label("<", chars(4)), Ok("<".to_owned()));
    }
    use crate::figure::compute_at_query;

    fn compute_at(query_text: &str) -> Output {
        compute_at_query::<TokenLedger>(query_text).unwrap()
    }

    #[test]
    fn hovering_a_cell_names_its_whole_token() {
        let output = compute_at("from=32");
        // A 640 × 346 drawing: 20 px cells, rows of (346 - 26) / 8 = 40 px.
        let size = (640.0, 346.0);
        let third = TokenLedger::hover(&output, (45.0, 26.0 + 5.0), size, false).unwrap();
        let piece = &output.tokens[34].piece;
        assert!(third.starts_with("token 34: "), "{third}");
        assert!(third.contains(&format!("{piece:?}")), "{third}");
        // Second row, first cell.
        let next_row = TokenLedger::hover(&output, (1.0, 26.0 + 41.0), size, false).unwrap();
        assert!(next_row.starts_with("token 64: "), "{next_row}");
        // Stacked: 16 per row in 16 rows of 20 px, so the same point is another token.
        let point = (45.0, 26.0 + 25.0);
        let wide = TokenLedger::hover(&output, point, (640.0, 346.0), false).unwrap();
        assert!(wide.starts_with("token 34: "), "{wide}");
        let narrow = TokenLedger::hover(&output, point, (320.0, 346.0), true).unwrap();
        assert!(narrow.starts_with("token 50: "), "{narrow}");
        assert!(TokenLedger::hover(&output, (45.0, 10.0), size, false).is_none());
        assert!(TokenLedger::hover(&output, (700.0, 40.0), size, false).is_none());
    }

    #[test]
    fn trainable_tokens_are_exactly_the_action_tokens() {
        let output = compute_at("");
        assert!(output.reward > 0.0, "the teacher solves the article's task");
        let actions = output.count(SpanRole::Action);
        assert!(actions > 0);
        assert_eq!(output.trainable, actions);
        assert!(
            output
                .tokens
                .iter()
                .all(|t| t.trained == (t.role == SpanRole::Action))
        );
    }

    #[test]
    fn the_unshifted_mask_trains_observation_tokens_and_misses_action_starts() {
        let output = compute_at("misshift=1");
        let readouts = TokenLedger::readouts(&output);
        let value = |name: &str| {
            readouts
                .iter()
                .find(|r| r.id == format!("token-ledger-{name}"))
                .unwrap()
                .value
        };
        // Each action span loses its first token, and the token after it (a tool
        // result) is trained instead, except after the final call, which ends the
        // episode.
        let spans_followed = output
            .tokens
            .windows(2)
            .filter(|w| w[0].role == SpanRole::Action && w[1].role != SpanRole::Action)
            .count();
        assert_eq!(value("misshift-wrong"), spans_followed as f64);
        assert_eq!(value("misshift-missed"), value("turns"));
        assert!(spans_followed >= 1);
    }

    #[test]
    fn the_window_stays_inside_the_episode() {
        let output = compute_at("from=2048");
        assert!(output.from < output.tokens.len());
    }
}

//! One episode of the code-repair environment, turn by turn.
//!
//! The harness (`arlbook_core::agent::harness::run_episode`) runs a policy on a task:
//! at each turn the policy writes an action, the harness executes the tool call and
//! appends the observation. This figure runs the whole episode, then shows it up to the
//! chosen turn: the action and observation of each turn, the fraction of visible tests
//! the code passes before each turn (`visible_pass_fraction`, the raw potential of the
//! shaping chapter), and, at the last turn, why the episode ended and its reward.
//! Policies: the scripted teacher, or uniform random tokens (which almost never form a
//! valid call: the parse errors show what the harness does with them).

use arlbook_core::agent::harness::{EpisodeIds, HarnessConfig, run_episode};
use arlbook_core::agent::policy::{Teacher, UniformRandom};
use arlbook_core::agent::record::EpisodeRecord;
use arlbook_core::agent::task::{Split, article_example, generate_task};
use arlbook_core::error::FieldError;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::figure::{DrawResult, Figure, Meta, Readout, State, choice, slider};
use crate::plot::{self, BLUE, GREEN, INK, MUTED, ORANGE, RED, SHADE, Style};

/// The figure.
pub struct Episode;

/// Characters of an action or observation line drawn before it is cut.
const LINE_CHARS: usize = 96;
/// Observation lines drawn per turn.
const OBSERVATION_LINES: usize = 3;

/// One turn as drawn.
#[derive(Debug, Clone)]
pub struct Turn {
    /// The action text the policy wrote (or what it wrote that did not parse).
    pub action: String,
    /// The harness's answer (a tool result, or the parse error).
    pub observation: String,
    /// Whether the action parsed as a tool call.
    pub parsed: bool,
    /// Visible tests passing before this turn, as a fraction.
    pub visible_before: f64,
}

/// What the figure computes.
#[derive(Debug, Clone)]
pub struct Output {
    /// The task id and family.
    pub task: String,
    /// Every turn of the episode.
    pub turns: Vec<Turn>,
    /// Turns shown (`1..=turns.len()`).
    pub shown: usize,
    /// Visible pass fraction after the last turn.
    pub visible_after: f64,
    /// Why the episode ended.
    pub end_reason: String,
    /// The episode's reward (1 if the hidden tests passed at `finish`).
    pub reward: f64,
    /// Tokens in the episode's context after the shown turn.
    pub tokens_so_far: usize,
}

fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        let cut: String = flat.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

/// The values of the `edits` control: the `edit("old", "new")` tool, addressed by a
/// text unique in the file (the documented training config's harness,
/// `configs/cpu-small.toml`), or whole-line `write_code` edits addressed by number.
pub const EDITS: &[&str] = &["text", "line"];

/// The harness of the `edits` control's value.
pub fn harness_for(state: &State) -> HarnessConfig {
    HarnessConfig {
        edit_tool: state.get("edits") != "line",
        ..HarnessConfig::default()
    }
}

fn run(state: &State) -> Result<EpisodeRecord, FieldError> {
    let seed = state.count("seed")? as u64;
    let task = if state.get("task") == "generated" {
        generate_task(Split::Train, seed)
    } else {
        article_example()
    };
    let config = harness_for(state);
    Ok(if state.get("policy") == "random" {
        run_episode(
            &task,
            &mut UniformRandom,
            &config,
            EpisodeIds::default(),
            seed,
        )
    } else {
        let mut teacher = Teacher::for_harness(&task, &config);
        run_episode(&task, &mut teacher, &config, EpisodeIds::default(), seed)
    })
}

impl Figure for Episode {
    type Output = Output;

    const META: Meta = Meta {
        id: "episode",
        title: "An episode, turn by turn",
        caption: "Step through the teacher's repair of the article's task: it runs the \
                  tests, reads the code, edits the faulty text, runs the tests again and \
                  finishes; the bar on the left of each turn is the share of visible tests \
                  passing before it. Switch the edits to address a line to see the same \
                  repair name the line by its number instead. Switch the policy to random tokens to see \
                  malformed calls answered with parse errors until the harness ends the run \
                  (reward 0; the readout says why it ended), or pick a generated task.",
        controls: &[
            choice("task", "task", &["article", "generated"], "article"),
            slider("seed", "task and episode seed", 0.0, 999.0, 1.0, "0"),
            choice("policy", "policy", &["teacher", "random"], "teacher"),
            choice("edits", "edits address", EDITS, "text"),
            slider("turn", "turns shown", 1.0, 16.0, 1.0, "16"),
        ],
        aspect: 0.5,
        panels: 1,
    };

    fn compute(state: &State) -> Result<Output, FieldError> {
        let record = run(state)?;
        let turns: Vec<Turn> = record
            .calls
            .iter()
            .enumerate()
            .map(|(t, call)| Turn {
                action: call.action_text.clone(),
                observation: call.parse_error.clone().map_or_else(
                    || call.observation_text.clone(),
                    |e| format!("parse error: {e}"),
                ),
                parsed: call.call.is_some(),
                visible_before: record.visible_pass_fraction.get(t).copied().unwrap_or(0.0),
            })
            .collect();
        let shown = state.count("turn")?.clamp(1, turns.len().max(1));
        // The context after turn t: the prompt, then every action and observation so far.
        let tokens_so_far = record.calls.get(shown - 1).map_or(0, |call| {
            call.context_ids.len() + call.generated_ids.len() + call.observation_ids.len()
        });
        Ok(Output {
            task: format!("{} ({})", record.task_id, record.family),
            visible_after: record.visible_pass_fraction.last().copied().unwrap_or(0.0),
            end_reason: record.end_reason.name().to_owned(),
            reward: record.reward,
            shown,
            tokens_so_far,
            turns,
        })
    }

    fn readouts(output: &Output) -> Vec<Readout> {
        let id = Self::META.id;
        // Before the next turn, or after the last one.
        let visible = output
            .turns
            .get(output.shown)
            .map_or(output.visible_after, |t| t.visible_before);
        vec![
            Readout::new(
                id,
                "turns",
                "turns in the episode",
                output.turns.len() as f64,
            ),
            Readout::new(
                id,
                "visible",
                format!("visible tests passing after turn {}", output.shown),
                visible,
            ),
            Readout::new(
                id,
                "tokens",
                format!("context tokens after turn {}", output.shown),
                output.tokens_so_far as f64,
            ),
            Readout::new(
                id,
                "reward",
                format!("reward at the end ({})", output.end_reason),
                output.reward,
            ),
        ]
    }

    fn draw<DB: DrawingBackend>(
        output: &Output,
        area: &DrawingArea<DB, Shift>,
        style: &Style,
    ) -> DrawResult<DB> {
        let (_, height) = area.dim_in_pixel();
        let px = |css: f64| i32::try_from(style.px(css)).unwrap_or(i32::MAX);
        let bottom_limit = i32::try_from(height).unwrap_or(i32::MAX);
        // A line of the action (14 px text), of an observation (13 px) and the gap
        // between two turns.
        let line = px(18.0);
        let observation_line = px(16.0);
        let turn_gap = px(8.0);
        let chars = if style.narrow {
            LINE_CHARS / 2
        } else {
            LINE_CHARS
        };
        let left = px(34.0);
        // Room for a line of text right of `left`, a small margin kept.
        let (width, _) = area.dim_in_pixel();
        let room = width.saturating_sub(style.px(34.0 + 6.0));
        let (bar_left, bar_right) = (px(14.0), px(22.0));
        let mut y = px(8.0);
        let task_font = style.text_colored(13.0, INK);
        area.draw_text(
            &plot::fit_plain(
                area,
                &format!("task {}", output.task),
                &task_font,
                width.saturating_sub(style.px(6.0 + 6.0)),
            )?,
            &task_font,
            (px(6.0), y),
        )?;
        y += line * 3 / 2;
        for (t, turn) in output.turns.iter().take(output.shown).enumerate() {
            let observation_lines = OBSERVATION_LINES.min(turn.observation.lines().count().max(1));
            let needed =
                line + observation_line * i32::try_from(observation_lines).unwrap_or(1) + turn_gap;
            // Room is kept below a turn for what may follow it: below the last one the
            // ending line; below another the note that the next does not fit, and the
            // ending line under that note.
            let last = t + 1 == output.shown;
            let reserve = if last { line } else { 2 * line };
            if y + needed > bottom_limit - reserve {
                let note = if last {
                    format!("… turn {} does not fit here", t + 1)
                } else {
                    format!("… turns {}–{} do not fit here", t + 1, output.shown)
                };
                area.draw_text(&note, &style.text_colored(11.0, MUTED), (left, y))?;
                y += line;
                break;
            }
            // The visible-test bar: its filled height is the pass fraction before the turn.
            let (top, bottom) = (y, y + needed - turn_gap * 3 / 4);
            let filled = bottom - (f64::from(bottom - top) * turn.visible_before).round() as i32;
            area.draw(&Rectangle::new(
                [(bar_left, top), (bar_right, bottom)],
                SHADE.filled(),
            ))?;
            area.draw(&Rectangle::new(
                [(bar_left, filled), (bar_right, bottom)],
                GREEN.filled(),
            ))?;
            let action_color = if turn.parsed { BLUE } else { RED };
            let action = format!("{}. {}", t + 1, one_line(&turn.action, chars));
            let font = style.text_colored(14.0, action_color);
            area.draw_text(
                &plot::fit_plain(area, &action, &font, room)?,
                &font,
                (left, y),
            )?;
            y += line;
            for observation in turn.observation.lines().take(OBSERVATION_LINES) {
                let observation = format!("   {}", one_line(observation, chars));
                let font = style.text_colored(13.0, ORANGE);
                area.draw_text(
                    &plot::fit_plain(area, &observation, &font, room)?,
                    &font,
                    (left, y),
                )?;
                y += observation_line;
            }
            // The next turn starts below this one's room (an empty observation keeps a
            // line, as its bar does).
            y = top + needed;
        }
        if output.shown >= output.turns.len() {
            area.draw_text(
                &format!(
                    "ended: {} · reward {}",
                    output.end_reason,
                    plot::format_number(output.reward, plot::DECIMALS)
                ),
                &style.text_colored(14.0, INK),
                (left, y.min(bottom_limit - line)),
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figure::compute_at_query;

    #[test]
    fn the_teacher_repairs_the_article_task_and_earns_reward_one() {
        let output = compute_at_query::<Episode>("").unwrap();
        assert!(output.turns.len() >= 3, "{:?}", output.turns);
        assert_eq!(output.reward, 1.0);
        assert!(output.turns.iter().all(|t| t.parsed));
        // Before the fix some visible test fails; after the last turn all pass.
        assert!(output.turns[0].visible_before < 1.0);
        assert_eq!(output.visible_after, 1.0);
    }

    #[test]
    fn the_teacher_edits_by_text_or_by_line_as_the_control_says() {
        let tools = |query: &str| -> Vec<String> {
            compute_at_query::<Episode>(query)
                .unwrap()
                .turns
                .iter()
                .map(|t| t.action.split('(').next().unwrap_or("").to_owned())
                .collect()
        };
        let by_text = tools("");
        assert!(by_text.iter().any(|t| t == "edit"), "{by_text:?}");
        assert!(!by_text.iter().any(|t| t == "write_code"), "{by_text:?}");
        let by_line = tools("edits=line");
        assert!(by_line.iter().any(|t| t == "write_code"), "{by_line:?}");
        assert!(!by_line.iter().any(|t| t == "edit"), "{by_line:?}");
    }

    #[test]
    fn random_tokens_get_parse_errors_and_no_reward() {
        let output = compute_at_query::<Episode>("policy=random").unwrap();
        assert_eq!(output.reward, 0.0);
        assert!(output.turns.iter().any(|t| !t.parsed));
        assert_ne!(output.end_reason, "finish");
    }

    #[test]
    fn turns_shown_are_clamped_and_tokens_grow_with_them() {
        let first = compute_at_query::<Episode>("turn=1").unwrap();
        let all = compute_at_query::<Episode>("turn=16").unwrap();
        assert_eq!(first.shown, 1);
        assert_eq!(all.shown, all.turns.len());
        assert!(first.tokens_so_far < all.tokens_so_far);
    }
}

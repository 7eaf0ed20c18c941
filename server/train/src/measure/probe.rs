//! Where an SFT policy fails, measured during SFT every `sft.probe_every` steps (a
//! `probe` row in the metrics):
//!
//! - **Validation success**: one greedy episode on each of the first `sft.probe_tasks`
//!   validation tasks (the same tasks every time, so the curve compares like with like),
//!   and the failed episodes by cause (`arlbook_core::agent::failure`).
//! - **Teacher-forced accuracy by action part**: the scripted teacher's episodes on the
//!   same validation tasks (never trained on: SFT learns from training tasks). At each
//!   of the teacher's calls the policy reads the teacher's context, and at each action
//!   token its most likely token (argmax of the logits) is compared with the teacher's,
//!   the teacher's own tokens fed back. A part of a call is right when every token that
//!   overlaps it is right:
//!   - `tool`: the tool's name (`write_code` in `write_code(3, "best = xs[0]")`);
//!   - `line`: the line number of a `write_code` call;
//!   - `text`: the text of a `write_code` call, exactly;
//!   - `finish`: the name at the teacher's `finish` calls (finishing when it should);
//!   - `early_finish`: at the teacher's other calls, the share whose first token the
//!     policy would start `finish` with (finishing when it should not);
//!   - `token`: every action token, the end token included.
//!
//! Parts are character spans of the action text; a token belongs to every part its
//! characters overlap.

use anyhow::{Result, bail};
use arlbook_core::agent::{
    EpisodeIds, EpisodeRecord, Split, Teacher, ToolCall, generate_task, run_episode, tokenizer,
};
use arlbook_core::metrics::{MetricsRow, RowStage};
use burn::prelude::*;

use crate::config::TrainConfig;
use crate::measure::eval::FailureBreakdown;
use crate::measure::validation::validation_rollouts;
use crate::policy::fused::score::weights_for;
use crate::policy::generate::{Cache, Engine};
use crate::policy::model::PolicyModel;
use crate::policy::sampling::argmax;

/// Rows (teacher calls) scored in one batch: bounds the cache's memory.
const ROWS_PER_BATCH: usize = 64;

/// Character spans `[start, end)` of a call's parts in its action text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PartSpans {
    /// The tool's name.
    pub tool: (usize, usize),
    /// The line number (`write_code` and `replace` only).
    pub line: Option<(usize, usize)>,
    /// The text from the first quote to the last, exclusive (`write_code` replace and
    /// insert; both texts of a `replace` or an `edit`).
    pub text: Option<(usize, usize)>,
}

/// The part spans of `action` (a call's text as the teacher writes it).
pub fn part_spans(action: &str) -> PartSpans {
    let open = action.find('(').unwrap_or(action.len());
    let name_start = action.len() - action.trim_start().len();
    let mut spans = PartSpans {
        tool: (name_start.min(open), open),
        ..PartSpans::default()
    };
    if !matches!(
        action[name_start.min(open)..open].trim(),
        "write_code" | "replace" | "edit"
    ) {
        return spans;
    }
    let rest = &action[(open + 1).min(action.len())..];
    let digits_from = open + 1 + (rest.len() - rest.trim_start().len());
    let digits = action[digits_from.min(action.len())..]
        .chars()
        .take_while(char::is_ascii_digit)
        .count();
    if digits > 0 {
        spans.line = Some((digits_from, digits_from + digits));
    }
    if let (Some(first), Some(last)) = (action.find('"'), action.rfind('"'))
        && last > first
    {
        spans.text = Some((first + 1, last));
    }
    spans
}

/// What the policy got right at one teacher call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CallScore {
    /// Action tokens, and those predicted right.
    pub tokens: (usize, usize),
    /// Whether every token of the tool's name was right.
    pub tool: bool,
    /// For `write_code` and `replace`: whether the line number was right.
    pub line: Option<bool>,
    /// For a call with a text (`write_code`, `replace`, `edit`): whether it was right.
    pub text: Option<bool>,
    /// Whether the teacher called `finish` here.
    pub is_finish: bool,
    /// Whether the policy's first token was the first token of `finish`.
    pub starts_finish: bool,
}

/// Scores one call: `teacher` the teacher's action tokens (ending with the end token),
/// `predicted[t]` the policy's argmax after the teacher's first `t` tokens.
pub fn score_call(
    action: &str,
    call: Option<&ToolCall>,
    teacher: &[u32],
    predicted: &[u32],
) -> CallScore {
    let pieces = tokenizer().pieces();
    let spans = part_spans(action);
    // The character span of every teacher token the policy got wrong (the end token
    // has no characters).
    let mut at = 0;
    let mut wrong = Vec::new();
    for (t, &token) in teacher.iter().enumerate() {
        let len = match pieces.get(token as usize) {
            Some(piece) if token != arlbook_core::agent::tokenizer::END => piece.len(),
            _ => 0,
        };
        if predicted.get(t) != Some(&token) {
            wrong.push((at, at + len));
        }
        at += len;
    }
    let right_in = |span: Option<(usize, usize)>| -> Option<bool> {
        let (start, end) = span?;
        Some(!wrong.iter().any(|&(from, to)| from < end && start < to))
    };
    let tool = right_in(Some(spans.tool)).unwrap_or(false);
    let line = right_in(spans.line);
    let text = right_in(spans.text);
    let finish_first = tokenizer().encode("finish").first().copied();
    CallScore {
        tokens: (
            teacher.len(),
            teacher
                .iter()
                .zip(predicted)
                .filter(|(a, b)| a == b)
                .count(),
        ),
        tool,
        line,
        text,
        is_finish: matches!(call, Some(ToolCall::Finish)),
        starts_finish: predicted.first().copied() == finish_first,
    }
}

/// Teacher-forced accuracy by part over many calls (fractions; `None` where no call
/// has the part).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PartAccuracy {
    /// Action tokens predicted right.
    pub token: Option<f64>,
    /// Calls whose tool name was right.
    pub tool: Option<f64>,
    /// `write_code` and `replace` calls whose line was right.
    pub line: Option<f64>,
    /// Calls with a text (`write_code`, `replace`, `edit`) whose text was exactly right.
    pub text: Option<f64>,
    /// The teacher's `finish` calls the policy would start with `finish`.
    pub finish: Option<f64>,
    /// The teacher's other calls the policy would start with `finish`.
    pub early_finish: Option<f64>,
}

fn share(flags: impl Iterator<Item = bool>) -> Option<f64> {
    let (mut n, mut yes) = (0usize, 0usize);
    for flag in flags {
        n += 1;
        yes += usize::from(flag);
    }
    (n > 0).then(|| yes as f64 / n as f64)
}

impl PartAccuracy {
    /// The accuracy over `calls`.
    pub fn of(calls: &[CallScore]) -> Self {
        let tokens: usize = calls.iter().map(|c| c.tokens.0).sum();
        let right: usize = calls.iter().map(|c| c.tokens.1).sum();
        Self {
            token: (tokens > 0).then(|| right as f64 / tokens as f64),
            tool: share(calls.iter().map(|c| c.tool)),
            line: share(calls.iter().filter_map(|c| c.line)),
            text: share(calls.iter().filter_map(|c| c.text)),
            finish: share(calls.iter().filter(|c| c.is_finish).map(|c| c.tool)),
            early_finish: share(
                calls
                    .iter()
                    .filter(|c| !c.is_finish)
                    .map(|c| c.starts_finish),
            ),
        }
    }
}

/// The policy's argmax at every action token of every call of `episodes`, teacher
/// forced (one entry per call, in episode and call order).
fn teacher_forced_predictions(
    engine: &Engine<'_>,
    episodes: &[EpisodeRecord],
) -> Result<Vec<Vec<u32>>> {
    let calls: Vec<&arlbook_core::agent::ModelCall> =
        episodes.iter().flat_map(|e| &e.calls).collect();
    let vocab = tokenizer().vocab_size();
    let mut out = Vec::with_capacity(calls.len());
    for batch in calls.chunks(ROWS_PER_BATCH) {
        let contexts: Vec<&[u32]> = batch.iter().map(|c| c.context_ids.as_slice()).collect();
        let (mut cache, mut logits): (Cache, Vec<f32>) = engine.prefill(&contexts)?;
        let longest = batch
            .iter()
            .map(|c| c.generated_ids.len())
            .max()
            .unwrap_or(0);
        let mut predicted = vec![Vec::new(); batch.len()];
        for t in 0..longest {
            if logits.len() != batch.len() * vocab {
                bail!(
                    "probe: expected {} x {vocab} logits, got {}",
                    batch.len(),
                    logits.len()
                );
            }
            for (row, call) in batch.iter().enumerate() {
                if t < call.generated_ids.len() {
                    predicted[row].push(argmax(&logits[row * vocab..(row + 1) * vocab]) as u32);
                }
            }
            if t + 1 == longest {
                break;
            }
            let tokens: Vec<u32> = batch
                .iter()
                .map(|c| c.generated_ids.get(t).copied().unwrap_or(0))
                .collect();
            let live: Vec<bool> = batch
                .iter()
                .map(|c| t + 1 < c.generated_ids.len())
                .collect();
            logits = engine.step(&mut cache, &tokens, &live, t)?;
        }
        out.extend(predicted);
    }
    Ok(out)
}

/// Teacher-forced accuracy of `model` on the teacher's `episodes`.
pub fn teacher_forced(
    model: &PolicyModel,
    device: &Device,
    episodes: &[EpisodeRecord],
) -> Result<PartAccuracy> {
    let weights = weights_for(model, device)?;
    let engine = Engine {
        model,
        device,
        weights: weights.as_ref(),
    };
    let predictions = teacher_forced_predictions(&engine, episodes)?;
    let scores: Vec<CallScore> = episodes
        .iter()
        .flat_map(|e| &e.calls)
        .zip(&predictions)
        .map(|(call, predicted)| {
            score_call(
                &call.action_text,
                call.call.as_ref(),
                &call.generated_ids,
                predicted,
            )
        })
        .collect();
    Ok(PartAccuracy::of(&scores))
}

/// The teacher's episodes on the first `tasks` validation tasks (the probe's set).
pub fn teacher_episodes(config: &TrainConfig, tasks: usize) -> Vec<EpisodeRecord> {
    (0..tasks)
        .map(|i| {
            let task = generate_task(Split::Validation, i as u64);
            run_episode(
                &task,
                &mut Teacher::for_harness(&task, &config.harness),
                &config.harness,
                EpisodeIds {
                    group_id: i as u64,
                    sample_id: 0,
                },
                i as u64,
            )
        })
        .collect()
}

/// The probe row after `step` SFT steps of `total`: validation success and failures
/// by cause on the probe's tasks, and the teacher-forced accuracy on `teacher`.
pub fn probe_row(
    config: &TrainConfig,
    model: &PolicyModel,
    device: &Device,
    teacher: &[EpisodeRecord],
    (step, total): (usize, usize),
) -> Result<MetricsRow> {
    let tasks = config.sft.probe_tasks;
    let rollouts = validation_rollouts(config, model, device, tasks)?;
    let mut row = MetricsRow::new(RowStage::Probe, step).of_steps(total);
    let successes = rollouts.iter().filter(|r| r.record.success()).count();
    row.val_success = Some(successes as f64 / tasks.max(1) as f64);
    let task_list: Vec<_> = (0..tasks)
        .map(|i| generate_task(Split::Validation, i as u64))
        .collect();
    let failures = FailureBreakdown::of(&task_list, rollouts.iter().map(|r| &r.record));
    row.failure_causes = Some(failures.causes);
    let accuracy = teacher_forced(model, device, teacher)?;
    row.tf_token_accuracy = accuracy.token;
    row.tf_tool_accuracy = accuracy.tool;
    row.tf_line_accuracy = accuracy.line;
    row.tf_text_exact = accuracy.text;
    row.tf_finish_accuracy = accuracy.finish;
    row.tf_early_finish = accuracy.early_finish;
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ModelConfig;
    use crate::run::trainer::vocab;

    #[test]
    fn parts_of_a_write_a_delete_a_replace_an_edit_and_a_bare_call() {
        let a = "write_code(12, \"best = xs[0]\")";
        let s = part_spans(a);
        assert_eq!(&a[s.tool.0..s.tool.1], "write_code");
        let (l0, l1) = s.line.unwrap();
        assert_eq!(&a[l0..l1], "12");
        let (t0, t1) = s.text.unwrap();
        assert_eq!(&a[t0..t1], "best = xs[0]");
        let d = part_spans("write_code(3, delete)");
        assert!(d.text.is_none());
        assert_eq!(d.line, Some((11, 12)));
        let r = "replace(2, \"0\", \"xs[0]\")";
        let s = part_spans(r);
        assert_eq!(&r[s.tool.0..s.tool.1], "replace");
        let (l0, l1) = s.line.unwrap();
        assert_eq!(&r[l0..l1], "2");
        let (t0, t1) = s.text.unwrap();
        assert_eq!(&r[t0..t1], "0\", \"xs[0]");
        let e = "edit(\"best = 0\", \"best = xs[0]\")";
        let s = part_spans(e);
        assert_eq!(&e[s.tool.0..s.tool.1], "edit");
        assert_eq!(s.line, None);
        let (t0, t1) = s.text.unwrap();
        assert_eq!(&e[t0..t1], "best = 0\", \"best = xs[0]");
        let f = part_spans("finish()");
        assert_eq!(f.tool, (0, 6));
        assert_eq!((f.line, f.text), (None, None));
    }

    fn teacher_tokens(action: &str) -> Vec<u32> {
        let mut ids = tokenizer().encode(action);
        ids.push(arlbook_core::agent::tokenizer::END);
        ids
    }

    #[test]
    fn a_call_is_scored_part_by_part() {
        let action = "write_code(4, \"best = x\")";
        let call = arlbook_core::agent::parse_call(action).unwrap();
        let teacher = teacher_tokens(action);
        let all = score_call(action, Some(&call), &teacher, &teacher);
        assert_eq!(all.tokens, (teacher.len(), teacher.len()));
        assert!(all.tool && all.line == Some(true) && all.text == Some(true));

        // The same call with line 5: only the line is wrong.
        let other = teacher_tokens("write_code(5, \"best = x\")");
        assert_eq!(other.len(), teacher.len());
        let s = score_call(action, Some(&call), &teacher, &other);
        assert!(s.tool);
        assert_eq!((s.line, s.text), (Some(false), Some(true)));
        assert_eq!(s.tokens.1, teacher.len() - 1);

        // A different name in the text: only the text is wrong.
        let other = teacher_tokens("write_code(4, \"best = v\")");
        let s = score_call(action, Some(&call), &teacher, &other);
        assert_eq!((s.tool, s.line, s.text), (true, Some(true), Some(false)));
    }

    #[test]
    fn finish_placement_counts_the_first_token() {
        let finish = teacher_tokens("finish()");
        let run = teacher_tokens("run_tests()");
        let at_finish = score_call("finish()", Some(&ToolCall::Finish), &finish, &finish);
        let early = score_call("run_tests()", Some(&ToolCall::RunTests), &run, &finish);
        let fine = score_call("run_tests()", Some(&ToolCall::RunTests), &run, &run);
        assert!(at_finish.is_finish && at_finish.tool);
        assert!(early.starts_finish && !fine.starts_finish);
        let acc = PartAccuracy::of(&[at_finish, early, fine]);
        assert_eq!(acc.finish, Some(1.0));
        assert_eq!(acc.early_finish, Some(0.5));
        assert_eq!(acc.line, None);
    }

    #[test]
    fn teacher_forcing_matches_greedy_generation_on_the_first_token() {
        // On every call, the argmax after the context alone is what greedy decoding
        // of the same context starts with: check against the engine's prefill.
        let device = Device::flex();
        device.seed(3);
        let model_config = ModelConfig {
            layers: 1,
            width: 32,
            heads: 2,
            context: 640,
            ..ModelConfig::default()
        };
        let model = PolicyModel::new(&model_config, vocab(), &device);
        let config = TrainConfig::default();
        let episodes = teacher_episodes(&config, 3);
        let weights = crate::policy::fused::Weights::of(&model).unwrap();
        let engine = Engine {
            model: &model,
            device: &device,
            weights: Some(&weights),
        };
        let predictions = teacher_forced_predictions(&engine, &episodes).unwrap();
        let calls: Vec<_> = episodes.iter().flat_map(|e| &e.calls).collect();
        assert_eq!(predictions.len(), calls.len());
        for (call, predicted) in calls.iter().zip(&predictions) {
            assert_eq!(predicted.len(), call.generated_ids.len());
            let (_, logits) = engine.prefill(&[call.context_ids.as_slice()]).unwrap();
            assert_eq!(predicted[0] as usize, argmax(&logits));
            // And the second token: the context with the teacher's first token.
            if call.generated_ids.len() > 1 {
                let mut longer = call.context_ids.clone();
                longer.push(call.generated_ids[0]);
                let (_, logits) = engine.prefill(&[longer.as_slice()]).unwrap();
                assert_eq!(predicted[1] as usize, argmax(&logits));
            }
        }
        let accuracy = teacher_forced(&model, &device, &episodes).unwrap();
        for value in [accuracy.token, accuracy.tool, accuracy.finish] {
            let v = value.unwrap();
            assert!((0.0..=1.0).contains(&v), "{v}");
        }
    }
}

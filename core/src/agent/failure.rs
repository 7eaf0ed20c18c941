//! Why a failed episode failed: one cause per episode, read off its record and task.
//!
//! Every bug of the environment sits on one line (`Task::bug_line`) and is repaired by
//! replacing that line, so a failed episode falls into one of these causes, checked in
//! this order (the first that applies is the cause):
//!
//! 1. `env_fault`: the executor crashed (not the policy's doing);
//! 2. `malformed_call`: the malformed-call rule ended the episode;
//! 3. `turn_budget` / `token_budget`: a budget cut the episode off;
//! 4. the policy called `finish` with code that fails the hidden tests, and
//!    - `no_edit`: no edit was applied;
//!    - `unknown_name`: an applied edit names a variable that the starting listing does
//!      not contain (any word of the edit that is not a keyword and not a word of the
//!      listing, the `def` line included);
//!    - `wrong_line`: no applied edit replaced or deleted the bug's line (its position
//!      followed through inserts and deletes above it);
//!    - `wrong_text`: the bug's line was edited, but not into a line that passes.
//!
//! Beside the cause, [`Diagnosis::finished_after_failing_tests`] says whether the
//! policy ran the visible tests after its last applied edit, saw at least one fail, and
//! called `finish` anyway (`record.visible_pass_fraction[t]` is the pass fraction before
//! call `t`, so before that `run_tests` call).

use serde::{Deserialize, Serialize};

use super::action::{EditMode, ToolCall};
use super::lang::variable_names;
use super::record::{EndReason, EpisodeRecord};
use super::task::Task;

/// The cause of a failed episode (see the module docs for the order they are checked in).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureCause {
    /// The executor crashed.
    EnvFault,
    /// Too many malformed calls in a row.
    MalformedCall,
    /// The turn budget ran out.
    TurnBudget,
    /// The token budget ran out.
    TokenBudget,
    /// `finish` without any applied edit.
    NoEdit,
    /// An applied edit names a variable absent from the listing.
    UnknownName,
    /// No applied edit touched the bug's line.
    WrongLine,
    /// The bug's line was edited into a line that still fails.
    WrongText,
}

impl FailureCause {
    /// Every cause, in the order they are checked.
    pub const ALL: [FailureCause; 8] = [
        FailureCause::EnvFault,
        FailureCause::MalformedCall,
        FailureCause::TurnBudget,
        FailureCause::TokenBudget,
        FailureCause::NoEdit,
        FailureCause::UnknownName,
        FailureCause::WrongLine,
        FailureCause::WrongText,
    ];

    /// The `snake_case` name.
    pub fn name(self) -> &'static str {
        match self {
            FailureCause::EnvFault => "env_fault",
            FailureCause::MalformedCall => "malformed_call",
            FailureCause::TurnBudget => "turn_budget",
            FailureCause::TokenBudget => "token_budget",
            FailureCause::NoEdit => "no_edit",
            FailureCause::UnknownName => "unknown_name",
            FailureCause::WrongLine => "wrong_line",
            FailureCause::WrongText => "wrong_text",
        }
    }
}

/// What [`diagnose`] finds in a failed episode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnosis {
    /// The cause.
    pub cause: FailureCause,
    /// The policy saw a failing `run_tests` after its last applied edit and finished.
    pub finished_after_failing_tests: bool,
}

/// One applied edit: its call index, line, mode and the line's new text (a `replace`
/// or an `edit` is a whole-line replacement by the line it produced, at the line its
/// observation names).
struct AppliedEdit<'a> {
    call: usize,
    line: usize,
    mode: EditMode,
    text: &'a str,
}

/// Whether the harness refused one of `record`'s edit calls (`write_code`, `replace`
/// or `edit` answered with `error:`), whatever the episode's outcome.
pub fn has_refused_edit(record: &EpisodeRecord) -> bool {
    record.calls.iter().any(|model_call| {
        model_call.call.as_ref().is_some_and(ToolCall::is_edit)
            && model_call.observation_text.starts_with("error:")
    })
}

/// The edits of `record` the environment applied (its observation starts with `ok:`).
fn applied_edits(record: &EpisodeRecord) -> Vec<AppliedEdit<'_>> {
    record
        .calls
        .iter()
        .enumerate()
        .filter(|(_, model_call)| model_call.observation_text.starts_with("ok:"))
        .filter_map(|(call, model_call)| match &model_call.call {
            Some(ToolCall::WriteCode { line, text, mode }) => Some(AppliedEdit {
                call,
                line: *line,
                mode: *mode,
                text,
            }),
            Some(ToolCall::ReplaceText { .. } | ToolCall::EditText { .. }) => {
                // `ok: line N is now TEXT` (`CodeEnv::replace_text`, `CodeEnv::edit_text`).
                let (head, text) = model_call.observation_text.split_once(" is now ")?;
                Some(AppliedEdit {
                    call,
                    line: head.strip_prefix("ok: line ")?.parse().ok()?,
                    mode: EditMode::Replace,
                    text,
                })
            }
            _ => None,
        })
        .collect()
}

/// Whether an edit names a variable that `task`'s starting listing does not contain.
fn names_unknown_variable(task: &Task, edits: &[AppliedEdit<'_>]) -> bool {
    let known: Vec<String> = task
        .buggy_code
        .iter()
        .flat_map(|line| variable_names(line))
        .collect();
    edits
        .iter()
        .filter(|edit| edit.mode != EditMode::Delete)
        .flat_map(|edit| variable_names(edit.text))
        .any(|word| !known.contains(&word))
}

/// Whether an edit replaced or deleted the bug's line, following its position through
/// inserts and deletes above it.
fn touches_bug_line(task: &Task, edits: &[AppliedEdit<'_>]) -> bool {
    let mut position = task.bug_line;
    for edit in edits {
        match edit.mode {
            EditMode::Replace | EditMode::Delete if edit.line == position => return true,
            EditMode::Insert if edit.line <= position => position += 1,
            EditMode::Delete if edit.line < position => position -= 1,
            _ => {}
        }
    }
    false
}

/// Whether the policy ran the visible tests after its last applied edit, saw a failure
/// there, and then called `finish`.
fn finished_after_failing_tests(record: &EpisodeRecord, last_edit: Option<usize>) -> bool {
    if record.end_reason != EndReason::Finish {
        return false;
    }
    let after = last_edit.map_or(0, |call| call + 1);
    record
        .calls
        .iter()
        .enumerate()
        .skip(after)
        .any(|(t, model_call)| {
            matches!(model_call.call, Some(ToolCall::RunTests))
                && record
                    .visible_pass_fraction
                    .get(t)
                    .is_some_and(|&fraction| fraction < 1.0)
        })
}

/// The cause of `record`'s failure on `task`, or `None` when the episode succeeded.
pub fn diagnose(task: &Task, record: &EpisodeRecord) -> Option<Diagnosis> {
    if record.success() {
        return None;
    }
    let edits = applied_edits(record);
    let cause = if record.env_fault || record.end_reason == EndReason::EnvFault {
        FailureCause::EnvFault
    } else {
        match record.end_reason {
            EndReason::MalformedLimit => FailureCause::MalformedCall,
            EndReason::TurnBudget => FailureCause::TurnBudget,
            EndReason::TokenBudget => FailureCause::TokenBudget,
            EndReason::EnvFault => FailureCause::EnvFault,
            EndReason::Finish => {
                if edits.is_empty() {
                    FailureCause::NoEdit
                } else if names_unknown_variable(task, &edits) {
                    FailureCause::UnknownName
                } else if touches_bug_line(task, &edits) {
                    FailureCause::WrongText
                } else {
                    FailureCause::WrongLine
                }
            }
        }
    };
    Some(Diagnosis {
        cause,
        finished_after_failing_tests: finished_after_failing_tests(
            record,
            edits.last().map(|edit| edit.call),
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::harness::{EpisodeIds, HarnessConfig, run_episode};
    use crate::agent::policy::{
        Generation, Policy, PolicyInfo, SamplingSettings, Teacher, scripted,
    };
    use crate::agent::task::{Split, article_example, generate_task};
    use crate::rng::RandomStream;

    /// A policy that writes the given calls, one per turn, then repeats the last.
    struct Scripted {
        calls: Vec<String>,
        next: usize,
    }

    impl Policy for Scripted {
        fn info(&self) -> PolicyInfo {
            PolicyInfo {
                name: "scripted".to_owned(),
                version: String::new(),
                sampling: SamplingSettings::default(),
            }
        }

        fn next_tokens(
            &mut self,
            _context: &[u32],
            max_new_tokens: usize,
            _rng: &mut RandomStream,
        ) -> Generation {
            let text = &self.calls[self.next.min(self.calls.len() - 1)];
            self.next += 1;
            scripted(text, max_new_tokens)
        }
    }

    fn run(task: &Task, calls: &[&str]) -> EpisodeRecord {
        run_with(task, calls, &HarnessConfig::default())
    }

    fn run_with(task: &Task, calls: &[&str], config: &HarnessConfig) -> EpisodeRecord {
        let mut policy = Scripted {
            calls: calls.iter().map(|&c| c.to_owned()).collect(),
            next: 0,
        };
        run_episode(task, &mut policy, config, EpisodeIds::default(), 1)
    }

    fn cause(task: &Task, calls: &[&str]) -> Diagnosis {
        diagnose(task, &run(task, calls)).expect("the episode fails")
    }

    #[test]
    fn the_teachers_repair_is_no_failure() {
        let with_levers = HarnessConfig {
            replace_tool: true,
            name_check: true,
            ..HarnessConfig::default()
        };
        let with_edit = HarnessConfig {
            edit_tool: true,
            ..HarnessConfig::default()
        };
        for config in [HarnessConfig::default(), with_levers, with_edit] {
            for seed in 0..20 {
                let task = generate_task(Split::Validation, seed);
                let record = run_episode(
                    &task,
                    &mut Teacher::for_harness(&task, &config),
                    &config,
                    EpisodeIds::default(),
                    seed,
                );
                assert!(record.success(), "seed {seed}");
                assert_eq!(diagnose(&task, &record), None);
            }
        }
    }

    /// Runs each `(calls, expected cause)` of `cases` on the article's example under
    /// `config`, then checks that without the setting the first call of the case that
    /// repairs (expected `None`) is an unknown tool.
    fn assert_causes(config: &HarnessConfig, cases: &[(&[&str], Option<FailureCause>)]) {
        let task = article_example();
        for (calls, expected) in cases {
            let cause = diagnose(&task, &run_with(&task, calls, config)).map(|d| d.cause);
            assert_eq!(cause, *expected, "{calls:?}");
        }
        let (repair, _) = cases
            .iter()
            .find(|(_, expected)| expected.is_none())
            .expect("a case that repairs");
        let record = run(&task, repair);
        let error = record.calls[0].parse_error.as_deref().unwrap_or_default();
        assert!(error.contains("unknown tool"), "{repair:?}: {error:?}");
    }

    #[test]
    fn a_replace_is_diagnosed_by_the_line_it_produced() {
        let config = HarnessConfig {
            replace_tool: true,
            ..HarnessConfig::default()
        };
        assert_causes(
            &config,
            &[
                (&["replace(2, \"0\", \"xs[0]\")", "finish()"], None),
                (
                    &["replace(2, \"0\", \"xs[1]\")", "finish()"],
                    Some(FailureCause::WrongText),
                ),
                (
                    &["replace(2, \"0\", \"k\")", "finish()"],
                    Some(FailureCause::UnknownName),
                ),
                (
                    &["replace(8, \"best\", \"x\")", "finish()"],
                    Some(FailureCause::WrongLine),
                ),
                // A refused replace is no edit.
                (
                    &["replace(2, \"1\", \"xs[0]\")", "finish()"],
                    Some(FailureCause::NoEdit),
                ),
            ],
        );
    }

    #[test]
    fn an_edit_is_diagnosed_by_the_line_its_observation_names() {
        let config = HarnessConfig {
            edit_tool: true,
            ..HarnessConfig::default()
        };
        assert_causes(
            &config,
            &[
                (&["edit(\"0\", \"xs[0]\")", "finish()"], None),
                (
                    &["edit(\"best = 0\", \"best = xs[1]\")", "finish()"],
                    Some(FailureCause::WrongText),
                ),
                (
                    &["edit(\">\", \"<\")", "finish()"],
                    Some(FailureCause::WrongLine),
                ),
                // A refused edit (`best` occurs four times) is no edit.
                (
                    &["edit(\"best\", \"top\")", "finish()"],
                    Some(FailureCause::NoEdit),
                ),
            ],
        );
    }

    #[test]
    fn finishing_at_once_is_no_edit() {
        let task = article_example();
        let d = cause(&task, &["finish()"]);
        assert_eq!(d.cause, FailureCause::NoEdit);
        assert!(!d.finished_after_failing_tests);
    }

    #[test]
    fn running_failing_tests_then_finishing_is_flagged() {
        let task = article_example();
        let d = cause(&task, &["run_tests()", "finish()"]);
        assert_eq!(d.cause, FailureCause::NoEdit);
        assert!(d.finished_after_failing_tests);
        // Tests run before an edit do not count: the edit changed the code since.
        let edit = format!("write_code({}, \"best = 1\")", task.bug_line);
        let d = cause(&task, &["run_tests()", &edit, "finish()"]);
        assert!(!d.finished_after_failing_tests);
    }

    #[test]
    fn an_edit_elsewhere_is_the_wrong_line_and_a_new_name_is_unknown() {
        let task = article_example();
        // find_max: line 2 is the bug (best = 0); line 8 returns best.
        assert_eq!(task.bug_line, 2);
        let d = cause(&task, &["write_code(8, \"return best\")", "finish()"]);
        assert_eq!(d.cause, FailureCause::WrongLine);
        let d = cause(&task, &["write_code(2, \"best = zzz\")", "finish()"]);
        assert_eq!(d.cause, FailureCause::UnknownName);
        let d = cause(&task, &["write_code(2, \"best = xs[1]\")", "finish()"]);
        assert_eq!(d.cause, FailureCause::WrongText);
    }

    #[test]
    fn the_bug_line_is_followed_through_an_insert_above_it() {
        let task = article_example();
        // An insert at line 2 moves the bug to line 3: replacing line 3 edits it.
        let insert = "write_code(2, \"best = 0\", insert)";
        let d = cause(&task, &[insert, "write_code(3, \"best = 0\")", "finish()"]);
        assert_eq!(d.cause, FailureCause::WrongText);
        let d = cause(&task, &[insert, "write_code(2, \"best = 0\")", "finish()"]);
        assert_eq!(d.cause, FailureCause::WrongLine);
    }

    #[test]
    fn a_budget_or_malformed_end_is_its_own_cause() {
        let task = article_example();
        let three_turns = HarnessConfig {
            max_turns: 3,
            ..HarnessConfig::default()
        };
        let record = run_with(&task, &["run_tests()"], &three_turns);
        assert_eq!(record.end_reason, EndReason::TurnBudget);
        assert_eq!(
            diagnose(&task, &record).map(|d| d.cause),
            Some(FailureCause::TurnBudget)
        );
        assert_eq!(
            cause(&task, &["this is not a call"]).cause,
            FailureCause::MalformedCall
        );
    }
}

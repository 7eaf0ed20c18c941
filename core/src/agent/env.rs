//! The environment state of one episode: the current code and the tools that read,
//! edit and test it.
//!
//! Every tool result is a plain-text observation; invalid edits and broken programs
//! are reported in that text, never as a panic or a Rust error, because the policy has
//! to read them and recover.

use std::fmt::Write as _;

use super::action::EditMode;
use super::interp::{Value, format_list, run};
use super::lang::{Line, parse_line, variable_names};
use super::program::{indent_levels, parse_program};
use super::replacement::occurrences;
use super::task::{Task, TestCase};

/// The longest program an edit may produce, in lines.
pub const MAX_CODE_LINES: usize = 40;

/// One test's outcome on the current code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TestOutcome {
    /// Returned the expected value.
    Pass,
    /// Returned something else.
    Wrong(Value),
    /// Failed to parse or raised a runtime error (the message).
    Error(String),
}

/// The code under repair and its task.
#[derive(Debug, Clone)]
pub struct CodeEnv {
    task: Task,
    code: Vec<String>,
    step_limit: u64,
    /// With the name check on: the names of the starting listing (else empty).
    known_names: Option<Vec<String>>,
}

impl CodeEnv {
    /// A fresh environment holding the task's buggy code.
    pub fn new(task: Task, step_limit: u64) -> Self {
        let code = task.buggy_code.clone();
        Self {
            task,
            code,
            step_limit,
            known_names: None,
        }
    }

    /// Turns the name check on or off (`HarnessConfig::name_check`): with it on, an
    /// edit whose new line names a variable that the starting listing does not contain
    /// is refused with an error observation, and the code is left as it was.
    #[must_use]
    pub fn with_name_check(mut self, on: bool) -> Self {
        self.known_names = on.then(|| {
            self.task
                .buggy_code
                .iter()
                .flat_map(|line| variable_names(line))
                .collect()
        });
        self
    }

    /// The task.
    pub fn task(&self) -> &Task {
        &self.task
    }

    /// The current code, one string per line.
    pub fn code(&self) -> &[String] {
        &self.code
    }

    /// Runs `cases` on the current code.
    pub fn outcomes(&self, cases: &[TestCase]) -> Vec<TestOutcome> {
        let function = match parse_program(&self.code) {
            Ok(f) => f,
            Err(e) => return vec![TestOutcome::Error(e.to_string()); cases.len()],
        };
        cases
            .iter()
            .map(|case| match run(&function, &case.input, self.step_limit) {
                Ok(v) if v == case.expected => TestOutcome::Pass,
                Ok(v) => TestOutcome::Wrong(v),
                Err(e) => TestOutcome::Error(e.to_string()),
            })
            .collect()
    }

    /// Fraction of visible tests the current code passes (the shaping potential).
    pub fn visible_pass_fraction(&self) -> f64 {
        let cases = &self.task.visible_tests;
        if cases.is_empty() {
            return 0.0;
        }
        let passed = self
            .outcomes(cases)
            .iter()
            .filter(|o| **o == TestOutcome::Pass)
            .count();
        passed as f64 / cases.len() as f64
    }

    /// Whether the current code passes every hidden test (the success criterion).
    pub fn passes_hidden_tests(&self) -> bool {
        self.outcomes(&self.task.hidden_tests)
            .iter()
            .all(|o| *o == TestOutcome::Pass)
    }

    /// The observation of `run_tests`: a summary line, then one line per failure with
    /// the expected and the actual result.
    pub fn run_tests(&self) -> String {
        let cases = &self.task.visible_tests;
        if let Err(e) = parse_program(&self.code) {
            return format!("error: the code does not parse: {e}");
        }
        let outcomes = self.outcomes(cases);
        let failed = outcomes.iter().filter(|o| **o != TestOutcome::Pass).count();
        // Writing into a String cannot fail, so the `fmt::Result`s below are ignored.
        let mut text = format!(
            "{} tests: {} passed, {failed} failed",
            cases.len(),
            cases.len() - failed
        );
        for (case, outcome) in cases.iter().zip(&outcomes) {
            let call = format!("{}({})", self.task.function, format_list(&case.input));
            match outcome {
                TestOutcome::Pass => {}
                TestOutcome::Wrong(got) => {
                    let _ = write!(text, "\nfail {call}: expected {}, got {got}", case.expected);
                }
                TestOutcome::Error(message) => {
                    let _ = write!(
                        text,
                        "\nfail {call}: expected {}, got error: {message}",
                        case.expected
                    );
                }
            }
        }
        text
    }

    /// The observation of `read_code`: the numbered listing, indented by block depth.
    pub fn read_code(&self) -> String {
        listing(&self.code)
    }

    /// Whether `text` may become a line: it parses, is not a `def` line and, with the
    /// name check on, names no variable absent from the starting listing.
    fn check_new_line(&self, text: &str) -> Result<(), String> {
        match parse_line(text) {
            Err(message) => return Err(format!("error: the text does not parse: {message}")),
            Ok(Line::Def(..)) => return Err("error: only line 1 may be a def line".to_owned()),
            Ok(_) => {}
        }
        if let Some(known) = &self.known_names
            && let Some(unknown) = variable_names(text)
                .into_iter()
                .find(|name| !known.contains(name))
        {
            return Err(format!(
                "error: {unknown} is not a name in the code, the edit was not applied"
            ));
        }
        Ok(())
    }

    /// Applies a `replace` edit: the one occurrence of `old` on line `line` becomes
    /// `new`. `Ok` and `Err` both carry the observation text; on `Err` the code is
    /// unchanged.
    pub fn replace_text(&mut self, line: usize, old: &str, new: &str) -> Result<String, String> {
        let count = self.code.len();
        if line == 1 {
            return Err("error: line 1 (the def line) cannot be edited".to_owned());
        }
        if line > count {
            return Err(format!(
                "error: line {line} is out of range, the code has {count} lines"
            ));
        }
        if old.is_empty() {
            return Err("error: the old text is empty".to_owned());
        }
        let current = &self.code[line - 1];
        let Some(at) = current.find(old) else {
            return Err(format!("error: line {line} does not contain \"{old}\""));
        };
        if occurrences(current, old) > 1 {
            return Err(format!(
                "error: \"{old}\" occurs more than once on line {line}"
            ));
        }
        let replaced = format!("{}{new}{}", &current[..at], &current[at + old.len()..]);
        let text = replaced.trim();
        self.check_new_line(text)?;
        text.clone_into(&mut self.code[line - 1]);
        Ok(format!("ok: line {line} is now {text}"))
    }

    /// Applies an `edit`: the one occurrence of `old` in the file (within a line)
    /// becomes `new`. `Ok` and `Err` both carry the observation text; on `Err` the code
    /// is unchanged.
    pub fn edit_text(&mut self, old: &str, new: &str) -> Result<String, String> {
        if old.is_empty() {
            return Err("error: the old text is empty".to_owned());
        }
        let mut found = self
            .code
            .iter()
            .enumerate()
            .flat_map(|(index, line)| std::iter::repeat_n(index, occurrences(line, old)));
        let Some(index) = found.next() else {
            return Err(format!("error: the code does not contain \"{old}\""));
        };
        let more = found.count();
        if more > 0 {
            return Err(format!(
                "error: \"{old}\" occurs {} times in the code",
                more + 1
            ));
        }
        let line = index + 1;
        if line == 1 {
            return Err("error: line 1 (the def line) cannot be edited".to_owned());
        }
        let current = &self.code[index];
        let text = current.replacen(old, new, 1);
        let text = text.trim();
        self.check_new_line(text)?;
        text.clone_into(&mut self.code[index]);
        Ok(format!("ok: line {line} is now {text}"))
    }

    /// Applies a `write_code` edit; `Ok` and `Err` both carry the observation text.
    pub fn write_code(
        &mut self,
        line: usize,
        text: &str,
        mode: EditMode,
    ) -> Result<String, String> {
        let count = self.code.len();
        let text = text.trim();
        if line == 1 {
            return Err("error: line 1 (the def line) cannot be edited".to_owned());
        }
        let in_range = match mode {
            EditMode::Insert => line <= count + 1,
            EditMode::Replace | EditMode::Delete => line <= count,
        };
        if !in_range {
            return Err(format!(
                "error: line {line} is out of range, the code has {count} lines"
            ));
        }
        if mode != EditMode::Delete {
            self.check_new_line(text)?;
        }
        match mode {
            EditMode::Replace => {
                text.clone_into(&mut self.code[line - 1]);
                Ok(format!("ok: line {line} is now {text}"))
            }
            EditMode::Insert => {
                if count >= MAX_CODE_LINES {
                    return Err(format!(
                        "error: the code already has {MAX_CODE_LINES} lines"
                    ));
                }
                self.code.insert(line - 1, text.to_owned());
                Ok(format!(
                    "ok: line {line} inserted, the code has {} lines",
                    count + 1
                ))
            }
            EditMode::Delete => {
                self.code.remove(line - 1);
                Ok(format!(
                    "ok: line {line} deleted, the code has {} lines",
                    count - 1
                ))
            }
        }
    }
}

/// A numbered listing: `N <indent>text` per line, two spaces per block level.
pub fn listing(code: &[String]) -> String {
    let levels = indent_levels(code);
    code.iter()
        .zip(levels)
        .enumerate()
        .map(|(i, (text, level))| format!("{} {}{text}", i + 1, "  ".repeat(level)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Reads a listing back into code lines (the inverse of [`listing`] on trimmed lines).
pub fn parse_listing(text: &str) -> Option<Vec<String>> {
    text.lines()
        .enumerate()
        .map(|(i, row)| {
            let (number, rest) = row.split_once(' ')?;
            (number.parse::<usize>().ok()? == i + 1).then(|| rest.trim().to_owned())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::task::article_example;

    #[test]
    fn run_tests_reports_expected_and_actual() {
        let env = CodeEnv::new(article_example(), 1000);
        assert_eq!(
            env.run_tests(),
            "3 tests: 2 passed, 1 failed\nfail find_max([-2, -5, -8]): expected -2, got 0"
        );
    }

    #[test]
    fn fixing_the_initial_value_passes_every_test() {
        let mut env = CodeEnv::new(article_example(), 1000);
        assert!(!env.passes_hidden_tests());
        let observation = env
            .write_code(2, "best = xs[0]", EditMode::Replace)
            .unwrap();
        assert_eq!(observation, "ok: line 2 is now best = xs[0]");
        assert!(env.passes_hidden_tests());
        assert_eq!(env.visible_pass_fraction(), 1.0);
    }

    #[test]
    fn listing_round_trips_through_the_parser() {
        let env = CodeEnv::new(article_example(), 1000);
        let text = env.read_code();
        assert!(text.starts_with("1 def find_max(xs):\n2   best = 0\n3   for x in xs:"));
        assert_eq!(parse_listing(&text).unwrap(), env.code());
    }

    #[test]
    fn invalid_edits_are_observations() {
        let mut env = CodeEnv::new(article_example(), 1000);
        let before = env.code().to_vec();
        assert!(
            env.write_code(99, "x = 1", EditMode::Replace)
                .unwrap_err()
                .contains("out of range")
        );
        assert!(
            env.write_code(1, "x = 1", EditMode::Replace)
                .unwrap_err()
                .contains("def line")
        );
        assert!(
            env.write_code(2, "x = = 1", EditMode::Replace)
                .unwrap_err()
                .contains("parse")
        );
        assert_eq!(env.code(), before);
        env.write_code(3, "", EditMode::Delete).unwrap();
        assert!(
            env.run_tests()
                .starts_with("error: the code does not parse")
        );
    }

    #[test]
    fn replace_changes_the_one_match_on_its_line() {
        let mut env = CodeEnv::new(article_example(), 1000);
        // Line 2 is `best = 0`.
        let observation = env.replace_text(2, "0", "xs[0]").unwrap();
        assert_eq!(observation, "ok: line 2 is now best = xs[0]");
        assert!(env.passes_hidden_tests());
    }

    #[test]
    fn replace_refuses_a_missing_or_repeated_match_and_leaves_the_code() {
        let mut env = CodeEnv::new(article_example(), 1000);
        let before = env.code().to_vec();
        let cases = [
            (2, "1", "2", "does not contain \"1\""),
            (3, "x", "y", "more than once"),
            (2, "", "y", "old text is empty"),
            (1, "xs", "ys", "def line"),
            (99, "a", "b", "out of range"),
            (2, "= 0", "= =", "does not parse"),
        ];
        for (line, old, new, needle) in cases {
            let message = env.replace_text(line, old, new).unwrap_err();
            assert!(message.contains(needle), "{line} {old}: {message}");
        }
        assert_eq!(env.code(), before);
    }

    #[test]
    fn edit_changes_the_one_match_in_the_file_on_whatever_line_it_is() {
        let mut env = CodeEnv::new(article_example(), 1000);
        // `best = 0` is line 2 and occurs nowhere else.
        let observation = env.edit_text("best = 0", "best = xs[0]").unwrap();
        assert_eq!(observation, "ok: line 2 is now best = xs[0]");
        assert!(env.passes_hidden_tests());
        let mut env = CodeEnv::new(article_example(), 1000);
        assert_eq!(
            env.edit_text(">", ">=").unwrap(),
            "ok: line 4 is now if x >= best:"
        );
    }

    #[test]
    fn edit_refuses_a_missing_repeated_or_def_line_match_and_leaves_the_code() {
        let mut env = CodeEnv::new(article_example(), 1000);
        let before = env.code().to_vec();
        let cases = [
            ("best = 1", "x", "does not contain \"best = 1\""),
            ("best", "top", "occurs 4 times"),
            ("end", "end", "occurs 2 times"),
            ("", "y", "old text is empty"),
            ("find_max", "f", "def line"),
            ("= 0", "= =", "does not parse"),
            ("best = 0", "def g(xs):", "only line 1 may be a def line"),
        ];
        for (old, new, needle) in cases {
            let message = env.edit_text(old, new).unwrap_err();
            assert!(message.contains(needle), "{old}: {message}");
        }
        assert_eq!(env.code(), before);
        let mut checked = CodeEnv::new(article_example(), 1000).with_name_check(true);
        assert!(checked.edit_text("0", "part").unwrap_err().contains("part"));
    }

    #[test]
    fn the_name_check_refuses_a_name_the_listing_lacks() {
        let task = article_example();
        let mut plain = CodeEnv::new(task.clone(), 1000);
        assert!(plain.write_code(2, "best = k", EditMode::Replace).is_ok());
        let mut checked = CodeEnv::new(task, 1000).with_name_check(true);
        let before = checked.code().to_vec();
        let message = checked
            .write_code(2, "best = k", EditMode::Replace)
            .unwrap_err();
        assert_eq!(
            message,
            "error: k is not a name in the code, the edit was not applied"
        );
        assert!(
            checked
                .replace_text(2, "0", "part")
                .unwrap_err()
                .contains("part")
        );
        assert_eq!(checked.code(), before);
        // Names of the listing, the parameter and the loop variable included, pass.
        assert!(
            checked
                .write_code(2, "best = xs[0]", EditMode::Replace)
                .is_ok()
        );
    }
}

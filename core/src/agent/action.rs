//! The action format: the text a policy emits for a tool call, and its parser.
//!
//! ```text
//! run_tests()
//! read_code()
//! write_code(3, "best = xs[0]")          replace line 3
//! write_code(3, "best = xs[0]", insert)  insert a new line before line 3 (n+1 appends)
//! write_code(3, delete)                  delete line 3
//! replace(3, "0", "xs[0]")               replace the one "0" on line 3 by "xs[0]"
//! edit("best = 0", "best = xs[0]")       replace the one "best = 0" in the file
//! finish()
//! ```
//!
//! `replace` and `edit` are harness settings (`HarnessConfig::replace_tool`,
//! `HarnessConfig::edit_tool`): the parser reads them always, and the harness answers
//! one as an unknown tool when its setting is off.
//!
//! A generated action is this text followed by the end token; the parser rejects
//! anything else with a message meant to be read by the policy as its next observation.

use serde::{Deserialize, Serialize};

/// How `write_code` changes the listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EditMode {
    /// Replace the line.
    Replace,
    /// Insert a new line before the given one.
    Insert,
    /// Delete the line.
    Delete,
}

/// A parsed tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "tool", rename_all = "snake_case")]
pub enum ToolCall {
    /// Run the visible tests on the current code.
    RunTests,
    /// Show the numbered listing.
    ReadCode,
    /// Edit one line.
    WriteCode {
        /// 1-based line number.
        line: usize,
        /// The new text (empty for a deletion).
        text: String,
        /// Replace, insert or delete.
        mode: EditMode,
    },
    /// Replace the one occurrence of `old` on a line by `new`.
    #[serde(rename = "replace")]
    ReplaceText {
        /// 1-based line number.
        line: usize,
        /// The text to find: it must occur exactly once on the line.
        old: String,
        /// What it becomes.
        new: String,
    },
    /// Replace the one occurrence of `old` in the whole file by `new`: an edit
    /// addressed by its text, with no line number.
    #[serde(rename = "edit")]
    EditText {
        /// The text to find: it must occur exactly once in the file, within a line.
        old: String,
        /// What it becomes.
        new: String,
    },
    /// End the episode and submit the code for grading.
    Finish,
}

impl ToolCall {
    /// Whether the call changes the code (`write_code`, `replace` or `edit`).
    pub fn is_edit(&self) -> bool {
        matches!(
            self,
            ToolCall::WriteCode { .. } | ToolCall::ReplaceText { .. } | ToolCall::EditText { .. }
        )
    }

    /// The tool's name as the policy writes it.
    pub fn tool_name(&self) -> &'static str {
        match self {
            ToolCall::RunTests => "run_tests",
            ToolCall::ReadCode => "read_code",
            ToolCall::WriteCode { .. } => "write_code",
            ToolCall::ReplaceText { .. } => "replace",
            ToolCall::EditText { .. } => "edit",
            ToolCall::Finish => "finish",
        }
    }

    /// The canonical text of the call (what [`parse_call`] reads back to `self`).
    pub fn to_text(&self) -> String {
        match self {
            ToolCall::WriteCode {
                line,
                text,
                mode: EditMode::Replace,
            } => format!("write_code({line}, \"{text}\")"),
            ToolCall::WriteCode {
                line,
                text,
                mode: EditMode::Insert,
            } => format!("write_code({line}, \"{text}\", insert)"),
            ToolCall::WriteCode {
                line,
                mode: EditMode::Delete,
                ..
            } => format!("write_code({line}, delete)"),
            ToolCall::ReplaceText { line, old, new } => {
                format!("replace({line}, \"{old}\", \"{new}\")")
            }
            ToolCall::EditText { old, new } => format!("edit(\"{old}\", \"{new}\")"),
            other => format!("{}()", other.tool_name()),
        }
    }
}

/// The tool list shown in every prompt, with the optional tools the harness has
/// (`HarnessConfig::replace_tool`, `HarnessConfig::edit_tool`).
pub fn tool_spec(replace_tool: bool, edit_tool: bool) -> String {
    let mut spec = "tools: run_tests() read_code() write_code(line, \"text\") \
write_code(line, \"text\", insert) write_code(line, delete)"
        .to_owned();
    if replace_tool {
        spec.push_str(" replace(line, \"old\", \"new\")");
    }
    if edit_tool {
        spec.push_str(" edit(\"old\", \"new\")");
    }
    spec.push_str(" finish()");
    spec
}

/// Parses one action's text into a call, or says why it is not one.
pub fn parse_call(text: &str) -> Result<ToolCall, String> {
    let text = text.trim();
    let Some(open) = text.find('(') else {
        return Err("malformed call: expected name(arguments)".to_owned());
    };
    let name = text[..open].trim();
    let Some(args) = text[open + 1..].strip_suffix(')') else {
        return Err("malformed call: it must end with ')'".to_owned());
    };
    let args = args.trim();
    match name {
        "run_tests" | "read_code" | "finish" => {
            if !args.is_empty() {
                return Err(format!("malformed call: {name} takes no arguments"));
            }
            Ok(match name {
                "run_tests" => ToolCall::RunTests,
                "read_code" => ToolCall::ReadCode,
                _ => ToolCall::Finish,
            })
        }
        "write_code" => parse_write(args),
        "replace" => parse_replace(args),
        "edit" => parse_edit(args),
        _ => Err(unknown_tool(name)),
    }
}

/// The message for a call to a tool the harness does not have.
pub fn unknown_tool(name: &str) -> String {
    format!(
        "malformed call: unknown tool '{}'; tools are run_tests read_code write_code finish",
        truncate(name, 24)
    )
}

fn truncate(text: &str, max_chars: usize) -> String {
    text.chars().take(max_chars).collect()
}

/// The line number before the first comma of `args`, and what follows that comma.
fn line_and_rest<'a>(args: &'a str, tool: &str) -> Result<(usize, &'a str), String> {
    let Some((line_text, rest)) = args.split_once(',') else {
        return Err(format!(
            "malformed call: {tool} needs a line number and a text"
        ));
    };
    let line: usize = line_text
        .trim()
        .parse()
        .ok()
        .filter(|&l| l >= 1)
        .ok_or_else(|| "malformed call: the line number must be an integer >= 1".to_owned())?;
    Ok((line, rest.trim()))
}

/// The text between the double quotes that open `rest`, and what follows them.
fn quoted(rest: &str) -> Result<(&str, &str), String> {
    let Some(inner) = rest.strip_prefix('"') else {
        return Err("malformed call: the text must be in double quotes".to_owned());
    };
    let Some(close) = inner.find('"') else {
        return Err("malformed call: the text has no closing quote".to_owned());
    };
    Ok((&inner[..close], inner[close + 1..].trim()))
}

/// The old and the new text of `"old", "new"`, and nothing after them.
fn old_and_new<'a>(rest: &'a str, tool: &str) -> Result<(&'a str, &'a str), String> {
    let (old, tail) = quoted(rest)?;
    let Some(tail) = tail.strip_prefix(',') else {
        return Err(format!(
            "malformed call: {tool} needs an old and a new text"
        ));
    };
    let (new, tail) = quoted(tail.trim())?;
    if !tail.is_empty() {
        return Err("malformed call: nothing may follow the new text".to_owned());
    }
    Ok((old, new))
}

fn parse_replace(args: &str) -> Result<ToolCall, String> {
    let (line, rest) = line_and_rest(args, "replace")?;
    let (old, new) = old_and_new(rest, "replace")?;
    Ok(ToolCall::ReplaceText {
        line,
        old: old.to_owned(),
        new: new.to_owned(),
    })
}

fn parse_edit(args: &str) -> Result<ToolCall, String> {
    let (old, new) = old_and_new(args, "edit")?;
    Ok(ToolCall::EditText {
        old: old.to_owned(),
        new: new.to_owned(),
    })
}

fn parse_write(args: &str) -> Result<ToolCall, String> {
    let (line, rest) = line_and_rest(args, "write_code")?;
    if rest == "delete" {
        return Ok(ToolCall::WriteCode {
            line,
            text: String::new(),
            mode: EditMode::Delete,
        });
    }
    let (text, tail) = quoted(rest)?;
    let text = text.to_owned();
    let mode = match tail {
        "" => EditMode::Replace,
        _ => match tail.strip_prefix(',').map(str::trim) {
            Some("insert") => EditMode::Insert,
            Some("replace") => EditMode::Replace,
            _ => {
                return Err(
                    "malformed call: after the text only ', insert' or ', replace' may follow"
                        .to_owned(),
                );
            }
        },
    };
    Ok(ToolCall::WriteCode { line, text, mode })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_calls_round_trip() {
        let calls = [
            ToolCall::RunTests,
            ToolCall::ReadCode,
            ToolCall::Finish,
            ToolCall::WriteCode {
                line: 2,
                text: "best = xs[0]".into(),
                mode: EditMode::Replace,
            },
            ToolCall::WriteCode {
                line: 9,
                text: "end".into(),
                mode: EditMode::Insert,
            },
            ToolCall::WriteCode {
                line: 4,
                text: String::new(),
                mode: EditMode::Delete,
            },
            ToolCall::ReplaceText {
                line: 3,
                old: "0".into(),
                new: "xs[0]".into(),
            },
            ToolCall::EditText {
                old: "best = 0".into(),
                new: "best = xs[0]".into(),
            },
        ];
        for call in calls {
            assert_eq!(parse_call(&call.to_text()), Ok(call.clone()));
            let edits = ["write_code", "replace", "edit"];
            assert_eq!(
                call.is_edit(),
                edits.contains(&call.tool_name()),
                "{call:?}"
            );
        }
    }

    #[test]
    fn the_tool_list_names_the_optional_tools_the_harness_has() {
        let plain = tool_spec(false, false);
        assert!(
            plain.ends_with("write_code(line, delete) finish()"),
            "{plain}"
        );
        assert!(!plain.contains("replace(") && !plain.contains("edit("));
        let both = tool_spec(true, true);
        assert!(both.contains("replace(line, \"old\", \"new\") edit(\"old\", \"new\") finish()"));
    }

    #[test]
    fn malformed_calls_explain_themselves() {
        let cases = [
            ("run_tests", "expected name(arguments)"),
            ("run_tests(", "must end with ')'"),
            ("run_tests(1)", "takes no arguments"),
            ("compile()", "unknown tool"),
            ("write_code(0, \"x = 1\")", "integer >= 1"),
            ("write_code(2, x = 1)", "double quotes"),
            ("write_code(2, \"x = 1)", "closing quote"),
            ("write_code(2, \"x = 1\", append)", "only ', insert'"),
            ("write_code()", "line number and a text"),
            ("replace(3)", "line number and a text"),
            ("replace(3, \"a\")", "an old and a new text"),
            ("replace(3, \"a\", b)", "double quotes"),
            ("replace(3, \"a\", \"b\", insert)", "nothing may follow"),
            ("edit()", "double quotes"),
            ("edit(\"a\")", "an old and a new text"),
            ("edit(2, \"a\", \"b\")", "double quotes"),
            ("edit(\"a\", \"b\", \"c\")", "nothing may follow"),
        ];
        for (text, needle) in cases {
            let message = parse_call(text).unwrap_err();
            assert!(message.contains(needle), "{text}: {message}");
        }
    }
}

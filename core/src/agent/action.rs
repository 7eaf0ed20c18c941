//! The action format: the text a policy emits for a tool call, and its parser.
//!
//! ```text
//! run_tests()
//! read_code()
//! write_code(3, "best = xs[0]")          replace line 3
//! write_code(3, "best = xs[0]", insert)  insert a new line before line 3 (n+1 appends)
//! write_code(3, delete)                  delete line 3
//! finish()
//! ```
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
    /// End the episode and submit the code for grading.
    Finish,
}

impl ToolCall {
    /// The tool's name as the policy writes it.
    pub fn tool_name(&self) -> &'static str {
        match self {
            ToolCall::RunTests => "run_tests",
            ToolCall::ReadCode => "read_code",
            ToolCall::WriteCode { .. } => "write_code",
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
            other => format!("{}()", other.tool_name()),
        }
    }
}

/// The tool list shown in every prompt.
pub const TOOL_SPEC: &str = "tools: run_tests() read_code() write_code(line, \"text\") \
write_code(line, \"text\", insert) write_code(line, delete) finish()";

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
        _ => Err(format!(
            "malformed call: unknown tool '{}'; tools are run_tests read_code write_code finish",
            truncate(name, 24)
        )),
    }
}

fn truncate(text: &str, max_chars: usize) -> String {
    text.chars().take(max_chars).collect()
}

fn parse_write(args: &str) -> Result<ToolCall, String> {
    let Some((line_text, rest)) = args.split_once(',') else {
        return Err("malformed call: write_code needs a line number and a text".to_owned());
    };
    let line_text = line_text.trim();
    let line: usize = line_text
        .parse()
        .ok()
        .filter(|&l| l >= 1)
        .ok_or_else(|| "malformed call: the line number must be an integer >= 1".to_owned())?;
    let rest = rest.trim();
    if rest == "delete" {
        return Ok(ToolCall::WriteCode {
            line,
            text: String::new(),
            mode: EditMode::Delete,
        });
    }
    let Some(quoted) = rest.strip_prefix('"') else {
        return Err("malformed call: the text must be in double quotes".to_owned());
    };
    let Some(close) = quoted.find('"') else {
        return Err("malformed call: the text has no closing quote".to_owned());
    };
    let text = quoted[..close].to_owned();
    let tail = quoted[close + 1..].trim();
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
        ];
        for call in calls {
            assert_eq!(parse_call(&call.to_text()), Ok(call.clone()));
        }
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
        ];
        for (text, needle) in cases {
            let message = parse_call(text).unwrap_err();
            assert!(message.contains(needle), "{text}: {message}");
        }
    }
}

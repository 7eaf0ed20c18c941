//! A program's block structure: from parsed lines to a tree of statements.
//!
//! Blocks open with `if`, `else`, `for` or `while` lines and close with `end`; a broken
//! structure (an `end` too many, a loop without `end`) is a [`LangError`] naming the
//! line, which the harness shows to the policy.

use super::lang::{Expr, Line, LoopRange, parse_line};

/// A statement with the 1-based source line it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stmt {
    /// 1-based line number in the listing.
    pub line: usize,
    /// What it does.
    pub kind: StmtKind,
}

/// A statement of the block tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StmtKind {
    /// `name = expr`.
    Assign(String, Expr),
    /// `return expr`.
    Return(Expr),
    /// `if cond: then else: otherwise end`.
    If(Expr, Vec<Stmt>, Vec<Stmt>),
    /// `for var in range: body end`.
    For(String, LoopRange, Vec<Stmt>),
    /// `while cond: body end`.
    While(Expr, Vec<Stmt>),
}

/// A parsed function: header and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    /// The function's name.
    pub name: String,
    /// Parameter names.
    pub params: Vec<String>,
    /// The body.
    pub body: Vec<Stmt>,
}

/// A program error: the 1-based line (0 when it concerns the whole program) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LangError {
    /// 1-based line number, or 0 for the program as a whole.
    pub line: usize,
    /// What went wrong.
    pub message: String,
}

impl core::fmt::Display for LangError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if self.line == 0 {
            write!(f, "{}", self.message)
        } else {
            write!(f, "line {}: {}", self.line, self.message)
        }
    }
}

/// Parses a whole program (one string per line).
pub fn parse_program(lines: &[String]) -> Result<Function, LangError> {
    let parsed: Vec<Line> = lines
        .iter()
        .enumerate()
        .map(|(i, text)| {
            parse_line(text).map_err(|message| LangError {
                line: i + 1,
                message,
            })
        })
        .collect::<Result<_, _>>()?;
    let Some(Line::Def(name, params)) = parsed.first().cloned() else {
        return Err(LangError {
            line: 1,
            message: "the program must start with a def line".to_owned(),
        });
    };
    let mut pos = 1;
    let (body, closer) = block(&parsed, &mut pos)?;
    if let Some(line) = closer {
        return Err(LangError {
            line,
            message: "'end' or 'else' without an open block".to_owned(),
        });
    }
    Ok(Function { name, params, body })
}

/// Reads statements from `pos` until an `end`/`else` (returned with its line) or the end.
fn block(lines: &[Line], pos: &mut usize) -> Result<(Vec<Stmt>, Option<usize>), LangError> {
    let mut out = Vec::new();
    while *pos < lines.len() {
        let line = *pos + 1;
        let current = lines[*pos].clone();
        *pos += 1;
        let unclosed = |what: &str| LangError {
            line,
            message: format!("this {what} block has no 'end'"),
        };
        let kind = match current {
            Line::End | Line::Else => {
                *pos -= 1;
                return Ok((out, Some(line)));
            }
            Line::Def(..) => {
                return Err(LangError {
                    line,
                    message: "a second def is not allowed".to_owned(),
                });
            }
            Line::Assign(name, value) => StmtKind::Assign(name, value),
            Line::Return(value) => StmtKind::Return(value),
            Line::If(cond) => {
                let (then, closer) = block(lines, pos)?;
                let closer = closer.ok_or_else(|| unclosed("if"))?;
                let otherwise = if lines[closer - 1] == Line::Else {
                    *pos += 1;
                    let (otherwise, end) = block(lines, pos)?;
                    let end = end.ok_or_else(|| unclosed("else"))?;
                    if lines[end - 1] != Line::End {
                        return Err(LangError {
                            line: end,
                            message: "a second 'else' in one if".to_owned(),
                        });
                    }
                    otherwise
                } else {
                    Vec::new()
                };
                *pos += 1;
                StmtKind::If(cond, then, otherwise)
            }
            Line::For(var, range) => StmtKind::For(var, range, loop_body(lines, pos, line)?),
            Line::While(cond) => StmtKind::While(cond, loop_body(lines, pos, line)?),
        };
        out.push(Stmt { line, kind });
    }
    Ok((out, None))
}

fn loop_body(lines: &[Line], pos: &mut usize, line: usize) -> Result<Vec<Stmt>, LangError> {
    let (body, closer) = block(lines, pos)?;
    match closer {
        Some(end) if lines[end - 1] == Line::End => {
            *pos += 1;
            Ok(body)
        }
        Some(other) => Err(LangError {
            line: other,
            message: "'else' without an if".to_owned(),
        }),
        None => Err(LangError {
            line,
            message: "this loop has no 'end'".to_owned(),
        }),
    }
}

/// The nesting depth of each line, for indenting a listing (tolerant of broken code).
pub fn indent_levels(lines: &[String]) -> Vec<usize> {
    let mut depth = 1usize;
    lines
        .iter()
        .enumerate()
        .map(|(i, text)| {
            if i == 0 {
                return 0;
            }
            match parse_line(text) {
                Ok(Line::End) => {
                    depth = depth.saturating_sub(1).max(1);
                    depth
                }
                Ok(Line::Else) => depth.saturating_sub(1).max(1),
                Ok(Line::If(_) | Line::For(..) | Line::While(_)) => {
                    depth += 1;
                    depth - 1
                }
                _ => depth,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn program(text: &str) -> Vec<String> {
        text.lines().map(str::to_owned).collect()
    }

    #[test]
    fn find_max_parses_into_nested_blocks() {
        let f = parse_program(&program(
            "def find_max(xs):\nbest = 0\nfor x in xs:\nif x > best:\nbest = x\nend\nend\nreturn best",
        ))
        .unwrap();
        assert_eq!(f.name, "find_max");
        assert_eq!(f.body.len(), 3);
        let StmtKind::For(_, _, body) = &f.body[1].kind else {
            panic!("expected a loop")
        };
        assert_eq!(body[0].line, 4);
    }

    #[test]
    fn missing_end_names_the_opening_line() {
        let err = parse_program(&program("def f(xs):\nfor x in xs:\nreturn x")).unwrap_err();
        assert_eq!(err.line, 2);
    }

    #[test]
    fn listing_indentation_follows_blocks() {
        let lines = program("def f(xs):\nif true:\nx = 1\nelse:\nx = 2\nend\nreturn x");
        assert_eq!(indent_levels(&lines), vec![0, 1, 2, 1, 2, 1, 1]);
    }
}

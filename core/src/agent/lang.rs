//! The tiny language the repair tasks are written in: its lexer, line grammar and
//! block structure.
//!
//! A program is a list of lines. Line 1 is the header `def name(xs):`; the others are
//! single statements. Blocks open with a line ending in `:` (`if`, `else`, `for`,
//! `while`) and close with a line `end`, so a program can be edited one line at a time
//! and indentation carries no meaning (listings add it for the reader).
//!
//! ```text
//! statement := name = expr | return expr | if expr: | else: | end
//!            | for name in expr: | for name in range(expr, expr): | while expr:
//! expr      := or-chain of and-chains of [not] comparisons of sums of products of
//!              unary minus of postfix indexing of atoms
//! atom      := integer | true | false | name | len(expr) | [expr, ...] | (expr)
//! ```
//!
//! ## Design
//! - Parsing never panics and never recurses without bound: expression nesting is
//!   capped at [`MAX_NESTING`]; a line that breaks the grammar is an error message that
//!   the harness shows to the policy as an observation.

/// The deepest expression nesting the parser accepts.
pub const MAX_NESTING: usize = 32;
/// The longest line (in characters) the parser accepts.
pub const MAX_LINE_CHARS: usize = 200;

/// A lexical token of the language.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lexeme {
    /// An identifier or keyword.
    Word(String),
    /// A non-negative integer literal.
    Int(i64),
    /// An operator or punctuation mark.
    Sym(&'static str),
}

const SYMBOLS: [&str; 21] = [
    "==", "!=", "<=", ">=", "<", ">", "=", "+", "-", "*", "/", "%", "(", ")", "[", "]", ",", ":",
    "\"", "'", ".",
];

/// Words that cannot name a variable.
pub const KEYWORDS: [&str; 15] = [
    "def", "if", "else", "for", "in", "range", "while", "return", "end", "and", "or", "not",
    "true", "false", "len",
];

/// Splits one line into lexemes.
pub fn lex(text: &str) -> Result<Vec<Lexeme>, String> {
    if text.chars().count() > MAX_LINE_CHARS {
        return Err(format!("line longer than {MAX_LINE_CHARS} characters"));
    }
    let mut out = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == ' ' || c == '\t' {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < chars.len() && chars[i].is_ascii_digit() {
                i += 1;
            }
            let digits: String = chars[start..i].iter().collect();
            let value = digits
                .parse::<i64>()
                .map_err(|_| format!("number {digits} is too large"))?;
            out.push(Lexeme::Int(value));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(Lexeme::Word(chars[start..i].iter().collect()));
        } else {
            let rest: String = chars[i..chars.len().min(i + 2)].iter().collect();
            let Some(sym) = SYMBOLS.iter().find(|s| rest.starts_with(**s)) else {
                return Err(format!("unexpected character {c:?}"));
            };
            out.push(Lexeme::Sym(sym));
            i += sym.len();
        }
    }
    Ok(out)
}

/// A binary operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    /// `+` (integers add, lists concatenate).
    Add,
    /// `-`.
    Sub,
    /// `*`.
    Mul,
    /// `/` (truncating).
    Div,
    /// `%` (remainder with the sign of the dividend).
    Rem,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
    /// `==`.
    Eq,
    /// `!=`.
    Ne,
    /// `and` (short-circuit).
    And,
    /// `or` (short-circuit).
    Or,
}

/// An expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    /// An integer literal.
    Int(i64),
    /// `true` or `false`.
    Bool(bool),
    /// A variable.
    Var(String),
    /// `len(e)`.
    Len(Box<Expr>),
    /// `[e, ...]`.
    List(Vec<Expr>),
    /// `list[index]`.
    Index(Box<Expr>, Box<Expr>),
    /// `-e`.
    Neg(Box<Expr>),
    /// `not e`.
    Not(Box<Expr>),
    /// `a op b`.
    Binary(BinOp, Box<Expr>, Box<Expr>),
}

/// What a `for` loop walks over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoopRange {
    /// `for x in list:`.
    Each(Expr),
    /// `for i in range(start, stop):` (stop exclusive).
    Range(Expr, Expr),
}

/// One line of a program, parsed on its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// `def name(params):`.
    Def(String, Vec<String>),
    /// `name = expr`.
    Assign(String, Expr),
    /// `return expr`.
    Return(Expr),
    /// `if expr:`.
    If(Expr),
    /// `else:`.
    Else,
    /// `end`.
    End,
    /// `for var in ...:`.
    For(String, LoopRange),
    /// `while expr:`.
    While(Expr),
}

struct Parser {
    lexemes: Vec<Lexeme>,
    pos: usize,
    depth: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Lexeme> {
        self.lexemes.get(self.pos)
    }

    fn peek_sym(&self, sym: &str) -> bool {
        matches!(self.peek(), Some(Lexeme::Sym(s)) if *s == sym)
    }

    fn peek_word(&self, word: &str) -> bool {
        matches!(self.peek(), Some(Lexeme::Word(w)) if w == word)
    }

    fn expect_sym(&mut self, sym: &str) -> Result<(), String> {
        if self.peek_sym(sym) {
            self.pos += 1;
            Ok(())
        } else {
            Err(format!("expected '{sym}' {}", self.here()))
        }
    }

    fn expect_word(&mut self, word: &str) -> Result<(), String> {
        if self.peek_word(word) {
            self.pos += 1;
            Ok(())
        } else {
            Err(format!("expected '{word}' {}", self.here()))
        }
    }

    fn here(&self) -> String {
        match self.peek() {
            None => "at the end of the line".to_owned(),
            Some(Lexeme::Word(w)) => format!("before '{w}'"),
            Some(Lexeme::Int(v)) => format!("before '{v}'"),
            Some(Lexeme::Sym(s)) => format!("before '{s}'"),
        }
    }

    fn name(&mut self) -> Result<String, String> {
        match self.peek() {
            Some(Lexeme::Word(w)) if !KEYWORDS.contains(&w.as_str()) => {
                let w = w.clone();
                self.pos += 1;
                Ok(w)
            }
            _ => Err(format!("expected a variable name {}", self.here())),
        }
    }

    fn finish(&self) -> Result<(), String> {
        if self.pos == self.lexemes.len() {
            Ok(())
        } else {
            Err(format!("unexpected text {}", self.here()))
        }
    }

    fn expr(&mut self) -> Result<Expr, String> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return Err("expression nested too deeply".to_owned());
        }
        let result = self.or_chain();
        self.depth -= 1;
        result
    }

    fn or_chain(&mut self) -> Result<Expr, String> {
        let mut left = self.and_chain()?;
        while self.peek_word("or") {
            self.pos += 1;
            let right = self.and_chain()?;
            left = Expr::Binary(BinOp::Or, Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn and_chain(&mut self) -> Result<Expr, String> {
        let mut left = self.negation()?;
        while self.peek_word("and") {
            self.pos += 1;
            let right = self.negation()?;
            left = Expr::Binary(BinOp::And, Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn negation(&mut self) -> Result<Expr, String> {
        if self.peek_word("not") {
            self.pos += 1;
            self.depth += 1;
            if self.depth > MAX_NESTING {
                return Err("expression nested too deeply".to_owned());
            }
            let inner = self.negation();
            self.depth -= 1;
            return Ok(Expr::Not(Box::new(inner?)));
        }
        self.comparison()
    }

    fn comparison(&mut self) -> Result<Expr, String> {
        let left = self.sum()?;
        let op = match self.peek() {
            Some(Lexeme::Sym("<")) => BinOp::Lt,
            Some(Lexeme::Sym("<=")) => BinOp::Le,
            Some(Lexeme::Sym(">")) => BinOp::Gt,
            Some(Lexeme::Sym(">=")) => BinOp::Ge,
            Some(Lexeme::Sym("==")) => BinOp::Eq,
            Some(Lexeme::Sym("!=")) => BinOp::Ne,
            _ => return Ok(left),
        };
        self.pos += 1;
        let right = self.sum()?;
        Ok(Expr::Binary(op, Box::new(left), Box::new(right)))
    }

    fn sum(&mut self) -> Result<Expr, String> {
        let mut left = self.product()?;
        loop {
            let op = match self.peek() {
                Some(Lexeme::Sym("+")) => BinOp::Add,
                Some(Lexeme::Sym("-")) => BinOp::Sub,
                _ => return Ok(left),
            };
            self.pos += 1;
            let right = self.product()?;
            left = Expr::Binary(op, Box::new(left), Box::new(right));
        }
    }

    fn product(&mut self) -> Result<Expr, String> {
        let mut left = self.unary()?;
        loop {
            let op = match self.peek() {
                Some(Lexeme::Sym("*")) => BinOp::Mul,
                Some(Lexeme::Sym("/")) => BinOp::Div,
                Some(Lexeme::Sym("%")) => BinOp::Rem,
                _ => return Ok(left),
            };
            self.pos += 1;
            let right = self.unary()?;
            left = Expr::Binary(op, Box::new(left), Box::new(right));
        }
    }

    fn unary(&mut self) -> Result<Expr, String> {
        if self.peek_sym("-") {
            self.pos += 1;
            self.depth += 1;
            if self.depth > MAX_NESTING {
                return Err("expression nested too deeply".to_owned());
            }
            let inner = self.unary();
            self.depth -= 1;
            return Ok(Expr::Neg(Box::new(inner?)));
        }
        self.postfix()
    }

    fn postfix(&mut self) -> Result<Expr, String> {
        let mut base = self.atom()?;
        while self.peek_sym("[") {
            self.pos += 1;
            let index = self.expr()?;
            self.expect_sym("]")?;
            base = Expr::Index(Box::new(base), Box::new(index));
        }
        Ok(base)
    }

    fn atom(&mut self) -> Result<Expr, String> {
        let Some(lexeme) = self.peek().cloned() else {
            return Err("expected a value at the end of the line".to_owned());
        };
        self.pos += 1;
        match lexeme {
            Lexeme::Int(v) => Ok(Expr::Int(v)),
            Lexeme::Word(w) => match w.as_str() {
                "true" => Ok(Expr::Bool(true)),
                "false" => Ok(Expr::Bool(false)),
                "len" => {
                    self.expect_sym("(")?;
                    let inner = self.expr()?;
                    self.expect_sym(")")?;
                    Ok(Expr::Len(Box::new(inner)))
                }
                _ if KEYWORDS.contains(&w.as_str()) => {
                    Err(format!("'{w}' cannot be used as a value"))
                }
                _ => Ok(Expr::Var(w)),
            },
            Lexeme::Sym("(") => {
                let inner = self.expr()?;
                self.expect_sym(")")?;
                Ok(inner)
            }
            Lexeme::Sym("[") => self.list_tail(),
            Lexeme::Sym(s) => Err(format!("unexpected '{s}'")),
        }
    }

    fn list_tail(&mut self) -> Result<Expr, String> {
        let mut items = Vec::new();
        if self.peek_sym("]") {
            self.pos += 1;
            return Ok(Expr::List(items));
        }
        loop {
            items.push(self.expr()?);
            if self.peek_sym(",") {
                self.pos += 1;
            } else {
                self.expect_sym("]")?;
                return Ok(Expr::List(items));
            }
        }
    }

    fn block_header(&mut self) -> Result<Line, String> {
        let Some(Lexeme::Word(keyword)) = self.peek().cloned() else {
            return Err("a statement starts with a name or a keyword".to_owned());
        };
        self.pos += 1;
        let line = match keyword.as_str() {
            "if" => Line::If(self.expr()?),
            "while" => Line::While(self.expr()?),
            "else" => Line::Else,
            "for" => {
                let var = self.name()?;
                self.expect_word("in")?;
                if self.peek_word("range") {
                    self.pos += 1;
                    self.expect_sym("(")?;
                    let start = self.expr()?;
                    self.expect_sym(",")?;
                    let stop = self.expr()?;
                    self.expect_sym(")")?;
                    Line::For(var, LoopRange::Range(start, stop))
                } else {
                    Line::For(var, LoopRange::Each(self.expr()?))
                }
            }
            "def" => {
                let name = self.name()?;
                self.expect_sym("(")?;
                let mut params = vec![self.name()?];
                while self.peek_sym(",") {
                    self.pos += 1;
                    params.push(self.name()?);
                }
                self.expect_sym(")")?;
                Line::Def(name, params)
            }
            _ => return Err(format!("unknown statement '{keyword}'")),
        };
        self.expect_sym(":")?;
        self.finish()?;
        Ok(line)
    }

    fn line(&mut self) -> Result<Line, String> {
        if self.lexemes.is_empty() {
            return Err("empty line".to_owned());
        }
        if self.peek_word("end") {
            self.pos += 1;
            self.finish()?;
            return Ok(Line::End);
        }
        if self.peek_word("return") {
            self.pos += 1;
            let value = self.expr()?;
            self.finish()?;
            return Ok(Line::Return(value));
        }
        let is_assign = matches!(self.lexemes.get(1), Some(Lexeme::Sym("=")));
        if is_assign {
            let target = self.name()?;
            self.expect_sym("=")?;
            let value = self.expr()?;
            self.finish()?;
            return Ok(Line::Assign(target, value));
        }
        self.block_header()
    }
}

/// Parses one line of source text.
pub fn parse_line(text: &str) -> Result<Line, String> {
    let lexemes = lex(text)?;
    Parser {
        lexemes,
        pos: 0,
        depth: 0,
    }
    .line()
}

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
    fn bad_lines_are_errors_not_panics() {
        for text in [
            "best = = 0",
            "if x >",
            "for in xs:",
            "return",
            "(((",
            "x = [1,",
            "%",
        ] {
            assert!(parse_line(text).is_err(), "{text}");
        }
        let deep = format!("x = {}1{}", "(".repeat(100), ")".repeat(100));
        assert!(parse_line(&deep).is_err());
    }

    #[test]
    fn listing_indentation_follows_blocks() {
        let lines = program("def f(xs):\nif true:\nx = 1\nelse:\nx = 2\nend\nreturn x");
        assert_eq!(indent_levels(&lines), vec![0, 1, 2, 1, 2, 1, 1]);
    }
}

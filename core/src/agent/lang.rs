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
//! The block structure of a whole program is built in [`super::program`].
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

/// The words of `line` that can name a variable (every word but the keywords), in
/// order; a line that does not lex has none.
pub fn variable_names(line: &str) -> Vec<String> {
    lex(line)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|lexeme| match lexeme {
            Lexeme::Word(word) if !KEYWORDS.contains(&word.as_str()) => Some(word),
            _ => None,
        })
        .collect()
}

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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn comparison_binds_looser_than_arithmetic() {
        let Line::If(Expr::Binary(BinOp::Gt, _, right)) = parse_line("if x > y + 1:").unwrap()
        else {
            panic!("expected a comparison");
        };
        assert!(matches!(*right, Expr::Binary(BinOp::Add, _, _)));
    }
}

//! The interpreter of the task language: runs a parsed function on one input list.
//!
//! ## Design
//! - Every run is bounded: each executed statement and each loop iteration costs one
//!   step, and a run stops with an error after `step_limit` steps; lists are capped at
//!   [`MAX_LIST_LEN`] elements; arithmetic is checked. So no program, however broken,
//!   hangs, overflows or exhausts memory.
//! - A failure is a [`LangError`] value (line and message) that the harness turns into
//!   an observation; nothing here panics.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::lang::{BinOp, Expr, LoopRange};
use super::program::{Function, LangError, Stmt, StmtKind};

/// The longest list a program may build.
pub const MAX_LIST_LEN: usize = 1000;
/// The default step budget of one run.
pub const DEFAULT_STEP_LIMIT: u64 = 10_000;

/// A runtime value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Value {
    /// A boolean.
    Bool(bool),
    /// A 64-bit integer.
    Int(i64),
    /// A list of integers.
    List(Vec<i64>),
}

impl core::fmt::Display for Value {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(v) => write!(f, "{v}"),
            Value::List(items) => write!(f, "{}", format_list(items)),
        }
    }
}

/// `[1, -2, 3]`.
pub fn format_list(items: &[i64]) -> String {
    let parts: Vec<String> = items.iter().map(i64::to_string).collect();
    format!("[{}]", parts.join(", "))
}

struct Machine {
    vars: BTreeMap<String, Value>,
    steps: u64,
    step_limit: u64,
}

enum Flow {
    Next,
    Return(Value),
}

fn err(line: usize, message: impl Into<String>) -> LangError {
    LangError {
        line,
        message: message.into(),
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Bool(_) => "a bool",
        Value::Int(_) => "an int",
        Value::List(_) => "a list",
    }
}

impl Machine {
    fn tick(&mut self, line: usize) -> Result<(), LangError> {
        self.steps += 1;
        if self.steps > self.step_limit {
            Err(err(
                line,
                format!("step limit of {} exceeded", self.step_limit),
            ))
        } else {
            Ok(())
        }
    }

    fn block(&mut self, body: &[Stmt]) -> Result<Flow, LangError> {
        for stmt in body {
            if let Flow::Return(value) = self.stmt(stmt)? {
                return Ok(Flow::Return(value));
            }
        }
        Ok(Flow::Next)
    }

    fn stmt(&mut self, stmt: &Stmt) -> Result<Flow, LangError> {
        let line = stmt.line;
        self.tick(line)?;
        match &stmt.kind {
            StmtKind::Assign(name, value) => {
                let value = self.eval(value, line)?;
                self.vars.insert(name.clone(), value);
                Ok(Flow::Next)
            }
            StmtKind::Return(value) => Ok(Flow::Return(self.eval(value, line)?)),
            StmtKind::If(cond, then, otherwise) => {
                if self.truth(cond, line)? {
                    self.block(then)
                } else {
                    self.block(otherwise)
                }
            }
            StmtKind::While(cond, body) => {
                while self.truth(cond, line)? {
                    self.tick(line)?;
                    if let Flow::Return(value) = self.block(body)? {
                        return Ok(Flow::Return(value));
                    }
                }
                Ok(Flow::Next)
            }
            StmtKind::For(var, LoopRange::Each(list), body) => {
                let items = match self.eval(list, line)? {
                    Value::List(items) => items,
                    other => {
                        return Err(err(
                            line,
                            format!("for-in needs a list, got {}", type_name(&other)),
                        ));
                    }
                };
                for item in items {
                    self.tick(line)?;
                    self.vars.insert(var.clone(), Value::Int(item));
                    if let Flow::Return(value) = self.block(body)? {
                        return Ok(Flow::Return(value));
                    }
                }
                Ok(Flow::Next)
            }
            StmtKind::For(var, LoopRange::Range(start, stop), body) => {
                let start = self.int(start, line)?;
                let stop = self.int(stop, line)?;
                // The range is walked lazily: a huge bound costs steps, not memory.
                let mut i = start;
                while i < stop {
                    self.tick(line)?;
                    self.vars.insert(var.clone(), Value::Int(i));
                    if let Flow::Return(value) = self.block(body)? {
                        return Ok(Flow::Return(value));
                    }
                    i += 1;
                }
                Ok(Flow::Next)
            }
        }
    }

    fn truth(&mut self, cond: &Expr, line: usize) -> Result<bool, LangError> {
        match self.eval(cond, line)? {
            Value::Bool(b) => Ok(b),
            other => Err(err(
                line,
                format!("a condition must be a bool, got {}", type_name(&other)),
            )),
        }
    }

    fn int(&mut self, expr: &Expr, line: usize) -> Result<i64, LangError> {
        match self.eval(expr, line)? {
            Value::Int(v) => Ok(v),
            other => Err(err(
                line,
                format!("expected an int, got {}", type_name(&other)),
            )),
        }
    }

    fn eval(&mut self, expr: &Expr, line: usize) -> Result<Value, LangError> {
        match expr {
            Expr::Int(v) => Ok(Value::Int(*v)),
            Expr::Bool(b) => Ok(Value::Bool(*b)),
            Expr::Var(name) => self
                .vars
                .get(name)
                .cloned()
                .ok_or_else(|| err(line, format!("name '{name}' is not defined"))),
            Expr::Len(inner) => match self.eval(inner, line)? {
                Value::List(items) => Ok(Value::Int(items.len() as i64)),
                other => Err(err(
                    line,
                    format!("len needs a list, got {}", type_name(&other)),
                )),
            },
            Expr::List(items) => {
                let values = items
                    .iter()
                    .map(|item| self.int(item, line))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Value::List(values))
            }
            Expr::Index(list, index) => {
                let Value::List(items) = self.eval(list, line)? else {
                    return Err(err(line, "only a list can be indexed"));
                };
                let index = self.int(index, line)?;
                usize::try_from(index)
                    .ok()
                    .and_then(|i| items.get(i).copied())
                    .map(Value::Int)
                    .ok_or_else(|| {
                        err(
                            line,
                            format!("index {index} out of range (length {})", items.len()),
                        )
                    })
            }
            Expr::Neg(inner) => {
                let v = self.int(inner, line)?;
                v.checked_neg()
                    .map(Value::Int)
                    .ok_or_else(|| err(line, "integer overflow"))
            }
            Expr::Not(inner) => Ok(Value::Bool(!self.truth(inner, line)?)),
            Expr::Binary(op, a, b) => self.binary(*op, a, b, line),
        }
    }

    fn binary(&mut self, op: BinOp, a: &Expr, b: &Expr, line: usize) -> Result<Value, LangError> {
        match op {
            BinOp::And => return Ok(Value::Bool(self.truth(a, line)? && self.truth(b, line)?)),
            BinOp::Or => return Ok(Value::Bool(self.truth(a, line)? || self.truth(b, line)?)),
            _ => {}
        }
        let left = self.eval(a, line)?;
        let right = self.eval(b, line)?;
        match (op, left, right) {
            (BinOp::Eq, l, r) => Ok(Value::Bool(l == r)),
            (BinOp::Ne, l, r) => Ok(Value::Bool(l != r)),
            (BinOp::Add, Value::List(mut l), Value::List(r)) => {
                if l.len() + r.len() > MAX_LIST_LEN {
                    return Err(err(
                        line,
                        format!("list longer than {MAX_LIST_LEN} elements"),
                    ));
                }
                l.extend(r);
                Ok(Value::List(l))
            }
            (op, Value::Int(l), Value::Int(r)) => int_op(op, l, r, line),
            (_, l, r) => Err(err(
                line,
                format!(
                    "operator {} cannot combine {} and {}",
                    op_symbol(op),
                    type_name(&l),
                    type_name(&r)
                ),
            )),
        }
    }
}

fn op_symbol(op: BinOp) -> &'static str {
    match op {
        BinOp::Add => "+",
        BinOp::Sub => "-",
        BinOp::Mul => "*",
        BinOp::Div => "/",
        BinOp::Rem => "%",
        BinOp::Lt => "<",
        BinOp::Le => "<=",
        BinOp::Gt => ">",
        BinOp::Ge => ">=",
        BinOp::Eq => "==",
        BinOp::Ne => "!=",
        BinOp::And => "and",
        BinOp::Or => "or",
    }
}

fn int_op(op: BinOp, l: i64, r: i64, line: usize) -> Result<Value, LangError> {
    let checked = |v: Option<i64>| {
        v.map(Value::Int)
            .ok_or_else(|| err(line, "integer overflow"))
    };
    match op {
        BinOp::Add => checked(l.checked_add(r)),
        BinOp::Sub => checked(l.checked_sub(r)),
        BinOp::Mul => checked(l.checked_mul(r)),
        BinOp::Div | BinOp::Rem if r == 0 => Err(err(line, "division by zero")),
        BinOp::Div => checked(l.checked_div(r)),
        BinOp::Rem => checked(l.checked_rem(r)),
        BinOp::Lt => Ok(Value::Bool(l < r)),
        BinOp::Le => Ok(Value::Bool(l <= r)),
        BinOp::Gt => Ok(Value::Bool(l > r)),
        BinOp::Ge => Ok(Value::Bool(l >= r)),
        BinOp::Eq => Ok(Value::Bool(l == r)),
        BinOp::Ne => Ok(Value::Bool(l != r)),
        BinOp::And | BinOp::Or => Err(err(line, "and/or need bools")),
    }
}

/// Runs `function` with its single parameter bound to `input`.
pub fn run(function: &Function, input: &[i64], step_limit: u64) -> Result<Value, LangError> {
    if function.params.len() != 1 {
        return Err(err(
            1,
            format!(
                "the function must take exactly one list, it takes {}",
                function.params.len()
            ),
        ));
    }
    let mut machine = Machine {
        vars: BTreeMap::new(),
        steps: 0,
        step_limit,
    };
    machine
        .vars
        .insert(function.params[0].clone(), Value::List(input.to_vec()));
    match machine.block(&function.body)? {
        Flow::Return(value) => Ok(value),
        Flow::Next => Err(err(0, "the function ended without returning a value")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::program::parse_program;

    fn compile(text: &str) -> Function {
        let lines: Vec<String> = text.lines().map(str::to_owned).collect();
        parse_program(&lines).unwrap()
    }

    const FIND_MAX_BUGGY: &str =
        "def find_max(xs):\nbest = 0\nfor x in xs:\nif x > best:\nbest = x\nend\nend\nreturn best";

    #[test]
    fn article_find_max_bug_returns_zero_on_all_negative_input() {
        let f = compile(FIND_MAX_BUGGY);
        assert_eq!(run(&f, &[3, 1, 2], 100).unwrap(), Value::Int(3));
        assert_eq!(run(&f, &[-2, -5, -8], 100).unwrap(), Value::Int(0));
        assert_eq!(run(&f, &[0], 100).unwrap(), Value::Int(0));
    }

    #[test]
    fn infinite_loop_hits_the_step_limit() {
        let f = compile("def f(xs):\nwhile true:\nx = 1\nend\nreturn 0");
        let e = run(&f, &[], 500).unwrap_err();
        assert!(e.message.contains("step limit"), "{e}");
    }

    #[test]
    fn runtime_errors_name_their_line() {
        let f = compile("def f(xs):\ny = 1\nreturn xs[5]");
        let e = run(&f, &[1], 100).unwrap_err();
        assert_eq!(e.line, 3);
        let f = compile("def f(xs):\nreturn 1 / 0");
        assert_eq!(run(&f, &[], 100).unwrap_err().message, "division by zero");
    }

    #[test]
    fn doubling_a_list_stops_at_the_length_cap() {
        let f = compile("def f(xs):\nys = [1]\nwhile true:\nys = ys + ys\nend\nreturn ys");
        let e = run(&f, &[], 10_000).unwrap_err();
        assert!(e.message.contains("list longer"), "{e}");
    }
}

//! Rendering a problem to the lines of its reference program, each with the bugs it
//! can carry.
//!
//! The program is written in the order header, distractors placed after the header,
//! initial values, distractors placed before the loop, the loop header (with a
//! for-each loop's counter or a while loop's start), the guard, the aggregate's body,
//! the counter's or the while loop's step, the loop's end, the return. Every bug a line
//! offers is one the visible and hidden tests can catch on some inputs; sites where a
//! test almost never could (a slightly wrong map in a max's comparison, which the loop
//! corrects when it meets the element again) offer none.

use super::{Aggregate, BugKind, GuardKind, LoopForm, MAX_OF_NONE, MapKind, Problem, SiteRole};

/// The names a rendered function uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    /// The function.
    pub function: String,
    /// The input list.
    pub list: String,
    /// The loop item (for-each loops).
    pub item: String,
    /// The index (index and while loops, and the counter of for-each index aggregates).
    pub index: String,
    /// The accumulator.
    pub acc: String,
    /// The running value of prefix aggregates.
    pub aux: String,
}

impl Names {
    /// One fixed set of names (`f`, `xs`, `x`, `i`, `acc`, `run`), for enumerating the
    /// sites of a skeleton, where names do not matter.
    pub fn canonical() -> Self {
        Self {
            function: "f".into(),
            list: "xs".into(),
            item: "x".into(),
            index: "i".into(),
            acc: "acc".into(),
            aux: "run".into(),
        }
    }
}

/// A harmless line that moves line numbers: `name = expr`, placed after the header or
/// just before the loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Distractor {
    /// The line's text.
    pub text: String,
    /// Its variable (a wrong `return` may return it).
    pub name: String,
    /// Whether it goes before the loop (after the initial values) instead of after the
    /// header.
    pub before_loop: bool,
}

/// A bug a line can carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mutation {
    /// The operator.
    pub bug: BugKind,
    /// The role of the place.
    pub role: SiteRole,
    /// The line's buggy text.
    pub text: String,
}

/// One line of a rendered function with the bugs it can carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteLine {
    /// The reference text.
    pub text: String,
    /// Its possible bugs (empty for distractors, headers and block ends).
    pub mutations: Vec<Mutation>,
}

struct Lines(Vec<SiteLine>);

impl Lines {
    fn plain(&mut self, text: impl Into<String>) {
        self.0.push(SiteLine {
            text: text.into(),
            mutations: Vec::new(),
        });
    }

    fn with(&mut self, text: impl Into<String>, mutations: Vec<(BugKind, SiteRole, String)>) {
        self.0.push(SiteLine {
            text: text.into(),
            mutations: mutations
                .into_iter()
                .map(|(bug, role, text)| Mutation { bug, role, text })
                .collect(),
        });
    }
}

/// The mapped element `m(e)` and its buggy variants.
fn map_expr(map: MapKind, constant: i64, e: &str) -> (String, Vec<(BugKind, String)>) {
    let (op, swapped) = match map {
        MapKind::Identity => return (e.to_owned(), Vec::new()),
        MapKind::Neg => {
            return (
                format!("-{e}"),
                vec![(BugKind::WrongOperator, e.to_owned())],
            );
        }
        MapKind::Add => ("+", "-"),
        MapKind::Sub => ("-", "+"),
        MapKind::Mul => ("*", "+"),
    };
    (
        format!("{e} {op} {constant}"),
        vec![
            (BugKind::WrongOperator, format!("{e} {swapped} {constant}")),
            (
                BugKind::ConstantOffByOne,
                format!("{e} {op} {}", constant + 1),
            ),
        ],
    )
}

/// A line built around an expression with buggy variants (the mapped element, the
/// guard's condition): its text, and one mutation per variant with the line's `role`.
fn embed(
    (expr, variants): &(String, Vec<(BugKind, String)>),
    role: SiteRole,
    line: impl Fn(&str) -> String,
) -> (String, Vec<(BugKind, SiteRole, String)>) {
    let mutations = variants
        .iter()
        .map(|(bug, variant)| (*bug, role, line(variant)))
        .collect();
    (line(expr), mutations)
}

/// `(m)` when `m` is a sum or difference (so a product binds it whole).
fn grouped(m: &str) -> String {
    if m.contains(" + ") || m.contains(" - ") {
        format!("({m})")
    } else {
        m.to_owned()
    }
}

/// The guard's condition on `e` and its buggy variants.
fn guard_condition(kind: GuardKind, c: i64, e: &str) -> (String, Vec<(BugKind, String)>) {
    use GuardKind::{Eq, Even, Ge, Gt, Le, Lt, Ne, Odd};
    let cmp = |op: &str, k: i64| format!("{e} {op} {k}");
    match kind {
        Even | Odd => {
            let op = kind.operator();
            let flipped = if kind == Even { "!=" } else { "==" };
            (
                format!("{e} % 2 {op} 0"),
                vec![
                    (BugKind::WrongComparison, format!("{e} % 2 {flipped} 0")),
                    (BugKind::ConstantOffByOne, format!("{e} % 3 {op} 0")),
                ],
            )
        }
        _ => {
            let op = kind.operator();
            let flipped = match kind {
                Gt => "<",
                Lt => ">",
                Ge => "<=",
                Le => ">=",
                Eq => "!=",
                _ => "==",
            };
            let mut variants = vec![
                (BugKind::WrongComparison, cmp(flipped, c)),
                (BugKind::OffByOne, cmp(op, c + 1)),
                (BugKind::OffByOne, cmp(op, c - 1)),
            ];
            let loosened = match kind {
                Gt => Some(">="),
                Lt => Some("<="),
                Ge => Some(">"),
                Le => Some("<"),
                Eq | Ne | Even | Odd => None,
            };
            if let Some(other) = loosened {
                variants.push((BugKind::WrongComparison, cmp(other, c)));
            }
            (cmp(op, c), variants)
        }
    }
}

use BugKind::{ConstantOffByOne, OffByOne, WrongComparison, WrongInit, WrongOperator, WrongReturn};
use SiteRole as R;

/// What every part of the rendering needs: the problem, the names, the element
/// expression and its mapped form.
struct Renderer<'a> {
    problem: &'a Problem,
    names: &'a Names,
    /// The element the loop looks at: `x`, or `xs[i]`.
    element: String,
    /// The mapped element and its buggy variants.
    mapped: (String, Vec<(BugKind, String)>),
    out: Lines,
}

impl Renderer<'_> {
    fn aggregate(&self) -> Aggregate {
        self.problem.skeleton.aggregate
    }

    fn loop_form(&self) -> LoopForm {
        self.problem.skeleton.loop_form
    }

    /// A for-each loop over an index aggregate keeps a position counter.
    fn has_counter(&self) -> bool {
        self.loop_form() == LoopForm::Each && self.aggregate().reports_index()
    }

    fn init(&mut self, var: &str, value: &str, wrong: &str) {
        self.out.with(
            format!("{var} = {value}"),
            vec![(WrongInit, R::Init, format!("{var} = {wrong}"))],
        );
    }

    fn initial_values(&mut self) {
        let (b, aux) = (self.names.acc.clone(), self.names.aux.clone());
        match self.aggregate() {
            Aggregate::Sum | Aggregate::Count => self.init(&b, "0", "1"),
            Aggregate::Product => self.init(&b, "1", "0"),
            Aggregate::Max | Aggregate::Min if self.problem.skeleton.aggregate_from_first() => {
                // The map is not mutated here nor in the comparison: the loop revisits the
                // first element, so a slightly wrong value is corrected and no test
                // would catch it.
                let first = map_expr(
                    self.problem.skeleton.map,
                    self.problem.map_constant,
                    &format!("{}[0]", self.names.list),
                );
                self.out.with(
                    format!("{b} = {}", first.0),
                    vec![(WrongInit, R::Init, format!("{b} = 0"))],
                );
            }
            Aggregate::Max => self.init(&b, &MAX_OF_NONE.to_string(), "0"),
            Aggregate::Min => self.init(&b, &(-MAX_OF_NONE).to_string(), "0"),
            Aggregate::FirstIndex => {}
            Aggregate::LastIndex => self.init(&b, "-1", "0"),
            Aggregate::Any => self.init(&b, "false", "true"),
            Aggregate::All | Aggregate::Sorted => self.init(&b, "true", "false"),
            Aggregate::Select => self.init(&b, "[]", "[0]"),
            Aggregate::PrefixSum => {
                self.init(&b, "[]", "[0]");
                self.init(&aux, "0", "1");
            }
            Aggregate::PrefixProduct => {
                self.init(&b, "[]", "[0]");
                self.init(&aux, "1", "0");
            }
        }
    }

    /// The loop header (after a for-each loop's counter or a while loop's start).
    fn loop_header(&mut self) {
        let Names {
            list: l,
            item: x,
            index: i,
            ..
        } = self.names;
        let start = i64::from(self.aggregate() == Aggregate::Sorted);
        match self.loop_form() {
            LoopForm::Each => {
                if self.has_counter() {
                    self.out.with(
                        format!("{i} = 0"),
                        vec![(OffByOne, R::Counter, format!("{i} = 1"))],
                    );
                }
                self.out.plain(format!("for {x} in {l}:"));
            }
            LoopForm::Index => self.out.with(
                format!("for {i} in range({start}, len({l})):"),
                vec![
                    (
                        OffByOne,
                        R::Loop,
                        format!("for {i} in range({}, len({l})):", start + 1),
                    ),
                    (
                        OffByOne,
                        R::Loop,
                        format!("for {i} in range({start}, len({l}) - 1):"),
                    ),
                ],
            ),
            LoopForm::While => {
                self.out.with(
                    format!("{i} = {start}"),
                    vec![(OffByOne, R::Loop, format!("{i} = {}", start + 1))],
                );
                self.out.with(
                    format!("while {i} < len({l}):"),
                    vec![
                        (OffByOne, R::Loop, format!("while {i} < len({l}) - 1:")),
                        (WrongComparison, R::Loop, format!("while {i} <= len({l}):")),
                        (WrongComparison, R::Loop, format!("while {i} > len({l}):")),
                    ],
                );
            }
        }
    }

    /// The guard's `if` line (negated for all); whether there is one.
    fn guard(&mut self) -> bool {
        let Some(kind) = self.problem.skeleton.guard else {
            return false;
        };
        let condition = guard_condition(kind, self.problem.guard_constant, &self.element);
        let negate = self.aggregate() == Aggregate::All;
        let line = |c: &str| {
            if negate {
                format!("if not {c}:")
            } else {
                format!("if {c}:")
            }
        };
        let (text, mutations) = embed(&condition, R::Guard, line);
        self.out.with(text, mutations);
        true
    }

    /// `var = var op m` with the map's bugs and the operator swapped for `swapped`.
    fn accumulate(&mut self, var: &str, op: &str, swapped: &str) {
        let wrap = |m: &str| {
            if op == "*" { grouped(m) } else { m.to_owned() }
        };
        let (text, mut mutations) = embed(&self.mapped, R::Update, |m| {
            format!("{var} = {var} {op} {}", wrap(m))
        });
        mutations.push((
            WrongOperator,
            R::Update,
            format!("{var} = {var} {swapped} {}", grouped(&self.mapped.0)),
        ));
        self.out.with(text, mutations);
    }

    /// The aggregate's work on one element that passed the guard.
    fn body(&mut self) {
        let Names {
            list: l,
            index: i,
            acc: b,
            aux,
            ..
        } = self.names;
        match self.aggregate() {
            Aggregate::Sum => self.accumulate(b, "+", "-"),
            Aggregate::Product => self.accumulate(b, "*", "+"),
            Aggregate::Count => self.out.with(
                format!("{b} = {b} + 1"),
                vec![
                    (WrongOperator, R::Update, format!("{b} = {b} - 1")),
                    (ConstantOffByOne, R::Update, format!("{b} = {b} + 2")),
                ],
            ),
            Aggregate::Max | Aggregate::Min => {
                let (op, flipped) = if self.aggregate() == Aggregate::Max {
                    (">", "<")
                } else {
                    ("<", ">")
                };
                let m = self.mapped.0.clone();
                self.out.with(
                    format!("if {m} {op} {b}:"),
                    vec![(
                        WrongComparison,
                        R::Compare,
                        format!("if {m} {flipped} {b}:"),
                    )],
                );
                let (text, mutations) = embed(&self.mapped, R::Update, |m| format!("{b} = {m}"));
                self.out.with(text, mutations);
                self.out.plain("end");
            }
            Aggregate::FirstIndex => {
                let element = self.element.clone();
                self.out.with(
                    format!("return {i}"),
                    vec![
                        (WrongReturn, R::Return, format!("return {element}")),
                        (OffByOne, R::Return, format!("return {i} + 1")),
                    ],
                );
            }
            Aggregate::LastIndex => self.out.with(
                format!("{b} = {i}"),
                vec![(OffByOne, R::Update, format!("{b} = {i} + 1"))],
            ),
            Aggregate::Any => self.out.plain(format!("{b} = true")),
            Aggregate::All => self.out.plain(format!("{b} = false")),
            Aggregate::Select => {
                let (text, mutations) =
                    embed(&self.mapped, R::Update, |m| format!("{b} = {b} + [{m}]"));
                self.out.with(text, mutations);
            }
            Aggregate::PrefixSum => {
                self.accumulate(aux, "+", "-");
                self.out.plain(format!("{b} = {b} + [{aux}]"));
            }
            Aggregate::PrefixProduct => {
                self.accumulate(aux, "*", "+");
                self.out.plain(format!("{b} = {b} + [{aux}]"));
            }
            Aggregate::Sorted => {
                let (a, c) = (format!("{l}[{i} - 1]"), format!("{l}[{i}]"));
                self.out.with(
                    format!("if {a} > {c}:"),
                    vec![
                        (WrongComparison, R::Compare, format!("if {a} < {c}:")),
                        (WrongComparison, R::Compare, format!("if {a} >= {c}:")),
                    ],
                );
                self.out.plain(format!("{b} = false"));
                self.out.plain("end");
            }
        }
    }

    /// The counter's or the while loop's step.
    fn step(&mut self) {
        let i = &self.names.index;
        if self.has_counter() {
            self.out.with(
                format!("{i} = {i} + 1"),
                vec![
                    (ConstantOffByOne, R::Counter, format!("{i} = {i} + 2")),
                    (WrongOperator, R::Counter, format!("{i} = {i} - 1")),
                ],
            );
        }
        if self.loop_form() == LoopForm::While {
            self.out.with(
                format!("{i} = {i} + 1"),
                vec![(ConstantOffByOne, R::Step, format!("{i} = {i} + 2"))],
            );
        }
    }

    /// The final return and the wrong values it can return instead.
    fn final_return(&mut self, distractors: &[Distractor]) {
        let Names {
            list: l,
            item: x,
            index: i,
            acc: b,
            aux,
            ..
        } = self.names;
        let mut wrong: Vec<String> = match self.loop_form() {
            LoopForm::Each => vec![x.clone()],
            LoopForm::Index | LoopForm::While => vec![i.clone()],
        };
        wrong.extend(distractors.iter().map(|d| d.name.clone()));
        let returned = match self.aggregate() {
            Aggregate::FirstIndex => {
                wrong = vec![format!("len({l})"), "0".to_owned()];
                "-1".to_owned()
            }
            Aggregate::PrefixSum | Aggregate::PrefixProduct => {
                wrong.insert(0, aux.clone());
                b.clone()
            }
            Aggregate::Any => {
                wrong = vec!["false".to_owned()];
                b.clone()
            }
            Aggregate::All | Aggregate::Sorted => {
                wrong = vec!["true".to_owned()];
                b.clone()
            }
            _ => b.clone(),
        };
        let mutations = wrong
            .into_iter()
            .map(|v| (WrongReturn, R::Return, format!("return {v}")))
            .collect();
        self.out.with(format!("return {returned}"), mutations);
    }
}

/// Renders the reference program of `problem` with `names` and `distractors`, each
/// line with the bugs it can carry (see the module docs for the order of the parts).
pub fn render(problem: &Problem, names: &Names, distractors: &[Distractor]) -> Vec<SiteLine> {
    let s = problem.skeleton;
    let element = match s.loop_form {
        LoopForm::Each => names.item.clone(),
        LoopForm::Index | LoopForm::While => format!("{}[{}]", names.list, names.index),
    };
    let mut r = Renderer {
        problem,
        names,
        mapped: map_expr(s.map, problem.map_constant, &element),
        element,
        out: Lines(Vec::new()),
    };
    r.out
        .plain(format!("def {}({}):", names.function, names.list));
    for d in distractors.iter().filter(|d| !d.before_loop) {
        r.out.plain(d.text.clone());
    }
    r.initial_values();
    for d in distractors.iter().filter(|d| d.before_loop) {
        r.out.plain(d.text.clone());
    }
    r.loop_header();
    let guarded = r.guard();
    r.body();
    if guarded {
        r.out.plain("end");
    }
    r.step();
    r.out.plain("end");
    r.final_return(distractors);
    r.out.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::grammar::Skeleton;
    use crate::agent::program::parse_program;

    fn names() -> Names {
        Names::canonical()
    }

    #[test]
    fn every_skeleton_renders_a_program_that_parses_with_every_mutation() {
        let distractors = [Distractor {
            text: "n = len(xs)".into(),
            name: "n".into(),
            before_loop: true,
        }];
        for skeleton in Skeleton::all() {
            let problem = Problem {
                skeleton,
                guard_constant: 2,
                map_constant: 3,
            };
            let lines = render(&problem, &names(), &distractors);
            let code: Vec<String> = lines.iter().map(|l| l.text.clone()).collect();
            parse_program(&code).unwrap_or_else(|e| panic!("{}: {e}\n{code:?}", skeleton.name()));
            for (n, line) in lines.iter().enumerate() {
                for m in &line.mutations {
                    let mut buggy = code.clone();
                    buggy[n] = m.text.clone();
                    assert_ne!(buggy, code, "{} {m:?}", skeleton.name());
                    parse_program(&buggy)
                        .unwrap_or_else(|e| panic!("{} {m:?}: {e}", skeleton.name()));
                }
            }
        }
    }

    #[test]
    fn the_article_find_max_is_a_point_of_the_grammar() {
        let problem = Problem {
            skeleton: Skeleton {
                loop_form: LoopForm::Each,
                guard: None,
                map: MapKind::Identity,
                aggregate: Aggregate::Max,
            },
            guard_constant: 0,
            map_constant: 0,
        };
        let mut n = names();
        n.function = "find_max".into();
        n.acc = "best".into();
        let code: Vec<String> = render(&problem, &n, &[])
            .into_iter()
            .map(|l| l.text)
            .collect();
        assert_eq!(
            code.join("\n"),
            "def find_max(xs):\nbest = xs[0]\nfor x in xs:\nif x > best:\nbest = x\nend\nend\nreturn best"
        );
        assert_eq!(
            problem.spec(),
            "return the largest of the elements of a nonempty list"
        );
    }
}

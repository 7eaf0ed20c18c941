//! The program grammar the repair problems are drawn from: four slots that compose a
//! function over an integer list, the plain-words specification composed from the same
//! slots, and the rendering of a function with every place a bug can go.
//!
//! ## Slots
//! - **loop form** ([`LoopForm`]): `for x in xs:`, `for i in range(0, len(xs)):`, or a
//!   `while i < len(xs):` loop with its own counter;
//! - **guard** ([`GuardKind`], optional): the element compared with a constant
//!   (`>`, `<`, `>=`, `<=`, `==`, `!=`) or tested for parity (`x % 2 == 0`, `!= 0`);
//! - **element map** ([`MapKind`]): `x`, `x + c`, `x - c`, `x * c` or `-x`;
//! - **aggregate** ([`Aggregate`]): sum, count, product, max, min, first index, last
//!   index, any, all, the selected list, running sums, running products, sortedness.
//!
//! A [`Skeleton`] is the four slots without constants; a [`Problem`] adds the guard's and
//! the map's constants. The article's `findMax` is the point
//! `(for-each, no guard, identity, max)`, the old ten functions are points too (for
//! example `count_above` is `(any loop, > K, identity, count)`).
//!
//! The specification is written from the slots in words, for example "return the sum of
//! each element times 3 over the elements greater than 2", so a reader of the prompt and
//! of the listing can tell which line disagrees with it.
//!
//! ## Rendering and bug sites
//! [`render`] writes the reference program for a problem and given names, line by line,
//! and attaches to each line the bugs it can carry: for each, the [`BugKind`], the
//! [`SiteRole`] of the place (the guard, the loop bound, the accumulator update, ...) and
//! the buggy text of the line. Harmless distractor lines (`n = len(xs)`, `limit = 7`)
//! move the line numbers and carry no bug.

use serde::{Deserialize, Serialize};

/// The kinds of injected bug (the bug operators).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BugKind {
    /// An accumulator, flag or counter starts at the wrong value (the wrong identity).
    WrongInit,
    /// A comparison flipped (`<` for `>`, `!=` for `==`) or made strict or non-strict
    /// (`>=` for `>`).
    WrongComparison,
    /// A loop bound, start or guard threshold is off by one.
    OffByOne,
    /// The function returns the wrong variable or constant.
    WrongReturn,
    /// An arithmetic operator is the wrong one (`-` for `+`, `+` for `*`).
    WrongOperator,
    /// A constant of the map, a step or a modulus is off by one.
    ConstantOffByOne,
}

impl BugKind {
    /// Every kind, in a fixed order.
    pub const ALL: [BugKind; 6] = [
        BugKind::WrongInit,
        BugKind::WrongComparison,
        BugKind::OffByOne,
        BugKind::WrongReturn,
        BugKind::WrongOperator,
        BugKind::ConstantOffByOne,
    ];

    /// The `snake_case` name.
    pub fn name(self) -> &'static str {
        match self {
            BugKind::WrongInit => "wrong_init",
            BugKind::WrongComparison => "wrong_comparison",
            BugKind::OffByOne => "off_by_one",
            BugKind::WrongReturn => "wrong_return",
            BugKind::WrongOperator => "wrong_operator",
            BugKind::ConstantOffByOne => "constant_off_by_one",
        }
    }
}

/// The role of the line a bug sits on, part of the problem key (a bug in the element
/// map takes the role of the line the map is on).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SiteRole {
    /// The initial value of the accumulator (or the running value).
    Init,
    /// The loop's range, start or condition.
    Loop,
    /// The `while` loop's increment.
    Step,
    /// The position counter of a for-each loop that reports an index.
    Counter,
    /// The guard's condition.
    Guard,
    /// The comparison of max, min or sortedness.
    Compare,
    /// The accumulator's update (with the element map inside it).
    Update,
    /// A `return` (the final one, or the one inside the loop of first index).
    Return,
}

impl SiteRole {
    /// Every role, in a fixed order.
    pub const ALL: [SiteRole; 8] = [
        SiteRole::Init,
        SiteRole::Loop,
        SiteRole::Step,
        SiteRole::Counter,
        SiteRole::Guard,
        SiteRole::Compare,
        SiteRole::Update,
        SiteRole::Return,
    ];

    /// The `snake_case` name.
    pub fn name(self) -> &'static str {
        match self {
            SiteRole::Init => "init",
            SiteRole::Loop => "loop",
            SiteRole::Step => "step",
            SiteRole::Counter => "counter",
            SiteRole::Guard => "guard",
            SiteRole::Compare => "compare",
            SiteRole::Update => "update",
            SiteRole::Return => "return",
        }
    }
}

/// How the loop walks the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoopForm {
    /// `for x in xs:`.
    Each,
    /// `for i in range(0, len(xs)):`.
    Index,
    /// `i = 0`, `while i < len(xs):`, ..., `i = i + 1`.
    While,
}

impl LoopForm {
    /// Every form.
    pub const ALL: [LoopForm; 3] = [LoopForm::Each, LoopForm::Index, LoopForm::While];

    /// The name used in keys and layouts.
    pub fn name(self) -> &'static str {
        match self {
            LoopForm::Each => "each",
            LoopForm::Index => "index",
            LoopForm::While => "while",
        }
    }
}

/// Which elements the aggregate looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GuardKind {
    /// `x > c`.
    Gt,
    /// `x < c`.
    Lt,
    /// `x >= c`.
    Ge,
    /// `x <= c`.
    Le,
    /// `x == c`.
    Eq,
    /// `x != c`.
    Ne,
    /// `x % 2 == 0`.
    Even,
    /// `x % 2 != 0`.
    Odd,
}

impl GuardKind {
    /// Every kind.
    pub const ALL: [GuardKind; 8] = [
        GuardKind::Gt,
        GuardKind::Lt,
        GuardKind::Ge,
        GuardKind::Le,
        GuardKind::Eq,
        GuardKind::Ne,
        GuardKind::Even,
        GuardKind::Odd,
    ];

    /// The name used in keys.
    pub fn name(self) -> &'static str {
        match self {
            GuardKind::Gt => "gt",
            GuardKind::Lt => "lt",
            GuardKind::Ge => "ge",
            GuardKind::Le => "le",
            GuardKind::Eq => "eq",
            GuardKind::Ne => "ne",
            GuardKind::Even => "even",
            GuardKind::Odd => "odd",
        }
    }

    /// Whether the guard compares with a constant.
    pub fn uses_constant(self) -> bool {
        !matches!(self, GuardKind::Even | GuardKind::Odd)
    }

    fn operator(self) -> &'static str {
        match self {
            GuardKind::Gt => ">",
            GuardKind::Lt => "<",
            GuardKind::Ge => ">=",
            GuardKind::Le => "<=",
            GuardKind::Eq | GuardKind::Even => "==",
            GuardKind::Ne | GuardKind::Odd => "!=",
        }
    }

    fn words(self, constant: i64) -> String {
        match self {
            GuardKind::Gt => format!("greater than {constant}"),
            GuardKind::Lt => format!("less than {constant}"),
            GuardKind::Ge => format!("at least {constant}"),
            GuardKind::Le => format!("at most {constant}"),
            GuardKind::Eq => format!("equal to {constant}"),
            GuardKind::Ne => format!("not equal to {constant}"),
            GuardKind::Even => "even".to_owned(),
            GuardKind::Odd => "odd".to_owned(),
        }
    }

    fn name_word(self) -> &'static str {
        match self {
            GuardKind::Gt => "above",
            GuardKind::Lt => "below",
            GuardKind::Ge => "least",
            GuardKind::Le => "most",
            GuardKind::Eq => "equal",
            GuardKind::Ne => "other",
            GuardKind::Even => "even",
            GuardKind::Odd => "odd",
        }
    }
}

/// What the aggregate applies to each element it looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MapKind {
    /// `x`.
    Identity,
    /// `x + c`.
    Add,
    /// `x - c`.
    Sub,
    /// `x * c`.
    Mul,
    /// `-x`.
    Neg,
}

impl MapKind {
    /// Every kind.
    pub const ALL: [MapKind; 5] = [
        MapKind::Identity,
        MapKind::Add,
        MapKind::Sub,
        MapKind::Mul,
        MapKind::Neg,
    ];

    /// The name used in keys.
    pub fn name(self) -> &'static str {
        match self {
            MapKind::Identity => "id",
            MapKind::Add => "add",
            MapKind::Sub => "sub",
            MapKind::Mul => "mul",
            MapKind::Neg => "neg",
        }
    }

    /// Whether the map has a constant.
    pub fn uses_constant(self) -> bool {
        matches!(self, MapKind::Add | MapKind::Sub | MapKind::Mul)
    }

    fn words(self, constant: i64) -> String {
        match self {
            MapKind::Identity => "the elements".to_owned(),
            MapKind::Add => format!("each element plus {constant}"),
            MapKind::Sub => format!("each element minus {constant}"),
            MapKind::Mul => format!("each element times {constant}"),
            MapKind::Neg => "each element negated".to_owned(),
        }
    }

    fn name_word(self) -> &'static str {
        match self {
            MapKind::Identity => "list",
            MapKind::Add => "plus",
            MapKind::Sub => "minus",
            MapKind::Mul => "times",
            MapKind::Neg => "negated",
        }
    }
}

/// What the function computes from the elements it looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Aggregate {
    /// The sum of the mapped elements.
    Sum,
    /// How many elements pass the guard.
    Count,
    /// The product of the mapped elements.
    Product,
    /// The largest mapped element (the first element's without a guard, else -100 when
    /// none passes).
    Max,
    /// The smallest mapped element (100 when none passes a guard).
    Min,
    /// The index of the first element that passes the guard, or -1.
    FirstIndex,
    /// The index of the last element that passes the guard, or -1.
    LastIndex,
    /// Whether some element passes the guard.
    Any,
    /// Whether every element passes the guard.
    All,
    /// The list of the mapped elements.
    Select,
    /// The list of running sums of the mapped elements.
    PrefixSum,
    /// The list of running products of the mapped elements.
    PrefixProduct,
    /// Whether the list is in ascending order.
    Sorted,
}

impl Aggregate {
    /// Every aggregate.
    pub const ALL: [Aggregate; 13] = [
        Aggregate::Sum,
        Aggregate::Count,
        Aggregate::Product,
        Aggregate::Max,
        Aggregate::Min,
        Aggregate::FirstIndex,
        Aggregate::LastIndex,
        Aggregate::Any,
        Aggregate::All,
        Aggregate::Select,
        Aggregate::PrefixSum,
        Aggregate::PrefixProduct,
        Aggregate::Sorted,
    ];

    /// The name used in keys.
    pub fn name(self) -> &'static str {
        match self {
            Aggregate::Sum => "sum",
            Aggregate::Count => "count",
            Aggregate::Product => "product",
            Aggregate::Max => "max",
            Aggregate::Min => "min",
            Aggregate::FirstIndex => "first_index",
            Aggregate::LastIndex => "last_index",
            Aggregate::Any => "any",
            Aggregate::All => "all",
            Aggregate::Select => "select",
            Aggregate::PrefixSum => "prefix_sum",
            Aggregate::PrefixProduct => "prefix_product",
            Aggregate::Sorted => "sorted",
        }
    }

    /// Aggregates that only make sense with a guard (and no map).
    fn needs_guard(self) -> bool {
        matches!(
            self,
            Aggregate::Count
                | Aggregate::FirstIndex
                | Aggregate::LastIndex
                | Aggregate::Any
                | Aggregate::All
        )
    }

    /// Aggregates that report an index (a for-each loop keeps a counter for them).
    fn reports_index(self) -> bool {
        matches!(self, Aggregate::FirstIndex | Aggregate::LastIndex)
    }
}

/// The value of a max (min) over no element when a guard can reject every element.
pub const MAX_OF_NONE: i64 = -100;

/// The four slots of a function, without constants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Skeleton {
    /// How the loop walks the list.
    pub loop_form: LoopForm,
    /// Which elements count (none: all of them).
    pub guard: Option<GuardKind>,
    /// What is applied to each element.
    pub map: MapKind,
    /// What is computed.
    pub aggregate: Aggregate,
}

impl Skeleton {
    /// Whether the slots combine into a meaningful function: count, indices, any and
    /// all need a guard and no map; sortedness takes neither and an index loop.
    pub fn is_valid(&self) -> bool {
        match self.aggregate {
            Aggregate::Sorted => {
                self.guard.is_none()
                    && self.map == MapKind::Identity
                    && self.loop_form != LoopForm::Each
            }
            a if a.needs_guard() => self.guard.is_some() && self.map == MapKind::Identity,
            _ => true,
        }
    }

    /// Every valid skeleton, in a fixed order.
    pub fn all() -> Vec<Skeleton> {
        let mut out = Vec::new();
        for aggregate in Aggregate::ALL {
            for loop_form in LoopForm::ALL {
                for guard in std::iter::once(None).chain(GuardKind::ALL.map(Some)) {
                    for map in MapKind::ALL {
                        let skeleton = Skeleton {
                            loop_form,
                            guard,
                            map,
                            aggregate,
                        };
                        if skeleton.is_valid() {
                            out.push(skeleton);
                        }
                    }
                }
            }
        }
        out
    }

    /// `loop.guard.map.aggregate`, for example `each.gt.mul.sum` (`none` for no guard).
    pub fn name(&self) -> String {
        format!(
            "{}.{}.{}.{}",
            self.loop_form.name(),
            self.guard.map_or("none", GuardKind::name),
            self.map.name(),
            self.aggregate.name()
        )
    }

    /// The shortest input list the function is defined on.
    pub fn min_len(&self) -> usize {
        usize::from(self.aggregate_from_first())
    }

    /// Max and min without a guard start from the first element.
    fn aggregate_from_first(&self) -> bool {
        self.guard.is_none() && matches!(self.aggregate, Aggregate::Max | Aggregate::Min)
    }
}

/// A skeleton with its constants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Problem {
    /// The slots.
    pub skeleton: Skeleton,
    /// The guard's constant (unused by parity guards and without a guard).
    pub guard_constant: i64,
    /// The map's constant (unused by the identity and negation).
    pub map_constant: i64,
}

/// The values a guard's constant is drawn from.
pub const GUARD_CONSTANTS: std::ops::RangeInclusive<i64> = 0..=4;
/// The values an additive map's constant is drawn from.
pub const ADD_CONSTANTS: std::ops::RangeInclusive<i64> = 1..=3;
/// The values a multiplying map's constant is drawn from.
pub const MUL_CONSTANTS: std::ops::RangeInclusive<i64> = 2..=3;

impl Problem {
    /// The one-line specification shown in the prompt, composed from the slots.
    pub fn spec(&self) -> String {
        let s = &self.skeleton;
        let mapped = s.map.words(self.map_constant);
        let guard = s.guard.map(|g| g.words(self.guard_constant));
        let over = guard
            .as_ref()
            .map(|g| {
                if s.map == MapKind::Identity {
                    format!(" that are {g}")
                } else {
                    format!(" over the elements that are {g}")
                }
            })
            .unwrap_or_default();
        let g = guard.unwrap_or_default();
        match s.aggregate {
            Aggregate::Sum => format!("return the sum of {mapped}{over}"),
            Aggregate::Product => format!("return the product of {mapped}{over}"),
            Aggregate::Count => format!("return how many elements are {g}"),
            Aggregate::Max if s.guard.is_none() => {
                format!("return the largest of {mapped} of a nonempty list")
            }
            Aggregate::Min if s.guard.is_none() => {
                format!("return the smallest of {mapped} of a nonempty list")
            }
            Aggregate::Max => {
                format!("return the largest of {mapped}{over}, or {MAX_OF_NONE} if there is none")
            }
            Aggregate::Min => format!(
                "return the smallest of {mapped}{over}, or {} if there is none",
                -MAX_OF_NONE
            ),
            Aggregate::FirstIndex => {
                format!("return the index of the first element that is {g}, or -1")
            }
            Aggregate::LastIndex => {
                format!("return the index of the last element that is {g}, or -1")
            }
            Aggregate::Any => format!("return true if some element is {g}, otherwise false"),
            Aggregate::All => format!("return true if every element is {g}, otherwise false"),
            Aggregate::Select => format!("return the list of {mapped}{over}"),
            Aggregate::PrefixSum => format!("return the list of running sums of {mapped}{over}"),
            Aggregate::PrefixProduct => {
                format!("return the list of running products of {mapped}{over}")
            }
            Aggregate::Sorted => {
                "return true if the list is in ascending order, otherwise false".to_owned()
            }
        }
    }

    /// A function name that describes the problem (`sum_above`, `max_times`,
    /// `first_even`): it names the skeleton, never the bug or its line.
    pub fn descriptive_name(&self) -> String {
        let s = &self.skeleton;
        let head = match (s.aggregate, s.guard, s.map) {
            (Aggregate::Sorted, _, _) => return "is_sorted".to_owned(),
            (Aggregate::FirstIndex, _, _) => "first",
            (Aggregate::LastIndex, _, _) => "last",
            (Aggregate::PrefixSum, _, _) => "sums",
            (Aggregate::PrefixProduct, _, _) => "products",
            (a, _, _) => a.name(),
        };
        match s.guard {
            Some(g) => format!("{head}_{}", g.name_word()),
            None => format!("{head}_{}", s.map.name_word()),
        }
    }
}

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
    match map {
        MapKind::Identity => (e.to_owned(), Vec::new()),
        MapKind::Add => (
            format!("{e} + {constant}"),
            vec![
                (BugKind::WrongOperator, format!("{e} - {constant}")),
                (BugKind::ConstantOffByOne, format!("{e} + {}", constant + 1)),
            ],
        ),
        MapKind::Sub => (
            format!("{e} - {constant}"),
            vec![
                (BugKind::WrongOperator, format!("{e} + {constant}")),
                (BugKind::ConstantOffByOne, format!("{e} - {}", constant + 1)),
            ],
        ),
        MapKind::Mul => (
            format!("{e} * {constant}"),
            vec![
                (BugKind::WrongOperator, format!("{e} + {constant}")),
                (BugKind::ConstantOffByOne, format!("{e} * {}", constant + 1)),
            ],
        ),
        MapKind::Neg => (
            format!("-{e}"),
            vec![(BugKind::WrongOperator, e.to_owned())],
        ),
    }
}

/// A line that embeds the mapped element: its text and its map mutations, which take
/// the line's `role`.
fn with_map(
    (mapped, variants): &(String, Vec<(BugKind, String)>),
    role: SiteRole,
    line: impl Fn(&str) -> String,
) -> (String, Vec<(BugKind, SiteRole, String)>) {
    let mutations = variants
        .iter()
        .map(|(bug, m)| (*bug, role, line(m)))
        .collect();
    (line(mapped), mutations)
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

fn tagged(
    role: SiteRole,
    variants: Vec<(BugKind, String)>,
    line: impl Fn(&str) -> String,
) -> Vec<(BugKind, SiteRole, String)> {
    variants
        .into_iter()
        .map(|(bug, text)| (bug, role, line(&text)))
        .collect()
}

/// Renders the reference program of `problem` with `names` and `distractors`, each
/// line with the bugs it can carry.
pub fn render(problem: &Problem, names: &Names, distractors: &[Distractor]) -> Vec<SiteLine> {
    use BugKind::{
        ConstantOffByOne, OffByOne, WrongComparison, WrongInit, WrongOperator, WrongReturn,
    };
    use SiteRole as R;
    let s = problem.skeleton;
    let Names {
        list: l,
        item: x,
        index: i,
        acc: b,
        aux,
        ..
    } = names;
    let mut out = Lines(Vec::new());
    out.plain(format!("def {}({l}):", names.function));
    for d in distractors.iter().filter(|d| !d.before_loop) {
        out.plain(d.text.clone());
    }
    let element = match s.loop_form {
        LoopForm::Each => x.clone(),
        LoopForm::Index | LoopForm::While => format!("{l}[{i}]"),
    };
    let mapped = map_expr(s.map, problem.map_constant, &element);
    let first = map_expr(s.map, problem.map_constant, &format!("{l}[0]"));

    // Initial values.
    let init = |out: &mut Lines, var: &str, value: &str, wrong: &str| {
        out.with(
            format!("{var} = {value}"),
            vec![(WrongInit, R::Init, format!("{var} = {wrong}"))],
        );
    };
    match s.aggregate {
        Aggregate::Sum | Aggregate::Count => init(&mut out, b, "0", "1"),
        Aggregate::Product => init(&mut out, b, "1", "0"),
        Aggregate::Max | Aggregate::Min if s.aggregate_from_first() => {
            // The map is not mutated here nor in the comparison below: the loop revisits
            // the first element, and a comparison against a slightly wrong value rarely
            // changes the result, so no test would catch those bugs.
            let text = format!("{b} = {}", first.0);
            out.with(text, vec![(WrongInit, R::Init, format!("{b} = 0"))]);
        }
        Aggregate::Max => init(&mut out, b, &MAX_OF_NONE.to_string(), "0"),
        Aggregate::Min => init(&mut out, b, &(-MAX_OF_NONE).to_string(), "0"),
        Aggregate::FirstIndex => {}
        Aggregate::LastIndex => init(&mut out, b, "-1", "0"),
        Aggregate::Any => init(&mut out, b, "false", "true"),
        Aggregate::All | Aggregate::Sorted => init(&mut out, b, "true", "false"),
        Aggregate::Select => init(&mut out, b, "[]", "[0]"),
        Aggregate::PrefixSum => {
            init(&mut out, b, "[]", "[0]");
            init(&mut out, aux, "0", "1");
        }
        Aggregate::PrefixProduct => {
            init(&mut out, b, "[]", "[0]");
            init(&mut out, aux, "1", "0");
        }
    }
    for d in distractors.iter().filter(|d| d.before_loop) {
        out.plain(d.text.clone());
    }

    // The loop header (and the counter of a for-each loop that reports an index).
    let start = if s.aggregate == Aggregate::Sorted {
        1
    } else {
        0
    };
    let counter = s.loop_form == LoopForm::Each && s.aggregate.reports_index();
    match s.loop_form {
        LoopForm::Each => {
            if counter {
                out.with(
                    format!("{i} = 0"),
                    vec![(OffByOne, R::Counter, format!("{i} = 1"))],
                );
            }
            out.plain(format!("for {x} in {l}:"));
        }
        LoopForm::Index => out.with(
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
            out.with(
                format!("{i} = {start}"),
                vec![(OffByOne, R::Loop, format!("{i} = {}", start + 1))],
            );
            out.with(
                format!("while {i} < len({l}):"),
                vec![
                    (OffByOne, R::Loop, format!("while {i} < len({l}) - 1:")),
                    (WrongComparison, R::Loop, format!("while {i} <= len({l}):")),
                    (WrongComparison, R::Loop, format!("while {i} > len({l}):")),
                ],
            );
        }
    }

    // The guard.
    let guard = s.guard.map(|g| {
        let (condition, variants) = guard_condition(g, problem.guard_constant, &element);
        if s.aggregate == Aggregate::All {
            let line = |c: &str| format!("if not {c}:");
            (line(&condition), tagged(R::Guard, variants, line))
        } else {
            let line = |c: &str| format!("if {c}:");
            (line(&condition), tagged(R::Guard, variants, line))
        }
    });
    if let Some((text, mutations)) = &guard {
        out.with(text.clone(), mutations.clone());
    }

    // The body.
    match s.aggregate {
        Aggregate::Sum => {
            let (text, mut mutations) =
                with_map(&mapped, R::Update, |m| format!("{b} = {b} + {m}"));
            mutations.push((
                WrongOperator,
                R::Update,
                format!("{b} = {b} - {}", grouped(&mapped.0)),
            ));
            out.with(text, mutations);
        }
        Aggregate::Count => out.with(
            format!("{b} = {b} + 1"),
            vec![
                (WrongOperator, R::Update, format!("{b} = {b} - 1")),
                (ConstantOffByOne, R::Update, format!("{b} = {b} + 2")),
            ],
        ),
        Aggregate::Product => {
            let (text, mut mutations) = with_map(&mapped, R::Update, |m| {
                format!("{b} = {b} * {}", grouped(m))
            });
            mutations.push((
                WrongOperator,
                R::Update,
                format!("{b} = {b} + {}", grouped(&mapped.0)),
            ));
            out.with(text, mutations);
        }
        Aggregate::Max | Aggregate::Min => {
            let (op, flipped) = if s.aggregate == Aggregate::Max {
                (">", "<")
            } else {
                ("<", ">")
            };
            out.with(
                format!("if {} {op} {b}:", mapped.0),
                vec![(
                    WrongComparison,
                    R::Compare,
                    format!("if {} {flipped} {b}:", mapped.0),
                )],
            );
            let (text, mutations) = with_map(&mapped, R::Update, |m| format!("{b} = {m}"));
            out.with(text, mutations);
            out.plain("end");
        }
        Aggregate::FirstIndex => out.with(
            format!("return {i}"),
            vec![
                (WrongReturn, R::Return, format!("return {element}")),
                (OffByOne, R::Return, format!("return {i} + 1")),
            ],
        ),
        Aggregate::LastIndex => out.with(
            format!("{b} = {i}"),
            vec![(OffByOne, R::Update, format!("{b} = {i} + 1"))],
        ),
        Aggregate::Any => out.plain(format!("{b} = true")),
        Aggregate::All => out.plain(format!("{b} = false")),
        Aggregate::Select => {
            let (text, mutations) = with_map(&mapped, R::Update, |m| format!("{b} = {b} + [{m}]"));
            out.with(text, mutations);
        }
        Aggregate::PrefixSum | Aggregate::PrefixProduct => {
            let (text, mut mutations) = if s.aggregate == Aggregate::PrefixSum {
                let (t, mut m) = with_map(&mapped, R::Update, |m| format!("{aux} = {aux} + {m}"));
                m.push((
                    WrongOperator,
                    R::Update,
                    format!("{aux} = {aux} - {}", grouped(&mapped.0)),
                ));
                (t, m)
            } else {
                let (t, mut m) = with_map(&mapped, R::Update, |m| {
                    format!("{aux} = {aux} * {}", grouped(m))
                });
                m.push((
                    WrongOperator,
                    R::Update,
                    format!("{aux} = {aux} + {}", grouped(&mapped.0)),
                ));
                (t, m)
            };
            mutations.dedup();
            out.with(text, mutations);
            out.plain(format!("{b} = {b} + [{aux}]"));
        }
        Aggregate::Sorted => {
            let (a, c) = (format!("{l}[{i} - 1]"), format!("{l}[{i}]"));
            out.with(
                format!("if {a} > {c}:"),
                vec![
                    (WrongComparison, R::Compare, format!("if {a} < {c}:")),
                    (WrongComparison, R::Compare, format!("if {a} >= {c}:")),
                ],
            );
            out.plain(format!("{b} = false"));
            out.plain("end");
        }
    }
    if guard.is_some() {
        out.plain("end");
    }

    // Steps, the loop's end and the return.
    if counter {
        out.with(
            format!("{i} = {i} + 1"),
            vec![
                (ConstantOffByOne, R::Counter, format!("{i} = {i} + 2")),
                (WrongOperator, R::Counter, format!("{i} = {i} - 1")),
            ],
        );
    }
    if s.loop_form == LoopForm::While {
        out.with(
            format!("{i} = {i} + 1"),
            vec![(ConstantOffByOne, R::Step, format!("{i} = {i} + 2"))],
        );
    }
    out.plain("end");
    let mut wrong_values: Vec<String> = match s.loop_form {
        LoopForm::Each => vec![x.clone()],
        LoopForm::Index | LoopForm::While => vec![i.clone()],
    };
    wrong_values.extend(distractors.iter().map(|d| d.name.clone()));
    let returned = match s.aggregate {
        Aggregate::FirstIndex => {
            wrong_values = vec![format!("len({l})"), "0".to_owned()];
            "-1".to_owned()
        }
        Aggregate::PrefixSum | Aggregate::PrefixProduct => {
            wrong_values.insert(0, aux.clone());
            b.clone()
        }
        Aggregate::Any | Aggregate::All | Aggregate::Sorted => {
            wrong_values = vec![
                (if s.aggregate == Aggregate::Any {
                    "false"
                } else {
                    "true"
                })
                .to_owned(),
            ];
            b.clone()
        }
        _ => b.clone(),
    };
    out.with(
        format!("return {returned}"),
        wrong_values
            .into_iter()
            .map(|v| (WrongReturn, R::Return, format!("return {v}")))
            .collect(),
    );
    out.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::program::parse_program;

    fn names() -> Names {
        Names {
            function: "f".into(),
            list: "xs".into(),
            item: "x".into(),
            index: "i".into(),
            acc: "acc".into(),
            aux: "run".into(),
        }
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

    #[test]
    fn specs_name_every_slot() {
        let problem = Problem {
            skeleton: Skeleton {
                loop_form: LoopForm::Index,
                guard: Some(GuardKind::Gt),
                map: MapKind::Mul,
                aggregate: Aggregate::Sum,
            },
            guard_constant: 3,
            map_constant: 2,
        };
        assert_eq!(
            problem.spec(),
            "return the sum of each element times 2 over the elements that are greater than 3"
        );
        assert_eq!(problem.descriptive_name(), "sum_above");
    }
}

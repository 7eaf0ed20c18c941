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
//! `(for-each, no guard, identity, max)`; nine of the ten functions of the first version
//! of the environment are points too (for example `count_above` is
//! `(any loop, > K, identity, count)`, `running_product` the running products); the
//! tenth, `second_largest`, keeps two running values and has no slot here.
//!
//! The specification is written from the slots in words, for example "return the sum of
//! each element times 3 over the elements greater than 2", so a reader of the prompt and
//! of the listing can tell which line disagrees with it.
//!
//! ## Rendering and bug sites
//! [`render()`] (in [`mod@render`]) writes the reference program for a problem and given
//! names, line by line, and attaches to each line the bugs it can carry ([`bugs`]): for
//! each, the [`BugKind`], the [`SiteRole`] of its line (the guard, the loop bound, the
//! accumulator update, ...) and the buggy text of the line. Harmless distractor lines
//! (`n = len(xs)`, `limit = 7`) move the line numbers and carry no bug.

pub mod bugs;
pub mod render;

use serde::{Deserialize, Serialize};

pub use bugs::{BugKind, SiteRole};
pub use render::{Distractor, Mutation, Names, SiteLine, render};

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
    fn aggregate_from_first(self) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

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

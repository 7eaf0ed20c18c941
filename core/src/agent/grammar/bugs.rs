//! The bug operators and the roles of the lines they sit on: two of the three parts of
//! a problem key ([`crate::agent::key`]).

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

//! The function templates of the repair tasks and the bugs each can carry.
//!
//! A template is a reference program with placeholders for its names and constant
//! (`{a}` the list, `{b}` the accumulator, `{x}` the loop item, `{i}` the index, `{K}`
//! the constant), in one or more layouts (for-each or index loops), and a list of bug
//! sites: which line a bug of each kind replaces, and with what. The article's `findMax`
//! with `best = 0` is `find_max` with a wrong initial value.

use serde::{Deserialize, Serialize};

/// The kinds of injected bug.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BugKind {
    /// The accumulator or counter starts at the wrong value.
    WrongInit,
    /// A comparison points the wrong way.
    FlippedComparison,
    /// A loop bound or threshold is off by one.
    OffByOne,
    /// The function returns the wrong variable or constant.
    WrongReturn,
    /// An arithmetic or comparison operator is the wrong one.
    WrongOperator,
}

impl BugKind {
    /// Every kind, in a fixed order (the order families are enumerated in).
    pub const ALL: [BugKind; 5] = [
        BugKind::WrongInit,
        BugKind::FlippedComparison,
        BugKind::OffByOne,
        BugKind::WrongReturn,
        BugKind::WrongOperator,
    ];

    /// The `snake_case` name.
    pub fn name(self) -> &'static str {
        match self {
            BugKind::WrongInit => "wrong_init",
            BugKind::FlippedComparison => "flipped_comparison",
            BugKind::OffByOne => "off_by_one",
            BugKind::WrongReturn => "wrong_return",
            BugKind::WrongOperator => "wrong_operator",
        }
    }
}

/// One layout of a template: its code (lines separated by `\n`, the header first) and
/// its bug sites `(kind, 0-based line, replacement)`.
#[derive(Debug)]
pub struct Variant {
    /// Short name of the layout.
    pub name: &'static str,
    /// The reference code with placeholders.
    pub code: &'static str,
    /// Where each supported bug goes.
    pub bugs: &'static [(BugKind, usize, &'static str)],
}

/// A function template.
#[derive(Debug)]
pub struct Template {
    /// The function's name.
    pub function: &'static str,
    /// One-line specification shown in the prompt (`{K}` is substituted).
    pub spec: &'static str,
    /// Shortest valid input list.
    pub min_len: usize,
    /// Whether the code uses the constant `{K}`.
    pub uses_constant: bool,
    /// Names the accumulator `{b}` may take.
    pub acc_names: &'static [&'static str],
    /// Layouts.
    pub variants: &'static [Variant],
    /// Inputs every task of this template tests (edge cases), for constant `k`.
    pub edge_cases: fn(i64) -> Vec<Vec<i64>>,
    /// Whether half of the random inputs are sorted (so sortedness is tested both ways).
    pub sorted_inputs: bool,
}

/// Names the input list may take.
pub const LIST_NAMES: [&str; 6] = ["xs", "nums", "values", "arr", "items", "data"];
/// Names the loop item may take.
pub const ITEM_NAMES: [&str; 4] = ["x", "v", "e", "item"];
/// Names the loop index may take.
pub const INDEX_NAMES: [&str; 5] = ["i", "j", "k", "idx", "pos"];

use BugKind::{FlippedComparison, OffByOne, WrongInit, WrongOperator, WrongReturn};

/// Every template, in a fixed order (the order families are enumerated in).
pub const TEMPLATES: &[Template] = &[
    Template {
        function: "find_max",
        spec: "return the largest value of a nonempty list",
        min_len: 1,
        uses_constant: false,
        acc_names: &["best", "top", "result", "acc"],
        variants: &[
            Variant {
                name: "for-each",
                code: "def find_max({a}):\n{b} = {a}[0]\nfor {x} in {a}:\nif {x} > {b}:\n{b} = {x}\nend\nend\nreturn {b}",
                bugs: &[
                    (WrongInit, 1, "{b} = 0"),
                    (FlippedComparison, 3, "if {x} < {b}:"),
                    (WrongReturn, 7, "return {x}"),
                ],
            },
            Variant {
                name: "index",
                code: "def find_max({a}):\n{b} = {a}[0]\nfor {i} in range(1, len({a})):\nif {a}[{i}] > {b}:\n{b} = {a}[{i}]\nend\nend\nreturn {b}",
                bugs: &[
                    (WrongInit, 1, "{b} = 0"),
                    (FlippedComparison, 3, "if {a}[{i}] < {b}:"),
                    (OffByOne, 2, "for {i} in range(1, len({a}) - 1):"),
                    (WrongReturn, 7, "return {i}"),
                ],
            },
        ],
        edge_cases: |_| {
            vec![
                vec![3, 1, 2],
                vec![-2, -5, -8],
                vec![0],
                vec![7],
                vec![1, 5, 5],
                vec![-4, -1],
            ]
        },
        sorted_inputs: false,
    },
    Template {
        function: "find_min",
        spec: "return the smallest value of a nonempty list",
        min_len: 1,
        uses_constant: false,
        acc_names: &["best", "top", "result", "acc"],
        variants: &[
            Variant {
                name: "for-each",
                code: "def find_min({a}):\n{b} = {a}[0]\nfor {x} in {a}:\nif {x} < {b}:\n{b} = {x}\nend\nend\nreturn {b}",
                bugs: &[
                    (WrongInit, 1, "{b} = 0"),
                    (FlippedComparison, 3, "if {x} > {b}:"),
                    (WrongReturn, 7, "return {x}"),
                ],
            },
            Variant {
                name: "index",
                code: "def find_min({a}):\n{b} = {a}[0]\nfor {i} in range(1, len({a})):\nif {a}[{i}] < {b}:\n{b} = {a}[{i}]\nend\nend\nreturn {b}",
                bugs: &[
                    (WrongInit, 1, "{b} = 0"),
                    (FlippedComparison, 3, "if {a}[{i}] > {b}:"),
                    (OffByOne, 2, "for {i} in range(1, len({a}) - 1):"),
                    (WrongReturn, 7, "return {i}"),
                ],
            },
        ],
        edge_cases: |_| {
            vec![
                vec![2, 5, 8],
                vec![0],
                vec![-4],
                vec![3, 1, 2],
                vec![6, 9, 1],
                vec![4, 4],
            ]
        },
        sorted_inputs: false,
    },
    Template {
        function: "sum_list",
        spec: "return the sum of the elements of a list",
        min_len: 0,
        uses_constant: false,
        acc_names: &["total", "acc", "result"],
        variants: &[
            Variant {
                name: "for-each",
                code: "def sum_list({a}):\n{b} = 0\nfor {x} in {a}:\n{b} = {b} + {x}\nend\nreturn {b}",
                bugs: &[
                    (WrongInit, 1, "{b} = 1"),
                    (WrongOperator, 3, "{b} = {b} - {x}"),
                    (WrongReturn, 5, "return {x}"),
                ],
            },
            Variant {
                name: "index",
                code: "def sum_list({a}):\n{b} = 0\nfor {i} in range(0, len({a})):\n{b} = {b} + {a}[{i}]\nend\nreturn {b}",
                bugs: &[
                    (WrongInit, 1, "{b} = 1"),
                    (OffByOne, 2, "for {i} in range(1, len({a})):"),
                    (WrongOperator, 3, "{b} = {b} - {a}[{i}]"),
                    (WrongReturn, 5, "return {i}"),
                ],
            },
        ],
        edge_cases: |_| vec![vec![], vec![5], vec![-1, -2], vec![1, 2, 3], vec![4, -4, 2]],
        sorted_inputs: false,
    },
    Template {
        function: "count_above",
        spec: "return how many elements are greater than {K}",
        min_len: 0,
        uses_constant: true,
        acc_names: &["count", "total", "acc", "n"],
        variants: &[
            Variant {
                name: "for-each",
                code: "def count_above({a}):\n{b} = 0\nfor {x} in {a}:\nif {x} > {K}:\n{b} = {b} + 1\nend\nend\nreturn {b}",
                bugs: &[
                    (WrongInit, 1, "{b} = 1"),
                    (FlippedComparison, 3, "if {x} < {K}:"),
                    (OffByOne, 3, "if {x} >= {K}:"),
                    (WrongOperator, 4, "{b} = {b} - 1"),
                    (WrongReturn, 7, "return {x}"),
                ],
            },
            Variant {
                name: "index",
                code: "def count_above({a}):\n{b} = 0\nfor {i} in range(0, len({a})):\nif {a}[{i}] > {K}:\n{b} = {b} + 1\nend\nend\nreturn {b}",
                bugs: &[
                    (WrongInit, 1, "{b} = 1"),
                    (FlippedComparison, 3, "if {a}[{i}] < {K}:"),
                    (OffByOne, 2, "for {i} in range(1, len({a})):"),
                    (WrongOperator, 4, "{b} = {b} - 1"),
                    (WrongReturn, 7, "return {i}"),
                ],
            },
        ],
        edge_cases: |k| {
            vec![
                vec![],
                vec![k],
                vec![k + 1],
                vec![k - 1, k, k + 1],
                vec![k + 2, k + 1, k + 3],
                vec![k + 1, k - 2],
            ]
        },
        sorted_inputs: false,
    },
    Template {
        function: "first_index_above",
        spec: "return the index of the first element greater than {K}, or -1",
        min_len: 0,
        uses_constant: true,
        acc_names: &["result"],
        variants: &[
            Variant {
                name: "index",
                code: "def first_index_above({a}):\nfor {i} in range(0, len({a})):\nif {a}[{i}] > {K}:\nreturn {i}\nend\nend\nreturn -1",
                bugs: &[
                    (FlippedComparison, 2, "if {a}[{i}] < {K}:"),
                    (OffByOne, 1, "for {i} in range(1, len({a})):"),
                    (WrongReturn, 3, "return {a}[{i}]"),
                ],
            },
            Variant {
                name: "counter",
                code: "def first_index_above({a}):\n{i} = 0\nfor {x} in {a}:\nif {x} > {K}:\nreturn {i}\nend\n{i} = {i} + 1\nend\nreturn -1",
                bugs: &[
                    (WrongInit, 1, "{i} = 1"),
                    (FlippedComparison, 3, "if {x} < {K}:"),
                    (OffByOne, 3, "if {x} >= {K}:"),
                    (WrongReturn, 4, "return {x}"),
                    (WrongOperator, 6, "{i} = {i} - 1"),
                ],
            },
        ],
        edge_cases: |k| {
            vec![
                vec![],
                vec![k + 1],
                vec![k],
                vec![k, k + 1],
                vec![k - 1, k - 1],
                vec![k - 3, k + 2, k + 5],
            ]
        },
        sorted_inputs: false,
    },
    Template {
        function: "is_sorted",
        spec: "return true if the list is in ascending order, otherwise false",
        min_len: 0,
        uses_constant: false,
        acc_names: &["ok", "result", "found"],
        variants: &[
            Variant {
                name: "early-return",
                code: "def is_sorted({a}):\nfor {i} in range(1, len({a})):\nif {a}[{i} - 1] > {a}[{i}]:\nreturn false\nend\nend\nreturn true",
                bugs: &[
                    (FlippedComparison, 2, "if {a}[{i} - 1] < {a}[{i}]:"),
                    (OffByOne, 1, "for {i} in range(2, len({a})):"),
                    (WrongReturn, 6, "return false"),
                    (WrongOperator, 2, "if {a}[{i} - 1] >= {a}[{i}]:"),
                ],
            },
            Variant {
                name: "flag",
                code: "def is_sorted({a}):\n{b} = true\nfor {i} in range(1, len({a})):\nif {a}[{i} - 1] > {a}[{i}]:\n{b} = false\nend\nend\nreturn {b}",
                bugs: &[
                    (WrongInit, 1, "{b} = false"),
                    (FlippedComparison, 3, "if {a}[{i} - 1] < {a}[{i}]:"),
                    (OffByOne, 2, "for {i} in range(2, len({a})):"),
                    (WrongReturn, 7, "return true"),
                    (WrongOperator, 3, "if {a}[{i} - 1] >= {a}[{i}]:"),
                ],
            },
        ],
        edge_cases: |_| {
            vec![
                vec![],
                vec![1],
                vec![1, 1],
                vec![2, 1],
                vec![1, 2, 3],
                vec![1, 3, 2],
                vec![3, 2, 1],
                vec![4, 1, 5],
            ]
        },
        sorted_inputs: true,
    },
    Template {
        function: "second_largest",
        spec: "return the second value of the list in descending order (len >= 2)",
        min_len: 2,
        uses_constant: false,
        acc_names: &["second"],
        variants: &[Variant {
            name: "two-slots",
            code: "def second_largest({a}):\nfirst = {a}[0]\nsecond = {a}[1]\nif second > first:\nfirst = {a}[1]\nsecond = {a}[0]\nend\nfor {i} in range(2, len({a})):\nif {a}[{i}] > first:\nsecond = first\nfirst = {a}[{i}]\nelse:\nif {a}[{i}] > second:\nsecond = {a}[{i}]\nend\nend\nend\nreturn second",
            bugs: &[
                (WrongInit, 1, "first = 0"),
                (FlippedComparison, 8, "if {a}[{i}] < first:"),
                (OffByOne, 7, "for {i} in range(3, len({a})):"),
                (WrongReturn, 17, "return first"),
            ],
        }],
        edge_cases: |_| {
            vec![
                vec![5, 5],
                vec![1, 2],
                vec![2, 1],
                vec![-3, -1, -2],
                vec![4, 1, 3, 2],
                vec![1, 2, 3, 9],
            ]
        },
        sorted_inputs: false,
    },
    Template {
        function: "running_product",
        spec: "return the list of prefix products of the list",
        min_len: 0,
        uses_constant: false,
        acc_names: &["p", "prod", "run", "acc"],
        variants: &[
            Variant {
                name: "for-each",
                code: "def running_product({a}):\nout = []\n{b} = 1\nfor {x} in {a}:\n{b} = {b} * {x}\nout = out + [{b}]\nend\nreturn out",
                bugs: &[
                    (WrongInit, 2, "{b} = 0"),
                    (WrongOperator, 4, "{b} = {b} + {x}"),
                    (WrongReturn, 7, "return {b}"),
                ],
            },
            Variant {
                name: "index",
                code: "def running_product({a}):\nout = []\n{b} = 1\nfor {i} in range(0, len({a})):\n{b} = {b} * {a}[{i}]\nout = out + [{b}]\nend\nreturn out",
                bugs: &[
                    (WrongInit, 2, "{b} = 0"),
                    (OffByOne, 3, "for {i} in range(1, len({a})):"),
                    (WrongOperator, 4, "{b} = {b} + {a}[{i}]"),
                    (WrongReturn, 7, "return {b}"),
                ],
            },
        ],
        edge_cases: |_| {
            vec![
                vec![],
                vec![3],
                vec![0, 5],
                vec![-1, 2, -3],
                vec![1, 2, 3],
                vec![2, 2],
            ]
        },
        sorted_inputs: false,
    },
    Template {
        function: "count_equal",
        spec: "return how many elements are equal to {K}",
        min_len: 0,
        uses_constant: true,
        acc_names: &["count", "total", "acc", "n"],
        variants: &[
            Variant {
                name: "for-each",
                code: "def count_equal({a}):\n{b} = 0\nfor {x} in {a}:\nif {x} == {K}:\n{b} = {b} + 1\nend\nend\nreturn {b}",
                bugs: &[
                    (WrongInit, 1, "{b} = 1"),
                    (FlippedComparison, 3, "if {x} != {K}:"),
                    (WrongOperator, 4, "{b} = {b} - 1"),
                    (WrongReturn, 7, "return {x}"),
                ],
            },
            Variant {
                name: "index",
                code: "def count_equal({a}):\n{b} = 0\nfor {i} in range(0, len({a})):\nif {a}[{i}] == {K}:\n{b} = {b} + 1\nend\nend\nreturn {b}",
                bugs: &[
                    (WrongInit, 1, "{b} = 1"),
                    (FlippedComparison, 3, "if {a}[{i}] != {K}:"),
                    (OffByOne, 2, "for {i} in range(0, len({a}) - 1):"),
                    (WrongOperator, 4, "{b} = {b} - 1"),
                    (WrongReturn, 7, "return {i}"),
                ],
            },
        ],
        edge_cases: |k| {
            vec![
                vec![],
                vec![k],
                vec![k, k],
                vec![k + 1],
                vec![k - 1, k, k + 1],
                vec![k + 2, k],
            ]
        },
        sorted_inputs: false,
    },
    Template {
        function: "sum_positive",
        spec: "return the sum of the elements greater than 0",
        min_len: 0,
        uses_constant: false,
        acc_names: &["total", "acc", "result"],
        variants: &[Variant {
            name: "for-each",
            code: "def sum_positive({a}):\n{b} = 0\nfor {x} in {a}:\nif {x} > 0:\n{b} = {b} + {x}\nend\nend\nreturn {b}",
            bugs: &[
                (WrongInit, 1, "{b} = 1"),
                (FlippedComparison, 3, "if {x} < 0:"),
                (OffByOne, 3, "if {x} > 1:"),
                (WrongOperator, 4, "{b} = {b} - {x}"),
                (WrongReturn, 7, "return {x}"),
            ],
        }],
        edge_cases: |_| {
            vec![
                vec![],
                vec![1],
                vec![-1],
                vec![0, 1, 2],
                vec![-3, 4, -5],
                vec![1, 1],
            ]
        },
        sorted_inputs: false,
    },
];

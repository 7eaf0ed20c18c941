//! The seeded task generator and the train / validation / test splits.
//!
//! A task is one template instance with one injected bug, its visible tests (shown by
//! `run_tests`) and its hidden tests (used only to grade at `finish`).
//!
//! ## Splits
//! A *family* is a (template, bug kind) pair. Every family belongs to exactly one split
//! ([`family_split`]), and the constant `K` of the templates that use one is drawn from
//! a band that belongs to the split ([`constant_band`]). So a test task is never a
//! train task with new inputs: its template-and-bug combination was never trained on.
//!
//! ## Draw order
//! `generate_task(split, seed)` reads stream `TASK_STREAM + split index` of `seed`. Each
//! attempt draws, in order: the family (`below(#families)`), the layout, the list,
//! accumulator, item and index names, the constant, then [`RANDOM_INPUTS`] lists (length,
//! then each value), then the visible tests. An attempt whose bug is not caught by at
//! least one visible and one hidden test is discarded and the next attempt continues
//! the same stream.

use serde::{Deserialize, Serialize};

use super::interp::{DEFAULT_STEP_LIMIT, Value, run};
use super::program::parse_program;
use super::templates::{
    BugKind, INDEX_NAMES, ITEM_NAMES, LIST_NAMES, TEMPLATES, Template, Variant,
};
use crate::rng::RandomStream;

/// The base stream id of task generation (the split index is added).
pub const TASK_STREAM: u64 = 0x7A5C_0000;
/// Random input lists drawn per task, besides the template's edge cases.
pub const RANDOM_INPUTS: usize = 6;
/// Visible tests per task.
pub const VISIBLE_TESTS: usize = 3;
const MAX_ATTEMPTS: usize = 64;

/// A data split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Split {
    /// Training tasks.
    Train,
    /// Held-out families for model selection.
    Validation,
    /// Held-out families for the final report.
    Test,
}

impl Split {
    /// All splits.
    pub const ALL: [Split; 3] = [Split::Train, Split::Validation, Split::Test];

    /// The lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Split::Train => "train",
            Split::Validation => "validation",
            Split::Test => "test",
        }
    }

    /// Parses `train`, `validation` (or `val`), `test`.
    pub fn parse(text: &str) -> Option<Split> {
        match text {
            "train" => Some(Split::Train),
            "validation" | "val" => Some(Split::Validation),
            "test" => Some(Split::Test),
            _ => None,
        }
    }

    fn index(self) -> u64 {
        match self {
            Split::Train => 0,
            Split::Validation => 1,
            Split::Test => 2,
        }
    }
}

/// A problem family: a template and a bug kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Family {
    /// Index into [`TEMPLATES`].
    pub template: usize,
    /// The bug.
    pub bug: BugKind,
}

impl Family {
    /// `find_max/wrong_init`.
    pub fn name(self) -> String {
        format!("{}/{}", TEMPLATES[self.template].function, self.bug.name())
    }
}

/// Every family some layout supports, in template order then bug order.
pub fn all_families() -> Vec<Family> {
    let mut out = Vec::new();
    for (template, t) in TEMPLATES.iter().enumerate() {
        for bug in BugKind::ALL {
            if t.variants.iter().any(|v| v.bugs.iter().any(|b| b.0 == bug)) {
                out.push(Family { template, bug });
            }
        }
    }
    out
}

/// The split a family belongs to: a fixed interleaving that leaves every template and
/// every bug kind in train while holding whole combinations out.
pub fn family_split(family: Family) -> Split {
    let bug = BugKind::ALL
        .iter()
        .position(|&b| b == family.bug)
        .unwrap_or(0);
    match (family.template * 2 + bug * 3) % 7 {
        0 => Split::Test,
        4 => Split::Validation,
        _ => Split::Train,
    }
}

/// The families of one split.
pub fn families_of(split: Split) -> Vec<Family> {
    all_families()
        .into_iter()
        .filter(|&f| family_split(f) == split)
        .collect()
}

/// The values the constant `K` takes in a split (disjoint across splits).
pub fn constant_band(split: Split) -> &'static [i64] {
    match split {
        Split::Train => &[0, 1, 2, 3],
        Split::Validation => &[4, 5],
        Split::Test => &[-3, -2, -1],
    }
}

/// One test: an input list and the expected return value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestCase {
    /// The input list.
    pub input: Vec<i64>,
    /// What the reference program returns.
    pub expected: Value,
}

/// A repair task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    /// `split/seed`, or `example/find_max` for the article's example.
    pub id: String,
    /// The split it was drawn from.
    pub split: Split,
    /// The seed it was drawn with.
    pub seed: u64,
    /// `template/bug`.
    pub family: String,
    /// The function's name.
    pub function: String,
    /// The injected bug.
    pub bug: BugKind,
    /// The layout's name.
    pub layout: String,
    /// The constant, for templates that use one.
    pub constant: Option<i64>,
    /// One-line specification shown in the prompt.
    pub spec: String,
    /// The code the episode starts from (one string per line).
    pub buggy_code: Vec<String>,
    /// The correct code (never shown to the policy).
    pub reference_code: Vec<String>,
    /// 1-based line of the bug.
    pub bug_line: usize,
    /// Tests `run_tests` runs.
    pub visible_tests: Vec<TestCase>,
    /// Tests that grade the code at `finish`.
    pub hidden_tests: Vec<TestCase>,
}

struct Names<'a> {
    list: &'a str,
    acc: &'a str,
    item: &'a str,
    index: &'a str,
    constant: i64,
}

fn fill(pattern: &str, names: &Names<'_>) -> String {
    pattern
        .replace("{a}", names.list)
        .replace("{b}", names.acc)
        .replace("{x}", names.item)
        .replace("{i}", names.index)
        .replace("{K}", &names.constant.to_string())
}

fn pick<'a>(rng: &mut RandomStream, items: &[&'a str]) -> &'a str {
    items[rng.below(items.len() as u32) as usize]
}

/// Runs `code` on `input`; errors become `None`.
fn outcome(code: &[String], input: &[i64]) -> Option<Value> {
    let function = parse_program(code).ok()?;
    run(&function, input, DEFAULT_STEP_LIMIT).ok()
}

fn random_inputs(rng: &mut RandomStream, template: &Template, constant: i64) -> Vec<Vec<i64>> {
    (0..RANDOM_INPUTS)
        .map(|n| {
            let span = 6 - template.min_len as u32 + 1;
            let len = template.min_len + rng.below(span) as usize;
            let mut list: Vec<i64> = (0..len)
                .map(|_| {
                    let offset = i64::from(rng.below(13)) - 6;
                    if template.uses_constant {
                        constant + offset / 2
                    } else {
                        offset
                    }
                })
                .collect();
            if template.sorted_inputs && n % 2 == 0 {
                list.sort_unstable();
            }
            list
        })
        .collect()
}

/// Draws one attempt; `None` when the bug goes undetected by the drawn tests.
fn attempt(rng: &mut RandomStream, split: Split, seed: u64) -> Option<Task> {
    let families = families_of(split);
    let family = families[rng.below(families.len() as u32) as usize];
    let template = &TEMPLATES[family.template];
    let variants: Vec<&Variant> = template
        .variants
        .iter()
        .filter(|v| v.bugs.iter().any(|b| b.0 == family.bug))
        .collect();
    let variant = variants[rng.below(variants.len() as u32) as usize];
    let band = constant_band(split);
    let names = Names {
        list: pick(rng, &LIST_NAMES),
        acc: pick(rng, template.acc_names),
        item: pick(rng, &ITEM_NAMES),
        index: pick(rng, &INDEX_NAMES),
        constant: band[rng.below(band.len() as u32) as usize],
    };
    let reference: Vec<String> = variant.code.lines().map(|l| fill(l, &names)).collect();
    let &(_, bug_index, bug_text) = variant.bugs.iter().find(|b| b.0 == family.bug)?;
    let mut buggy = reference.clone();
    buggy[bug_index] = fill(bug_text, &names);

    let mut inputs = (template.edge_cases)(names.constant);
    for list in random_inputs(rng, template, names.constant) {
        if !inputs.contains(&list) {
            inputs.push(list);
        }
    }
    let mut cases = Vec::new();
    let mut failing = Vec::new();
    for input in inputs {
        let expected = outcome(&reference, &input)?;
        if outcome(&buggy, &input).as_ref() != Some(&expected) {
            failing.push(cases.len());
        }
        cases.push(TestCase { input, expected });
    }
    if failing.len() < 2 {
        return None;
    }
    // One failing test is shown, another is kept for grading; the rest fill at random.
    let shown_fail = failing[rng.below(failing.len() as u32) as usize];
    let kept_fail = *failing.iter().find(|&&i| i != shown_fail)?;
    let mut rest: Vec<usize> = (0..cases.len())
        .filter(|&i| i != shown_fail && i != kept_fail)
        .collect();
    let mut visible_index = vec![shown_fail];
    while visible_index.len() < VISIBLE_TESTS && !rest.is_empty() {
        visible_index.push(rest.remove(rng.below(rest.len() as u32) as usize));
    }
    visible_index.sort_unstable();
    let (visible, hidden): (Vec<_>, Vec<_>) = cases
        .into_iter()
        .enumerate()
        .partition(|(i, _)| visible_index.contains(i));
    Some(Task {
        id: format!("{}/{seed}", split.name()),
        split,
        seed,
        family: family.name(),
        function: template.function.to_owned(),
        bug: family.bug,
        layout: variant.name.to_owned(),
        constant: template.uses_constant.then_some(names.constant),
        spec: fill(template.spec, &names),
        buggy_code: buggy,
        reference_code: reference,
        bug_line: bug_index + 1,
        visible_tests: visible.into_iter().map(|(_, c)| c).collect(),
        hidden_tests: hidden.into_iter().map(|(_, c)| c).collect(),
    })
}

/// The task of `split` for `seed` (see the module docs for the draw order). The same
/// `(split, seed)` gives the same task on every platform.
pub fn generate_task(split: Split, seed: u64) -> Task {
    let mut rng = RandomStream::new(seed, TASK_STREAM + split.index());
    for _ in 0..MAX_ATTEMPTS {
        if let Some(task) = attempt(&mut rng, split, seed) {
            return task;
        }
    }
    // Unreachable in practice (a test checks every family); a valid task regardless.
    article_example()
}

/// The article's running example: `find_max` starting from `best = 0`, with the three
/// visible tests `[3, 1, 2] -> 3`, `[-2, -5, -8] -> -2`, `[0] -> 0`.
pub fn article_example() -> Task {
    let lines = |text: &str| text.lines().map(str::to_owned).collect::<Vec<_>>();
    let reference = lines(
        "def find_max(xs):\nbest = xs[0]\nfor x in xs:\nif x > best:\nbest = x\nend\nend\nreturn best",
    );
    let mut buggy = reference.clone();
    "best = 0".clone_into(&mut buggy[1]);
    let case = |input: Vec<i64>| {
        let expected = Value::Int(input.iter().copied().max().unwrap_or(0));
        TestCase { input, expected }
    };
    Task {
        id: "example/find_max".to_owned(),
        // Its family, find_max/wrong_init, is held out for the test split.
        split: Split::Test,
        seed: 0,
        family: "find_max/wrong_init".to_owned(),
        function: "find_max".to_owned(),
        bug: BugKind::WrongInit,
        layout: "for-each".to_owned(),
        constant: None,
        spec: "return the largest value of a nonempty list".to_owned(),
        buggy_code: buggy,
        reference_code: reference,
        bug_line: 2,
        visible_tests: vec![case(vec![3, 1, 2]), case(vec![-2, -5, -8]), case(vec![0])],
        hidden_tests: vec![
            case(vec![7]),
            case(vec![-1]),
            case(vec![-4, -1]),
            case(vec![1, 5, 5]),
            case(vec![-9, -3, -6]),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_and_bug_kind_appears_in_train() {
        let train = families_of(Split::Train);
        for t in 0..TEMPLATES.len() {
            assert!(train.iter().any(|f| f.template == t), "template {t}");
        }
        for bug in BugKind::ALL {
            assert!(train.iter().any(|f| f.bug == bug), "{bug:?}");
        }
        assert!(!families_of(Split::Validation).is_empty());
        assert!(!families_of(Split::Test).is_empty());
    }

    #[test]
    fn at_least_eight_templates_and_five_bug_kinds() {
        assert!(TEMPLATES.len() >= 8);
        let kinds: std::collections::BTreeSet<_> = all_families().iter().map(|f| f.bug).collect();
        assert_eq!(kinds.len(), 5);
    }

    #[test]
    fn article_example_belongs_to_a_test_family() {
        let family = Family {
            template: 0,
            bug: BugKind::WrongInit,
        };
        assert_eq!(family.name(), article_example().family);
        assert_eq!(family_split(family), article_example().split);
    }

    #[test]
    fn article_example_fails_only_the_all_negative_visible_test() {
        let task = article_example();
        let failing: Vec<_> = task
            .visible_tests
            .iter()
            .filter(|c| outcome(&task.buggy_code, &c.input).as_ref() != Some(&c.expected))
            .map(|c| c.input.clone())
            .collect();
        assert_eq!(failing, vec![vec![-2, -5, -8]]);
    }
}

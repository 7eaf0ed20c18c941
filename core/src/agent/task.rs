//! The seeded task generator.
//!
//! A task is one problem of the grammar ([`super::grammar`]) with one injected bug, its
//! visible tests (shown by `run_tests`) and its hidden tests (used only to grade at
//! `finish`). Its problem key and split come from [`super::key`]: the generator draws
//! a key of the split, then an instance of it.
//!
//! ## Draw order
//! `generate_task(split, seed)` reads stream `TASK_STREAM + split index` of `seed`. A
//! key is drawn (`below(#keys of the split)`) and given up to [`ATTEMPTS_PER_KEY`]
//! attempts before the next key is drawn. Each attempt draws, in order: the guard
//! constant, the map constant, the list, item, index, accumulator and running-value
//! names, whether the function gets the descriptive or a neutral name (and which), the
//! number of distractors and each one's name, value and place, the bug's site among the
//! lines that can carry the key's bug, then [`RANDOM_INPUTS`] lists (length, then each
//! value), then the visible tests. An attempt whose bug is not caught by at least one
//! visible and one hidden test is discarded.

use serde::{Deserialize, Serialize};

use super::grammar::{
    ADD_CONSTANTS, BugKind, Distractor, GUARD_CONSTANTS, GuardKind, MUL_CONSTANTS, MapKind, Names,
    Problem, render,
};
use super::interp::{DEFAULT_STEP_LIMIT, Value, run};
pub use super::key::Split;
use super::key::{ProblemKey, Tier, catalogue};
use super::program::{Function, parse_program};
use crate::rng::RandomStream;

/// The base stream id of task generation (the split index is added).
pub const TASK_STREAM: u64 = 0x7A5C_0000;
/// Random input lists drawn per task, besides the edge cases.
pub const RANDOM_INPUTS: usize = 6;
/// Visible tests per task.
pub const VISIBLE_TESTS: usize = 3;
/// Attempts at an instance of one key before another key is drawn.
pub const ATTEMPTS_PER_KEY: usize = 4;
const MAX_KEY_DRAWS: usize = 32;

/// Names the input list may take.
pub const LIST_NAMES: [&str; 6] = ["xs", "nums", "values", "arr", "items", "data"];
/// Names the loop item may take.
pub const ITEM_NAMES: [&str; 4] = ["x", "v", "e", "item"];
/// Names the loop index may take.
pub const INDEX_NAMES: [&str; 5] = ["i", "j", "k", "idx", "pos"];
/// Names the accumulator may take.
pub const ACC_NAMES: [&str; 6] = ["acc", "result", "total", "best", "res", "ans"];
/// Names the running value of prefix aggregates may take.
pub const AUX_NAMES: [&str; 3] = ["run", "cur", "part"];
/// Neutral function names (half the tasks; the others describe the skeleton).
pub const NEUTRAL_FUNCTION_NAMES: [&str; 8] = [
    "solve", "compute", "calc", "process", "helper", "check", "f", "g",
];
/// Names distractor lines assign.
pub const DISTRACTOR_NAMES: [&str; 6] = ["n", "size", "limit", "start", "spare", "tmp"];
/// At most this many distractor lines per task.
pub const MAX_DISTRACTORS: u32 = 2;

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
    /// The problem key (see [`super::key`]): `skeleton:bug@role`.
    #[serde(default)]
    pub key: String,
    /// The tier of a validation or test task (`None` in train).
    #[serde(default)]
    pub tier: Option<Tier>,
    /// `skeleton/bug`, the key without the site's role.
    pub family: String,
    /// The function's name.
    pub function: String,
    /// The injected bug.
    pub bug: BugKind,
    /// The loop form (`each`, `index`, `while`).
    pub layout: String,
    /// The guard's constant, for guards that compare with one.
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

fn pick<'a>(rng: &mut RandomStream, items: &[&'a str]) -> &'a str {
    items[rng.below(items.len() as u32) as usize]
}

fn in_range(rng: &mut RandomStream, range: std::ops::RangeInclusive<i64>) -> i64 {
    let span = (range.end() - range.start() + 1) as u32;
    range.start() + i64::from(rng.below(span))
}

/// Runs `function` (`None`: it does not parse) on `input`; errors become `None`.
fn outcome(function: Option<&Function>, input: &[i64]) -> Option<Value> {
    run(function?, input, DEFAULT_STEP_LIMIT).ok()
}

/// Inputs every task tests: around the guard's constant, all negative, single
/// elements, repeats, ascending and descending runs (those shorter than `min_len` are
/// left out).
fn edge_cases(c: i64, min_len: usize) -> Vec<Vec<i64>> {
    let lists = vec![
        vec![],
        vec![c],
        vec![c + 1],
        vec![c - 1, c, c + 1],
        vec![c + 2, c + 1, c + 3],
        vec![3, 1, 2],
        vec![-2, -5, -8],
        vec![0],
        vec![7],
        vec![1, 5, 5],
        vec![-4, -1],
        vec![2, 2],
        vec![1, 2, 3, 4],
        vec![4, 1, 5],
        vec![c, c + 1],
        vec![c, c + 2, c],
    ];
    lists.into_iter().filter(|l| l.len() >= min_len).collect()
}

fn random_inputs(rng: &mut RandomStream, problem: &Problem) -> Vec<Vec<i64>> {
    let s = problem.skeleton;
    let min_len = s.min_len();
    let around_constant = s.guard.is_some_and(GuardKind::uses_constant);
    let sorted = s.aggregate == super::grammar::Aggregate::Sorted;
    (0..RANDOM_INPUTS)
        .map(|n| {
            let span = 6 - min_len as u32 + 1;
            let len = min_len + rng.below(span) as usize;
            let mut list: Vec<i64> = (0..len)
                .map(|_| {
                    let offset = i64::from(rng.below(13)) - 6;
                    if around_constant && n % 2 == 0 {
                        problem.guard_constant + offset / 2
                    } else {
                        offset
                    }
                })
                .collect();
            if sorted && n % 2 == 0 {
                list.sort_unstable();
            }
            list
        })
        .collect()
}

fn draw_names(rng: &mut RandomStream, problem: &Problem) -> Names {
    let list = pick(rng, &LIST_NAMES).to_owned();
    let item = pick(rng, &ITEM_NAMES).to_owned();
    let index = pick(rng, &INDEX_NAMES).to_owned();
    let acc = pick(rng, &ACC_NAMES).to_owned();
    let aux = pick(rng, &AUX_NAMES).to_owned();
    let function = if rng.below(2) == 0 {
        problem.descriptive_name()
    } else {
        pick(rng, &NEUTRAL_FUNCTION_NAMES).to_owned()
    };
    Names {
        function,
        list,
        item,
        index,
        acc,
        aux,
    }
}

fn draw_distractors(rng: &mut RandomStream, list: &str) -> Vec<Distractor> {
    let count = rng.below(MAX_DISTRACTORS + 1);
    let mut out: Vec<Distractor> = Vec::new();
    for _ in 0..count {
        let name = pick(rng, &DISTRACTOR_NAMES);
        let value = match rng.below(3) {
            0 => format!("len({list})"),
            1 => "0".to_owned(),
            _ => (1 + rng.below(9)).to_string(),
        };
        let before_loop = rng.below(2) == 1;
        if out.iter().any(|d| d.name == name) {
            continue;
        }
        out.push(Distractor {
            text: format!("{name} = {value}"),
            name: name.to_owned(),
            before_loop,
        });
    }
    out
}

/// Draws one attempt at `key`; `None` when the drawn tests do not catch the bug.
fn attempt(rng: &mut RandomStream, split: Split, seed: u64, key: ProblemKey) -> Option<Task> {
    let skeleton = key.skeleton;
    let guard_constant = in_range(rng, GUARD_CONSTANTS);
    let map_constant = match skeleton.map {
        MapKind::Mul => in_range(rng, MUL_CONSTANTS),
        _ => in_range(rng, ADD_CONSTANTS),
    };
    let problem = Problem {
        skeleton,
        guard_constant,
        map_constant,
    };
    let names = draw_names(rng, &problem);
    let distractors = draw_distractors(rng, &names.list);
    let lines = render(&problem, &names, &distractors);
    let sites: Vec<(usize, &str)> = lines
        .iter()
        .enumerate()
        .flat_map(|(n, line)| {
            line.mutations
                .iter()
                .filter(|m| m.bug == key.bug && m.role == key.role)
                .map(move |m| (n, m.text.as_str()))
        })
        .collect();
    if sites.is_empty() {
        return None;
    }
    let (bug_index, bug_text) = sites[rng.below(sites.len() as u32) as usize];
    let reference: Vec<String> = lines.iter().map(|l| l.text.clone()).collect();
    let mut buggy = reference.clone();
    bug_text.clone_into(&mut buggy[bug_index]);

    let mut inputs = edge_cases(guard_constant, skeleton.min_len());
    for list in random_inputs(rng, &problem) {
        if !inputs.contains(&list) {
            inputs.push(list);
        }
    }
    // Each program is parsed once, then run on every input.
    let reference_fn = parse_program(&reference).ok();
    let buggy_fn = parse_program(&buggy).ok();
    let mut cases = Vec::new();
    let mut failing = Vec::new();
    for input in inputs {
        let expected = outcome(reference_fn.as_ref(), &input)?;
        if outcome(buggy_fn.as_ref(), &input).as_ref() != Some(&expected) {
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
    let tier = catalogue().split_of(&key).and_then(|(_, tier)| tier);
    Some(Task {
        id: format!("{}/{seed}", split.name()),
        split,
        seed,
        key: key.name(),
        tier,
        family: format!("{}/{}", skeleton.name(), key.bug.name()),
        function: names.function.clone(),
        bug: key.bug,
        layout: skeleton.loop_form.name().to_owned(),
        constant: skeleton
            .guard
            .is_some_and(GuardKind::uses_constant)
            .then_some(guard_constant),
        spec: problem.spec(),
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
    let keys = catalogue().keys_of(split);
    for _ in 0..MAX_KEY_DRAWS {
        let key = keys[rng.below(keys.len() as u32) as usize];
        if let Some(task) = instance(&mut rng, split, seed, key, ATTEMPTS_PER_KEY) {
            return task;
        }
    }
    // Unreachable in practice (a test draws thousands of tasks); a valid task regardless.
    article_example()
}

fn instance(
    rng: &mut RandomStream,
    split: Split,
    seed: u64,
    key: ProblemKey,
    attempts: usize,
) -> Option<Task> {
    (0..attempts).find_map(|_| attempt(rng, split, seed, key))
}

/// A task of one given key, drawn from its own stream of `seed` (for inspecting a key;
/// `None` when `attempts` instances all go undetected by their tests). The task's
/// split is the key's (train for a key no split uses).
pub fn task_of_key(key: ProblemKey, seed: u64, attempts: usize) -> Option<Task> {
    let split = catalogue()
        .split_of(&key)
        .map_or(Split::Train, |(split, _)| split);
    let stream = TASK_STREAM + 0x100 + super::key::stable_hash(&key.name()) % 0x1_0000_0000;
    let mut rng = RandomStream::new(seed, stream);
    instance(&mut rng, split, seed, key, attempts)
}

/// The problem key of the article's example, `find_max` starting from `best = 0`.
pub fn article_key() -> ProblemKey {
    use super::grammar::{Aggregate, LoopForm, SiteRole, Skeleton};
    ProblemKey {
        skeleton: Skeleton {
            loop_form: LoopForm::Each,
            guard: None,
            map: MapKind::Identity,
            aggregate: Aggregate::Max,
        },
        bug: BugKind::WrongInit,
        role: SiteRole::Init,
    }
}

/// The article's running example: `find_max` starting from `best = 0`, with the three
/// visible tests `[3, 1, 2] -> 3`, `[-2, -5, -8] -> -2`, `[0] -> 0`. Its split and
/// tier are its key's.
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
    let key = article_key();
    let (split, tier) = catalogue().split_of(&key).unwrap_or((Split::Train, None));
    Task {
        id: "example/find_max".to_owned(),
        split,
        seed: 0,
        key: key.name(),
        tier,
        family: format!("{}/{}", key.skeleton.name(), key.bug.name()),
        function: "find_max".to_owned(),
        bug: BugKind::WrongInit,
        layout: "each".to_owned(),
        constant: None,
        spec: "return the largest of the elements of a nonempty list".to_owned(),
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
    fn article_example_is_the_grammar_point_with_its_key() {
        let task = article_example();
        let problem = Problem {
            skeleton: article_key().skeleton,
            guard_constant: 0,
            map_constant: 0,
        };
        assert_eq!(task.spec, problem.spec());
        assert_eq!(task.key, "each.none.id.max:wrong_init@init");
        assert_eq!(
            catalogue().split_of(&article_key()).map(|p| p.0),
            Some(task.split)
        );
    }

    #[test]
    fn article_example_fails_only_the_all_negative_visible_test() {
        let task = article_example();
        let failing: Vec<_> = task
            .visible_tests
            .iter()
            .filter(|c| {
                let buggy = parse_program(&task.buggy_code).ok();
                outcome(buggy.as_ref(), &c.input).as_ref() != Some(&c.expected)
            })
            .map(|c| c.input.clone())
            .collect();
        assert_eq!(failing, vec![vec![-2, -5, -8]]);
    }
}

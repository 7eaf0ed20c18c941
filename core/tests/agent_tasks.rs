//! Task generation: determinism, splits by problem key, tiers, and the grammar's
//! programs against an independent implementation of their specifications.

use std::collections::{BTreeMap, BTreeSet};

use arlbook_core::agent::grammar::{
    Aggregate, BugKind, Distractor, GuardKind, MapKind, Names, Problem, Skeleton, render,
};
use arlbook_core::agent::interp::{Value, run};
use arlbook_core::agent::key::{ProblemKey, Tier, catalogue};
use arlbook_core::agent::program::parse_program;
use arlbook_core::agent::task::{Split, Task, generate_task};
use arlbook_core::rng::RandomStream;

fn tasks(split: Split, n: u64) -> Vec<Task> {
    (0..n).map(|seed| generate_task(split, seed)).collect()
}

#[test]
fn same_seed_gives_the_same_task() {
    for split in Split::ALL {
        for seed in 0..50 {
            assert_eq!(generate_task(split, seed), generate_task(split, seed));
        }
    }
    assert_ne!(
        generate_task(Split::Train, 1),
        generate_task(Split::Train, 2)
    );
}

#[test]
fn keys_are_partitioned_into_splits_with_the_required_counts() {
    let c = catalogue();
    let mut seen = BTreeSet::new();
    for split in Split::ALL {
        for key in c.keys_of(split) {
            assert!(seen.insert(*key), "{} in two splits", key.name());
            assert_eq!(c.split_of(key).map(|p| p.0), Some(split));
        }
    }
    assert!(seen.len() <= c.all_keys().len());
    let train = c.keys_of(Split::Train).len();
    let validation = c.keys_of(Split::Validation).len();
    let test = c.keys_of(Split::Test).len();
    assert!(train >= 2000, "{train} train keys");
    assert!(validation >= 300, "{validation} validation keys");
    assert!(test >= 300, "{test} test keys");
    for split in [Split::Validation, Split::Test] {
        for tier in [Tier::A, Tier::B] {
            let n = c
                .keys_of(split)
                .iter()
                .filter(|k| c.split_of(k).and_then(|p| p.1) == Some(tier))
                .count();
            assert!(n >= 100, "{split:?} tier {tier:?}: {n} keys");
        }
    }
}

#[test]
fn tiers_are_what_they_say() {
    let c = catalogue();
    let train = c.keys_of(Split::Train);
    let train_skeletons: BTreeSet<Skeleton> = train.iter().map(|k| k.skeleton).collect();
    let train_guard_cells: BTreeSet<String> = train.iter().map(ProblemKey::guard_cell).collect();
    let train_operator_cells: BTreeSet<String> =
        train.iter().map(ProblemKey::operator_cell).collect();
    let mut primitive_counts: BTreeMap<String, usize> = BTreeMap::new();
    for key in train {
        for p in primitives(*key) {
            *primitive_counts.entry(p).or_default() += 1;
        }
    }
    let mut held_out_cells: [BTreeSet<String>; 2] = Default::default();
    for (n, split) in [Split::Validation, Split::Test].into_iter().enumerate() {
        for key in c.keys_of(split) {
            assert_eq!(c.split_of(key).map(|p| p.1.is_some()), Some(true));
            match c.split_of(key).and_then(|p| p.1) {
                Some(Tier::A) => {
                    assert!(train_skeletons.contains(&key.skeleton), "{}", key.name());
                }
                Some(Tier::B) => {
                    let guard_new = !train_guard_cells.contains(&key.guard_cell());
                    let operator_new = !train_operator_cells.contains(&key.operator_cell());
                    assert!(guard_new || operator_new, "{}", key.name());
                    if guard_new {
                        held_out_cells[n].insert(format!("guard:{}", key.guard_cell()));
                    }
                    if operator_new {
                        held_out_cells[n].insert(format!("operator:{}", key.operator_cell()));
                    }
                    for p in primitives(*key) {
                        let count = primitive_counts.get(&p).copied().unwrap_or(0);
                        assert!(count >= 50, "{}: {p} in {count} train keys", key.name());
                    }
                }
                None => panic!("{} has no tier", key.name()),
            }
        }
    }
    // Validation's held-out cells are its own.
    assert!(held_out_cells[0].is_disjoint(&held_out_cells[1]));
    assert!(held_out_cells.iter().all(|cells| cells.len() >= 4));
}

/// The slot values and the operator of a key.
fn primitives(key: ProblemKey) -> Vec<String> {
    let s = key.skeleton;
    vec![
        format!("loop:{}", s.loop_form.name()),
        format!("guard:{}", s.guard.map_or("none", GuardKind::name)),
        format!("map:{}", s.map.name()),
        format!("aggregate:{}", s.aggregate.name()),
        format!("bug:{}", key.bug.name()),
    ]
}

#[test]
fn generated_tasks_carry_their_keys_and_never_cross_splits() {
    let c = catalogue();
    let mut drawn: Vec<BTreeSet<String>> = Vec::new();
    let mut programs: Vec<BTreeSet<Vec<String>>> = Vec::new();
    for split in Split::ALL {
        let keys: BTreeMap<String, ProblemKey> =
            c.keys_of(split).iter().map(|k| (k.name(), *k)).collect();
        let tasks = tasks(split, 1500);
        for task in &tasks {
            assert_eq!(task.split, split);
            assert!(!task.id.starts_with("example"), "fallback for {}", task.id);
            let key = keys
                .get(&task.key)
                .unwrap_or_else(|| panic!("{}: key {} not of {split:?}", task.id, task.key));
            assert_eq!(c.split_of(key).and_then(|p| p.1), task.tier);
            assert_eq!(task.tier.is_none(), split == Split::Train);
            assert_eq!(task.bug, key.bug);
        }
        drawn.push(tasks.iter().map(|t| t.key.clone()).collect());
        programs.push(tasks.iter().map(|t| t.buggy_code.clone()).collect());
    }
    for a in 0..3 {
        for b in a + 1..3 {
            assert!(drawn[a].is_disjoint(&drawn[b]));
            assert!(programs[a].is_disjoint(&programs[b]));
        }
    }
    // 1500 draws reach well over a thousand distinct train keys.
    assert!(
        drawn[0].len() >= 1000,
        "{} distinct train keys",
        drawn[0].len()
    );
    assert!(drawn[1].len() >= 300 && drawn[2].len() >= 300);
}

#[test]
fn renamings_new_constants_and_distractors_keep_the_key() {
    let tasks = tasks(Split::Train, 3000);
    let mut by_key: BTreeMap<&str, Vec<&Task>> = BTreeMap::new();
    for task in &tasks {
        by_key.entry(&task.key).or_default().push(task);
    }
    let repeated: Vec<_> = by_key.values().filter(|v| v.len() >= 2).collect();
    assert!(!repeated.is_empty());
    // Instances of one key differ in their text but not in their problem.
    let differing = repeated
        .iter()
        .filter(|v| v[0].buggy_code != v[1].buggy_code)
        .count();
    assert!(
        differing * 10 >= repeated.len() * 9,
        "{differing} of {}",
        repeated.len()
    );
}

#[test]
fn bug_lines_are_spread_over_the_function_for_every_name() {
    let tasks = tasks(Split::Train, 3000);
    let mut lines_by_name: BTreeMap<&str, BTreeSet<usize>> = BTreeMap::new();
    let mut bugs_by_name: BTreeMap<&str, BTreeSet<BugKind>> = BTreeMap::new();
    for task in &tasks {
        lines_by_name
            .entry(&task.function)
            .or_default()
            .insert(task.bug_line);
        bugs_by_name
            .entry(&task.function)
            .or_default()
            .insert(task.bug);
    }
    for (name, lines) in &lines_by_name {
        let count = tasks.iter().filter(|t| t.function == *name).count();
        if count >= 40 {
            assert!(
                lines.len() >= 5,
                "{name}: bug lines {lines:?} over {count} tasks"
            );
            assert!(
                bugs_by_name[name].len() >= 4,
                "{name}: {:?}",
                bugs_by_name[name]
            );
        }
    }
    // Every operator occurs, on many different lines.
    for bug in BugKind::ALL {
        let lines: BTreeSet<usize> = tasks
            .iter()
            .filter(|t| t.bug == bug)
            .map(|t| t.bug_line)
            .collect();
        assert!(lines.len() >= 4, "{bug:?}: {lines:?}");
    }
}

#[test]
fn every_task_has_a_detectable_bug_and_the_findmax_edge_cases() {
    for split in Split::ALL {
        for seed in 0..300 {
            let task = generate_task(split, seed);
            assert_eq!(task.visible_tests.len(), 3);
            let reference = parse_program(&task.reference_code).unwrap();
            let buggy = parse_program(&task.buggy_code).unwrap();
            let differing: Vec<usize> = (0..task.buggy_code.len())
                .filter(|&i| task.buggy_code[i] != task.reference_code[i])
                .collect();
            assert_eq!(differing, vec![task.bug_line - 1], "{}", task.id);
            let fails = |cases: &[arlbook_core::agent::TestCase]| {
                cases
                    .iter()
                    .filter(|c| run(&buggy, &c.input, 10_000).ok().as_ref() != Some(&c.expected))
                    .count()
            };
            assert!(fails(&task.visible_tests) >= 1, "{}", task.id);
            assert!(fails(&task.hidden_tests) >= 1, "{}", task.id);
            for case in task.visible_tests.iter().chain(&task.hidden_tests) {
                assert_eq!(run(&reference, &case.input, 10_000).unwrap(), case.expected);
            }
            if task.key.contains(".none.id.max:") {
                let inputs: Vec<_> = task
                    .visible_tests
                    .iter()
                    .chain(&task.hidden_tests)
                    .map(|c| c.input.clone())
                    .collect();
                assert!(inputs.contains(&vec![-2, -5, -8]));
                assert!(inputs.iter().any(|i| i.len() == 1));
            }
        }
    }
}

/// An independent implementation of each problem's specification.
fn oracle(p: &Problem, xs: &[i64]) -> Value {
    let s = p.skeleton;
    let c = p.guard_constant;
    let k = p.map_constant;
    let passes = |x: i64| match s.guard {
        None => true,
        Some(GuardKind::Gt) => x > c,
        Some(GuardKind::Lt) => x < c,
        Some(GuardKind::Ge) => x >= c,
        Some(GuardKind::Le) => x <= c,
        Some(GuardKind::Eq) => x == c,
        Some(GuardKind::Ne) => x != c,
        Some(GuardKind::Even) => x.rem_euclid(2) == 0,
        Some(GuardKind::Odd) => x.rem_euclid(2) == 1,
    };
    let map = |x: i64| match s.map {
        MapKind::Identity => x,
        MapKind::Add => x + k,
        MapKind::Sub => x - k,
        MapKind::Mul => x * k,
        MapKind::Neg => -x,
    };
    let chosen: Vec<i64> = xs.iter().copied().filter(|&x| passes(x)).map(map).collect();
    let scan = |start: i64, f: fn(i64, i64) -> i64| {
        chosen
            .iter()
            .scan(start, |acc, &x| {
                *acc = f(*acc, x);
                Some(*acc)
            })
            .collect::<Vec<_>>()
    };
    match s.aggregate {
        Aggregate::Sum => Value::Int(chosen.iter().sum()),
        Aggregate::Count => Value::Int(chosen.len() as i64),
        Aggregate::Product => Value::Int(chosen.iter().product()),
        Aggregate::Max => Value::Int(chosen.iter().copied().max().unwrap_or(-100)),
        Aggregate::Min => Value::Int(chosen.iter().copied().min().unwrap_or(100)),
        Aggregate::FirstIndex => {
            Value::Int(xs.iter().position(|&x| passes(x)).map_or(-1, |i| i as i64))
        }
        Aggregate::LastIndex => {
            Value::Int(xs.iter().rposition(|&x| passes(x)).map_or(-1, |i| i as i64))
        }
        Aggregate::Any => Value::Bool(xs.iter().any(|&x| passes(x))),
        Aggregate::All => Value::Bool(xs.iter().all(|&x| passes(x))),
        Aggregate::Select => Value::List(chosen),
        Aggregate::PrefixSum => Value::List(scan(0, |a, x| a + x)),
        Aggregate::PrefixProduct => Value::List(scan(1, |a, x| a * x)),
        Aggregate::Sorted => Value::Bool(xs.windows(2).all(|w| w[0] <= w[1])),
    }
}

#[test]
fn reference_programs_match_an_independent_implementation() {
    let mut rng = RandomStream::new(99, 0);
    for skeleton in Skeleton::all() {
        for round in 0..4 {
            let problem = Problem {
                skeleton,
                guard_constant: i64::from(rng.below(5)),
                map_constant: 2 + i64::from(rng.below(2)),
            };
            let names = Names {
                function: problem.descriptive_name(),
                list: ["xs", "nums", "data"][round % 3].into(),
                item: ["x", "v"][round % 2].into(),
                index: ["i", "pos"][round % 2].into(),
                acc: ["acc", "best", "total"][round % 3].into(),
                aux: "run".into(),
            };
            let distractors: Vec<Distractor> = (0..round % 3)
                .map(|d| Distractor {
                    text: format!("{} = len({})", ["n", "tmp"][d], names.list),
                    name: ["n", "tmp"][d].into(),
                    before_loop: d == 1,
                })
                .collect();
            let code: Vec<String> = render(&problem, &names, &distractors)
                .into_iter()
                .map(|l| l.text)
                .collect();
            let function = parse_program(&code).unwrap();
            for _ in 0..25 {
                let len = skeleton.min_len() + rng.below(6) as usize;
                let xs: Vec<i64> = (0..len).map(|_| i64::from(rng.below(17)) - 8).collect();
                assert_eq!(
                    run(&function, &xs, 10_000).unwrap(),
                    oracle(&problem, &xs),
                    "{} on {xs:?}:\n{}",
                    skeleton.name(),
                    code.join("\n")
                );
            }
        }
    }
}

/// The specification names every slot but the loop form (which the listing shows):
/// two problems that differ in another slot or a constant have different
/// specifications.
#[test]
fn specifications_tell_problems_apart() {
    let mut specs = BTreeMap::new();
    for skeleton in Skeleton::all() {
        for guard_constant in 0..=4 {
            for map_constant in 1..=3 {
                let p = Problem {
                    skeleton,
                    guard_constant,
                    map_constant,
                };
                let canonical = Problem {
                    skeleton: Skeleton {
                        loop_form: arlbook_core::agent::grammar::LoopForm::Each,
                        ..skeleton
                    },
                    guard_constant: if skeleton.guard.is_some_and(GuardKind::uses_constant) {
                        guard_constant
                    } else {
                        0
                    },
                    map_constant: if skeleton.map.uses_constant() {
                        map_constant
                    } else {
                        0
                    },
                };
                if let Some(other) = specs.insert(p.spec(), canonical) {
                    assert_eq!(other, canonical, "{}", p.spec());
                }
            }
        }
    }
    assert!(specs.len() > 1000);
}

/// No token identifies a problem: every token of the prompts and listings of 2,000
/// train tasks that occurs in at least five of them occurs in tasks of at least three
/// different keys (function names are several word pieces, numbers one digit a token).
#[test]
fn no_token_identifies_a_problem() {
    use arlbook_core::agent::env::listing;
    use arlbook_core::agent::harness::{HarnessConfig, prompt_text};
    use arlbook_core::agent::tokenizer::tokenizer;
    let mut keys_of_token: BTreeMap<u32, BTreeSet<String>> = BTreeMap::new();
    let mut tasks_of_token: BTreeMap<u32, usize> = BTreeMap::new();
    for task in tasks(Split::Train, 2000) {
        let text = format!(
            "{}\n{}",
            prompt_text(&task, &HarnessConfig::default()),
            listing(&task.buggy_code)
        );
        let tokens: BTreeSet<u32> = tokenizer().encode(&text).into_iter().collect();
        for token in tokens {
            keys_of_token
                .entry(token)
                .or_default()
                .insert(task.key.clone());
            *tasks_of_token.entry(token).or_default() += 1;
        }
    }
    for (token, keys) in &keys_of_token {
        if tasks_of_token[token] < 5 {
            continue;
        }
        assert!(
            keys.len() >= 3,
            "token {:?} occurs with only {} keys",
            tokenizer().pieces()[*token as usize],
            keys.len()
        );
    }
}

/// Every key of every split has instances whose tests catch the bug: a key is a
/// problem the generator can pose, not a dead entry in the counts.
#[test]
fn every_key_of_every_split_can_be_posed() {
    use arlbook_core::agent::task::task_of_key;
    let c = catalogue();
    for split in Split::ALL {
        for key in c.keys_of(split) {
            let task = task_of_key(*key, 0, 32)
                .unwrap_or_else(|| panic!("{}: no detectable instance", key.name()));
            assert_eq!(task.key, key.name());
            assert_eq!(task.split, split);
        }
    }
}

//! Task generation: determinism, split disjointness, and the templates against
//! independent Rust implementations.

use std::collections::BTreeSet;

use arlbook_core::agent::interp::{Value, run};
use arlbook_core::agent::program::parse_program;
use arlbook_core::agent::task::{
    Split, all_families, constant_band, families_of, family_split, generate_task,
};
use arlbook_core::rng::RandomStream;

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
fn families_are_partitioned_into_splits() {
    let all = all_families();
    let mut seen = BTreeSet::new();
    for split in Split::ALL {
        for family in families_of(split) {
            assert!(seen.insert(family), "{family:?} in two splits");
        }
    }
    assert_eq!(seen.len(), all.len());
}

#[test]
fn constant_bands_are_disjoint() {
    for a in Split::ALL {
        for b in Split::ALL {
            if a != b {
                assert!(
                    constant_band(a)
                        .iter()
                        .all(|k| !constant_band(b).contains(k))
                );
            }
        }
    }
}

/// A test task is never a train task with new inputs: no family, constant or program
/// text of the held-out splits occurs among train tasks.
#[test]
fn generated_splits_do_not_overlap() {
    let n = 400;
    let mut programs = Vec::new();
    for split in Split::ALL {
        let tasks: Vec<_> = (0..n).map(|seed| generate_task(split, seed)).collect();
        let families: BTreeSet<String> = tasks.iter().map(|t| t.family.clone()).collect();
        let sources: BTreeSet<Vec<String>> = tasks.iter().map(|t| t.buggy_code.clone()).collect();
        for task in &tasks {
            assert_eq!(task.split, split);
            if let Some(k) = task.constant {
                assert!(constant_band(split).contains(&k), "{}", task.id);
            }
        }
        programs.push((split, families, sources));
    }
    for (i, (a, fa, sa)) in programs.iter().enumerate() {
        for (b, fb, sb) in &programs[i + 1..] {
            assert!(fa.is_disjoint(fb), "{a:?} and {b:?} share a family");
            assert!(sa.is_disjoint(sb), "{a:?} and {b:?} share a buggy program");
        }
    }
    // The tasks actually reach every family of each split.
    for (split, families, _) in &programs {
        assert_eq!(families.len(), families_of(*split).len(), "{split:?}");
    }
}

#[test]
fn every_family_split_is_the_declared_one() {
    for family in all_families() {
        let split = family_split(family);
        assert!(families_of(split).contains(&family));
    }
}

#[test]
fn every_task_has_a_detectable_bug_and_the_findmax_edge_cases() {
    for split in Split::ALL {
        for seed in 0..300 {
            let task = generate_task(split, seed);
            assert!(
                !task.id.starts_with("example"),
                "fallback used for {split:?}/{seed}"
            );
            assert_eq!(task.visible_tests.len(), 3);
            let reference = parse_program(&task.reference_code).unwrap();
            let buggy = parse_program(&task.buggy_code).unwrap();
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
            if task.function == "find_max" {
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

/// Independent implementations of each template's specification.
fn oracle(function: &str, k: i64, xs: &[i64]) -> Value {
    match function {
        "find_max" => Value::Int(xs.iter().copied().max().unwrap_or(i64::MIN)),
        "find_min" => Value::Int(xs.iter().copied().min().unwrap_or(i64::MAX)),
        "sum_list" => Value::Int(xs.iter().sum()),
        "count_above" => Value::Int(xs.iter().filter(|&&x| x > k).count() as i64),
        "first_index_above" => Value::Int(xs.iter().position(|&x| x > k).map_or(-1, |i| i as i64)),
        "is_sorted" => Value::Bool(xs.windows(2).all(|w| w[0] <= w[1])),
        "second_largest" => {
            let mut sorted = xs.to_vec();
            sorted.sort_unstable_by(|a, b| b.cmp(a));
            Value::Int(sorted[1])
        }
        "running_product" => Value::List(
            xs.iter()
                .scan(1i64, |p, &x| {
                    *p *= x;
                    Some(*p)
                })
                .collect(),
        ),
        "count_equal" => Value::Int(xs.iter().filter(|&&x| x == k).count() as i64),
        "sum_positive" => Value::Int(xs.iter().filter(|&&x| x > 0).sum()),
        other => panic!("no oracle for {other}"),
    }
}

#[test]
fn reference_programs_match_independent_implementations() {
    let mut rng = RandomStream::new(99, 0);
    let mut functions = BTreeSet::new();
    for split in Split::ALL {
        for seed in 0..200 {
            let task = generate_task(split, seed);
            functions.insert(task.function.clone());
            let reference = parse_program(&task.reference_code).unwrap();
            let k = task.constant.unwrap_or(0);
            for _ in 0..20 {
                let len = 2 + rng.below(6) as usize;
                let xs: Vec<i64> = (0..len).map(|_| i64::from(rng.below(21)) - 10).collect();
                assert_eq!(
                    run(&reference, &xs, 10_000).unwrap(),
                    oracle(&task.function, k, &xs),
                    "{} on {xs:?}",
                    task.id
                );
            }
        }
    }
    assert_eq!(functions.len(), 10);
}

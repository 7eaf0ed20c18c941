//! The correct program, derived from what the student sees: the specification in the
//! prompt and the code listing.
//!
//! The specification names every slot of the grammar but the loop form, with its
//! constants ([`spec_table`] inverts [`Problem::spec`]); the listing shows the loop form,
//! the names and the distractor lines, and differs from the correct program in one line.
//! [`derive_repair`] re-renders the program the specification describes with the
//! listing's names and distractors and returns it when it differs from the listing in
//! exactly one line. The scripted teacher repairs from this, so every call it makes is
//! derivable from its observations; it reads the task's reference only to choose when
//! two derivations fit equally (a test checks that this never happens on the splits).

use std::collections::HashMap;
use std::sync::OnceLock;

use super::grammar::{
    ADD_CONSTANTS, Distractor, GUARD_CONSTANTS, GuardKind, LoopForm, MUL_CONSTANTS, MapKind, Names,
    Problem, Skeleton, render,
};
use super::lang::{Lexeme, Line, LoopRange, lex, parse_line};
use super::task::{ACC_NAMES, AUX_NAMES, DISTRACTOR_NAMES, INDEX_NAMES, ITEM_NAMES};

/// Every specification the grammar writes, with the problem it describes (its loop
/// form is the first valid one: the specification does not name it).
pub fn spec_table() -> &'static HashMap<String, Problem> {
    static TABLE: OnceLock<HashMap<String, Problem>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = HashMap::new();
        for skeleton in Skeleton::all() {
            let guard_constants: Vec<i64> = if skeleton.guard.is_some_and(GuardKind::uses_constant)
            {
                GUARD_CONSTANTS.collect()
            } else {
                vec![0]
            };
            let map_constants: Vec<i64> = match skeleton.map {
                MapKind::Mul => MUL_CONSTANTS.collect(),
                MapKind::Add | MapKind::Sub => ADD_CONSTANTS.collect(),
                MapKind::Identity | MapKind::Neg => vec![0],
            };
            for &guard_constant in &guard_constants {
                for &map_constant in &map_constants {
                    let problem = Problem {
                        skeleton,
                        guard_constant,
                        map_constant,
                    };
                    table.entry(problem.spec()).or_insert(problem);
                }
            }
        }
        table
    })
}

/// The identifiers of a listing.
fn words(code: &[String]) -> Vec<String> {
    code.iter()
        .filter_map(|line| lex(line).ok())
        .flatten()
        .filter_map(|lexeme| match lexeme {
            Lexeme::Word(w) => Some(w),
            _ => None,
        })
        .collect()
}

/// The names of `pool` the listing uses (the pool's first name when it uses none).
fn used(pool: &[&str], words: &[String]) -> Vec<String> {
    let found: Vec<String> = pool
        .iter()
        .filter(|name| words.iter().any(|w| w == *name))
        .map(|name| (*name).to_owned())
        .collect();
    if found.is_empty() {
        vec![pool[0].to_owned()]
    } else {
        found
    }
}

/// The loop form a listing shows (its loop header survives every bug).
fn loop_form(code: &[String]) -> Option<LoopForm> {
    code.iter().find_map(|line| match parse_line(line).ok()? {
        Line::For(_, LoopRange::Each(_)) => Some(LoopForm::Each),
        Line::For(_, LoopRange::Range(..)) => Some(LoopForm::Index),
        Line::While(_) => Some(LoopForm::While),
        _ => None,
    })
}

/// The distractor lines of a listing (assignments to a distractor name), all placed
/// after the header: rendered, that is the same text wherever they were drawn, as long
/// as they precede the loop.
fn distractors(code: &[String]) -> Vec<Distractor> {
    code.iter()
        .filter_map(|line| match parse_line(line).ok()? {
            Line::Assign(name, _) if DISTRACTOR_NAMES.contains(&name.as_str()) => {
                Some((name, line))
            }
            _ => None,
        })
        .map(|(name, line)| Distractor {
            text: line.clone(),
            name,
            before_loop: false,
        })
        .collect()
}

/// Every program the specification and the listing allow that differs from the listing
/// in exactly one line.
pub fn derive_repairs(spec: &str, code: &[String]) -> Vec<Vec<String>> {
    let Some(problem) = spec_table().get(spec) else {
        return Vec::new();
    };
    let Some(Ok(Line::Def(function, params))) = code.first().map(|l| parse_line(l)) else {
        return Vec::new();
    };
    let Some(form) = loop_form(code) else {
        return Vec::new();
    };
    let problem = Problem {
        skeleton: Skeleton {
            loop_form: form,
            ..problem.skeleton
        },
        ..*problem
    };
    if !problem.skeleton.is_valid() {
        return Vec::new();
    }
    let words = words(code);
    let mut distractors = distractors(code);
    // Distractors before the loop come after the initial values: try both places.
    let placements = distractors.len().min(2) + 1;
    let mut out: Vec<Vec<String>> = Vec::new();
    for split in 0..placements {
        for (n, d) in distractors.iter_mut().enumerate() {
            d.before_loop = n >= split;
        }
        for item in used(&ITEM_NAMES, &words) {
            for index in used(&INDEX_NAMES, &words) {
                for acc in used(&ACC_NAMES, &words) {
                    for aux in used(&AUX_NAMES, &words) {
                        let names = Names {
                            function: function.clone(),
                            list: params.first().cloned().unwrap_or_default(),
                            item: item.clone(),
                            index: index.clone(),
                            acc: acc.clone(),
                            aux: aux.clone(),
                        };
                        let candidate: Vec<String> = render(&problem, &names, &distractors)
                            .into_iter()
                            .map(|l| l.text)
                            .collect();
                        let differing = candidate.len() == code.len()
                            && candidate.iter().zip(code).filter(|(a, b)| a != b).count() == 1;
                        if differing && !out.contains(&candidate) {
                            out.push(candidate);
                        }
                    }
                }
            }
        }
    }
    out
}

/// The one repair the specification and the listing determine; among several, the one
/// equal to `reference` (the teacher's only use of it); `None` when none fits.
pub fn derive_repair(spec: &str, code: &[String], reference: &[String]) -> Option<Vec<String>> {
    let mut repairs = derive_repairs(spec, code);
    match repairs.len() {
        0 => None,
        1 => repairs.pop(),
        _ => repairs.into_iter().find(|r| r == reference),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::task::{Split, article_example, generate_task};

    #[test]
    fn every_specification_is_one_problem() {
        let table = spec_table();
        assert!(table.len() > 1000);
        for (spec, problem) in table {
            assert_eq!(&problem.spec(), spec);
        }
    }

    #[test]
    fn the_listing_and_the_spec_determine_the_repair() {
        let task = article_example();
        assert_eq!(
            derive_repairs(&task.spec, &task.buggy_code),
            vec![task.reference_code.clone()]
        );
        for split in Split::ALL {
            for seed in 0..400 {
                let task = generate_task(split, seed);
                let repairs = derive_repairs(&task.spec, &task.buggy_code);
                assert_eq!(repairs, vec![task.reference_code.clone()], "{}", task.id);
            }
        }
    }
}

//! The train / validation / test splits, problem keys and the assignment of keys to
//! splits.
//!
//! ## The key
//! A task's problem is its [`Skeleton`] (the four grammar slots with names turned into
//! slots, every constant into its slot's one band, distractor lines removed), its bug
//! operator and the role of the bug's site: `each.gt.mul.sum:wrong_operator@update`.
//! Renaming variables or the function, drawing new constants, moving or adding
//! distractors and drawing new test inputs keep the key; two tasks with the same key
//! are the same problem in the sense of the article's "copies that only rename
//! variables belong in the same bucket".
//!
//! ## Splits and tiers
//! Every key belongs to at most one split ([`Catalogue::split_of`]), by a fixed hash of
//! names (FNV-1a), so the assignment is the same on every platform and never depends
//! on a draw:
//!
//! 1. **Held-out cells.** A *guard cell* is a (guard, aggregate) pair and an *operator
//!    cell* an (aggregate, bug operator) pair. About 7% of each kind of cell are held
//!    out for test and another 7% for validation (never a sortedness cell, which has too
//!    few keys). A key in a test cell is test tier **B**, in a validation cell
//!    validation tier B; a key in cells of both is used by neither and dropped.
//! 2. **Tier A.** Of the other keys, about 6% go to test and 6% to validation, tier
//!    **A**: their skeleton is trained on with other bugs or sites (a key whose
//!    skeleton has no train key stays in train).
//! 3. The rest is train.
//!
//! So a test task's key is never a train key; a tier-B task's (guard, aggregate) or
//! (aggregate, operator) composition never occurs in train, while each of its slot
//! values and its operator occurs in many train keys (a test checks at least 50).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::grammar::{BugKind, Distractor, Names, Problem, SiteRole, Skeleton, render};

/// A data split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Split {
    /// Training tasks.
    Train,
    /// Held-out problem keys for model selection.
    Validation,
    /// Held-out problem keys for the final report.
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

    /// 0, 1, 2 for train, validation, test (added to the task stream id).
    pub(crate) fn index(self) -> u64 {
        match self {
            Split::Train => 0,
            Split::Validation => 1,
            Split::Test => 2,
        }
    }
}

/// One problem: a skeleton, a bug operator and the role of its site.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ProblemKey {
    /// The slots.
    pub skeleton: Skeleton,
    /// The bug operator.
    pub bug: BugKind,
    /// Where the bug sits.
    pub role: SiteRole,
}

impl ProblemKey {
    /// `skeleton:bug@role`, for example `each.none.id.max:wrong_init@init`.
    pub fn name(&self) -> String {
        format!(
            "{}:{}@{}",
            self.skeleton.name(),
            self.bug.name(),
            self.role.name()
        )
    }

    /// The (guard, aggregate) cell.
    pub fn guard_cell(&self) -> String {
        format!(
            "{}.{}",
            self.skeleton.guard.map_or("none", |g| g.name()),
            self.skeleton.aggregate.name()
        )
    }

    /// The (aggregate, operator) cell.
    pub fn operator_cell(&self) -> String {
        format!("{}.{}", self.skeleton.aggregate.name(), self.bug.name())
    }
}

/// The tier of a held-out key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Tier {
    /// The skeleton is trained on with other bugs or sites.
    A,
    /// A (guard, aggregate) or (aggregate, operator) composition never trained on.
    B,
}

impl Tier {
    /// `A` or `B`.
    pub fn name(self) -> &'static str {
        match self {
            Tier::A => "A",
            Tier::B => "B",
        }
    }
}

/// FNV-1a, 64 bits: a fixed hash of a name, the same on every platform.
pub fn stable_hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, byte| {
        (h ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Per mille of cells held out for each of test and validation.
const HELD_OUT_CELLS_PER_MILLE: u64 = 70;
/// Per mille of the remaining keys held out for each of test and validation (tier A).
const TIER_A_PER_MILLE: u64 = 60;

/// Which held-out split a cell belongs to, if any.
fn cell_split(kind: &str, cell: &str, aggregate_is_sorted: bool) -> Option<Split> {
    if aggregate_is_sorted {
        return None;
    }
    match stable_hash(&format!("{kind}:{cell}")) % 1000 {
        h if h < HELD_OUT_CELLS_PER_MILLE => Some(Split::Test),
        h if h < 2 * HELD_OUT_CELLS_PER_MILLE => Some(Split::Validation),
        _ => None,
    }
}

/// Every key of the grammar with its split and tier.
#[derive(Debug)]
pub struct Catalogue {
    keys: Vec<ProblemKey>,
    place: BTreeMap<ProblemKey, (Split, Option<Tier>)>,
    by_split: [Vec<ProblemKey>; 3],
}

/// The (bug, role) pairs some line of `skeleton` can carry.
fn sites_of(skeleton: Skeleton) -> BTreeSet<(BugKind, SiteRole)> {
    let names = Names::canonical();
    let problem = Problem {
        skeleton,
        guard_constant: 1,
        map_constant: 2,
    };
    let distractor = Distractor {
        text: "n = len(xs)".into(),
        name: "n".into(),
        before_loop: false,
    };
    render(&problem, &names, &[distractor])
        .iter()
        .flat_map(|line| line.mutations.iter().map(|m| (m.bug, m.role)))
        .collect()
}

impl Catalogue {
    fn build() -> Self {
        let mut keys = Vec::new();
        for skeleton in Skeleton::all() {
            for (bug, role) in sites_of(skeleton) {
                keys.push(ProblemKey {
                    skeleton,
                    bug,
                    role,
                });
            }
        }
        let mut place = BTreeMap::new();
        for &key in &keys {
            let sorted = key.skeleton.aggregate == super::grammar::Aggregate::Sorted;
            let cells = [
                cell_split("guard", &key.guard_cell(), sorted),
                cell_split("operator", &key.operator_cell(), sorted),
            ];
            let test = cells.contains(&Some(Split::Test));
            let validation = cells.contains(&Some(Split::Validation));
            let assigned = match (test, validation) {
                (true, true) => continue,
                (true, false) => (Split::Test, Some(Tier::B)),
                (false, true) => (Split::Validation, Some(Tier::B)),
                (false, false) => match stable_hash(&format!("key:{}", key.name())) % 1000 {
                    h if h < TIER_A_PER_MILLE => (Split::Test, Some(Tier::A)),
                    h if h < 2 * TIER_A_PER_MILLE => (Split::Validation, Some(Tier::A)),
                    _ => (Split::Train, None),
                },
            };
            place.insert(key, assigned);
        }
        let trained: BTreeSet<Skeleton> = place
            .iter()
            .filter(|(_, (split, _))| *split == Split::Train)
            .map(|(key, _)| key.skeleton)
            .collect();
        for (key, assigned) in &mut place {
            if assigned.1 == Some(Tier::A) && !trained.contains(&key.skeleton) {
                *assigned = (Split::Train, None);
            }
        }
        let mut by_split: [Vec<ProblemKey>; 3] = Default::default();
        for &key in &keys {
            if let Some((split, _)) = place.get(&key) {
                by_split[split.index() as usize].push(key);
            }
        }
        Self {
            keys,
            place,
            by_split,
        }
    }

    /// Every key of the grammar, dropped ones included, in a fixed order.
    pub fn all_keys(&self) -> &[ProblemKey] {
        &self.keys
    }

    /// The keys of one split, in a fixed order.
    pub fn keys_of(&self, split: Split) -> &[ProblemKey] {
        &self.by_split[split.index() as usize]
    }

    /// The split and tier of a key (`None` for a key no split uses).
    pub fn split_of(&self, key: &ProblemKey) -> Option<(Split, Option<Tier>)> {
        self.place.get(key).copied()
    }
}

/// The shared catalogue (built once, in a few milliseconds).
pub fn catalogue() -> &'static Catalogue {
    static INSTANCE: OnceLock<Catalogue> = OnceLock::new();
    INSTANCE.get_or_init(Catalogue::build)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_fnv1a() {
        // Reference values of FNV-1a 64.
        assert_eq!(stable_hash(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(stable_hash("a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn catalogue_counts() {
        let c = catalogue();
        assert!(c.keys_of(Split::Train).len() >= 2000);
        assert!(c.keys_of(Split::Validation).len() >= 300);
        assert!(c.keys_of(Split::Test).len() >= 300);
    }
}

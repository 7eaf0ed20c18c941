//! Edge-of-competence sampling: training tasks are drawn where the policy's recent pass
//! rate is strictly between 0 and 1, so that a group's rewards are likely to differ and
//! its advantages to carry signal.
//!
//! ## The unit
//! Problem keys rarely repeat (a fresh task per group draws from thousands of keys), so
//! pass rates are kept per coarser unit ([`EdgeUnit`]): the `cell` (the skeleton's
//! aggregate and the bug operator, `max:wrong_init`, a few dozen cells), the
//! `skeleton` (loop form, guard, map and aggregate), or the `key` itself.
//!
//! ## The rule
//! Every sampled group, kept or discarded, adds `(batch, successes, rollouts)` to its
//! unit's history. A unit's recent pass rate is over the groups of the last
//! `edge_recent_steps` batches; with fewer than one group's worth of recent rollouts
//! it is unknown. When a group needs a task, candidates are drawn from the task stream
//! in turn: the first whose unit is unknown or has a recent rate strictly between 0 and
//! 1 is taken; a candidate whose unit recently always failed (`unsolved`) or always
//! succeeded (`solved`) is skipped and counted. After `edge_max_draws` candidates the
//! last one is taken anyway (`forced`). Since old results leave the window, a skipped
//! unit becomes unknown again and is re-measured, so a unit the policy has learned or
//! unlearned in the meantime comes back.
//!
//! ## Cost
//! No extra rollouts: the pass rates come from the rollouts the run trains on (and the
//! groups dynamic sampling discards). A skipped candidate costs one task generation
//! (microseconds). The skips and the forced draws are logged in each GRPO row
//! (`edge_skipped`).
//!
//! The history is part of the checkpoint, so a resumed run draws the same tasks.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// How each group's task is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskSampling {
    /// The next task of the stream.
    #[default]
    Uniform,
    /// The first task at the edge of the policy's competence (see the module docs).
    Edge,
}

/// The unit pass rates are kept by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EdgeUnit {
    /// The skeleton's aggregate and the bug operator (`max:wrong_init`).
    #[default]
    Cell,
    /// The skeleton (`each.none.id.max`).
    Skeleton,
    /// The problem key itself.
    Key,
}

impl EdgeUnit {
    /// The unit of a problem key `loop.guard.map.aggregate:bug@site`.
    pub fn of(self, key: &str) -> String {
        let (skeleton, rest) = key.split_once(':').unwrap_or((key, ""));
        match self {
            EdgeUnit::Key => key.to_owned(),
            EdgeUnit::Skeleton => skeleton.to_owned(),
            EdgeUnit::Cell => {
                let aggregate = skeleton.rsplit('.').next().unwrap_or(skeleton);
                let bug = rest.split('@').next().unwrap_or(rest);
                format!("{aggregate}:{bug}")
            }
        }
    }
}

/// What the recent history says about a unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Too few recent rollouts to judge.
    Unknown,
    /// Recently both solved and failed.
    Edge,
    /// Recently always solved.
    Solved,
    /// Recently never solved.
    Unsolved,
}

impl Verdict {
    /// Whether a task of this unit may be drawn.
    pub fn drawable(self) -> bool {
        matches!(self, Verdict::Unknown | Verdict::Edge)
    }

    /// The name a skip is counted under.
    pub fn skip_reason(self) -> &'static str {
        match self {
            Verdict::Solved => "solved",
            Verdict::Unsolved => "unsolved",
            Verdict::Unknown | Verdict::Edge => "none",
        }
    }
}

/// One sampled group's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupOutcome {
    /// The batch that sampled it.
    pub batch: usize,
    /// Rollouts that solved the task.
    pub successes: usize,
    /// Rollouts in the group.
    pub rollouts: usize,
}

/// Recent outcomes per unit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Competence {
    units: BTreeMap<String, Vec<GroupOutcome>>,
}

impl Competence {
    /// Adds a group's outcome to `unit`'s history.
    pub fn record(&mut self, unit: String, outcome: GroupOutcome) {
        self.units.entry(unit).or_default().push(outcome);
    }

    /// Drops outcomes of batches before `first_batch`, and units left empty.
    pub fn forget_before(&mut self, first_batch: usize) {
        for outcomes in self.units.values_mut() {
            outcomes.retain(|o| o.batch >= first_batch);
        }
        self.units.retain(|_, outcomes| !outcomes.is_empty());
    }

    /// The verdict on `unit` from batches `first_batch..`, judged once it has at least
    /// `min_rollouts` recent rollouts.
    pub fn verdict(&self, unit: &str, first_batch: usize, min_rollouts: usize) -> Verdict {
        let (successes, rollouts) = self
            .units
            .get(unit)
            .into_iter()
            .flatten()
            .filter(|o| o.batch >= first_batch)
            .fold((0, 0), |(s, n), o| (s + o.successes, n + o.rollouts));
        if rollouts < min_rollouts.max(1) {
            Verdict::Unknown
        } else if successes == 0 {
            Verdict::Unsolved
        } else if successes == rollouts {
            Verdict::Solved
        } else {
            Verdict::Edge
        }
    }

    /// Units with a recent outcome.
    pub fn tracked(&self) -> usize {
        self.units.len()
    }

    /// Adds batch `batch`'s sampled groups by `unit`, then forgets what is no longer
    /// among the last `recent_steps` batches.
    pub fn absorb(
        &mut self,
        unit: EdgeUnit,
        recent_steps: usize,
        batch: usize,
        groups: &[SampledGroup],
    ) {
        for group in groups {
            self.record(
                unit.of(&group.key),
                GroupOutcome {
                    batch,
                    successes: group.successes,
                    rollouts: group.rollouts,
                },
            );
        }
        self.forget_before((batch + 1).saturating_sub(recent_steps));
    }
}

/// A group as collection sampled it (kept or discarded): its task's key and outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampledGroup {
    /// The problem key.
    pub key: String,
    /// Rollouts that solved the task.
    pub successes: usize,
    /// Rollouts sampled.
    pub rollouts: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "each.none.id.max:wrong_init@init";

    fn outcome(batch: usize, successes: usize) -> GroupOutcome {
        GroupOutcome {
            batch,
            successes,
            rollouts: 6,
        }
    }

    #[test]
    fn units_of_a_key() {
        assert_eq!(EdgeUnit::Cell.of(KEY), "max:wrong_init");
        assert_eq!(EdgeUnit::Skeleton.of(KEY), "each.none.id.max");
        assert_eq!(EdgeUnit::Key.of(KEY), KEY);
    }

    #[test]
    fn verdicts_follow_the_recent_pass_rate() {
        let mut c = Competence::default();
        assert_eq!(c.verdict("a", 0, 6), Verdict::Unknown);
        c.record("a".into(), outcome(0, 0));
        assert_eq!(c.verdict("a", 0, 6), Verdict::Unsolved);
        // Not enough rollouts to judge yet.
        assert_eq!(c.verdict("a", 0, 12), Verdict::Unknown);
        c.record("a".into(), outcome(3, 6));
        assert_eq!(c.verdict("a", 0, 6), Verdict::Edge);
        // Only the later batch is recent: solved.
        assert_eq!(c.verdict("a", 1, 6), Verdict::Solved);
        assert!(!Verdict::Solved.drawable() && !Verdict::Unsolved.drawable());
        assert!(Verdict::Edge.drawable() && Verdict::Unknown.drawable());
    }

    #[test]
    fn absorbing_a_batch_keeps_the_last_steps_by_unit() {
        let mut c = Competence::default();
        let group = |key: &str, successes| SampledGroup {
            key: key.into(),
            successes,
            rollouts: 6,
        };
        c.absorb(EdgeUnit::Cell, 2, 0, &[group(KEY, 0)]);
        c.absorb(
            EdgeUnit::Cell,
            2,
            1,
            &[group("index.ge.sub.max:wrong_init@init", 6)],
        );
        // Both keys are the cell `max:wrong_init`: one failing and one solving group.
        assert_eq!(c.verdict("max:wrong_init", 0, 6), Verdict::Edge);
        c.absorb(EdgeUnit::Cell, 2, 2, &[]);
        // Batch 0 left the window of the last two.
        assert_eq!(c.verdict("max:wrong_init", 0, 6), Verdict::Solved);
    }

    #[test]
    fn forgetting_old_batches_makes_a_unit_unknown_again() {
        let mut c = Competence::default();
        c.record("a".into(), outcome(2, 6));
        c.record("b".into(), outcome(5, 1));
        c.forget_before(3);
        assert_eq!(c.tracked(), 1);
        assert_eq!(c.verdict("a", 0, 6), Verdict::Unknown);
        assert_eq!(c.verdict("b", 0, 6), Verdict::Edge);
    }
}

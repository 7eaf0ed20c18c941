//! Summary statistics over many episodes (success rate, lengths, end reasons) and over
//! many tasks (distinct problem keys, tiers, bug operators).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::record::EpisodeRecord;
use super::task::Task;

/// Running totals over episodes; [`EpisodeStats::add`] one record at a time.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct EpisodeStats {
    /// Episodes seen.
    pub episodes: usize,
    /// Episodes that finished with the hidden tests passing.
    pub successes: usize,
    /// Episodes that reached an end state (`finish` or the malformed-call rule).
    pub terminated: usize,
    /// Episodes cut off by a budget.
    pub truncated: usize,
    /// Episodes ended by an environment fault.
    pub env_faults: usize,
    /// Sum of model calls.
    pub total_turns: usize,
    /// Sum of sequence lengths (all tokens).
    pub total_tokens: usize,
    /// Sum of generated tokens.
    pub total_generated_tokens: usize,
    /// Longest sequence seen.
    pub max_tokens: usize,
    /// Episodes per end reason.
    pub end_reasons: BTreeMap<String, usize>,
}

impl EpisodeStats {
    /// Adds one episode.
    pub fn add(&mut self, record: &EpisodeRecord) {
        self.episodes += 1;
        self.successes += usize::from(record.success());
        self.terminated += usize::from(record.terminated);
        self.truncated += usize::from(record.truncated);
        self.env_faults += usize::from(record.env_fault);
        self.total_turns += record.calls.len();
        self.total_tokens += record.tokens.len();
        self.total_generated_tokens += record.generated_tokens();
        self.max_tokens = self.max_tokens.max(record.tokens.len());
        *self
            .end_reasons
            .entry(record.end_reason.name().to_owned())
            .or_default() += 1;
    }

    fn mean(&self, total: usize) -> f64 {
        if self.episodes == 0 {
            0.0
        } else {
            total as f64 / self.episodes as f64
        }
    }

    /// Successes over all episodes.
    pub fn success_rate(&self) -> f64 {
        self.mean(self.successes)
    }

    /// Successes over the episodes without an environment fault (the policy's own rate).
    pub fn success_rate_without_faults(&self) -> f64 {
        let clean = self.episodes - self.env_faults;
        if clean == 0 {
            0.0
        } else {
            self.successes as f64 / clean as f64
        }
    }

    /// Mean model calls per episode.
    pub fn mean_turns(&self) -> f64 {
        self.mean(self.total_turns)
    }

    /// Mean sequence length in tokens.
    pub fn mean_tokens(&self) -> f64 {
        self.mean(self.total_tokens)
    }

    /// Mean generated tokens per episode.
    pub fn mean_generated_tokens(&self) -> f64 {
        self.mean(self.total_generated_tokens)
    }
}

/// What a set of tasks covers: how many distinct problems, tiers and bug operators.
/// The distinct sets serialise as their sizes (`distinct_keys`, ...).
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct TaskStats {
    /// Tasks seen.
    pub tasks: usize,
    /// Distinct problem keys.
    #[serde(rename = "distinct_keys", serialize_with = "size")]
    pub keys: BTreeSet<String>,
    /// Distinct skeletons (keys without the bug and its site).
    #[serde(rename = "distinct_skeletons", serialize_with = "size")]
    pub skeletons: BTreeSet<String>,
    /// Distinct bug lines (1-based line numbers).
    #[serde(rename = "distinct_bug_lines", serialize_with = "size")]
    pub bug_lines: BTreeSet<usize>,
    /// Tasks per tier (`A`, `B`; train tasks have none).
    pub tiers: BTreeMap<String, usize>,
    /// Tasks per bug operator.
    pub bugs: BTreeMap<String, usize>,
    /// Tasks per loop form.
    pub layouts: BTreeMap<String, usize>,
}

fn size<T, S: serde::Serializer>(set: &BTreeSet<T>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_u64(set.len() as u64)
}

impl TaskStats {
    /// Adds one task.
    pub fn add(&mut self, task: &Task) {
        self.tasks += 1;
        self.keys.insert(task.key.clone());
        let skeleton = task.key.split(':').next().unwrap_or_default();
        self.skeletons.insert(skeleton.to_owned());
        self.bug_lines.insert(task.bug_line);
        if let Some(tier) = task.tier {
            *self.tiers.entry(tier.name().to_owned()).or_default() += 1;
        }
        *self.bugs.entry(task.bug.name().to_owned()).or_default() += 1;
        *self.layouts.entry(task.layout.clone()).or_default() += 1;
    }
}

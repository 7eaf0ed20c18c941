//! Collection: one batch of groups sampled with a snapshot of the policy, with
//! dynamic sampling's refills and the rollouts it leaves out, counted by reason.
//!
//! The tasks of batch `c`, round `r` come from
//! `RandomStream(seed, TASK_STREAM + 64 c + r)`; rollout `g` of group `i` runs with
//! episode seed `seed ^ (c << 24 | r << 16 | i)` and sample id `g`, so its policy
//! stream is the harness's `POLICY_STREAM + g` of that seed. With `task_sampling = "edge"`, a
//! group's task is the first candidate from that stream whose unit is at the edge of
//! the policy's competence ([`super::competence`]).

use std::collections::{BTreeMap, BTreeSet};

use arlbook_core::agent::{EpisodeIds, Split, Task, generate_task};
use arlbook_core::rng::RandomStream;

use crate::config::TrainConfig;
use crate::learner::sft::demonstration_task;
use crate::policy::generate::roll_out;
use crate::policy::rollout::{EpisodeSpec, Rollout};
use crate::policy::sampling::{policy_info, sampler};
use crate::run::checkpoint::{PendingBatch, StoredRollout};

use super::competence::{Competence, SampledGroup, TaskSampling, Verdict};
use super::remote::{RoundId, Source};

const TASK_STREAM: u64 = 0x6770_0000;

fn episode_seed(seed: u64, batch: usize, round: usize, group: usize) -> u64 {
    seed ^ ((batch as u64) << 24 | (round as u64) << 16 | group as u64)
}

fn all_equal(rewards: &[f64]) -> bool {
    rewards.windows(2).all(|w| w[0] == w[1])
}

/// What collection has gathered so far over its rounds.
#[derive(Default)]
struct Gathered {
    kept: Vec<Vec<Rollout>>,
    discarded: BTreeMap<String, usize>,
    sampled: usize,
    sampled_tokens: usize,
    groups_sampled: usize,
    groups_mixed: usize,
    task_keys: Vec<String>,
    sampled_successes: usize,
    sampled_groups: Vec<SampledGroup>,
    edge_skipped: BTreeMap<String, usize>,
}

impl Gathered {
    fn discard(&mut self, reason: &str, rollouts: usize) {
        *self.discarded.entry(reason.to_owned()).or_default() += rollouts;
    }

    /// Filters one sampled group (environment faults, too small, all equal with
    /// dynamic sampling) and keeps it while the batch has room.
    fn offer(&mut self, mut group: Vec<Rollout>, config: &TrainConfig, key: &str) {
        let g = &config.grpo;
        self.groups_sampled += 1;
        self.sampled_groups.push(SampledGroup {
            key: key.to_owned(),
            successes: group.iter().filter(|r| r.record.success()).count(),
            rollouts: group.len(),
        });
        if g.exclude_env_faults {
            let before = group.len();
            group.retain(|r| !r.record.env_fault);
            self.discard("env_fault", before - group.len());
        }
        if group.len() < 2 {
            self.discard("group_too_small", group.len());
            return;
        }
        let rewards: Vec<f64> = group.iter().map(|r| r.record.reward).collect();
        if !all_equal(&rewards) {
            self.groups_mixed += 1;
        } else if g.dynamic_sampling {
            self.discard("all_equal_group", group.len());
            return;
        }
        if self.kept.len() < g.tasks_per_batch {
            self.kept.push(group);
        }
    }
}

/// The next training task of `task_rng`: a fresh one, or one of SFT's first
/// `task_pool`.
fn draw_task(config: &TrainConfig, task_rng: &mut RandomStream) -> Task {
    let g = &config.grpo;
    if g.task_pool > 0 {
        let pool = u32::try_from(g.task_pool).unwrap_or(u32::MAX);
        demonstration_task(config, task_rng.below(pool) as usize)
    } else {
        generate_task(
            Split::Train,
            u64::from(task_rng.next_u32()) << 32 | u64::from(task_rng.next_u32()),
        )
    }
}

/// The task for one group of batch `index`: the next draw, or with `task_sampling = "edge"` the
/// first of up to `edge_max_draws` draws whose unit `competence` does not rule out
/// (the skipped ones counted by reason in `skipped`, a last draw taken anyway counted
/// as `forced`).
fn group_task(
    config: &TrainConfig,
    index: usize,
    task_rng: &mut RandomStream,
    competence: &Competence,
    skipped: &mut BTreeMap<String, usize>,
) -> Task {
    let g = &config.grpo;
    if g.task_sampling != TaskSampling::Edge {
        return draw_task(config, task_rng);
    }
    let first_batch = (index + 1).saturating_sub(g.edge_recent_steps);
    let mut draws_left = g.edge_max_draws.max(1);
    loop {
        let task = draw_task(config, task_rng);
        draws_left -= 1;
        let verdict: Verdict =
            competence.verdict(&g.edge_unit.of(&task.key), first_batch, g.group_size);
        if verdict.drawable() {
            return task;
        }
        if draws_left == 0 {
            *skipped.entry("forced".to_owned()).or_default() += 1;
            return task;
        }
        *skipped.entry(verdict.skip_reason().to_owned()).or_default() += 1;
    }
}

/// The episodes of round `round` of batch `index`: `wanted` training tasks (fresh ones,
/// or from SFT's first `task_pool`; at the edge of `competence` with
/// `task_sampling = "edge"`), `group_size` rollouts each. Their keys are appended to
/// `gathered.task_keys`.
fn round_specs(
    config: &TrainConfig,
    index: usize,
    round: usize,
    wanted: usize,
    competence: &Competence,
    gathered: &mut Gathered,
) -> Vec<EpisodeSpec> {
    let g = &config.grpo;
    let mut task_rng =
        RandomStream::new(config.seed, TASK_STREAM + 64 * index as u64 + round as u64);
    let mut specs = Vec::with_capacity(wanted * g.group_size);
    for group in 0..wanted {
        let task = group_task(
            config,
            index,
            &mut task_rng,
            competence,
            &mut gathered.edge_skipped,
        );
        gathered.task_keys.push(task.key.clone());
        for sample in 0..g.group_size {
            specs.push(EpisodeSpec {
                task: task.clone(),
                ids: EpisodeIds {
                    group_id: (index * 1000 + round * 100 + group) as u64,
                    sample_id: sample as u64,
                },
                seed: episode_seed(config.seed, index, round, group),
            });
        }
    }
    specs
}

/// Collects batch `index` with policy version `version` from `source` (a snapshot of
/// the policy in this process, or workers running that version); with
/// `task_sampling = "edge"`, its tasks are drawn by `competence`, which then takes in
/// every group the batch sampled.
///
/// # Errors
/// When the model's logits cannot be read back from the device, or the workers'
/// service fails.
pub fn collect(
    config: &TrainConfig,
    source: &mut Source<'_>,
    index: usize,
    version: usize,
    competence: &mut Competence,
) -> anyhow::Result<PendingBatch> {
    let g = &config.grpo;
    let info = policy_info(config, format!("grpo-{version}"));
    let sampler = sampler(config);
    let mut gathered = Gathered::default();
    let rounds = if g.dynamic_sampling {
        g.max_refill_rounds + 1
    } else {
        1
    };
    for round in 0..rounds {
        let wanted = g.tasks_per_batch - gathered.kept.len();
        if wanted == 0 {
            break;
        }
        let specs = round_specs(config, index, round, wanted, competence, &mut gathered);
        let rollouts = match source {
            Source::Local { model, device } => {
                roll_out(model, device, &specs, &config.harness, &sampler, &info)?
            }
            Source::Remote(service) => {
                let groups: Vec<&[EpisodeSpec]> = specs.chunks(g.group_size).collect();
                let round = RoundId {
                    batch: index,
                    round,
                    version,
                };
                service.round(round, &groups)?
            }
        };
        gathered.sampled += rollouts.len();
        gathered.sampled_successes += rollouts.iter().filter(|r| r.record.success()).count();
        gathered.sampled_tokens += rollouts
            .iter()
            .map(|r| r.record.generated_tokens())
            .sum::<usize>();
        for (group, spec) in rollouts
            .chunks(g.group_size)
            .zip(specs.chunks(g.group_size))
        {
            gathered.offer(group.to_vec(), config, &spec[0].task.key);
        }
    }
    if g.task_sampling == TaskSampling::Edge {
        competence.absorb(
            g.edge_unit,
            g.edge_recent_steps,
            index,
            &gathered.sampled_groups,
        );
    }
    Ok(PendingBatch {
        policy_version: version,
        rollouts: gathered
            .kept
            .iter()
            .flatten()
            .map(StoredRollout::from)
            .collect(),
        sampled: gathered.sampled,
        sampled_tokens: gathered.sampled_tokens,
        discarded: gathered.discarded,
        effective_fraction: if gathered.groups_sampled > 0 {
            gathered.groups_mixed as f64 / gathered.groups_sampled as f64
        } else {
            0.0
        },
        task_keys: gathered.task_keys,
        sampled_successes: gathered.sampled_successes,
        edge_skipped: gathered.edge_skipped,
    })
}

/// Splits stored rollouts back into groups (consecutive equal group ids).
pub fn regroup(batch: &PendingBatch) -> Vec<Vec<Rollout>> {
    let mut groups: Vec<Vec<Rollout>> = Vec::new();
    for stored in &batch.rollouts {
        let rollout: Rollout = stored.clone().into();
        match groups.last_mut() {
            Some(last) if last[0].record.group_id == rollout.record.group_id => last.push(rollout),
            _ => groups.push(vec![rollout]),
        }
    }
    groups
}

/// The distinct values of `keys`, sorted.
pub fn distinct(keys: &[String]) -> Vec<String> {
    let set: BTreeSet<&String> = keys.iter().collect();
    set.into_iter().cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::learner::grpo::competence::GroupOutcome;

    fn edge_config() -> TrainConfig {
        let mut config = TrainConfig::default();
        config.grpo.task_sampling = TaskSampling::Edge;
        config.grpo.edge_max_draws = 4;
        config.grpo.group_size = 6;
        config
    }

    /// The task the stream of batch 5, round 0 draws first, and its unit.
    fn first_draw(config: &TrainConfig) -> (Task, String) {
        let mut rng = RandomStream::new(config.seed, TASK_STREAM + 64 * 5);
        let task = draw_task(config, &mut rng);
        let unit = config.grpo.edge_unit.of(&task.key);
        (task, unit)
    }

    fn pick(config: &TrainConfig, competence: &Competence) -> (Task, BTreeMap<String, usize>) {
        let mut rng = RandomStream::new(config.seed, TASK_STREAM + 64 * 5);
        let mut skipped = BTreeMap::new();
        let task = group_task(config, 5, &mut rng, competence, &mut skipped);
        (task, skipped)
    }

    #[test]
    fn unknown_and_edge_units_are_drawn_as_they_come() {
        let config = edge_config();
        let (first, unit) = first_draw(&config);
        let (task, skipped) = pick(&config, &Competence::default());
        assert_eq!(task.key, first.key);
        assert!(skipped.is_empty());
        let mut competence = Competence::default();
        let outcome = GroupOutcome {
            batch: 4,
            successes: 3,
            rollouts: 6,
        };
        competence.record(unit, outcome);
        assert_eq!(pick(&config, &competence).0.key, first.key);
    }

    #[test]
    fn a_unit_always_solved_recently_is_skipped_and_counted() {
        let config = edge_config();
        let (first, unit) = first_draw(&config);
        let mut competence = Competence::default();
        let solved = GroupOutcome {
            batch: 4,
            successes: 6,
            rollouts: 6,
        };
        competence.record(unit.clone(), solved);
        let (task, skipped) = pick(&config, &competence);
        assert_ne!(config.grpo.edge_unit.of(&task.key), unit);
        assert!(skipped["solved"] >= 1);
        // Outside the recent window the unit is unknown again.
        let mut stale = config.clone();
        stale.grpo.edge_recent_steps = 1;
        assert_eq!(pick(&stale, &competence).0.key, first.key);
        // Off, the first draw is taken whatever the history says.
        let mut off = config.clone();
        off.grpo.task_sampling = TaskSampling::Uniform;
        assert_eq!(pick(&off, &competence).0.key, first.key);
    }

    #[test]
    fn after_the_most_draws_one_is_taken_anyway() {
        let mut config = edge_config();
        config.grpo.edge_max_draws = 1;
        let (first, unit) = first_draw(&config);
        let mut competence = Competence::default();
        let unsolved = GroupOutcome {
            batch: 5,
            successes: 0,
            rollouts: 6,
        };
        competence.record(unit, unsolved);
        let (task, skipped) = pick(&config, &competence);
        assert_eq!(task.key, first.key);
        assert_eq!(skipped.get("forced"), Some(&1));
    }
}

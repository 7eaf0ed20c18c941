//! Collection: one batch of groups sampled with a snapshot of the policy, with
//! dynamic sampling's refills and the rollouts it leaves out, counted by reason.
//!
//! The tasks of batch `c`, round `r` come from
//! `RandomStream(seed, TASK_STREAM + 64 c + r)`; rollout `g` of group `i` runs with
//! episode seed `seed ^ (c << 24 | r << 16 | i)` and sample id `g`, so its policy
//! stream is the harness's `POLICY_STREAM + g` of that seed.

use std::collections::{BTreeMap, BTreeSet};

use arlbook_core::agent::{EpisodeIds, Split, generate_task};
use arlbook_core::rng::RandomStream;
use burn::prelude::*;

use crate::checkpoint::{PendingBatch, StoredRollout};
use crate::config::TrainConfig;
use crate::generate::roll_out;
use crate::model::PolicyModel;
use crate::rollout::{EpisodeSpec, Rollout};
use crate::sampling::{policy_info, sampler};
use crate::sft::demonstration_task;

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
}

impl Gathered {
    fn discard(&mut self, reason: &str, rollouts: usize) {
        *self.discarded.entry(reason.to_owned()).or_default() += rollouts;
    }

    /// Filters one sampled group (environment faults, too small, all equal with
    /// dynamic sampling) and keeps it while the batch has room.
    fn offer(&mut self, mut group: Vec<Rollout>, config: &TrainConfig) {
        let g = &config.grpo;
        self.groups_sampled += 1;
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

/// The episodes of round `round` of batch `index`: `wanted` training tasks (fresh ones,
/// or from SFT's first `task_pool`), `group_size` rollouts each. Their keys are
/// appended to `task_keys`.
fn round_specs(
    config: &TrainConfig,
    index: usize,
    round: usize,
    wanted: usize,
    task_keys: &mut Vec<String>,
) -> Vec<EpisodeSpec> {
    let g = &config.grpo;
    let mut task_rng =
        RandomStream::new(config.seed, TASK_STREAM + 64 * index as u64 + round as u64);
    let mut specs = Vec::with_capacity(wanted * g.group_size);
    for group in 0..wanted {
        let task = if g.task_pool > 0 {
            let pool = u32::try_from(g.task_pool).unwrap_or(u32::MAX);
            demonstration_task(config, task_rng.below(pool) as usize)
        } else {
            generate_task(
                Split::Train,
                u64::from(task_rng.next_u32()) << 32 | u64::from(task_rng.next_u32()),
            )
        };
        task_keys.push(task.key.clone());
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

/// Collects batch `index` with `model`, a snapshot of policy version `version`.
///
/// # Errors
/// When the model's logits cannot be read back from the device.
pub fn collect(
    config: &TrainConfig,
    model: &PolicyModel,
    device: &Device,
    index: usize,
    version: usize,
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
        let specs = round_specs(config, index, round, wanted, &mut gathered.task_keys);
        let rollouts = roll_out(model, device, &specs, &config.harness, &sampler, &info)?;
        gathered.sampled += rollouts.len();
        gathered.sampled_successes += rollouts.iter().filter(|r| r.record.success()).count();
        gathered.sampled_tokens += rollouts
            .iter()
            .map(|r| r.record.generated_tokens())
            .sum::<usize>();
        for group in rollouts.chunks(g.group_size) {
            gathered.offer(group.to_vec(), config);
        }
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

//! Greedy validation episodes: one episode at temperature 0 on each of the first
//! validation tasks (episode seed = task index), read by GRPO's validation rows and by
//! the SFT probe.

use anyhow::Result;
use arlbook_core::agent::{EpisodeIds, Split, generate_task};
use burn::prelude::*;

use crate::config::TrainConfig;
use crate::policy::generate::roll_out;
use crate::policy::model::PolicyModel;
use crate::policy::rollout::EpisodeSpec;
use crate::policy::sampling::{Sampler, policy_info};

/// One greedy episode on each of the first `tasks` validation tasks (episode seed =
/// task index), in task order.
pub fn validation_rollouts(
    config: &TrainConfig,
    model: &PolicyModel,
    device: &Device,
    tasks: usize,
) -> Result<Vec<crate::policy::rollout::Rollout>> {
    let specs: Vec<EpisodeSpec> = (0..tasks)
        .map(|i| EpisodeSpec {
            task: generate_task(Split::Validation, i as u64),
            ids: EpisodeIds {
                group_id: i as u64,
                sample_id: 0,
            },
            seed: i as u64,
        })
        .collect();
    let greedy = Sampler {
        temperature: 0.0,
        top_p: None,
    };
    let info = policy_info(config, "validation".to_owned());
    roll_out(model, device, &specs, &config.harness, &greedy, &info)
}

/// Greedy success on the first `tasks` validation tasks ([`validation_rollouts`]).
pub fn validation_success(
    config: &TrainConfig,
    model: &PolicyModel,
    device: &Device,
    tasks: usize,
) -> Result<f64> {
    let rollouts = validation_rollouts(config, model, device, tasks)?;
    Ok(rollouts.iter().filter(|r| r.record.success()).count() as f64 / tasks.max(1) as f64)
}

//! The recovery diagnostic: every arm starts each task from the same wrong first
//! patch and a failing test run, and the share of episodes that still end repaired is
//! reported beside the natural success rate.
//!
//! Measuring recovery only on the runs that fail naturally compares different tasks
//! for different policies (each fails where it fails); a forced opening puts every
//! policy in the same state. The opening is four scripted calls, the first four of a
//! teacher episode with the edit made wrong: `run_tests` (the bug fails a test),
//! `read_code`, `write_code` that rewrites the buggy line as it is (an edit that
//! changes nothing, so the bug stays and the code still parses), and `run_tests`,
//! which fails again. From there the policy acts: it has to read the failure, find the
//! line and fix it. The forced calls use four of the harness's turns.

use anyhow::Result;
use arlbook_core::agent::policy::scripted;
use arlbook_core::agent::{EditMode, HarnessConfig, PolicyInfo, Task, ToolCall};
use burn::prelude::*;

use crate::policy::generate::{ModelGenerator, rollout_threads, try_in_parts};
use crate::policy::model::PolicyModel;
use crate::policy::rollout::{
    Action, EpisodeSpec, Generator, Request, Rollout, answer_with_model, run_lockstep,
};
use crate::policy::sampling::Sampler;

/// The forced opening of `task`.
pub fn wrong_patch_opening(task: &Task) -> Vec<ToolCall> {
    let line = task.bug_line;
    let text = task
        .buggy_code
        .get(line.saturating_sub(1))
        .cloned()
        .unwrap_or_default();
    vec![
        ToolCall::RunTests,
        ToolCall::ReadCode,
        ToolCall::WriteCode {
            line,
            text,
            mode: EditMode::Replace,
        },
        ToolCall::RunTests,
    ]
}

/// A [`Generator`] that plays each episode's opening, then lets the model act.
struct Opening<G> {
    model: G,
    openings: Vec<Vec<ToolCall>>,
    calls: Vec<usize>,
}

impl<G: Generator> Generator for Opening<G> {
    fn generate(&mut self, requests: &mut [Request<'_>], sampler: &Sampler) -> Result<Vec<Action>> {
        let (openings, calls) = (&self.openings, &mut self.calls);
        let (mut actions, generated) =
            answer_with_model(&mut self.model, requests, sampler, |request| {
                let episode = request.episode;
                let call = calls[episode];
                calls[episode] += 1;
                openings[episode].get(call).map(|forced| {
                    let generation = scripted(&forced.to_text(), request.limit);
                    Action {
                        entropy: vec![0.0; generation.tokens.len()],
                        generation,
                        keep: Vec::new(),
                    }
                })
            })?;
        for (k, action) in generated {
            actions[k] = Some(action);
        }
        Ok(actions.into_iter().map(Option::unwrap_or_default).collect())
    }
}

/// Runs `specs` with the model after each task's [`wrong_patch_opening`].
pub fn roll_out_from_wrong_patch(
    model: &PolicyModel,
    device: &Device,
    specs: &[EpisodeSpec],
    harness: &HarnessConfig,
    sampler: &Sampler,
    info: &PolicyInfo,
) -> Result<Vec<Rollout>> {
    try_in_parts(specs, rollout_threads(device), |part| {
        let mut generator = Opening {
            model: ModelGenerator::new(model, device.clone()),
            openings: part.iter().map(|s| wrong_patch_opening(&s.task)).collect(),
            calls: vec![0; part.len()],
        };
        run_lockstep(part, harness, &mut generator, sampler, info)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arlbook_core::agent::{EpisodeIds, Policy, Split, Teacher, generate_task};

    /// A generator that always answers `finish`.
    struct Finisher;

    impl Generator for Finisher {
        fn generate(&mut self, requests: &mut [Request<'_>], _: &Sampler) -> Result<Vec<Action>> {
            Ok(requests
                .iter()
                .map(|r| Action {
                    generation: scripted(&ToolCall::Finish.to_text(), r.limit),
                    ..Action::default()
                })
                .collect())
        }
    }

    fn spec(seed: u64) -> EpisodeSpec {
        EpisodeSpec {
            task: generate_task(Split::Test, seed),
            ids: EpisodeIds {
                group_id: seed,
                sample_id: 0,
            },
            seed,
        }
    }

    #[test]
    fn the_opening_leaves_the_bug_in_place_and_the_tests_failing() {
        let harness = HarnessConfig {
            max_turns: 8,
            max_context_tokens: 640,
            max_new_tokens: 40,
            ..HarnessConfig::default()
        };
        let specs: Vec<EpisodeSpec> = (0..12).map(spec).collect();
        let mut generator = Opening {
            model: Finisher,
            openings: specs.iter().map(|s| wrong_patch_opening(&s.task)).collect(),
            calls: vec![0; specs.len()],
        };
        let sampler = Sampler {
            temperature: 1.0,
            top_p: None,
        };
        let info = Teacher::new(&specs[0].task).info();
        let rollouts = run_lockstep(&specs, &harness, &mut generator, &sampler, &info).unwrap();
        for rollout in &rollouts {
            let calls: Vec<&str> = rollout
                .record
                .calls
                .iter()
                .map(|c| c.action_text.as_str())
                .collect();
            assert_eq!(calls.len(), 5, "{calls:?}");
            assert!(calls[2].starts_with("write_code"), "{calls:?}");
            let after_edit = &rollout.record.calls[3].observation_text;
            assert!(!after_edit.contains(" 0 failed"), "{after_edit}");
            // Giving up after the forced opening never repairs the task.
            assert!(!rollout.record.success(), "{calls:?}");
        }
    }
}

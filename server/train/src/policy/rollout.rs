//! Running many episodes in lockstep so that every model call of a turn is answered
//! by one batched forward pass.
//!
//! Each episode is a [`EpisodeRun`] with its own environment, task and random streams
//! (the harness's `POLICY_STREAM + sample_id` of the episode seed), so episodes stay
//! isolated and a seed reproduces each one whatever else is in the batch. At every
//! turn the driver gathers the contexts of the episodes still running, asks the
//! [`Generator`] for all their actions at once, and feeds each answer back to its
//! episode. A generator that fails (a device readback that did not complete) ends the
//! whole batch with its error: no episode goes on with made-up actions.

use anyhow::{Result, ensure};
use arlbook_core::agent::{
    EpisodeIds, EpisodeRecord, EpisodeRun, Generation, HarnessConfig, PolicyInfo, Task,
};
use arlbook_core::rng::RandomStream;

use crate::policy::sampling::{KeepMask, Sampler};

/// One pending model call.
#[derive(Debug)]
pub struct Request<'a> {
    /// The context token ids.
    pub context: &'a [u32],
    /// Most tokens to generate.
    pub limit: usize,
    /// The episode's policy stream.
    pub rng: &'a mut RandomStream,
    /// The episode's index in the specs given to [`run_lockstep`].
    pub episode: usize,
}

/// A generated action and what the trainer needs besides the record.
#[derive(Debug, Clone, Default)]
pub struct Action {
    /// Tokens and behaviour log-probabilities.
    pub generation: Generation,
    /// Nucleus keep sets, one per generated token (empty without `top_p`).
    pub keep: Vec<KeepMask>,
    /// Entropy of the tempered distribution at each generated token (nats).
    pub entropy: Vec<f64>,
}

/// Something that answers a batch of model calls (the transformer, or a test double).
pub trait Generator {
    /// One action per request, in order. Generation may stop at the end token.
    ///
    /// # Errors
    /// When the model's output cannot be read (a failed device readback).
    fn generate(&mut self, requests: &mut [Request<'_>], sampler: &Sampler) -> Result<Vec<Action>>;
}

/// What [`answer_with_model`] returns: the fixed answers by request index (`None` where
/// the model was asked), and the model's answers as `(request index, action)`.
pub type Answers = (Vec<Option<Action>>, Vec<(usize, Action)>);

/// Answers `requests` partly without the model: `fixed` gives the action of a request
/// it answers itself (a scripted call), and the others go to `model` in one batch.
/// Returns the fixed answers by request index (`None` where the model was asked) and
/// the model's answers as `(request index, action)`, in order.
pub fn answer_with_model<G: Generator>(
    model: &mut G,
    requests: &mut [Request<'_>],
    sampler: &Sampler,
    mut fixed: impl FnMut(&mut Request<'_>) -> Option<Action>,
) -> Result<Answers> {
    let mut actions: Vec<Option<Action>> = Vec::with_capacity(requests.len());
    let mut asked = Vec::new();
    let mut model_requests = Vec::new();
    for (k, request) in requests.iter_mut().enumerate() {
        let action = fixed(request);
        if action.is_none() {
            asked.push(k);
            model_requests.push(Request {
                context: request.context,
                limit: request.limit,
                rng: &mut *request.rng,
                episode: request.episode,
            });
        }
        actions.push(action);
    }
    let generated = model.generate(&mut model_requests, sampler)?;
    Ok((actions, asked.into_iter().zip(generated).collect()))
}

/// An episode to run.
#[derive(Debug, Clone)]
pub struct EpisodeSpec {
    /// The task.
    pub task: Task,
    /// Group and sample ids.
    pub ids: EpisodeIds,
    /// The episode seed.
    pub seed: u64,
}

/// A finished episode with its per-token extras, in generated-token order.
#[derive(Debug, Clone)]
pub struct Rollout {
    /// The record.
    pub record: EpisodeRecord,
    /// Keep sets per generated token (empty without `top_p`).
    pub keep: Vec<KeepMask>,
    /// Entropy per generated token.
    pub entropy: Vec<f64>,
}

/// Runs all `specs` to their end with `generator` answering every turn's calls together.
///
/// # Errors
/// The generator's error, or an answer that does not have one action per call.
pub fn run_lockstep(
    specs: &[EpisodeSpec],
    harness: &HarnessConfig,
    generator: &mut dyn Generator,
    sampler: &Sampler,
    policy: &PolicyInfo,
) -> Result<Vec<Rollout>> {
    let mut runs: Vec<EpisodeRun> = specs
        .iter()
        .map(|s| EpisodeRun::new(&s.task, harness, s.ids, s.seed))
        .collect();
    let mut keep: Vec<Vec<KeepMask>> = vec![Vec::new(); specs.len()];
    let mut entropy: Vec<Vec<f64>> = vec![Vec::new(); specs.len()];
    loop {
        let limits: Vec<Option<usize>> = runs.iter_mut().map(EpisodeRun::next_limit).collect();
        let active: Vec<usize> = (0..runs.len()).filter(|&i| limits[i].is_some()).collect();
        if active.is_empty() {
            break;
        }
        let actions = {
            let mut requests: Vec<Request<'_>> = runs
                .iter_mut()
                .zip(&limits)
                .enumerate()
                .filter_map(|(episode, (run, limit))| {
                    let limit = (*limit)?;
                    let (context, rng) = run.request();
                    Some(Request {
                        context,
                        limit,
                        rng,
                        episode,
                    })
                })
                .collect();
            generator.generate(&mut requests, sampler)?
        };
        ensure!(
            actions.len() == active.len(),
            "the generator answered {} of {} model calls",
            actions.len(),
            active.len()
        );
        for (&i, mut action) in active.iter().zip(actions) {
            // The harness keeps tokens up to the first end token and the limit; cut the
            // per-token extras to what it kept.
            let kept = runs[i].apply(action.generation);
            action.keep.truncate(kept);
            action.entropy.truncate(kept);
            keep[i].extend(action.keep);
            entropy[i].extend(action.entropy);
        }
    }
    Ok(runs
        .into_iter()
        .zip(keep)
        .zip(entropy)
        .map(|((run, keep), entropy)| Rollout {
            record: run.into_record(policy.clone()),
            keep,
            entropy,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arlbook_core::agent::{Policy, Split, Teacher, generate_task, run_episode};

    /// Answers each request with the teacher of its task, found by the prompt.
    struct TeacherBatch {
        teachers: std::collections::HashMap<Vec<u32>, Teacher>,
    }

    fn prompt_of(context: &[u32]) -> Vec<u32> {
        let call = arlbook_core::agent::tokenizer::CALL;
        let end = context
            .iter()
            .position(|&t| t == call)
            .unwrap_or(context.len());
        context[..end].to_vec()
    }

    impl Generator for TeacherBatch {
        fn generate(&mut self, requests: &mut [Request<'_>], _: &Sampler) -> Result<Vec<Action>> {
            Ok(requests
                .iter_mut()
                .map(|r| {
                    let teacher = self.teachers.get_mut(&prompt_of(r.context)).unwrap();
                    let generation = teacher.next_tokens(r.context, r.limit, r.rng);
                    let n = generation.tokens.len();
                    Action {
                        generation,
                        keep: Vec::new(),
                        entropy: vec![0.0; n],
                    }
                })
                .collect())
        }
    }

    #[test]
    fn lockstep_episodes_equal_one_at_a_time_episodes() {
        let harness = HarnessConfig::default();
        // Tasks with distinct prompts, so the test double can tell them apart.
        let mut prompts = std::collections::HashSet::new();
        let specs: Vec<EpisodeSpec> = (0..64)
            .map(|i| EpisodeSpec {
                task: generate_task(Split::Train, i),
                ids: EpisodeIds {
                    group_id: i,
                    sample_id: 0,
                },
                seed: 100 + i,
            })
            .filter(|s| {
                let mut run = EpisodeRun::new(&s.task, &harness, s.ids, s.seed);
                prompts.insert(prompt_of(run.request().0))
            })
            .take(6)
            .collect();
        let mut generator = TeacherBatch {
            teachers: specs
                .iter()
                .map(|s| {
                    let mut run = EpisodeRun::new(&s.task, &harness, s.ids, s.seed);
                    (prompt_of(run.request().0), Teacher::new(&s.task))
                })
                .collect(),
        };
        assert_eq!(generator.teachers.len(), specs.len(), "prompts must differ");
        let info = Teacher::new(&specs[0].task).info();
        let sampler = Sampler {
            temperature: 1.0,
            top_p: None,
        };
        let batched = run_lockstep(&specs, &harness, &mut generator, &sampler, &info).unwrap();
        for (spec, rollout) in specs.iter().zip(&batched) {
            let alone = run_episode(
                &spec.task,
                &mut Teacher::new(&spec.task),
                &harness,
                spec.ids,
                spec.seed,
            );
            assert_eq!(rollout.record, alone);
            assert_eq!(rollout.entropy.len(), alone.generated_tokens());
        }
    }

    /// Fails on its `fail_at`-th call, as a device whose readback broke would.
    struct Failing {
        calls: usize,
        fail_at: usize,
    }

    impl Generator for Failing {
        fn generate(&mut self, requests: &mut [Request<'_>], _: &Sampler) -> Result<Vec<Action>> {
            self.calls += 1;
            ensure!(self.calls < self.fail_at, "the readback failed");
            Ok(requests
                .iter()
                .map(|_| {
                    let generation = Generation {
                        tokens: vec![arlbook_core::agent::tokenizer::END],
                        logprobs: vec![-1.0],
                    };
                    Action {
                        generation,
                        keep: Vec::new(),
                        entropy: vec![0.5],
                    }
                })
                .collect())
        }
    }

    #[test]
    fn a_failing_generator_ends_the_batch_with_its_error() {
        let harness = HarnessConfig::default();
        let specs: Vec<EpisodeSpec> = (0..3)
            .map(|i| EpisodeSpec {
                task: generate_task(Split::Train, i),
                ids: EpisodeIds {
                    group_id: i,
                    sample_id: 0,
                },
                seed: i,
            })
            .collect();
        let info = Teacher::new(&specs[0].task).info();
        let sampler = Sampler {
            temperature: 1.0,
            top_p: None,
        };
        let mut failing = Failing {
            calls: 0,
            fail_at: 1,
        };
        let err = run_lockstep(&specs, &harness, &mut failing, &sampler, &info).unwrap_err();
        assert!(err.to_string().contains("readback failed"), "{err:#}");
        // A generator that works gives every episode its record.
        let mut working = Failing {
            calls: 0,
            fail_at: usize::MAX,
        };
        let rollouts = run_lockstep(&specs, &harness, &mut working, &sampler, &info).unwrap();
        assert_eq!(rollouts.len(), specs.len());
    }
}

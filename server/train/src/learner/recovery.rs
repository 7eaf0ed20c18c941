//! Recovery demonstrations: the teacher taking over from the model's own mistakes
//! (one round of `DAgger`, Ross, Gordon and Bagnell 2011, "A Reduction of Imitation
//! Learning and Structured Prediction to No-Regret Online Learning").
//!
//! Teacher episodes only ever show states the teacher reaches: every edit it makes is
//! right, so its tests pass the first time they run after an edit. A model trained on
//! them alone has never seen a failing test *after* its own edit, and it learns that
//! the call after an edit and a test run is `finish`, whatever the test said. To show
//! it what to do next, the model attempts training tasks at temperature 1 while the
//! teacher watches each call it makes:
//!
//! - while the model's call is the one the teacher would make, the model keeps going;
//! - at its first different call, the teacher takes over. A call that ends the episode
//!   or does not parse (`finish`, a malformed line) is replaced by the teacher's call
//!   and the teacher trains from there; any other call (a wrong edit, say) is carried
//!   out, and the teacher trains from the next call on, recovering from the state the
//!   mistake left (run the tests, read the code, undo or fix).
//!
//! A demonstration keeps the whole episode as context but puts the loss only on the
//! teacher's calls from the take-over on ([`Demonstration::trained_from`]); the
//! model's own calls, the mistake included, are never targets. Only episodes that the
//! teacher completed successfully are kept.

use std::path::Path;

use anyhow::{Context, Result};
use arlbook_core::agent::tokenizer::END;
use arlbook_core::agent::{
    EpisodeIds, EpisodeRecord, HarnessConfig, Policy, PolicyInfo, SpanRole, Split, Teacher,
    ToolCall, generate_task, parse_call, tokenizer,
};
use burn::prelude::*;
use serde::{Deserialize, Serialize};

use crate::policy::generate::{ModelGenerator, rollout_threads, try_in_parts};
use crate::policy::model::PolicyModel;
use crate::policy::rollout::{
    Action, EpisodeSpec, Generator, Request, Rollout, answer_with_model, run_lockstep,
};
use crate::policy::sampling::Sampler;

/// Seed offset of the tasks the model attempts (apart from the teacher's SFT tasks).
const RECOVERY_TASK_SEED: u64 = 0x2EC0_0000_0000;

/// An episode for SFT with the token index its loss starts at.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Demonstration {
    /// The episode.
    pub record: EpisodeRecord,
    /// Index into `record.tokens` of the first token that is a target (0 for a
    /// teacher episode: every generated token is).
    pub trained_from: usize,
}

impl Demonstration {
    /// A whole teacher episode.
    pub fn teacher(record: EpisodeRecord) -> Self {
        Self {
            record,
            trained_from: 0,
        }
    }

    /// Generated tokens at or after `trained_from` (the step's loss divides by their sum).
    pub fn trained_tokens(&self) -> usize {
        self.record
            .spans
            .iter()
            .filter(|s| s.role == SpanRole::Action)
            .map(|s| s.end.saturating_sub(s.start.max(self.trained_from)))
            .sum()
    }
}

/// Who makes an episode's calls: the model until its first mistake, then the teacher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Driver {
    /// The model, which has made this many calls.
    Model(usize),
    /// The teacher, whose calls are targets from this call index on.
    Teacher(usize),
}

/// A [`Generator`] that lets the model act and hands each episode to its teacher at
/// the model's first mistake (see the module docs).
struct TakeOver<G> {
    model: G,
    teachers: Vec<Teacher>,
    drivers: Vec<Driver>,
    /// The harness whose tools decide what parses as a call.
    harness: HarnessConfig,
}

fn teacher_action(teacher: &mut Teacher, request: &mut Request<'_>) -> Action {
    let generation = teacher.next_tokens(request.context, request.limit, request.rng);
    Action {
        entropy: vec![0.0; generation.tokens.len()],
        generation,
        keep: Vec::new(),
    }
}

/// Whether a generated call leaves nothing to recover from: it ends the episode, does
/// not parse, or names a tool `harness` does not have.
fn ends_or_malformed(tokens: &[u32], harness: &HarnessConfig) -> bool {
    let body = tokens.strip_suffix(&[END]).unwrap_or(tokens);
    match parse_call(&tokenizer().decode_text(body)) {
        Ok(ToolCall::Finish) | Err(_) => true,
        Ok(call) => harness.check_tool(&call).is_err(),
    }
}

impl<G: Generator> Generator for TakeOver<G> {
    fn generate(&mut self, requests: &mut [Request<'_>], sampler: &Sampler) -> Result<Vec<Action>> {
        let (drivers, teachers) = (&self.drivers, &mut self.teachers);
        let (mut actions, generated) =
            answer_with_model(&mut self.model, requests, sampler, |request| {
                let episode = request.episode;
                matches!(drivers[episode], Driver::Teacher(_))
                    .then(|| teacher_action(&mut teachers[episode], request))
            })?;
        for (k, action) in generated {
            let request = &mut requests[k];
            let episode = request.episode;
            let Driver::Model(calls) = self.drivers[episode] else {
                continue;
            };
            let wanted = teacher_action(&mut self.teachers[episode], request);
            actions[k] = Some(if action.generation.tokens == wanted.generation.tokens {
                self.drivers[episode] = Driver::Model(calls + 1);
                action
            } else if ends_or_malformed(&action.generation.tokens, &self.harness) {
                self.drivers[episode] = Driver::Teacher(calls);
                wanted
            } else {
                self.drivers[episode] = Driver::Teacher(calls + 1);
                action
            });
        }
        Ok(actions.into_iter().map(Option::unwrap_or_default).collect())
    }
}

/// The token index where call `call` (0-based) of `record` starts, if it made that many.
fn call_start(record: &EpisodeRecord, call: usize) -> Option<usize> {
    record
        .spans
        .iter()
        .filter(|s| s.role == SpanRole::Action)
        .nth(call)
        .map(|s| s.start)
}

/// The model's attempts at `tasks` training tasks (seeded by `seed`) with the teacher
/// taking over at each one's first mistake; the successful take-overs, in task order.
/// Also returns how many of the attempts the model finished without a mistake.
///
/// # Errors
/// When the model's logits cannot be read back from the device.
pub fn collect(
    model: &PolicyModel,
    device: &Device,
    harness: &HarnessConfig,
    seed: u64,
    tasks: usize,
) -> Result<(Vec<Demonstration>, usize)> {
    let specs: Vec<EpisodeSpec> = (0..tasks)
        .map(|i| EpisodeSpec {
            task: generate_task(
                Split::Train,
                seed.wrapping_add(RECOVERY_TASK_SEED) + i as u64,
            ),
            ids: EpisodeIds {
                group_id: i as u64,
                sample_id: 0,
            },
            seed: seed ^ RECOVERY_TASK_SEED ^ i as u64,
        })
        .collect();
    let sampler = Sampler {
        temperature: 1.0,
        top_p: None,
    };
    let info = PolicyInfo {
        name: "arlbook-transformer+teacher".to_owned(),
        version: "recovery".to_owned(),
        sampling: arlbook_core::agent::SamplingSettings::default(),
    };
    let attempts: Vec<(Rollout, Driver)> = try_in_parts(&specs, rollout_threads(device), |part| {
        let mut generator = TakeOver {
            model: ModelGenerator::new(model, device.clone()),
            teachers: part
                .iter()
                .map(|s| Teacher::for_harness(&s.task, harness))
                .collect(),
            drivers: vec![Driver::Model(0); part.len()],
            harness: harness.clone(),
        };
        let rollouts = run_lockstep(part, harness, &mut generator, &sampler, &info)?;
        Ok::<_, anyhow::Error>(rollouts.into_iter().zip(generator.drivers).collect())
    })?;
    let mut clean = 0;
    let mut demonstrations = Vec::new();
    for (rollout, driver) in attempts {
        match driver {
            Driver::Model(_) => clean += 1,
            Driver::Teacher(from_call) => {
                let record = rollout.record;
                if let Some(trained_from) = call_start(&record, from_call)
                    && record.success()
                {
                    demonstrations.push(Demonstration {
                        record,
                        trained_from,
                    });
                }
            }
        }
    }
    Ok((demonstrations, clean))
}

/// Writes `demonstrations` to `path` as JSON lines (through a temporary file, so a
/// crash leaves either the whole file or none).
pub fn save(path: &Path, demonstrations: &[Demonstration]) -> Result<()> {
    let mut text = String::new();
    for d in demonstrations {
        text.push_str(&serde_json::to_string(d)?);
        text.push('\n');
    }
    let partial = path.with_extension("jsonl.partial");
    std::fs::write(&partial, text).with_context(|| format!("writing {}", partial.display()))?;
    std::fs::rename(&partial, path).with_context(|| format!("writing {}", path.display()))
}

/// Reads the demonstrations [`save`] wrote, or `None` when there is no file.
pub fn load(path: &Path) -> Result<Option<Vec<Demonstration>>> {
    if !path.is_file() {
        return Ok(None);
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, line)| {
            serde_json::from_str(line)
                .with_context(|| format!("{} line {}: not a demonstration", path.display(), i + 1))
        })
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arlbook_core::agent::Task;

    /// Plays the teacher's call except at call `at`, where it says `instead`.
    struct OneMistake {
        teachers: Vec<Teacher>,
        calls: Vec<usize>,
        at: usize,
        instead: &'static str,
    }

    impl Generator for OneMistake {
        fn generate(&mut self, requests: &mut [Request<'_>], _: &Sampler) -> Result<Vec<Action>> {
            Ok(requests
                .iter_mut()
                .map(|r| {
                    let call = self.calls[r.episode];
                    self.calls[r.episode] += 1;
                    if call == self.at {
                        let mut tokens = tokenizer().encode(self.instead);
                        tokens.push(END);
                        let n = tokens.len();
                        Action {
                            generation: arlbook_core::agent::Generation {
                                tokens,
                                logprobs: vec![-1.0; n],
                            },
                            keep: Vec::new(),
                            entropy: vec![0.5; n],
                        }
                    } else {
                        teacher_action(&mut self.teachers[r.episode], r)
                    }
                })
                .collect())
        }
    }

    fn take_over(task: &Task, at: usize, instead: &'static str) -> (EpisodeRecord, Driver) {
        let specs = [EpisodeSpec {
            task: task.clone(),
            ids: EpisodeIds {
                group_id: 0,
                sample_id: 0,
            },
            seed: 5,
        }];
        let mut generator = TakeOver {
            model: OneMistake {
                teachers: vec![Teacher::new(task)],
                calls: vec![0],
                at,
                instead,
            },
            teachers: vec![Teacher::new(task)],
            drivers: vec![Driver::Model(0)],
            harness: HarnessConfig::default(),
        };
        let sampler = Sampler {
            temperature: 1.0,
            top_p: None,
        };
        let info = Teacher::new(task).info();
        let mut rollouts = run_lockstep(
            &specs,
            &HarnessConfig::default(),
            &mut generator,
            &sampler,
            &info,
        )
        .unwrap();
        (rollouts.remove(0).record, generator.drivers[0])
    }

    fn action_texts(record: &EpisodeRecord) -> Vec<String> {
        record
            .spans
            .iter()
            .filter(|s| s.role == SpanRole::Action)
            .map(|s| tokenizer().decode_text(&record.tokens[s.start..s.end]))
            .collect()
    }

    #[test]
    fn a_wrong_edit_is_carried_out_and_the_teacher_recovers_after_it() {
        let task = arlbook_core::agent::article_example();
        // Calls: run_tests, read_code, then the mistake: rewrite line 1 as it is.
        let (record, driver) = take_over(&task, 2, "write_code(3, \"for x in xs:\")");
        assert_eq!(driver, Driver::Teacher(3));
        assert!(record.success(), "{:?}", action_texts(&record));
        let texts = action_texts(&record);
        assert!(texts[2].starts_with("write_code(3"), "{texts:?}");
        // After the no-op edit: run the tests, see them fail, read, fix, test, finish.
        assert!(texts[3].starts_with("run_tests"), "{texts:?}");
        let demo = Demonstration {
            trained_from: call_start(&record, 3).unwrap(),
            record,
        };
        let first_three: usize = demo
            .record
            .spans
            .iter()
            .filter(|s| s.role == SpanRole::Action)
            .take(3)
            .map(|s| s.end - s.start)
            .sum();
        assert_eq!(
            demo.trained_tokens(),
            demo.record.generated_tokens() - first_three
        );
    }

    #[test]
    fn a_finish_is_replaced_by_the_teachers_call_which_is_trained() {
        let task = arlbook_core::agent::article_example();
        let (record, driver) = take_over(&task, 1, "finish()");
        assert_eq!(driver, Driver::Teacher(1));
        assert!(record.success());
        assert!(action_texts(&record)[1].starts_with("read_code"));
    }

    #[test]
    fn a_model_without_mistakes_is_never_taken_over() {
        let task = arlbook_core::agent::article_example();
        let (record, driver) = take_over(&task, usize::MAX, "");
        assert!(record.success());
        assert!(matches!(driver, Driver::Model(n) if n == action_texts(&record).len()));
    }

    #[test]
    fn saved_demonstrations_load_back_the_same() {
        let task = arlbook_core::agent::article_example();
        let (record, _) = take_over(&task, 2, "write_code(3, \"for x in xs:\")");
        let demos = vec![Demonstration {
            trained_from: call_start(&record, 3).unwrap(),
            record,
        }];
        let dir = std::env::temp_dir().join(format!("arlbook-recovery-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("recovery.jsonl");
        assert!(load(&path).unwrap().is_none());
        save(&path, &demos).unwrap();
        let back = load(&path).unwrap().unwrap();
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].record, demos[0].record);
        assert_eq!(back[0].trained_from, demos[0].trained_from);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

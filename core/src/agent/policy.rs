//! Policies: the trait a token-level policy implements, the scripted teacher and the
//! uniform-random baseline.
//!
//! A policy sees only the context token IDs (what a language model would see) and
//! returns the tokens it generates with their log-probabilities under itself, the
//! behaviour log-probabilities `log pi_old(y_k | c, y_<k)` the trainer later needs for
//! importance ratios. A generation ends with [`END`].

use serde::{Deserialize, Serialize};

use super::action::{EditMode, ToolCall};
use super::derive::derive_repair;
use super::env::parse_listing;
use super::harness::HarnessConfig;
use super::replacement::{smallest_replacement, smallest_unique_edit};
use super::task::Task;
use super::tokenizer::{CALL, END, OBS, tokenizer};
use crate::rng::RandomStream;

/// How a policy samples (recorded with every episode).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SamplingSettings {
    /// Softmax temperature (1 = the model's own distribution; 0 = greedy).
    pub temperature: f64,
    /// Keep only the `top_k` most likely tokens, when set.
    pub top_k: Option<u32>,
    /// Keep the smallest set of tokens with this much probability, when set.
    pub top_p: Option<f64>,
}

impl Default for SamplingSettings {
    fn default() -> Self {
        Self {
            temperature: 1.0,
            top_k: None,
            top_p: None,
        }
    }
}

/// Who generated an episode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyInfo {
    /// `teacher`, `random`, or the learned model's name.
    pub name: String,
    /// Checkpoint or revision (the policy version of the record).
    pub version: String,
    /// Sampling settings in force.
    pub sampling: SamplingSettings,
}

/// One model call's output.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Generation {
    /// Generated token IDs, normally ending with [`END`].
    pub tokens: Vec<u32>,
    /// `log pi(token | context, earlier tokens)` for each generated token.
    pub logprobs: Vec<f64>,
}

/// A policy over tokens. The learned transformer implements this: it samples with
/// `rng` (so a seed reproduces a rollout) and reports each token's log-probability under
/// the distribution it actually sampled from (after temperature / top-k / top-p).
pub trait Policy {
    /// Name, version and sampling settings, copied into every record.
    fn info(&self) -> PolicyInfo;
    /// Generates at most `max_new_tokens` tokens after `context`.
    fn next_tokens(
        &mut self,
        context: &[u32],
        max_new_tokens: usize,
        rng: &mut RandomStream,
    ) -> Generation;
}

/// Emits `text` followed by [`END`] with log-probability 0 (a deterministic policy),
/// cut at `max_new_tokens`.
pub fn scripted(text: &str, max_new_tokens: usize) -> Generation {
    let mut tokens = tokenizer().encode(text);
    tokens.push(END);
    tokens.truncate(max_new_tokens);
    let logprobs = vec![0.0; tokens.len()];
    Generation { tokens, logprobs }
}

/// The scripted teacher: runs the tests, reads the code, rewrites each line that
/// differs from the correct program, reruns the tests and finishes once they pass.
///
/// It decides from the context alone (the last observation), like a model would. The
/// correct program it edits toward is derived from what the student sees, the
/// specification and the first listing ([`derive_repair`]); the task's reference is
/// read only to choose between equally fitting derivations, and stands in if none fits
/// (a test checks both never happen on the splits). Its episodes are demonstrations
/// for supervised fine-tuning.
#[derive(Debug, Clone)]
pub struct Teacher {
    reference: Vec<String>,
    replace_tool: bool,
    edit_tool: bool,
}

impl Teacher {
    /// The teacher for one task, with the default harness's tools (whole-line
    /// `write_code` edits).
    pub fn new(task: &Task) -> Self {
        let reference = derive_repair(&task.spec, &task.buggy_code, &task.reference_code)
            .unwrap_or_else(|| task.reference_code.clone());
        Self {
            reference,
            replace_tool: false,
            edit_tool: false,
        }
    }

    /// The teacher for one task under `harness`: a line it rewrites in place becomes
    /// the smallest `edit` call with `edit_tool` on (when the line has a text unique
    /// in the file), else the smallest `replace` call with `replace_tool` on, else a
    /// whole-line `write_code` ([`super::replacement`]).
    pub fn for_harness(task: &Task, harness: &HarnessConfig) -> Self {
        Self {
            replace_tool: harness.replace_tool,
            edit_tool: harness.edit_tool,
            ..Self::new(task)
        }
    }

    /// The call the teacher makes after the given last observation (`None` at the
    /// start of an episode).
    pub fn decide(&self, last_observation: Option<&str>) -> ToolCall {
        let Some(observation) = last_observation else {
            return ToolCall::RunTests;
        };
        // A listing, or a refused edit's error followed by the listing
        // (`HarnessConfig::listing_on_refusal`).
        let listed = parse_listing(observation).or_else(|| {
            let (first, rest) = observation.split_once('\n')?;
            first.starts_with("error:").then(|| parse_listing(rest))?
        });
        if let Some(code) = listed {
            return self.first_edit(&code).unwrap_or(ToolCall::RunTests);
        }
        let first_line = observation.lines().next().unwrap_or("");
        if first_line.ends_with(" 0 failed") {
            return ToolCall::Finish;
        }
        if first_line.starts_with("ok:") {
            return ToolCall::RunTests;
        }
        // A failing test, a parse error or a rejected edit: look at the code again.
        ToolCall::ReadCode
    }

    /// The first edit that moves `code` toward the reference.
    fn first_edit(&self, code: &[String]) -> Option<ToolCall> {
        let first_difference = code
            .iter()
            .zip(&self.reference)
            .position(|(have, want)| have != want);
        let line = match first_difference {
            Some(i) => i,
            None if code.len() == self.reference.len() => return None,
            None => code.len().min(self.reference.len()),
        };
        let (mode, text) = match code.len().cmp(&self.reference.len()) {
            std::cmp::Ordering::Greater => (EditMode::Delete, String::new()),
            std::cmp::Ordering::Less => (EditMode::Insert, self.reference[line].clone()),
            std::cmp::Ordering::Equal => {
                if self.edit_tool
                    && let Some((old, new)) =
                        smallest_unique_edit(code, line, &self.reference[line])
                {
                    return Some(ToolCall::EditText { old, new });
                }
                if self.replace_tool
                    && let Some((old, new)) =
                        smallest_replacement(&code[line], &self.reference[line])
                {
                    return Some(ToolCall::ReplaceText {
                        line: line + 1,
                        old,
                        new,
                    });
                }
                (EditMode::Replace, self.reference[line].clone())
            }
        };
        Some(ToolCall::WriteCode {
            line: line + 1,
            text,
            mode,
        })
    }
}

/// The text of the last observation in `context`: after the last [`OBS`], up to the
/// [`CALL`] that hands the turn back.
pub fn last_observation(context: &[u32]) -> Option<String> {
    let start = context.iter().rposition(|&t| t == OBS)? + 1;
    let end = context[start..]
        .iter()
        .position(|&t| t == CALL)
        .map_or(context.len(), |p| start + p);
    Some(tokenizer().decode_text(&context[start..end]))
}

impl Policy for Teacher {
    fn info(&self) -> PolicyInfo {
        PolicyInfo {
            name: "teacher".to_owned(),
            version: "scripted-1".to_owned(),
            sampling: SamplingSettings {
                temperature: 0.0,
                top_k: None,
                top_p: None,
            },
        }
    }

    fn next_tokens(
        &mut self,
        context: &[u32],
        max_new_tokens: usize,
        _: &mut RandomStream,
    ) -> Generation {
        let call = self.decide(last_observation(context).as_deref());
        scripted(&call.to_text(), max_new_tokens)
    }
}

/// Draws every token uniformly from the whole vocabulary until it draws [`END`]; each
/// token's log-probability is `-ln V`. One `below(V)` draw per token.
#[derive(Debug, Clone, Copy, Default)]
pub struct UniformRandom;

impl Policy for UniformRandom {
    fn info(&self) -> PolicyInfo {
        PolicyInfo {
            name: "random".to_owned(),
            version: "uniform-1".to_owned(),
            sampling: SamplingSettings::default(),
        }
    }

    fn next_tokens(
        &mut self,
        _: &[u32],
        max_new_tokens: usize,
        rng: &mut RandomStream,
    ) -> Generation {
        let vocab = tokenizer().vocab_size() as u32;
        let logprob = -f64::from(vocab).ln();
        let mut out = Generation::default();
        while out.tokens.len() < max_new_tokens {
            let token = rng.below(vocab);
            out.tokens.push(token);
            out.logprobs.push(logprob);
            if token == END {
                break;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::task::article_example;

    #[test]
    fn teacher_follows_test_read_fix_test_finish() {
        let teacher = Teacher::new(&article_example());
        assert_eq!(teacher.decide(None), ToolCall::RunTests);
        assert_eq!(
            teacher.decide(Some("3 tests: 2 passed, 1 failed\nfail ...")),
            ToolCall::ReadCode
        );
        let listing = ARTICLE_LISTING;
        assert_eq!(
            teacher.decide(Some(listing)),
            ToolCall::WriteCode {
                line: 2,
                text: "best = xs[0]".into(),
                mode: EditMode::Replace
            }
        );
        assert_eq!(
            teacher.decide(Some("ok: line 2 is now best = xs[0]")),
            ToolCall::RunTests
        );
        assert_eq!(
            teacher.decide(Some("3 tests: 3 passed, 0 failed")),
            ToolCall::Finish
        );
    }

    #[test]
    fn with_the_replace_tool_the_teacher_writes_the_smallest_replacement() {
        let harness = HarnessConfig {
            replace_tool: true,
            ..HarnessConfig::default()
        };
        let teacher = Teacher::for_harness(&article_example(), &harness);
        let listing = ARTICLE_LISTING;
        assert_eq!(
            teacher.decide(Some(listing)),
            ToolCall::ReplaceText {
                line: 2,
                old: "0".into(),
                new: "xs[0]".into()
            }
        );
        // A refused edit sends it back to the listing.
        assert_eq!(
            teacher.decide(Some("error: line 2 does not contain \"1\"")),
            ToolCall::ReadCode
        );
    }

    #[test]
    fn with_the_edit_tool_the_teacher_writes_the_smallest_text_unique_in_the_file() {
        let harness = HarnessConfig {
            edit_tool: true,
            replace_tool: true,
            ..HarnessConfig::default()
        };
        let teacher = Teacher::for_harness(&article_example(), &harness);
        let listing = ARTICLE_LISTING;
        assert_eq!(
            teacher.decide(Some(listing)),
            ToolCall::EditText {
                old: "0".into(),
                new: "xs[0]".into()
            }
        );
        // A line with no unique text falls back to the line-addressed tools.
        let mut task = article_example();
        task.buggy_code = vec![
            "def find_max(xs):".into(),
            "best = xs[0]".into(),
            "for x in xs:".into(),
            "if x > best:".into(),
            "best = x".into(),
            "end".into(),
            "end".into(),
            "end".into(),
        ];
        let teacher = Teacher::for_harness(&task, &harness);
        let listing = "1 def find_max(xs):\n2   best = xs[0]\n3   for x in xs:\n4     if x > best:\n5       best = x\n6     end\n7   end\n8   end";
        assert!(matches!(
            teacher.decide(Some(listing)),
            ToolCall::ReplaceText { line: 8, .. }
        ));
    }

    /// The article task's starting listing, as `read_code` shows it.
    const ARTICLE_LISTING: &str = "1 def find_max(xs):\n2   best = 0\n3   for x in xs:\n4     if x > best:\n5       best = x\n6     end\n7   end\n8   return best";

    #[test]
    fn random_policy_reports_uniform_logprobs() {
        let mut rng = RandomStream::new(3, 0);
        let g = UniformRandom.next_tokens(&[], 20, &mut rng);
        let v = tokenizer().vocab_size() as f64;
        assert!(g.tokens.len() <= 20);
        assert!(g.logprobs.iter().all(|&l| (l + v.ln()).abs() < 1e-12));
    }
}

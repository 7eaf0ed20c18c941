//! The trajectory record of one episode: token-in, token-out.
//!
//! ## Design
//! - `tokens` is the whole episode as one causal sequence: the prompt span, then for
//!   each model call its action span (the generated tokens, ending with the end token)
//!   and the observation span the harness appended. No context is ever rewritten, so
//!   the context fed to call `k` is exactly a prefix of `tokens`; `calls[k].context_ids`
//!   stores it anyway, because that is what the trainer must reproduce, and
//!   [`EpisodeRecord::check_consistency`] proves the two agree.
//! - Behaviour log-probabilities are stored per generated token, as the sampling policy
//!   reported them. Re-tokenising the transcript text is never needed.
//! - Termination and truncation are separate: `terminated` means the episode reached an
//!   end state (`finish`, or the malformed-call rule); `truncated` means a budget cut it
//!   off. An environment fault is neither and is excluded from training.

use serde::{Deserialize, Serialize};

use super::action::ToolCall;
use super::harness::HarnessConfig;
use super::policy::PolicyInfo;
use super::task::Split;
use super::tokenizer::{END, tokenizer};

/// What a span of the token sequence is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpanRole {
    /// The harness's first context: task, spec and tool list.
    Prompt,
    /// Tokens the policy generated (the only ones that carry loss).
    Action,
    /// A tool result written by the harness.
    Observation,
}

/// A half-open range `[start, end)` of `tokens` with its role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    /// The role.
    pub role: SpanRole,
    /// First token index.
    pub start: usize,
    /// One past the last token index.
    pub end: usize,
}

/// Why an episode ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// The policy called `finish` (terminated).
    Finish,
    /// Too many malformed calls in a row (terminated by the task rule).
    MalformedLimit,
    /// The turn budget ran out (truncated).
    TurnBudget,
    /// The token budget ran out (truncated).
    TokenBudget,
    /// The executor crashed (environment fault; not the policy's doing).
    EnvFault,
}

impl EndReason {
    /// The `snake_case` name.
    pub fn name(self) -> &'static str {
        match self {
            EndReason::Finish => "finish",
            EndReason::MalformedLimit => "malformed_limit",
            EndReason::TurnBudget => "turn_budget",
            EndReason::TokenBudget => "token_budget",
            EndReason::EnvFault => "env_fault",
        }
    }

    /// Whether the episode reached an end state of the task.
    pub fn is_terminated(self) -> bool {
        matches!(self, EndReason::Finish | EndReason::MalformedLimit)
    }

    /// Whether a budget cut the episode off.
    pub fn is_truncated(self) -> bool {
        matches!(self, EndReason::TurnBudget | EndReason::TokenBudget)
    }
}

/// One model call and what the harness did with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelCall {
    /// The exact token IDs fed to the policy.
    pub context_ids: Vec<u32>,
    /// The token IDs it generated (ending with the end token unless cut off).
    pub generated_ids: Vec<u32>,
    /// Behaviour log-probability of each generated token.
    pub behaviour_logprobs: Vec<f64>,
    /// The action text (generated tokens before the end token, decoded).
    pub action_text: String,
    /// The parsed call, when the action parsed.
    pub call: Option<ToolCall>,
    /// Why the action did not parse, when it did not.
    pub parse_error: Option<String>,
    /// The observation token IDs the harness appended (empty after `finish`).
    pub observation_ids: Vec<u32>,
    /// The observation text (without the surrounding special tokens).
    pub observation_text: String,
    /// Whether this call's tool execution hit an injected environment fault.
    pub env_fault: bool,
}

/// The record of one episode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeRecord {
    /// The task id (`split/seed`).
    pub task_id: String,
    /// The task's family (`template/bug`).
    pub family: String,
    /// The task's split.
    pub split: Split,
    /// Group id (episodes on the same task compared with each other).
    pub group_id: u64,
    /// Sample id within the group.
    pub sample_id: u64,
    /// The episode seed (policy and fault streams derive from it).
    pub seed: u64,
    /// Who generated the actions, and how.
    pub policy: PolicyInfo,
    /// The harness settings.
    pub harness: HarnessConfig,
    /// Tokenizer version tag.
    pub tokenizer: String,
    /// Environment version tag.
    pub env_version: String,
    /// The whole episode's token IDs.
    pub tokens: Vec<u32>,
    /// Role spans covering `tokens` in order, without gaps.
    pub spans: Vec<Span>,
    /// Every model call.
    pub calls: Vec<ModelCall>,
    /// Why the episode ended.
    pub end_reason: EndReason,
    /// `end_reason.is_terminated()`.
    pub terminated: bool,
    /// `end_reason.is_truncated()`.
    pub truncated: bool,
    /// Whether an environment fault ended the episode.
    pub env_fault: bool,
    /// 1 if the hidden tests passed at `finish`, else 0.
    pub reward: f64,
    /// Fraction of visible tests the code passed before call `t` (`t = 0..=T`, the
    /// last entry after the final call): the shaping potential's raw values.
    pub visible_pass_fraction: Vec<f64>,
}

impl EpisodeRecord {
    /// Whether the episode succeeded (finished with the hidden tests passing).
    pub fn success(&self) -> bool {
        self.reward > 0.0
    }

    /// The reward for training, or `None` when an environment fault makes the outcome
    /// say nothing about the policy.
    pub fn training_reward(&self) -> Option<f64> {
        (!self.env_fault).then_some(self.reward)
    }

    /// Number of generated tokens (the `L_i` of the article).
    pub fn generated_tokens(&self) -> usize {
        self.calls.iter().map(|c| c.generated_ids.len()).sum()
    }

    /// Checks that the record is internally exact: contexts are prefixes of `tokens`,
    /// generated and observation IDs sit where the spans say, log-probabilities line up,
    /// texts decode from the IDs, and the flags agree with the end reason.
    pub fn check_consistency(&self) -> Result<(), String> {
        let t = tokenizer();
        let mut pos = 0;
        for (i, span) in self.spans.iter().enumerate() {
            if span.start != pos || span.end < span.start || span.end > self.tokens.len() {
                return Err(format!("span {i} does not continue at token {pos}"));
            }
            pos = span.end;
        }
        if pos != self.tokens.len() {
            return Err("spans do not cover every token".to_owned());
        }
        let mut actions = self.spans.iter().filter(|s| s.role == SpanRole::Action);
        for (k, call) in self.calls.iter().enumerate() {
            let span = actions
                .next()
                .ok_or(format!("call {k} has no action span"))?;
            if call.context_ids.as_slice() != &self.tokens[..span.start] {
                return Err(format!(
                    "call {k}: context is not the prefix before its action"
                ));
            }
            if call.generated_ids.as_slice() != &self.tokens[span.start..span.end] {
                return Err(format!(
                    "call {k}: generated ids differ from the action span"
                ));
            }
            if call.behaviour_logprobs.len() != call.generated_ids.len() {
                return Err(format!("call {k}: one log-probability per generated token"));
            }
            let text_ids: Vec<u32> = call
                .generated_ids
                .iter()
                .copied()
                .take_while(|&id| id != END)
                .collect();
            if t.decode(&text_ids) != call.action_text {
                return Err(format!(
                    "call {k}: action text does not decode from its ids"
                ));
            }
            let obs_end = span.end + call.observation_ids.len();
            if self.tokens.get(span.end..obs_end) != Some(call.observation_ids.as_slice()) {
                return Err(format!(
                    "call {k}: observation ids do not follow the action"
                ));
            }
            if t.decode_text(&call.observation_ids) != call.observation_text {
                return Err(format!("call {k}: observation text does not decode"));
            }
        }
        if actions.next().is_some() {
            return Err("more action spans than calls".to_owned());
        }
        let flags_agree = self.terminated == self.end_reason.is_terminated()
            && self.truncated == self.end_reason.is_truncated()
            && self.env_fault == (self.end_reason == EndReason::EnvFault);
        if !flags_agree {
            return Err("terminated / truncated / env_fault disagree with end_reason".to_owned());
        }
        if self.visible_pass_fraction.len() != self.calls.len() + 1 {
            return Err("visible_pass_fraction needs one entry per call plus one".to_owned());
        }
        Ok(())
    }

    /// Per-position flag: 1 where the token was generated by the policy (spans outside
    /// `tokens`, possible only in a hand-edited record, are ignored).
    pub fn generated_mask(&self) -> Vec<u8> {
        let mut mask = vec![0u8; self.tokens.len()];
        for span in self.spans.iter().filter(|s| s.role == SpanRole::Action) {
            if let Some(slots) = mask.get_mut(span.start..span.end) {
                slots.fill(1);
            }
        }
        mask
    }

    /// Per-position behaviour log-probability (0 where the token was not generated).
    pub fn behaviour_logprob_by_position(&self) -> Vec<f64> {
        let mut out = vec![0.0; self.tokens.len()];
        let actions = self.spans.iter().filter(|s| s.role == SpanRole::Action);
        for (span, call) in actions.zip(&self.calls) {
            let slots = out.get_mut(span.start..span.end).unwrap_or_default();
            for (slot, &logprob) in slots.iter_mut().zip(&call.behaviour_logprobs) {
                *slot = logprob;
            }
        }
        out
    }
}

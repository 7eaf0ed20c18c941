//! The harness: builds the prompt, calls the policy, parses its action, runs the tool,
//! appends the observation and decides whether to go on.
//!
//! ## Loop
//! Before each model call the harness stops with `turn_budget` if `max_turns` calls
//! were made, or with `token_budget` if the context has no room left. The policy may
//! generate up to `min(max_new_tokens, room)` tokens. An action without the end token is
//! cut off by the token budget when the room was the limit, and is a malformed call
//! otherwise. `max_malformed` malformed calls in a row end the episode (a task rule, so
//! it counts as terminated). `finish` grades the code on the hidden tests.
//!
//! ## Randomness
//! The policy draws from stream `POLICY_STREAM + sample_id` of the episode seed; the
//! injected executor crash draws one `bernoulli(fault_probability)` per executed
//! `run_tests` and per grading at `finish`, from stream `FAULT_STREAM + sample_id`
//! (both sums wrap, so no sample id overflows).

use serde::{Deserialize, Serialize};

use super::action::{ToolCall, parse_call, tool_spec, unknown_tool};
use super::env::CodeEnv;
use super::interp::DEFAULT_STEP_LIMIT;
use super::policy::{Generation, Policy, PolicyInfo};
use super::record::{EndReason, EpisodeRecord, ModelCall, Span, SpanRole};
use super::task::Task;
use super::tokenizer::{BOS, CALL, END, OBS, TOKENIZER_VERSION, Tokenizer, tokenizer};
use crate::rng::RandomStream;

/// Stream id base of the policy's draws (the sample id is added).
pub const POLICY_STREAM: u64 = 0x5011_0000_0000;
/// Stream id base of the injected faults (the sample id is added).
pub const FAULT_STREAM: u64 = 0xFA17_0000_0000;
/// Environment version tag stored in every record.
pub const ENV_VERSION: &str = "arlbook-code-repair-2";
/// The observation an injected executor crash produces.
pub const FAULT_OBSERVATION: &str = "error: the executor crashed (environment fault)";

/// The harness settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[allow(
    clippy::struct_excessive_bools,
    reason = "independent on/off harness settings, each a TOML boolean of its own"
)]
pub struct HarnessConfig {
    /// Most model calls per episode. Default 12.
    pub max_turns: usize,
    /// Most tokens of context a model call may see, generated tokens included.
    /// Default 1280: the longest teacher episode with two failed repairs first fits
    /// with room to spare (`core/tests/agent_episodes.rs`).
    pub max_context_tokens: usize,
    /// Most tokens one action may have, end token included. Default 48.
    pub max_new_tokens: usize,
    /// Malformed calls in a row that end the episode. Default 3.
    pub max_malformed: usize,
    /// Probability in `[0, 1]` that an executor run crashes. Default 0.
    pub fault_probability: f64,
    /// Interpreter steps per test run. Default 10000.
    pub step_limit: u64,
    /// Whether the `replace(line, "old", "new")` tool exists (listed in the prompt,
    /// used by the teacher for one-line repairs). Default false: without it a
    /// `replace` call is an unknown tool.
    pub replace_tool: bool,
    /// Whether the `edit("old", "new")` tool exists: an edit addressed by its text,
    /// `old` unique in the file, no line number (listed in the prompt, used by the
    /// teacher for one-line repairs whose line has a unique text; it takes precedence
    /// over `replace` there). Default false: without it an `edit` call is an unknown
    /// tool.
    pub edit_tool: bool,
    /// Whether an edit that names a variable absent from the starting listing is
    /// refused with an error observation. Default false.
    pub name_check: bool,
    /// Whether the observation of a refused edit (any edit tool) goes on with the
    /// current listing, as `read_code()` prints it, so the next call is made with the
    /// code just above it, the way edit tools of coding agents show the file after a
    /// failed edit. Default false: the error line alone.
    pub listing_on_refusal: bool,
}

impl Default for HarnessConfig {
    fn default() -> Self {
        Self {
            max_turns: 12,
            max_context_tokens: 1280,
            max_new_tokens: 48,
            max_malformed: 3,
            fault_probability: 0.0,
            step_limit: DEFAULT_STEP_LIMIT,
            replace_tool: false,
            edit_tool: false,
            name_check: false,
            listing_on_refusal: false,
        }
    }
}

impl HarnessConfig {
    /// The tool list the prompt shows.
    pub fn tool_spec(&self) -> String {
        tool_spec(self.replace_tool, self.edit_tool)
    }

    /// Whether `call` names a tool this harness has; `Err` is the observation.
    pub fn check_tool(&self, call: &ToolCall) -> Result<(), String> {
        match call {
            ToolCall::ReplaceText { .. } if !self.replace_tool => Err(unknown_tool("replace")),
            ToolCall::EditText { .. } if !self.edit_tool => Err(unknown_tool("edit")),
            _ => Ok(()),
        }
    }
}

/// Ids that place an episode in a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct EpisodeIds {
    /// Group id (same task, compared within the group).
    pub group_id: u64,
    /// Sample id within the group.
    pub sample_id: u64,
}

/// The first context's text: the request, the spec and the harness's tool list.
pub fn prompt_text(task: &Task, config: &HarnessConfig) -> String {
    format!(
        "task: fix {} so that all tests pass.\nspec: {}\n{}",
        task.function,
        task.spec,
        config.tool_spec()
    )
}

struct Transcript<'a> {
    tokenizer: &'a Tokenizer,
    tokens: Vec<u32>,
    spans: Vec<Span>,
}

impl Transcript<'_> {
    fn push(&mut self, role: SpanRole, ids: &[u32]) {
        let start = self.tokens.len();
        self.tokens.extend_from_slice(ids);
        self.spans.push(Span {
            role,
            start,
            end: self.tokens.len(),
        });
    }

    fn observation_ids(&self, text: &str) -> Vec<u32> {
        let mut ids = vec![OBS];
        ids.extend(self.tokenizer.encode(text));
        ids.push(CALL);
        ids
    }
}

/// What the harness does with one parsed call.
enum Step {
    Continue(String),
    End(EndReason, String),
}

fn execute(env: &mut CodeEnv, call: &ToolCall, crashed: bool, config: &HarnessConfig) -> Step {
    if crashed {
        return Step::End(EndReason::EnvFault, FAULT_OBSERVATION.to_owned());
    }
    let edited = match call {
        ToolCall::RunTests => return Step::Continue(env.run_tests()),
        ToolCall::ReadCode => return Step::Continue(env.read_code()),
        ToolCall::Finish => return Step::End(EndReason::Finish, String::new()),
        ToolCall::WriteCode { line, text, mode } => env.write_code(*line, text, *mode),
        ToolCall::ReplaceText { line, old, new } => env.replace_text(*line, old, new),
        ToolCall::EditText { old, new } => env.edit_text(old, new),
    };
    Step::Continue(match edited {
        Ok(text) => text,
        Err(error) if config.listing_on_refusal => format!("{error}\n{}", env.read_code()),
        Err(error) => error,
    })
}

/// A generation cut to its first end token and the limit, decoded and parsed.
struct Action {
    generated: Vec<u32>,
    logprobs: Vec<f64>,
    text: String,
    has_end: bool,
    parsed: Result<ToolCall, String>,
}

fn read_action(generation: Generation, limit: usize, config: &HarnessConfig) -> Action {
    let tokenizer = tokenizer();
    // Keep exactly what the policy produced, up to its first end token and the limit.
    let mut generated: Vec<u32> = generation.tokens.into_iter().take(limit).collect();
    if let Some(end) = generated.iter().position(|&t| t == END) {
        generated.truncate(end + 1);
    }
    let mut logprobs = generation.logprobs;
    logprobs.resize(generated.len(), 0.0);
    let text_ids: Vec<u32> = generated
        .iter()
        .copied()
        .take_while(|&t| t != END)
        .collect();
    let text = tokenizer.decode(&text_ids);
    let has_end = generated.last() == Some(&END);
    let parsed = if !has_end {
        Err(format!(
            "malformed call: no end token within {limit} tokens"
        ))
    } else if text_ids.iter().any(|&t| Tokenizer::is_special(t)) {
        Err("malformed call: special token inside the action".to_owned())
    } else {
        parse_call(&text).and_then(|call| config.check_tool(&call).map(|()| call))
    };
    Action {
        generated,
        logprobs,
        text,
        has_end,
        parsed,
    }
}

/// One episode in progress: the harness loop turned inside out, so a trainer can step
/// many episodes in lockstep and answer their model calls in one batched forward pass.
///
/// [`run_episode`] is this loop with one policy answering each request in turn; a
/// batched driver does the same with [`EpisodeRun::next_limit`],
/// [`EpisodeRun::request`] and [`EpisodeRun::apply`], and ends with
/// [`EpisodeRun::into_record`].
pub struct EpisodeRun {
    task_id: String,
    family: String,
    split: super::task::Split,
    ids: EpisodeIds,
    seed: u64,
    config: HarnessConfig,
    env: CodeEnv,
    transcript: Transcript<'static>,
    calls: Vec<ModelCall>,
    potentials: Vec<f64>,
    malformed_in_a_row: usize,
    reward: f64,
    policy_rng: RandomStream,
    fault_rng: RandomStream,
    limit: usize,
    ended: Option<EndReason>,
}

impl std::fmt::Debug for EpisodeRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EpisodeRun")
            .field("task_id", &self.task_id)
            .field("ids", &self.ids)
            .field("turns", &self.calls.len())
            .field("tokens", &self.transcript.tokens.len())
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl EpisodeRun {
    /// Starts an episode: the prompt is in the transcript, no call made yet.
    pub fn new(task: &Task, config: &HarnessConfig, ids: EpisodeIds, seed: u64) -> Self {
        let tokenizer = tokenizer();
        let env = CodeEnv::new(task.clone(), config.step_limit).with_name_check(config.name_check);
        let mut transcript = Transcript {
            tokenizer,
            tokens: Vec::new(),
            spans: Vec::new(),
        };
        let mut prompt = vec![BOS];
        prompt.extend(tokenizer.encode(&prompt_text(task, config)));
        prompt.push(CALL);
        transcript.push(SpanRole::Prompt, &prompt);
        let potentials = vec![env.visible_pass_fraction()];
        Self {
            task_id: task.id.clone(),
            family: task.family.clone(),
            split: task.split,
            ids,
            seed,
            config: config.clone(),
            env,
            transcript,
            calls: Vec::new(),
            potentials,
            malformed_in_a_row: 0,
            reward: 0.0,
            policy_rng: RandomStream::new(seed, POLICY_STREAM.wrapping_add(ids.sample_id)),
            fault_rng: RandomStream::new(seed, FAULT_STREAM.wrapping_add(ids.sample_id)),
            limit: 0,
            ended: None,
        }
    }

    /// Applies the budgets before the next model call: `Some(limit)`, the most tokens
    /// the call may generate, or `None` once the episode has ended.
    pub fn next_limit(&mut self) -> Option<usize> {
        if self.ended.is_some() {
            return None;
        }
        if self.calls.len() >= self.config.max_turns {
            self.ended = Some(EndReason::TurnBudget);
            return None;
        }
        let room = self
            .config
            .max_context_tokens
            .saturating_sub(self.transcript.tokens.len());
        if room == 0 {
            self.ended = Some(EndReason::TokenBudget);
            return None;
        }
        self.limit = self.config.max_new_tokens.min(room);
        Some(self.limit)
    }

    /// The context of the pending call and the policy's random stream for it.
    pub fn request(&mut self) -> (&[u32], &mut RandomStream) {
        (&self.transcript.tokens, &mut self.policy_rng)
    }

    /// Whether the episode has ended.
    pub fn is_done(&self) -> bool {
        self.ended.is_some()
    }

    /// Feeds the policy's answer to the pending call (after [`Self::next_limit`] gave
    /// `Some`): parses it, runs the tool and appends the observation. Returns how many
    /// of the generated tokens the transcript kept (up to the first end token and the
    /// limit; 0 once the episode has ended), so a caller holding per-token extras can
    /// cut them to match.
    pub fn apply(&mut self, generation: Generation) -> usize {
        if self.ended.is_some() {
            return 0;
        }
        let limit = self.limit;
        let context_ids = self.transcript.tokens.clone();
        let action = read_action(generation, limit, &self.config);
        let kept = action.generated.len();
        self.transcript.push(SpanRole::Action, &action.generated);
        let has_end = action.has_end;
        let parsed = action.parsed;
        let mut call_record = ModelCall {
            context_ids,
            generated_ids: action.generated,
            behaviour_logprobs: action.logprobs,
            action_text: action.text,
            call: parsed.as_ref().ok().cloned(),
            parse_error: parsed.as_ref().err().cloned(),
            observation_ids: Vec::new(),
            observation_text: String::new(),
            env_fault: false,
        };
        let step = match &parsed {
            Err(_) if !has_end && limit < self.config.max_new_tokens => {
                Step::End(EndReason::TokenBudget, String::new())
            }
            Err(message) => {
                self.malformed_in_a_row += 1;
                if self.malformed_in_a_row >= self.config.max_malformed {
                    Step::End(EndReason::MalformedLimit, message.clone())
                } else {
                    Step::Continue(message.clone())
                }
            }
            Ok(call) => {
                self.malformed_in_a_row = 0;
                let uses_executor = matches!(call, ToolCall::RunTests | ToolCall::Finish);
                let crashed =
                    uses_executor && self.fault_rng.bernoulli(self.config.fault_probability);
                execute(&mut self.env, call, crashed, &self.config)
            }
        };
        let (observation, ended) = match step {
            Step::Continue(text) => (text, None),
            Step::End(reason, text) => (text, Some(reason)),
        };
        if ended == Some(EndReason::EnvFault) {
            call_record.env_fault = true;
        }
        if ended == Some(EndReason::Finish) && self.env.passes_hidden_tests() {
            self.reward = 1.0;
        }
        if !observation.is_empty() {
            let obs_ids = self.transcript.observation_ids(&observation);
            self.transcript.push(SpanRole::Observation, &obs_ids);
            call_record.observation_ids = obs_ids;
            call_record.observation_text = observation;
        }
        self.calls.push(call_record);
        self.potentials.push(self.env.visible_pass_fraction());
        self.ended = ended;
        kept
    }

    /// The record of the ended episode, stamped with who acted.
    ///
    /// Call it after [`Self::next_limit`] returned `None`; an episode stopped earlier
    /// is recorded as cut off by the turn budget.
    pub fn into_record(self, policy: PolicyInfo) -> EpisodeRecord {
        let end_reason = self.ended.unwrap_or(EndReason::TurnBudget);
        EpisodeRecord {
            task_id: self.task_id,
            family: self.family,
            split: self.split,
            group_id: self.ids.group_id,
            sample_id: self.ids.sample_id,
            seed: self.seed,
            policy,
            harness: self.config,
            tokenizer: TOKENIZER_VERSION.to_owned(),
            env_version: ENV_VERSION.to_owned(),
            tokens: self.transcript.tokens,
            spans: self.transcript.spans,
            calls: self.calls,
            end_reason,
            terminated: end_reason.is_terminated(),
            truncated: end_reason.is_truncated(),
            env_fault: end_reason == EndReason::EnvFault,
            reward: self.reward,
            visible_pass_fraction: self.potentials,
        }
    }
}

/// Runs one episode of `policy` on `task` and returns its record.
pub fn run_episode(
    task: &Task,
    policy: &mut dyn Policy,
    config: &HarnessConfig,
    ids: EpisodeIds,
    seed: u64,
) -> EpisodeRecord {
    let mut run = EpisodeRun::new(task, config, ids, seed);
    while let Some(limit) = run.next_limit() {
        let (context, rng) = run.request();
        let generation = policy.next_tokens(context, limit, rng);
        run.apply(generation);
    }
    run.into_record(policy.info())
}

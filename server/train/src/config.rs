//! The training configuration: one TOML file (see `configs/`), every field with a
//! default, unknown fields rejected, and [`TrainConfig::validate`] naming the field
//! (`grpo.group_size`) of anything out of range.
//!
//! The GRPO knobs carry the names TRL and verl users know: `group_size` (TRL
//! `num_generations`, verl `rollout.n`), `tasks_per_batch`, `reduction`
//! (`loss_type` / `loss_agg_mode`), `eps_low` / `eps_high` (`epsilon` /
//! `epsilon_high`, `clip_ratio_low` / `clip_ratio_high`), `dual_clip` (`clip_ratio_c`),
//! `advantage_scale` (`scale_rewards`), `kl_beta` / `kl_estimator` (`beta`,
//! `kl_loss_coef` / `kl_loss_type`), `ref_refresh_steps` (TRL `ref_model_sync_steps`),
//! `dynamic_sampling` (DAPO's filter), `max_policy_lag`, `entropy_coef` (TRL
//! `entropy_coef`, verl `entropy_coeff`), and `convention` (whose edge-case rules apply).

use anyhow::Result;
use arlbook_core::FieldError;

use crate::footprint;
use crate::learner::grpo::competence::{EdgeUnit, TaskSampling};
use arlbook_core::agent::HarnessConfig;
use arlbook_core::math::advantage::StdKind;
use arlbook_core::math::convention::Convention;
use arlbook_core::math::kl::KlEstimator;
use arlbook_core::math::reduction::Reduction;
use arlbook_core::math::sampler_correction::SamplerCorrectionMode;
use serde::{Deserialize, Serialize};

/// Demonstrations per slice of an SFT step on a GPU, and the most on any device
/// (gradients accumulate over a step's slices; see the `sft` module docs).
pub const SFT_MICROBATCH_EPISODES: usize = 8;

/// Demonstrations per slice of an SFT step on the CPU backend. Small slices pad less and
/// let the cores share a step's work evenly: a step of `configs/cpu-small.toml` takes
/// 0.22 s in slices of 2 against 0.24 s in slices of 1, 0.26 s in slices of 4 and
/// 0.28 s in slices of 8 (150-step runs on the 2-core machine; `configs/cpu-small-experiment.md`).
pub const SFT_CPU_SLICE_EPISODES: usize = 2;

/// Which device trains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum BackendChoice {
    /// A hardware GPU through wgpu when one is present, else the CPU.
    #[default]
    Auto,
    /// burn's CPU backend.
    Cpu,
    /// burn's wgpu backend (fails without an adapter).
    Gpu,
}

/// `NAMES` and `FromStr` for a field-less enum from its `(name, variant)` pairs, so the
/// command line can parse it without the crate knowing clap.
macro_rules! named_variants {
    ($ty:ty, $what:literal, [$(($name:literal, $variant:ident)),+ $(,)?]) => {
        impl $ty {
            /// The names it takes, in the order of the variants.
            pub const NAMES: &[&str] = &[$($name),+];
        }

        impl std::str::FromStr for $ty {
            type Err = String;

            fn from_str(name: &str) -> Result<Self, Self::Err> {
                match name {
                    $($name => Ok(Self::$variant),)+
                    _ => Err(format!(
                        "unknown {} `{name}`; expected one of {}",
                        $what,
                        Self::NAMES.join(", ")
                    )),
                }
            }
        }
    };
}
pub(crate) use named_variants;

named_variants!(
    BackendChoice,
    "backend",
    [("auto", Auto), ("cpu", Cpu), ("gpu", Gpu)]
);

/// Which reinforcement-learning arm follows SFT in `arlbook train` (`--stage all`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum RlArm {
    /// GRPO on the policy's own groups.
    #[default]
    Grpo,
    /// Rejection-sampling SFT on the policy's own successes (`[rs]`).
    Rs,
}

/// How the transformer knows where a token sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum PositionKind {
    /// A learned embedding per position, added to the token's (GPT-2).
    #[default]
    Learned,
    /// Rotary positions (Su et al. 2021): each head's queries and keys turned by
    /// angles proportional to their positions, so a score depends on the offset between
    /// query and key; no position table.
    Rotary,
}

named_variants!(
    PositionKind,
    "position kind",
    [("learned", Learned), ("rotary", Rotary)]
);

/// The transformer's shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelConfig {
    /// Transformer blocks. Default 2.
    pub layers: usize,
    /// Model width `d_model`. Default 96.
    pub width: usize,
    /// Attention heads (must divide `width`). Default 4.
    pub heads: usize,
    /// Positions the model knows (at least `harness.max_context_tokens`). Default 640.
    pub context: usize,
    /// `learned` (default) or `rotary`.
    pub positions: PositionKind,
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self {
            layers: 2,
            width: 96,
            heads: 4,
            context: 640,
            positions: PositionKind::Learned,
        }
    }
}

/// Supervised cold start on teacher demonstrations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SftConfig {
    /// Optimizer steps. Default 300.
    pub steps: usize,
    /// Demonstrations per step. Default 16.
    pub batch_episodes: usize,
    /// Distinct training tasks the demonstrations come from. Default 4000.
    pub tasks: usize,
    /// Peak learning rate. Default 3e-3.
    pub learning_rate: f64,
    /// Linear warm-up steps. Default 20.
    pub warmup_steps: usize,
    /// Extra steps on recovery demonstrations after `steps` (see `train::recovery`);
    /// 0 turns the phase off. Default 0.
    pub recovery_steps: usize,
    /// Training tasks the model attempts once (at temperature 1) to collect the
    /// recovery demonstrations from. Default 512.
    pub recovery_tasks: usize,
    /// Share of the demonstrations, drawn per task, in which the teacher's first edit
    /// names a text the code does not contain and is refused before the right edit
    /// (the loss starts after the refused call; see `learner::sft`). Default 0.
    pub mistake_rate: f64,
    /// Weight of the observation tokens' loss beside the action tokens' (0 = actions
    /// only): the step's loss is the actions' mean negative log-likelihood plus this
    /// times the observations' (tool results: the listing, the test report), each a
    /// mean over its own tokens (see `learner::sft`). Default 0.
    pub observation_loss_weight: f64,
    /// Probe the policy every this many SFT steps and at the last (0 = never): a
    /// `probe` metrics row with greedy validation success, its failures by cause and
    /// the teacher-forced accuracy by action part (see `train::probe`). Default 0.
    pub probe_every: usize,
    /// Validation tasks the probe runs (one greedy episode and one teacher episode
    /// each, the first ones of the split). Default 64.
    pub probe_tasks: usize,
}

impl SftConfig {
    /// All SFT steps: the teacher phase, then the recovery phase. The cosine learning
    /// rate schedule spans both.
    pub fn total_steps(&self) -> usize {
        self.steps + self.recovery_steps
    }
}

impl Default for SftConfig {
    fn default() -> Self {
        Self {
            steps: 300,
            batch_episodes: 16,
            tasks: 4000,
            learning_rate: 3e-3,
            warmup_steps: 20,
            recovery_steps: 0,
            recovery_tasks: 512,
            mistake_rate: 0.0,
            observation_loss_weight: 0.0,
            probe_every: 0,
            probe_tasks: 64,
        }
    }
}

/// How advantages are scaled (TRL `scale_rewards`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum AdvantageScale {
    /// Divide by the group's std.
    #[default]
    Group,
    /// Divide by the batch's std.
    Batch,
    /// Do not divide (Dr. GRPO).
    None,
}

/// The learning-rate schedule after warm-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LrSchedule {
    /// Constant after warm-up.
    #[default]
    Constant,
    /// Cosine decay to 10% after warm-up.
    Cosine,
}

/// Group Relative Policy Optimization.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GrpoConfig {
    /// Optimizer outer steps (each collects one batch of groups). Default 40.
    pub steps: usize,
    /// Tasks per batch `B`. Default 8.
    pub tasks_per_batch: usize,
    /// Rollouts per task `G` (at least 2). Default 8.
    pub group_size: usize,
    /// Passes over each batch. Default 1.
    pub epochs: usize,
    /// Optimizer steps per pass (the batch is split into this many minibatches of
    /// whole groups). Default 1.
    pub minibatches: usize,
    /// Rows per forward pass; gradients are accumulated over the microbatches of a
    /// minibatch with weights over the whole minibatch. Default 16.
    pub microbatch_rows: usize,
    /// How per-token terms are averaged (`token-mean`, `seq-mean-token-mean`,
    /// `seq-mean-token-sum`, `seq-mean-token-sum-norm`, `dr_grpo`). Default
    /// `token-mean`.
    pub reduction: Reduction,
    /// The constant of the `*-norm` and `dr_grpo` reductions; default the longest
    /// generation of the minibatch.
    pub reduction_constant: Option<f64>,
    /// Lower clip width. Default 0.2.
    pub eps_low: f64,
    /// Upper clip width. Default 0.28 (DAPO's clip-higher).
    pub eps_high: f64,
    /// Dual-clip bound `c > 1` for negative advantages, when set.
    pub dual_clip: Option<f64>,
    /// Advantage scaling. Default `group`.
    pub advantage_scale: AdvantageScale,
    /// `population` or `sample` std. Default `population`.
    pub std_kind: StdKind,
    /// Leave-one-out baseline (RLOO) instead of the group mean. Default false.
    pub leave_one_out: bool,
    /// KL coefficient `beta >= 0`. Default 0 (no reference model is kept).
    pub kl_beta: f64,
    /// KL estimator `k1`, `k2`, `k3` or `abs` (verl's `|logp - ref_logp|`). Default `k3`. How the three spread against the
    /// true KL: the notebook's figure `kl-estimators` (chapter `kl-objective`).
    pub kl_estimator: KlEstimator,
    /// Copy the policy into the reference every this many steps (0 = frozen at the
    /// start). Default 0.
    pub ref_refresh_steps: usize,
    /// Drop groups whose rewards are all equal and sample more tasks. Default true.
    pub dynamic_sampling: bool,
    /// Most extra sampling rounds per step under dynamic sampling. Default 3.
    pub max_refill_rounds: usize,
    /// How each group's task is drawn: `uniform` (the default) takes the next training
    /// task; `edge` (edge-of-competence sampling) takes the first whose unit's recent
    /// pass rate (by `edge_unit`) is strictly between 0 and 1, skipping units the
    /// policy recently always or never solved (see `grpo::competence`).
    pub task_sampling: TaskSampling,
    /// The unit pass rates are kept by: `cell` (aggregate and bug operator, the
    /// default), `skeleton` or `key`.
    pub edge_unit: EdgeUnit,
    /// Batches whose groups count as recent. Default 20.
    pub edge_recent_steps: usize,
    /// Candidate tasks drawn per group before one is taken anyway. Default 16.
    pub edge_max_draws: usize,
    /// Rollouts for step `s` may come from the policy of step `s - lag` (an
    /// asynchronous collector's pipeline depth, made deterministic). Default 0.
    pub max_policy_lag: usize,
    /// Leave episodes that an environment fault ended out of the update. Default true.
    pub exclude_env_faults: bool,
    /// Peak learning rate. Default 3e-4.
    pub learning_rate: f64,
    /// Learning-rate schedule. Default `constant`.
    pub lr_schedule: LrSchedule,
    /// Linear warm-up steps. Default 0.
    pub warmup_steps: usize,
    /// Global gradient-norm clip (0 = off). Default 1.0.
    pub grad_clip: f64,
    /// Sampling temperature for rollouts. Default 1.0.
    pub temperature: f64,
    /// Nucleus sampling mass, when set.
    pub top_p: Option<f64>,
    /// Where each group's task comes from: 0 (the default) draws a fresh task from the
    /// whole training split for every group; `N > 0` draws from the first `N` tasks
    /// SFT learns from (`sft.tasks` of them), so RL revisits problems the model has
    /// seen. A small pool is a diagnostic (it measures memorisation, not held-out
    /// gain) and gives a tiny test model rollouts that succeed.
    pub task_pool: usize,
    /// Whose rules decide the loss's edge cases: `arlbook` (the default), `trl` or
    /// `verl`. `trl` counts empty completions in per-sequence means and takes the
    /// entropy bonus's token mean over the minibatch; `verl` divides each row by
    /// `L + 1e-8`, clamps each token's log-ratio to +-20 (no slope where clamped) and
    /// clamps `k3` as its `low_var_kl` does. The README's table of the libraries' rules
    /// lists them all.
    pub convention: Convention,
    /// Entropy bonus: the loss subtracts `entropy_coef` times the policy's entropy at
    /// the sampling temperature, reduced with the loss's weights (TRL `entropy_coef`,
    /// verl `entropy_coeff`). Default 0.
    pub entropy_coef: f64,
    /// Importance weights against the sampler (TRL's
    /// `vllm_importance_sampling_correction` with `vllm_importance_sampling_mode`):
    /// `none` (the default), `token_truncate`, `token_mask`, `sequence_truncate` or
    /// `sequence_mask`. With a mode, every update first scores its batch under the
    /// policy it starts from (one forward pass more per step); the ratio is taken
    /// against those log-probabilities, and each token's surrogate term is multiplied by
    /// their importance weight against the log-probabilities the rollouts were sampled
    /// with (a lagged snapshot under `max_policy_lag`), bounded by `importance_cap`.
    pub importance_correction: ImportanceCorrection,
    /// Upper bound of the importance weights (TRL `vllm_importance_sampling_max`).
    /// Default 3.
    pub importance_cap: f64,
}

/// How the update corrects for the sampler (see [`GrpoConfig::importance_correction`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ImportanceCorrection {
    /// The ratio is taken against the sampler's log-probabilities; no weights.
    #[default]
    None,
    /// Per-token weights, truncated at the cap.
    TokenTruncate,
    /// Per-token weights, 0 above the cap.
    TokenMask,
    /// One weight per sequence, truncated at the cap.
    SequenceTruncate,
    /// One weight per sequence, 0 above the cap.
    SequenceMask,
}

impl ImportanceCorrection {
    /// The core's mode, or `None` for no correction.
    pub fn mode(self) -> Option<SamplerCorrectionMode> {
        match self {
            Self::None => None,
            Self::TokenTruncate => Some(SamplerCorrectionMode::TokenTruncate),
            Self::TokenMask => Some(SamplerCorrectionMode::TokenMask),
            Self::SequenceTruncate => Some(SamplerCorrectionMode::SequenceTruncate),
            Self::SequenceMask => Some(SamplerCorrectionMode::SequenceMask),
        }
    }
}

impl Default for GrpoConfig {
    fn default() -> Self {
        Self {
            steps: 40,
            tasks_per_batch: 8,
            group_size: 8,
            epochs: 1,
            minibatches: 1,
            microbatch_rows: 16,
            reduction: Reduction::TokenMean,
            reduction_constant: None,
            eps_low: 0.2,
            eps_high: 0.28,
            dual_clip: None,
            advantage_scale: AdvantageScale::Group,
            std_kind: StdKind::Population,
            leave_one_out: false,
            kl_beta: 0.0,
            kl_estimator: KlEstimator::K3,
            ref_refresh_steps: 0,
            dynamic_sampling: true,
            max_refill_rounds: 3,
            task_sampling: TaskSampling::Uniform,
            edge_unit: EdgeUnit::Cell,
            edge_recent_steps: 20,
            edge_max_draws: 16,
            max_policy_lag: 0,
            exclude_env_faults: true,
            learning_rate: 3e-4,
            lr_schedule: LrSchedule::Constant,
            warmup_steps: 0,
            grad_clip: 1.0,
            temperature: 1.0,
            top_p: None,
            task_pool: 0,
            convention: Convention::Arlbook,
            entropy_coef: 0.0,
            importance_correction: ImportanceCorrection::None,
            importance_cap: 3.0,
        }
    }
}

/// Held-out measurement during training.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ValidationConfig {
    /// Measure validation success every this many GRPO steps (0 = never). Default 10.
    pub every_steps: usize,
    /// Validation tasks, one greedy episode each. Default 64.
    pub tasks: usize,
}

impl Default for ValidationConfig {
    fn default() -> Self {
        Self {
            every_steps: 10,
            tasks: 64,
        }
    }
}

/// Rejection-sampling SFT (expert iteration), the arm that asks how much of GRPO's
/// gain is extra data: each step collects the batch GRPO's step would (the same
/// tasks, seeds, `tasks_per_batch` x `group_size` rollouts at `grpo.temperature`, no
/// dynamic-sampling filter) and takes one step of negative log-likelihood on the
/// action tokens of the successful rollouts only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RsConfig {
    /// Optimizer steps (one collected batch each). Default 40.
    pub steps: usize,
    /// Peak learning rate. Default 1e-4.
    pub learning_rate: f64,
    /// Learning-rate schedule over `steps` (as GRPO's, so the two arms can be run
    /// alike). Default `constant`.
    pub lr_schedule: LrSchedule,
    /// Linear warm-up steps. Default 0.
    pub warmup_steps: usize,
}

impl Default for RsConfig {
    fn default() -> Self {
        Self {
            steps: 40,
            learning_rate: 1e-4,
            lr_schedule: LrSchedule::Constant,
            warmup_steps: 0,
        }
    }
}

/// Choosing checkpoints on validation, and the gate before reinforcement learning.
///
/// With `enabled`, the checkpoints at `sft_steps` (and the last SFT step) are scored on
/// validation by success at `temperature` over `tasks` tasks x `samples` samples; GRPO
/// starts from the best (ties go to the later step). At that checkpoint the gate
/// measures validation pass@1 and pass@`gate_samples` over `gate_tasks` tasks at
/// `grpo.temperature` (the headroom of GRPO's groups) and warns when their gap is below
/// `min_gap`. After GRPO or RS, the checkpoints at `rl_steps` (and the last step) are
/// scored the same way. The choices
/// and their numbers go to the metrics, the log and `summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SelectionConfig {
    /// Whether to select. Default false (GRPO starts from the last SFT step).
    pub enabled: bool,
    /// SFT steps whose checkpoints are candidates, besides the last (steps past the
    /// end are ignored). Default none.
    pub sft_steps: Vec<usize>,
    /// GRPO or RS steps whose checkpoints are candidates, besides the last (steps past
    /// the end are ignored). Default none.
    pub rl_steps: Vec<usize>,
    /// Validation tasks scored per candidate. Default 150.
    pub tasks: usize,
    /// Samples per task. Default 2.
    pub samples: usize,
    /// The sampling temperature candidates are scored at (0: greedy). Default 1, the
    /// temperature `arlbook eval` reads test at (GRPO may sample hotter:
    /// `grpo.temperature`).
    pub temperature: f64,
    /// Validation tasks of the gate. Default 32.
    pub gate_tasks: usize,
    /// Samples per task of the gate (its `k`). Default 8.
    pub gate_samples: usize,
    /// The gate warns when pass@k - pass@1 is below this. Default 0.05.
    pub min_gap: f64,
}

impl Default for SelectionConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            sft_steps: Vec::new(),
            rl_steps: Vec::new(),
            tasks: 150,
            samples: 2,
            temperature: 1.0,
            gate_tasks: 32,
            gate_samples: 8,
            min_gap: 0.05,
        }
    }
}

/// Rollout workers over NATS JetStream (`arlbook train --nats URL`, `arlbook worker`).
/// Without a broker URL (on the command line or here) the run collects in process and
/// the rest of this table is not used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterConfig {
    /// The broker, e.g. `nats://127.0.0.1:4222`; `--nats` overrides it. Default empty
    /// (collect in process).
    pub url: String,
    /// The run's name on the broker (its streams and buckets); empty: the name of the
    /// output folder. Letters, digits, `-` and `_`, at most 32.
    pub run: String,
    /// Seconds a worker may hold a rollout job without acknowledging it (a running
    /// job is kept alive by progress acknowledgements) before the broker hands it to
    /// another worker. Default 30.
    pub ack_wait_s: f64,
    /// Deliveries of one job before the broker stops offering it. Default 5.
    pub max_deliver: i64,
    /// Seconds the learner waits for a round's missing groups before it publishes
    /// their jobs again (under a new id). Default 600.
    pub resend_after_s: f64,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            url: String::new(),
            run: String::new(),
            ack_wait_s: 30.0,
            max_deliver: 5,
            resend_after_s: 600.0,
        }
    }
}

impl ClusterConfig {
    fn validate(&self) -> std::result::Result<(), FieldError> {
        require(
            self.run.len() <= 32
                && self
                    .run
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
            "cluster.run",
            "must be at most 32 letters, digits, '-' or '_'",
        )?;
        require(
            self.ack_wait_s.is_finite() && (0.5..=3600.0).contains(&self.ack_wait_s),
            "cluster.ack_wait_s",
            "must be in 0.5..=3600",
        )?;
        require(
            (1..=1000).contains(&self.max_deliver),
            "cluster.max_deliver",
            "must be in 1..=1000",
        )?;
        require(
            self.resend_after_s.is_finite() && self.resend_after_s >= self.ack_wait_s,
            "cluster.resend_after_s",
            "must be at least cluster.ack_wait_s",
        )
    }
}

/// A whole training run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrainConfig {
    /// Seed of everything: initial weights, task draws, rollouts.
    pub seed: u64,
    /// Device. Default `auto`.
    pub backend: BackendChoice,
    /// The RL arm after SFT: `grpo` or `rs`. Default `grpo`.
    pub arm: RlArm,
    /// Save a checkpoint every this many optimizer steps (SFT and GRPO). Default 25.
    pub checkpoint_every: usize,
    /// The training memory a config may ask for, in MiB, estimated before anything is
    /// allocated (`footprint`); a config over it is refused naming `model`. Default
    /// 16384.
    pub memory_budget_mb: usize,
    /// The model.
    pub model: ModelConfig,
    /// The environment's budgets.
    pub harness: HarnessConfig,
    /// Cold start.
    pub sft: SftConfig,
    /// Reinforcement learning.
    pub grpo: GrpoConfig,
    /// The rejection-sampling arm (`--stage rs`).
    pub rs: RsConfig,
    /// Validation.
    pub validation: ValidationConfig,
    /// Checkpoint selection on validation and the gate before RL.
    pub selection: SelectionConfig,
    /// Rollout workers over a broker.
    pub cluster: ClusterConfig,
}

impl Default for TrainConfig {
    fn default() -> Self {
        Self {
            seed: 7,
            backend: BackendChoice::Auto,
            arm: RlArm::Grpo,
            checkpoint_every: 25,
            memory_budget_mb: 16384,
            model: ModelConfig::default(),
            harness: HarnessConfig {
                max_turns: 8,
                max_context_tokens: 640,
                max_new_tokens: 40,
                ..HarnessConfig::default()
            },
            sft: SftConfig::default(),
            grpo: GrpoConfig::default(),
            rs: RsConfig::default(),
            validation: ValidationConfig::default(),
            selection: SelectionConfig::default(),
            cluster: ClusterConfig::default(),
        }
    }
}

fn require(ok: bool, field: &str, message: &str) -> std::result::Result<(), FieldError> {
    if ok {
        Ok(())
    } else {
        Err(FieldError::new(field, message))
    }
}

/// Refuses a table of `defaults` given as something else in `fields`, at any depth.
fn check_tables(
    fields: &serde_json::Value,
    defaults: &serde_json::Value,
    path: &str,
) -> std::result::Result<(), FieldError> {
    let (Some(fields), Some(defaults)) = (fields.as_object(), defaults.as_object()) else {
        return Ok(());
    };
    for (key, value) in fields {
        let Some(default) = defaults.get(key) else {
            continue;
        };
        let at = if path.is_empty() {
            key.clone()
        } else {
            format!("{path}.{key}")
        };
        if default.is_object() && !value.is_object() {
            return Err(FieldError::new(
                at,
                "must be a table of settings (a JSON object), not a list or a single value",
            ));
        }
        check_tables(value, default, &at)?;
    }
    Ok(())
}

/// `patch` over `base`, table by table.
pub fn merge_fields(
    base: &mut serde_json::Map<String, serde_json::Value>,
    patch: serde_json::Map<String, serde_json::Value>,
) {
    for (key, value) in patch {
        match (base.get_mut(&key), value) {
            (Some(serde_json::Value::Object(inner)), serde_json::Value::Object(patch)) => {
                merge_fields(inner, patch);
            }
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

impl TrainConfig {
    /// Parses TOML and validates; errors name the field.
    pub fn from_toml(text: &str) -> Result<Self> {
        let table: toml::Table = toml::from_str(text).map_err(|e| anyhow::anyhow!("{e}"))?;
        let config = Self::from_fields(serde_json::to_value(table)?)?;
        config.validate()?;
        Ok(config)
    }

    /// The config from its fields as JSON (the TOML file's tables as objects), not yet
    /// validated. One set of defaults whatever a table's completeness: every field
    /// left out takes its value from [`TrainConfig::default`], inside a table written
    /// only in part too. A table given as a list or a single value, an unknown field
    /// and a value of the wrong type are refused, naming the field.
    pub fn from_fields(fields: serde_json::Value) -> std::result::Result<Self, FieldError> {
        let serde_json::Value::Object(fields) = fields else {
            return Err(FieldError::new(
                "(config)",
                "expected the fields of a training config as a table (a JSON object)",
            ));
        };
        let defaults = serde_json::to_value(Self::default()).map_err(|e| {
            FieldError::new("(config)", format!("the defaults do not serialise: {e}"))
        })?;
        let fields = serde_json::Value::Object(fields);
        check_tables(&fields, &defaults, "")?;
        let (serde_json::Value::Object(mut merged), serde_json::Value::Object(fields)) =
            (defaults, fields)
        else {
            return Err(FieldError::new("(config)", "the defaults are not a table"));
        };
        merge_fields(&mut merged, fields);
        arlbook_core::api::parse_request(serde_json::Value::Object(merged))
    }

    /// Checks every range; the error names the first bad field.
    #[allow(clippy::too_many_lines, reason = "one flat list of field checks")]
    pub fn validate(&self) -> std::result::Result<(), FieldError> {
        let m = &self.model;
        require(
            (1..=48).contains(&m.layers),
            "model.layers",
            "must be in 1..=48",
        )?;
        require(
            (8..=4096).contains(&m.width),
            "model.width",
            "must be in 8..=4096",
        )?;
        require(
            m.heads >= 1 && m.width.is_multiple_of(m.heads),
            "model.heads",
            "must be at least 1 and divide model.width",
        )?;
        require(
            m.context >= self.harness.max_context_tokens,
            "model.context",
            "must be at least harness.max_context_tokens",
        )?;
        require(m.context <= 8192, "model.context", "must be at most 8192")?;
        require(
            m.positions == PositionKind::Learned || (m.width / m.heads).is_multiple_of(2),
            "model.positions",
            "rotary positions need an even head width (model.width / model.heads)",
        )?;
        self.validate_harness()?;
        let s = &self.sft;
        require(
            s.batch_episodes >= 1,
            "sft.batch_episodes",
            "must be at least 1",
        )?;
        require(s.tasks >= 1, "sft.tasks", "must be at least 1")?;
        require(
            s.recovery_steps == 0 || s.recovery_tasks >= 1,
            "sft.recovery_tasks",
            "must be at least 1 when sft.recovery_steps is set",
        )?;
        require(
            (0.0..=1.0).contains(&s.mistake_rate),
            "sft.mistake_rate",
            "must be in [0, 1]",
        )?;
        require(
            (0.0..=10.0).contains(&s.observation_loss_weight),
            "sft.observation_loss_weight",
            "must be in [0, 10]",
        )?;
        require(
            s.probe_every == 0 || s.probe_tasks >= 1,
            "sft.probe_tasks",
            "must be at least 1 when sft.probe_every is set",
        )?;
        self.validate_rest()?;
        self.cluster.validate()?;
        require(
            (64..=4 << 20).contains(&self.memory_budget_mb),
            "memory_budget_mb",
            "must be in 64..=4194304",
        )?;
        match footprint::over_budget(&self.shape(), self.memory_budget_mb) {
            Some((field, message)) => Err(FieldError::new(field, message)),
            None => Ok(()),
        }
    }

    /// What the memory estimate needs to know of this config.
    pub fn shape(&self) -> footprint::Shape {
        let g = &self.grpo;
        footprint::Shape {
            vocab: arlbook_core::agent::tokenizer::tokenizer().vocab_size(),
            context: self.model.context,
            layers: self.model.layers,
            width: self.model.width,
            heads: self.model.heads,
            position_table: self.model.positions == PositionKind::Learned,
            rows: g.microbatch_rows.max(SFT_MICROBATCH_EPISODES),
            reference: g.kl_beta > 0.0,
            rollouts: g.tasks_per_batch * g.group_size * (g.max_refill_rounds + 1),
            episode_tokens: self.harness.max_context_tokens,
        }
    }

    fn validate_harness(&self) -> std::result::Result<(), FieldError> {
        let h = &self.harness;
        require(h.max_turns >= 1, "harness.max_turns", "must be at least 1")?;
        require(
            (16..=8192).contains(&h.max_context_tokens),
            "harness.max_context_tokens",
            "must be in 16..=8192",
        )?;
        require(
            h.max_new_tokens >= 1,
            "harness.max_new_tokens",
            "must be at least 1",
        )?;
        require(
            h.max_malformed >= 1,
            "harness.max_malformed",
            "must be at least 1",
        )?;
        require(
            (0.0..=1.0).contains(&h.fault_probability),
            "harness.fault_probability",
            "must be in [0, 1]",
        )
    }

    fn validate_rest(&self) -> std::result::Result<(), FieldError> {
        let s = &self.sft;
        positive_rate("sft.learning_rate", s.learning_rate)?;
        let g = &self.grpo;
        require(g.group_size >= 2, "grpo.group_size", "must be at least 2")?;
        require(
            g.task_pool <= s.tasks.max(1),
            "grpo.task_pool",
            "must be at most sft.tasks (the pool is SFT's first tasks; 0 = the whole split)",
        )?;
        require(
            g.tasks_per_batch >= 1,
            "grpo.tasks_per_batch",
            "must be at least 1",
        )?;
        require(g.epochs >= 1, "grpo.epochs", "must be at least 1")?;
        require(
            g.edge_recent_steps >= 1,
            "grpo.edge_recent_steps",
            "must be at least 1",
        )?;
        require(
            g.edge_max_draws >= 1,
            "grpo.edge_max_draws",
            "must be at least 1",
        )?;
        require(
            g.minibatches >= 1 && g.minibatches <= g.tasks_per_batch,
            "grpo.minibatches",
            "must be in 1..=grpo.tasks_per_batch (minibatches hold whole groups)",
        )?;
        require(
            g.microbatch_rows >= 1,
            "grpo.microbatch_rows",
            "must be at least 1",
        )?;
        require(
            g.reduction_constant
                .is_none_or(|c| c.is_finite() && c > 0.0),
            "grpo.reduction_constant",
            "must be finite and > 0",
        )?;
        require(
            g.eps_low.is_finite() && (0.0..1.0).contains(&g.eps_low),
            "grpo.eps_low",
            "must be in [0, 1)",
        )?;
        require(
            g.eps_high.is_finite() && g.eps_high >= 0.0,
            "grpo.eps_high",
            "must be finite and >= 0",
        )?;
        require(
            g.dual_clip.is_none_or(|c| c.is_finite() && c > 1.0),
            "grpo.dual_clip",
            "must be finite and > 1",
        )?;
        require(
            g.kl_beta.is_finite() && g.kl_beta >= 0.0,
            "grpo.kl_beta",
            "must be finite and >= 0",
        )?;
        require(
            g.entropy_coef.is_finite() && g.entropy_coef >= 0.0,
            "grpo.entropy_coef",
            "must be finite and >= 0",
        )?;
        require(
            g.importance_cap.is_finite() && g.importance_cap > 0.0,
            "grpo.importance_cap",
            "must be finite and > 0",
        )?;
        positive_rate("grpo.learning_rate", g.learning_rate)?;
        positive_rate("rs.learning_rate", self.rs.learning_rate)?;
        require(
            g.grad_clip.is_finite() && g.grad_clip >= 0.0,
            "grpo.grad_clip",
            "must be finite and >= 0",
        )?;
        require(
            g.temperature.is_finite() && g.temperature > 0.0,
            "grpo.temperature",
            "must be finite and > 0 (training needs a stochastic policy)",
        )?;
        require(
            g.top_p.is_none_or(|p| p > 0.0 && p <= 1.0),
            "grpo.top_p",
            "must be in (0, 1]",
        )?;
        require(
            g.max_policy_lag <= 16,
            "grpo.max_policy_lag",
            "must be at most 16",
        )?;
        require(
            self.checkpoint_every >= 1,
            "checkpoint_every",
            "must be at least 1",
        )?;
        self.validate_sizes()
    }

    /// Upper bounds on counts: a typo such as `group_size = 1e9` is refused by name
    /// instead of exhausting memory (or running for years) in a training process.
    fn validate_sizes(&self) -> std::result::Result<(), FieldError> {
        let (s, g, h, v) = (&self.sft, &self.grpo, &self.harness, &self.validation);
        for (value, field, most) in [
            (s.steps, "sft.steps", MAX_STEPS),
            (s.batch_episodes, "sft.batch_episodes", MAX_BATCH),
            (s.tasks, "sft.tasks", MAX_TASKS),
            (s.warmup_steps, "sft.warmup_steps", MAX_STEPS),
            (s.recovery_steps, "sft.recovery_steps", MAX_STEPS),
            (s.recovery_tasks, "sft.recovery_tasks", MAX_TASKS),
            (s.probe_every, "sft.probe_every", MAX_STEPS),
            (s.probe_tasks, "sft.probe_tasks", MAX_TASKS),
            (g.steps, "grpo.steps", MAX_STEPS),
            (g.tasks_per_batch, "grpo.tasks_per_batch", MAX_BATCH),
            (g.group_size, "grpo.group_size", MAX_BATCH),
            (g.epochs, "grpo.epochs", 100),
            (g.microbatch_rows, "grpo.microbatch_rows", MAX_BATCH),
            (g.ref_refresh_steps, "grpo.ref_refresh_steps", MAX_STEPS),
            (g.max_refill_rounds, "grpo.max_refill_rounds", 100),
            (g.edge_recent_steps, "grpo.edge_recent_steps", MAX_STEPS),
            (g.edge_max_draws, "grpo.edge_max_draws", 10_000),
            (g.warmup_steps, "grpo.warmup_steps", MAX_STEPS),
            (self.rs.warmup_steps, "rs.warmup_steps", MAX_STEPS),
            (h.max_turns, "harness.max_turns", 1000),
            (h.max_new_tokens, "harness.max_new_tokens", 8192),
            (h.max_malformed, "harness.max_malformed", 1000),
            (self.checkpoint_every, "checkpoint_every", MAX_STEPS),
            (v.every_steps, "validation.every_steps", MAX_STEPS),
            (v.tasks, "validation.tasks", MAX_TASKS),
        ] {
            if value > most {
                return Err(FieldError::new(field, format!("must be at most {most}")));
            }
        }
        require(
            (1..=100_000_000).contains(&h.step_limit),
            "harness.step_limit",
            "must be in 1..=100000000",
        )?;
        require(
            self.rs.steps <= MAX_STEPS,
            "rs.steps",
            &format!("must be at most {MAX_STEPS}"),
        )?;
        self.validate_selection()
    }

    fn validate_selection(&self) -> std::result::Result<(), FieldError> {
        let v = &self.selection;
        // A candidate past its stage's end is ignored (a shorter run from the same
        // preset keeps its other settings); step 0 is no checkpoint.
        require(
            v.sft_steps.iter().all(|&s| (1..=MAX_STEPS).contains(&s)),
            "selection.sft_steps",
            &format!("every step must be in 1..={MAX_STEPS}"),
        )?;
        require(
            v.rl_steps.iter().all(|&s| (1..=MAX_STEPS).contains(&s)),
            "selection.rl_steps",
            &format!("every step must be in 1..={MAX_STEPS}"),
        )?;
        require(
            v.sft_steps.len() + v.rl_steps.len() <= 64,
            "selection.sft_steps",
            "at most 64 candidate steps in all (each keeps a checkpoint on disk)",
        )?;
        require(
            v.temperature.is_finite() && v.temperature >= 0.0,
            "selection.temperature",
            "must be finite and >= 0 (0 is greedy)",
        )?;
        for (value, field, least) in [
            (v.tasks, "selection.tasks", 2),
            (v.samples, "selection.samples", 1),
            (v.gate_tasks, "selection.gate_tasks", 2),
            (v.gate_samples, "selection.gate_samples", 1),
        ] {
            require(
                (least..=MAX_BATCH * 64).contains(&value),
                field,
                &format!("must be in {least}..={}", MAX_BATCH * 64),
            )?;
        }
        require(
            v.min_gap.is_finite() && (0.0..=1.0).contains(&v.min_gap),
            "selection.min_gap",
            "must be in [0, 1]",
        )
    }

    /// Whether the checkpoint at `position` is a selection candidate, kept on disk
    /// until the run ends.
    pub fn is_candidate(&self, position: crate::run::metrics::Position) -> bool {
        let v = &self.selection;
        v.enabled
            && match position.stage {
                0 => v.sft_steps.contains(&position.step),
                _ => v.rl_steps.contains(&position.step),
            }
    }
}

/// The most optimizer steps (or warm-up / refresh intervals) one stage may ask for.
const MAX_STEPS: usize = 1_000_000;
/// The most rows, groups or episodes in one batch.
const MAX_BATCH: usize = 4096;
/// The most distinct tasks a stage may draw from.
const MAX_TASKS: usize = 10_000_000;

fn positive_rate(field: &str, value: f64) -> std::result::Result<(), FieldError> {
    require(
        value.is_finite() && value > 0.0 && value < 1.0,
        field,
        "must be in (0, 1)",
    )
}

#[cfg(test)]
mod tests {

    #[test]
    fn an_absurd_product_is_refused() {
        let mut config = TrainConfig::default();
        config.model.layers = 48;
        config.model.width = 4096;
        config.model.heads = 32;
        config.model.context = 8192;
        config.harness.max_context_tokens = 8192;
        let err = config.validate().unwrap_err().to_string();
        assert!(err.starts_with("model: "), "{err}");
        assert!(err.contains("memory_budget_mb = 16384"), "{err}");
        // The repository's configs pass the same check in
        // `every_config_in_the_repository_is_valid`.
    }

    use super::*;

    #[test]
    fn the_default_is_valid_and_round_trips_through_toml() {
        let config = TrainConfig::default();
        config.validate().unwrap();
        let text = toml::to_string(&config).unwrap();
        assert_eq!(TrainConfig::from_toml(&text).unwrap(), config);
    }

    #[test]
    fn errors_name_the_field() {
        let err = TrainConfig::from_toml("[grpo]\ngroup_size = 1\n").unwrap_err();
        assert!(err.to_string().contains("grpo.group_size"), "{err}");
        let err = TrainConfig::from_toml("[model]\nwidth = 100\nheads = 3\n").unwrap_err();
        assert!(err.to_string().contains("model.heads"), "{err}");
        let err = TrainConfig::from_toml("[grpo]\ngroup_sise = 4\n").unwrap_err();
        assert!(err.to_string().contains("group_sise"), "{err}");
        let err = TrainConfig::from_toml("[grpo]\nreduction = \"mean\"\n").unwrap_err();
        assert!(err.to_string().contains("reduction"), "{err}");
        let err =
            TrainConfig::from_toml("[sft]\nrecovery_steps = 5\nrecovery_tasks = 0\n").unwrap_err();
        assert!(err.to_string().contains("sft.recovery_tasks"), "{err}");
        let err = TrainConfig::from_toml("[sft]\nmistake_rate = 1.5\n").unwrap_err();
        assert!(err.to_string().contains("sft.mistake_rate"), "{err}");
        let err = TrainConfig::from_toml("[sft]\nobservation_loss_weight = -0.5\n").unwrap_err();
        assert!(
            err.to_string().contains("sft.observation_loss_weight"),
            "{err}"
        );
        let err = TrainConfig::from_toml("[grpo]\neps_low = nan\n").unwrap_err();
        assert!(err.to_string().contains("grpo.eps_low"), "{err}");
        let err = TrainConfig::from_toml("[grpo]\ngroup_size = 1000000000000\n").unwrap_err();
        assert!(err.to_string().contains("grpo.group_size"), "{err}");
        let err = TrainConfig::from_toml("[sft]\nsteps = 5000000\n").unwrap_err();
        assert!(err.to_string().contains("sft.steps"), "{err}");
        let err = TrainConfig::from_toml("[selection]\ntemperature = -1.0\n").unwrap_err();
        assert!(err.to_string().contains("selection.temperature"), "{err}");
        let err =
            TrainConfig::from_toml("[model]\nwidth = 96\nheads = 32\npositions = \"rotary\"\n")
                .unwrap_err();
        assert!(err.to_string().contains("model.positions"), "{err}");
        let err = TrainConfig::from_toml("[model]\npositions = \"absolute\"\n").unwrap_err();
        assert!(err.to_string().contains("absolute"), "{err}");
    }

    #[test]
    fn every_config_in_the_repository_is_valid() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../configs");
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                let text = std::fs::read_to_string(&path).unwrap();
                TrainConfig::from_toml(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                seen += 1;
            }
        }
        assert!(seen >= 2, "expected the CPU and GPU configs");
    }
}

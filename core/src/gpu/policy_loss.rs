//! The policy loss over ragged sequences on the GPU (`policy_loss.wgsl`), in `f32`.
//!
//! The log-ratios `logp - old_logp` and `logp - ref_logp` are formed here in `f64`
//! and rounded once: their `f32` difference on the device would lose the digits that
//! make a ratio differ from 1. The reduction weights come from
//! [`crate::math::policy_loss::library::plan`], the same numbers as on the CPU, and so
//! do the convention's corrections after the kernel ([`library::finish`]).
//!
//! ## Sums without barriers
//! Every sequence is cut into chunks of at most [`CHUNK_TOKENS`] tokens. One thread per
//! chunk sums its tokens, one thread per sequence sums its chunks, and a single
//! workgroup adds the sequences up; the per-token terms come from a barrier-free
//! element-wise pass before that. This replaced one 64-lane workgroup per sequence,
//! which synchronised with barriers that lavapipe executes slowly (2.5 s for 512
//! sequences of 4096 tokens). Chunking also keeps long sequences parallel: a single
//! sequence of a million tokens is still spread over thousands of threads, so no
//! workgroup path is kept for long rows. The chunk length comes from a sweep on
//! lavapipe (`core/examples/sweep_segments.rs`, `core/examples/bench-gpu.md`); in `f32` the
//! rounding grows with the chunk length plus the number of chunks in a sequence.
//!
//! On a discrete GPU the chunk threads read memory with a stride of one chunk, which
//! coalesces poorly; a subgroup reduction would serve such a device better, but is not
//! available everywhere WebGPU runs.

use super::runner::{Job, Slot, bits, floats, groups_for, run};
use super::{GpuContext, GpuError};
use crate::Ragged;
use crate::math::kl::KlEstimator;
use crate::math::policy_loss::library;
use crate::math::policy_loss::{
    ClipFraction, Objective, PolicyLoss, PolicyLossConfig, PolicyLossInput, RatioLevel,
    TokenAdvantages,
};
use crate::math::reduction::expand_row_weights;

/// Values per row in the kernel's row buffer (and totals after the rows).
const ROW: usize = 8;
/// Counts are summed in `f32`, exact below 2^24.
const MAX_TOKENS: usize = 1 << 24;
/// The longest run of tokens one thread sums before handing its partial sums on.
pub const CHUNK_TOKENS: usize = 64;

/// Row offsets, chunk bounds and the first chunk of each row, as the kernel reads
/// them; and the number of chunks.
fn index_tables(lengths: &[usize], chunk_tokens: usize) -> (Vec<u32>, usize) {
    let rows = lengths.len();
    let chunks: usize = lengths.iter().map(|len| len.div_ceil(chunk_tokens)).sum();
    let mut index: Vec<u32> = Vec::with_capacity(2 * rows + chunks + 3);
    index.push(0);
    let mut end = 0usize;
    for &len in lengths {
        end += len;
        index.push(end as u32);
    }
    let mut start = 0usize;
    for &len in lengths {
        for at in (0..len).step_by(chunk_tokens) {
            index.push((start + at) as u32);
        }
        start += len;
    }
    index.push(start as u32);
    let mut first = 0usize;
    index.push(0);
    for &len in lengths {
        first += len.div_ceil(chunk_tokens);
        index.push(first as u32);
    }
    (index, chunks)
}

fn reshape(flat: &[f32], like: &Ragged<f64>) -> Ragged<f64> {
    let mut out = Ragged::default();
    let mut start = 0;
    for row in like.iter_rows() {
        let values: Vec<f64> = flat[start..start + row.len()]
            .iter()
            .map(|&v| f64::from(v))
            .collect();
        out.push_row(&values);
        start += row.len();
    }
    out
}

/// The kernel's input sections: log-ratio, reference log-ratio, logp, advantage (per
/// token), then the row weights.
fn pack_inputs(input: &PolicyLossInput<'_>, lengths: &[usize], weights: &[f64]) -> Vec<f32> {
    let logp = input.logp;
    let tokens = logp.total_len();
    let rows = lengths.len();
    let mut inputs: Vec<f32> = Vec::with_capacity(4 * tokens + rows);
    inputs.extend(
        logp.flat()
            .iter()
            .zip(input.old_logp.flat())
            .map(|(a, b)| (a - b) as f32),
    );
    match input.ref_logp {
        Some(reference) => inputs.extend(
            logp.flat()
                .iter()
                .zip(reference.flat())
                .map(|(a, b)| (a - b) as f32),
        ),
        None => inputs.extend(std::iter::repeat_n(0.0f32, tokens)),
    }
    inputs.extend(logp.flat().iter().map(|&v| v as f32));
    match input.advantages {
        TokenAdvantages::PerSequence(a) => {
            for (&len, &value) in lengths.iter().zip(a) {
                inputs.extend(std::iter::repeat_n(value as f32, len));
            }
        }
        TokenAdvantages::PerToken(a) => inputs.extend(a.flat().iter().map(|&v| v as f32)),
    }
    inputs.extend(weights.iter().map(|&w| w as f32));
    inputs
}

/// The loss for a validated input (see [`crate::math::policy_loss::validate`]). A
/// non-finite result (the `f32` range exceeded) is [`GpuError::TooLarge`].
pub async fn policy_loss(
    ctx: &GpuContext,
    input: &PolicyLossInput<'_>,
    config: &PolicyLossConfig,
) -> Result<PolicyLoss, GpuError> {
    policy_loss_chunked(ctx, input, config, None, CHUNK_TOKENS).await
}

/// [`policy_loss`] with per-token multipliers of the surrogate term (see
/// [`crate::math::policy_loss::policy_loss_scaled`]). A batch where the convention's
/// log-ratio clamp takes effect is [`GpuError::Unsupported`]: its slopes are corrected on
/// the CPU.
pub async fn policy_loss_scaled(
    ctx: &GpuContext,
    input: &PolicyLossInput<'_>,
    config: &PolicyLossConfig,
    pg_scale: Option<&Ragged<f64>>,
) -> Result<PolicyLoss, GpuError> {
    policy_loss_chunked(ctx, input, config, pg_scale, CHUNK_TOKENS).await
}

/// [`policy_loss`] with chunks of at most `chunk_tokens` tokens (at least 1), for
/// measuring the best chunk length.
#[allow(clippy::too_many_lines)]
pub async fn policy_loss_chunked(
    ctx: &GpuContext,
    original: &PolicyLossInput<'_>,
    config: &PolicyLossConfig,
    pg_scale: Option<&Ragged<f64>>,
    chunk_tokens: usize,
) -> Result<PolicyLoss, GpuError> {
    let chunk_tokens = chunk_tokens.max(1);
    if config.ratio_level == RatioLevel::SequenceSum || config.objective == Objective::Vespo {
        return Err(GpuError::Unsupported(
            "a whole-sequence ratio (sequence-sum, vespo) weighs each sequence as a whole; the CPU computes it"
                .to_string(),
        ));
    }
    let plan =
        library::plan(original, config, pg_scale).map_err(|e| GpuError::TooLarge(e.to_string()))?;
    if plan.clamps_any(original, config) {
        return Err(GpuError::Unsupported(format!(
            "the {} convention clamps a log-ratio in this batch",
            config.convention.name()
        )));
    }
    let input = &plan.pass_input(original);
    let logp = input.logp;
    let rows = logp.rows();
    let tokens = logp.total_len();
    if tokens > MAX_TOKENS || rows > u32::MAX as usize / ROW {
        return Err(GpuError::TooLarge(format!(
            "{tokens} tokens (the kernel takes at most {MAX_TOKENS})"
        )));
    }
    let lengths = logp.lengths();
    let weights = &plan.pg_weights;
    let inputs = pack_inputs(input, &lengths, weights);
    let (index, chunks) = index_tables(&lengths, chunk_tokens);
    let has_ref = input.ref_logp.is_some();
    let params = [
        rows as u32,
        tokens as u32,
        match config.objective {
            Objective::Ppo => 0,
            Objective::Cispo => 1,
            Objective::Sapo => 2,
            // Left to the CPU above.
            Objective::Vespo => 3,
        },
        u32::from(config.ratio_level == RatioLevel::Sequence),
        match config.kl_estimator {
            KlEstimator::K1 => 0,
            KlEstimator::K2 => 1,
            KlEstimator::K3 => 2,
            KlEstimator::Abs => 3,
        },
        u32::from(config.kl_clamp),
        u32::from(config.clip.dual_clip.is_some()),
        bits(config.clip.eps_low),
        bits(config.clip.eps_high),
        bits(config.clip.dual_clip.unwrap_or(0.0)),
        bits(config.sapo_tau_pos),
        bits(config.sapo_tau_neg),
        bits(if has_ref { config.beta } else { 0.0 }),
        chunks as u32,
    ];
    // Entry points: 0 chunk_log_ratio, 1 row_log_ratio, 2 token_terms, 3 chunk_sums,
    // 4 row_sums, 5 batch_sums. The sequence log-ratio is needed only at sequence level.
    let mut dispatches = Vec::with_capacity(6);
    if config.ratio_level == RatioLevel::Sequence {
        dispatches.push((0, groups_for(chunks)));
        dispatches.push((1, groups_for(rows)));
    }
    dispatches.extend([
        (2, groups_for(tokens)),
        (3, groups_for(chunks)),
        (4, groups_for(rows)),
        (5, 1),
    ]);
    let out = run(
        ctx,
        &Job {
            kernel: &arlbook_shaders::POLICY_LOSS,
            params: &params,
            slots: vec![
                Slot::Input(bytemuck::cast_slice(&index)),
                Slot::Input(bytemuck::cast_slice(&inputs)),
                Slot::Output {
                    bytes: 4 * tokens as u64 * 4,
                    read_back: true,
                },
                Slot::Output {
                    bytes: ((rows + 1) * ROW) as u64 * 4,
                    read_back: true,
                },
                Slot::Output {
                    bytes: (chunks * ROW) as u64 * 4,
                    read_back: false,
                },
            ],
            dispatches,
        },
    )
    .await?;
    let per_token = floats(&out[0]);
    let row_out = floats(&out[1]);
    let totals = &row_out[rows * ROW..];
    let ratio = &per_token[..tokens];
    let loss_per_token = &per_token[tokens..2 * tokens];
    let kl_per_token = &per_token[2 * tokens..3 * tokens];
    let gradient = &per_token[3 * tokens..];
    let pg_loss = f64::from(totals[1]);
    let kl = if has_ref { f64::from(totals[2]) } else { 0.0 };
    let beta = if has_ref { config.beta } else { 0.0 };
    let count = tokens as f64;
    let (low, high, dual) = (
        f64::from(totals[5]),
        f64::from(totals[6]),
        f64::from(totals[7]),
    );
    let mut result = PolicyLoss {
        loss: pg_loss + beta * kl,
        pg_loss,
        kl,
        token_weights: expand_row_weights(&lengths, weights)
            .map_err(|e| GpuError::TooLarge(e.to_string()))?,
        kl_token_weights: None,
        kl_per_token: reshape(kl_per_token, logp),
        ppo_kl: 0.0,
        convention: config.convention,
        pg_loss_per_token: reshape(loss_per_token, logp),
        ratio: reshape(ratio, logp),
        clip_fraction: ClipFraction {
            low: low / count,
            high: high / count,
            dual: dual / count,
            total: (low + high + dual) / count,
        },
        ratio_mean: f64::from(totals[3]) / count,
        ratio_max: f64::from(totals[4]),
        gradient: reshape(gradient, logp),
    };
    let finite = per_token.iter().all(|v| v.is_finite())
        && totals.iter().all(|v| v.is_finite())
        && kl_per_token.iter().all(|v| v.is_finite());
    if !finite {
        return Err(GpuError::TooLarge(
            "the loss or its gradient leaves the f32 range".into(),
        ));
    }
    library::finish(&plan, original, config, &mut result)
        .map_err(|e| GpuError::TooLarge(e.to_string()))?;
    Ok(result)
}

//! TRL's padded batch: `policy-loss` with `completion_mask`, and TRL's LUSPO where its
//! loss reads every position of the padded batch.
//!
//! TRL's `GRPOTrainer._compute_loss` works on `(B, T)` tensors with a 0/1 `mask`
//! (`completion_mask`, times `tool_mask`). Almost everything it reduces is masked first:
//! the token and sequence means, the sequence log-ratio `sum_t x_it m_it / max(L_i, 1)`,
//! the off-policy mask's mean KL, the entropy sum. For those, a padded request is the
//! ragged batch of its masked positions (in row order, an interior 0 of a tool mask
//! dropped too), and this module computes it so and spreads the per-token results back
//! over the `(B, T)` grid, 0 at every position outside the mask. Two places read the
//! padding too, and they are computed as TRL computes them:
//!
//! - **LUSPO** (`loss_type = "luspo"`): `(per_token_loss * mask.sum(1, keepdim=True))
//!   .mean()`. Its per-sequence loss `l_i` is `(B, 1)`, but `beta * per_token_kl` (every
//!   position) or a per-token importance ratio `rho_it` make `per_token_loss` `(B, T)`,
//!   and the mean then runs over all `B T` positions, padding included:
//!
//!   ```text
//!   loss = sum_i (L_i / (B T)) sum_{t < T} (l_i rho_it + beta kl_it)     (L_i = sum_t m_it)
//!   ```
//!
//!   so every position carries the weight `L_i / (B T)` (`token_weights`), the KL and
//!   its slope are taken at the padded positions from their `logp` and `ref_logp`, and
//!   `rho` at a padded position is the given one, or the vLLM ratio TRL forms there
//!   (`exp((old - sampling) * m) = 1`, then truncated or masked). With
//!   `use_bias_correction_kl` each `kl_it` is multiplied by the row's sequence ratio
//!   `s_i`, whose slope reaches the masked positions. A ragged batch has no padding, so
//!   there this form is computed only when every row has the same length (`T = L_i`,
//!   where it is the mean over rows of the row sums of `l_i rho_it + beta kl_it`); for
//!   unequal rows the request must give `completion_mask` and the padded rows.
//! - **VESPO** (`loss_type = "vespo"`): `get_gamma_weights` adds `sum_t clamp(ln rho_it,
//!   ln 1e-8, 20)` over every position of the row, padding included, to the masked sum
//!   of log-ratios; the padded positions' part is passed to the kernel as a row offset
//!   ([`crate::math::policy_loss::vespo::VespoRules`]).
//!
//! Errors from the masked computation name the padded position (`logp[1][5]`, not the
//! fifth masked one).

use super::library_names::{
    convention_of, given_sampler_field, resolve_parts, trl_sampler_correction,
};
use super::{
    Advantages, CoreExtras, Entropy, Request, Response, TrlLossType, core, entropy_of, finish,
    input_of, respond, scale_response, trl_scale, uniform_weights,
};
use crate::Ragged;
use crate::error::{FieldError, Result};
use crate::math::convention::Convention;
use crate::math::kl::kl_point;
use crate::math::policy_loss::vespo::trl_log_ratio_term;
use crate::math::policy_loss::{Objective, validate};
use crate::math::sampler_correction::SamplerCorrectionMode;

/// When TRL's LUSPO averages over every position of the padded batch: the field that
/// makes its per-token loss `(B, T)` (`beta > 0`, or a per-token importance ratio).
pub fn luspo_over_grid(request: &Request) -> Option<&'static str> {
    let r = request;
    if r.loss_type != Some(TrlLossType::Luspo) {
        return None;
    }
    if r.beta.is_some_and(|b| b > 0.0) {
        return Some("beta");
    }
    for (name, ratio) in [
        ("importance_weights", &r.importance_weights),
        ("importance_sampling_ratio", &r.importance_sampling_ratio),
    ] {
        if matches!(ratio, Some(Advantages::PerToken(_))) {
            return Some(name);
        }
    }
    let token_mode = matches!(
        r.vllm_importance_sampling_mode,
        Some(SamplerCorrectionMode::TokenMask | SamplerCorrectionMode::TokenTruncate)
    );
    token_mode.then_some("vllm_importance_sampling_mode")
}

/// The fields shaped like `logp`, whose indices a padded request gives in padded
/// positions.
const PER_TOKEN_FIELDS: [&str; 10] = [
    "logp",
    "old_logp",
    "ref_logp",
    "sampling_logp",
    "entropies",
    "advantages",
    "importance_weights",
    "importance_sampling_ratio",
    "rollout_is_weights",
    "logits",
];

/// The padded grid: the mask, its width and each row's count.
struct Grid {
    mask: Vec<Vec<bool>>,
    width: usize,
    counts: Vec<usize>,
}

impl Grid {
    /// The grid of `completion_mask`, or of a ragged batch whose rows are all as long.
    fn of(request: &Request) -> Result<Self> {
        let Some(rows) = &request.completion_mask else {
            let lengths = request.logp.lengths();
            let width = lengths.first().copied().unwrap_or(0);
            return Ok(Self {
                mask: lengths.iter().map(|&l| vec![true; l]).collect(),
                width,
                counts: lengths,
            });
        };
        let Some(first) = rows.first() else {
            return Err(FieldError::new(
                "completion_mask",
                "has no rows; it needs one per sequence",
            ));
        };
        let width = first.len();
        let mut mask = Vec::with_capacity(rows.len());
        for (i, row) in rows.iter().enumerate() {
            if row.len() != width {
                return Err(FieldError::new(
                    format!("completion_mask[{i}]"),
                    format!(
                        "has {} entries but completion_mask[0] has {width}; the padded batch \
                         is rectangular",
                        row.len()
                    ),
                ));
            }
            if let Some(t) = row.iter().position(|&m| m != 0.0 && m != 1.0) {
                return Err(FieldError::new(
                    format!("completion_mask[{i}][{t}]"),
                    format!("must be 0 or 1, got {}", row[t]),
                ));
            }
            mask.push(row.iter().map(|&m| m == 1.0).collect::<Vec<bool>>());
        }
        let counts: Vec<usize> = mask
            .iter()
            .map(|row| row.iter().filter(|&&m| m).count())
            .collect();
        if counts.iter().all(|&c| c == 0) {
            return Err(FieldError::new(
                "completion_mask",
                "selects no token; the loss needs at least one",
            ));
        }
        Ok(Self {
            mask,
            width,
            counts,
        })
    }

    fn rows(&self) -> usize {
        self.mask.len()
    }

    /// Checks that `field` has a row per sequence, each as wide as the mask.
    fn check_rows(&self, field: &str, lengths: &[usize]) -> Result<()> {
        if lengths.len() != self.rows() {
            return Err(FieldError::new(
                field,
                format!(
                    "has {} rows but completion_mask has {}; they must line up",
                    lengths.len(),
                    self.rows()
                ),
            ));
        }
        if let Some(i) = lengths.iter().position(|&l| l != self.width) {
            return Err(FieldError::new(
                format!("{field}[{i}]"),
                format!(
                    "has {} entries but completion_mask[{i}] has {}; with completion_mask \
                     every per-token row is padded to the mask's width",
                    lengths[i], self.width
                ),
            ));
        }
        Ok(())
    }

    /// Checks every per-token field of `request` against the grid.
    fn check_shapes(&self, request: &Request) -> Result<()> {
        let r = request;
        let ragged: [(&str, Option<&Ragged<f64>>); 4] = [
            ("logp", Some(&r.logp)),
            ("old_logp", Some(&r.old_logp)),
            ("ref_logp", r.ref_logp.as_ref()),
            ("sampling_logp", r.sampling_logp.as_ref()),
        ];
        let per_token = |a: &Option<Advantages>| match a {
            Some(Advantages::PerToken(values)) => Some(values.lengths()),
            _ => None,
        };
        let mut shaped: Vec<(&str, Vec<usize>)> = ragged
            .iter()
            .filter_map(|(name, values)| values.map(|v| (*name, v.lengths())))
            .collect();
        shaped.extend(r.entropies.as_ref().map(|e| ("entropies", e.lengths())));
        if let Advantages::PerToken(values) = &r.advantages {
            shaped.push(("advantages", values.lengths()));
        }
        for (name, field) in [
            ("importance_weights", &r.importance_weights),
            ("importance_sampling_ratio", &r.importance_sampling_ratio),
            ("rollout_is_weights", &r.rollout_is_weights),
        ] {
            if let Some(lengths) = per_token(field) {
                shaped.push((name, lengths));
            }
        }
        if let Some(logits) = &r.logits {
            shaped.push(("logits", logits.iter().map(Vec::len).collect()));
        }
        for (name, lengths) in &shaped {
            self.check_rows(name, lengths)?;
        }
        Ok(())
    }

    /// The masked entries of a padded field, as a ragged array.
    fn compact<T: Clone>(&self, padded: &[Vec<T>]) -> Ragged<T> {
        let mut out = Ragged::default();
        for (row, mask) in padded.iter().zip(&self.mask) {
            let kept: Vec<T> = row
                .iter()
                .zip(mask)
                .filter(|(_, m)| **m)
                .map(|(v, _)| v.clone())
                .collect();
            out.push_row(&kept);
        }
        out
    }

    fn compact_ragged(&self, padded: &Ragged<f64>) -> Ragged<f64> {
        self.compact(&padded.to_rows())
    }

    fn compact_advantages(&self, values: &Advantages) -> Advantages {
        match values {
            Advantages::PerSequence(v) => Advantages::PerSequence(v.clone()),
            Advantages::PerToken(v) => Advantages::PerToken(self.compact_ragged(v)),
        }
    }

    /// The ragged request of the masked positions, following `convention`.
    fn compact_request(&self, request: &Request, convention: Convention) -> Request {
        let advantages = |a: &Option<Advantages>| a.as_ref().map(|v| self.compact_advantages(v));
        Request {
            logp: self.compact_ragged(&request.logp),
            old_logp: self.compact_ragged(&request.old_logp),
            ref_logp: request.ref_logp.as_ref().map(|v| self.compact_ragged(v)),
            advantages: self.compact_advantages(&request.advantages),
            sampling_logp: request
                .sampling_logp
                .as_ref()
                .map(|v| self.compact_ragged(v)),
            entropies: request.entropies.as_ref().map(|v| self.compact_ragged(v)),
            importance_weights: advantages(&request.importance_weights),
            importance_sampling_ratio: advantages(&request.importance_sampling_ratio),
            rollout_is_weights: advantages(&request.rollout_is_weights),
            logits: request.logits.as_ref().map(|l| self.compact(l).to_rows()),
            completion_mask: None,
            convention: Some(convention),
            ..request.clone()
        }
    }

    /// A compact per-token result spread over the grid, 0 outside the mask.
    fn spread(&self, compact: &Ragged<f64>) -> Ragged<f64> {
        let mut out = Ragged::default();
        for (row, mask) in compact.iter_rows().zip(&self.mask) {
            let mut kept = row.iter();
            let padded: Vec<f64> = mask
                .iter()
                .map(|&m| if m { *kept.next().unwrap_or(&0.0) } else { 0.0 })
                .collect();
            out.push_row(&padded);
        }
        out
    }

    /// A compact `[row][token][vocabulary]` result spread over the grid, zeros (as many
    /// as the padded position's logits) outside the mask.
    fn spread_vectors(
        &self,
        compact: &[Vec<Vec<f64>>],
        logits: Option<&Vec<Vec<Vec<f64>>>>,
    ) -> Vec<Vec<Vec<f64>>> {
        compact
            .iter()
            .zip(&self.mask)
            .enumerate()
            .map(|(i, (row, mask))| {
                let mut kept = row.iter();
                mask.iter()
                    .enumerate()
                    .map(|(t, &m)| {
                        if m {
                            kept.next().cloned().unwrap_or_default()
                        } else {
                            let vocabulary =
                                logits.and_then(|l| l.get(i)?.get(t)).map_or(0, Vec::len);
                            vec![0.0; vocabulary]
                        }
                    })
                    .collect()
            })
            .collect()
    }

    /// The padded index of the `k`-th masked position of row `i`.
    fn padded_index(&self, i: usize, k: usize) -> Option<usize> {
        self.mask
            .get(i)?
            .iter()
            .enumerate()
            .filter(|(_, m)| **m)
            .nth(k)
            .map(|(t, _)| t)
    }

    /// An error of the masked computation, naming the padded position it is about.
    fn remap(&self, mut error: FieldError) -> FieldError {
        let field = error.field.clone();
        let Some(open) = field.find('[') else {
            return error;
        };
        let name = &field[..open];
        if !PER_TOKEN_FIELDS.contains(&name) {
            return error;
        }
        let indices: Vec<&str> = field[open..]
            .split(']')
            .take(2)
            .filter_map(|part| part.strip_prefix('['))
            .collect();
        let [row, token] = indices[..] else {
            return error;
        };
        let (Ok(i), Ok(k)) = (row.parse::<usize>(), token.parse::<usize>()) else {
            return error;
        };
        let prefix = format!("{name}[{row}][{token}]");
        let Some(rest) = field.strip_prefix(&prefix) else {
            return error;
        };
        if let Some(t) = self.padded_index(i, k) {
            error.field = format!("{name}[{i}][{t}]{rest}");
        }
        error
    }

    /// A response of the compact request spread over the grid.
    fn spread_response(&self, request: &Request, response: &Response) -> Response {
        Response {
            token_weights: self.spread(&response.token_weights),
            kl_token_weights: response.kl_token_weights.as_ref().map(|w| self.spread(w)),
            ratio: self.spread(&response.ratio),
            pg_loss_per_token: self.spread(&response.pg_loss_per_token),
            kl_per_token: self.spread(&response.kl_per_token),
            gradient: self.spread(&response.gradient),
            entropy_per_token: response.entropy_per_token.as_ref().map(|e| self.spread(e)),
            entropy_gradient: response
                .entropy_gradient
                .as_ref()
                .map(|g| self.spread_vectors(g, request.logits.as_ref())),
            ..*response
        }
    }
}

/// `policy-loss` on TRL's padded batch (or a ragged one whose rows are all as long,
/// for LUSPO's mean over every position).
pub fn compute(request: &Request) -> Result<Response> {
    let convention = convention_of(request)?;
    let grid = Grid::of(request)?;
    grid.check_shapes(request)?;
    let compact = grid.compact_request(request, convention);
    if luspo_over_grid(request).is_some() {
        return luspo(request, &grid, &compact);
    }
    let trl_vespo = convention == Convention::Trl
        && (request.loss_type == Some(TrlLossType::Vespo)
            || request.objective == Some(Objective::Vespo));
    let offsets = if trl_vespo {
        vespo_padding_offsets(request, &grid)?
    } else {
        None
    };
    let extras = CoreExtras {
        vespo_row_log_offsets: offsets.as_deref(),
    };
    let (out, config) = core(&compact, extras).map_err(|e| grid.remap(e))?;
    let response = finish(&compact, &config, respond(out)).map_err(|e| grid.remap(e))?;
    Ok(grid.spread_response(request, &response))
}

/// The importance ratio a request gives per token over the padded grid, checked at
/// every position (finite, `>= 0`), with its field name.
fn given_padded_ratio(request: &Request) -> Option<(&'static str, &Ragged<f64>)> {
    let name = given_sampler_field(request)?;
    let field = match name {
        "importance_weights" => &request.importance_weights,
        "importance_sampling_ratio" => &request.importance_sampling_ratio,
        _ => &request.rollout_is_weights,
    };
    match field {
        Some(Advantages::PerToken(values)) => Some((name, values)),
        _ => None,
    }
}

fn check_ratio_at(name: &str, i: usize, t: usize, value: f64) -> Result<f64> {
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(FieldError::new(
            format!("{name}[{i}][{t}]"),
            format!("must be a finite weight >= 0, got {value}"),
        ))
    }
}

/// TRL's VESPO: each row's `sum_t clamp(ln rho_it, ln 1e-8, 20)` over its padded
/// positions, when the importance ratio is per token (given, or TRL's token modes,
/// which form `exp(0) = 1` there before their bounds).
fn vespo_padding_offsets(request: &Request, grid: &Grid) -> Result<Option<Vec<f64>>> {
    if let Some((name, ratio)) = given_padded_ratio(request) {
        let mut offsets = Vec::with_capacity(grid.rows());
        for (i, (row, mask)) in ratio.iter_rows().zip(&grid.mask).enumerate() {
            let mut sum = 0.0;
            for (t, (&rho, &m)) in row.iter().zip(mask).enumerate() {
                if !m {
                    sum += trl_log_ratio_term(check_ratio_at(name, i, t, rho)?);
                }
            }
            offsets.push(sum);
        }
        return Ok(Some(offsets));
    }
    let Some(correction) = trl_sampler_correction(request)? else {
        return Ok(None);
    };
    if matches!(
        correction.mode,
        SamplerCorrectionMode::SequenceMask | SamplerCorrectionMode::SequenceTruncate
    ) {
        return Ok(None);
    }
    let term = trl_log_ratio_term(correction.bound(1.0));
    Ok(Some(
        grid.counts
            .iter()
            .map(|&count| (grid.width - count) as f64 * term)
            .collect(),
    ))
}

/// The importance ratio at every position of the grid, for LUSPO's `(B, T)` loss: the
/// given one (per sequence: the row's value everywhere), or TRL's vLLM ratio (per token:
/// the masked positions' from the compact request, the bounded 1 at the padding; per
/// sequence: the row's); `None` without one.
fn sampler_grid(
    request: &Request,
    grid: &Grid,
    compact_sampler: Option<&Ragged<f64>>,
) -> Result<Option<Vec<Vec<f64>>>> {
    let width = grid.width;
    if let Some(name) = given_sampler_field(request) {
        let field = match name {
            "importance_weights" => &request.importance_weights,
            "importance_sampling_ratio" => &request.importance_sampling_ratio,
            _ => &request.rollout_is_weights,
        };
        return match field {
            Some(Advantages::PerToken(values)) => {
                let mut rows = Vec::with_capacity(grid.rows());
                for (i, row) in values.iter_rows().enumerate() {
                    let checked: Result<Vec<f64>> = row
                        .iter()
                        .enumerate()
                        .map(|(t, &v)| check_ratio_at(name, i, t, v))
                        .collect();
                    rows.push(checked?);
                }
                Ok(Some(rows))
            }
            Some(Advantages::PerSequence(values)) => {
                Ok(Some(values.iter().map(|&v| vec![v; width]).collect()))
            }
            None => Ok(None),
        };
    }
    let (Some(correction), Some(compact)) = (trl_sampler_correction(request)?, compact_sampler)
    else {
        return Ok(None);
    };
    let padding = correction.bound(1.0);
    let per_sequence = matches!(
        correction.mode,
        SamplerCorrectionMode::SequenceMask | SamplerCorrectionMode::SequenceTruncate
    );
    let rows = compact
        .iter_rows()
        .zip(&grid.mask)
        .map(|(row, mask)| {
            if per_sequence {
                return vec![row.first().copied().unwrap_or(padding); width];
            }
            let mut kept = row.iter();
            mask.iter()
                .map(|&m| {
                    if m {
                        kept.next().copied().unwrap_or(padding)
                    } else {
                        padding
                    }
                })
                .collect()
        })
        .collect();
    Ok(Some(rows))
}

/// TRL's LUSPO with a `(B, T)` per-token loss (see the module docs).
// One assembly of the loss, its per-position outputs and its gradient.
#[allow(clippy::too_many_lines)]
fn luspo(request: &Request, grid: &Grid, compact: &Request) -> Result<Response> {
    let remap = |e: FieldError| grid.remap(e);
    let (config, parts) = resolve_parts(compact).map_err(remap)?;
    validate(&input_of(compact), &config).map_err(remap)?;
    // The sequence losses l_i, their slopes and TRL's metrics, without the KL term, the
    // importance ratio, the entropy or the scaling (each added below over the grid).
    let surrogate = Request {
        beta: None,
        ref_logp: None,
        use_bias_correction_kl: None,
        importance_weights: None,
        importance_sampling_ratio: None,
        rollout_is_weights: None,
        vllm_importance_sampling_mode: None,
        vllm_importance_sampling_clip_min: None,
        vllm_importance_sampling_clip_max: None,
        logits: None,
        entropies: None,
        entropy_coef: None,
        entropy_coeff: None,
        gradient_accumulation_steps: None,
        num_items_in_batch: None,
        num_processes: None,
        ..compact.clone()
    };
    let (out, _) = core(&surrogate, CoreExtras::default()).map_err(remap)?;
    let ratio_grid = sampler_grid(request, grid, parts.sampler.as_ref())?;
    let (rows, width) = (grid.rows(), grid.width);
    let cells = (rows * width) as f64;
    let beta = config.beta;
    let mut token_weights = Vec::with_capacity(rows);
    let mut pg_per_token = Vec::with_capacity(rows);
    let mut kl_per_token = Vec::with_capacity(rows);
    let mut ratio = Vec::with_capacity(rows);
    let mut gradient = Vec::with_capacity(rows);
    let (mut pg_loss, mut kl) = (0.0, 0.0);
    for i in 0..rows {
        let count = grid.counts[i];
        let weight = count as f64 / cells;
        let compact_ratio = out.ratio.row(i);
        let s = compact_ratio.first().copied().unwrap_or(1.0);
        let l = out.pg_loss_per_token.row(i).first().copied().unwrap_or(0.0);
        let rho: Vec<f64> = ratio_grid
            .as_ref()
            .map_or_else(|| vec![1.0; width], |g| g[i].clone());
        let rho_sum: f64 = rho.iter().sum();
        // KL at every position of the padded row, and its slope in that position's logp.
        let (kl_row, kl_slope): (Vec<f64>, Vec<f64>) = match (&request.ref_logp, beta > 0.0) {
            (Some(reference), true) => request
                .logp
                .row(i)
                .iter()
                .zip(reference.row(i))
                .map(|(&lp, &lr)| {
                    let point = kl_point(lp, lr, config.kl_estimator, config.kl_clamp);
                    (point.value, point.d_value_d_logp)
                })
                .unzip(),
            _ => (vec![0.0; width], vec![0.0; width]),
        };
        let kl_raw_sum: f64 = kl_row.iter().sum();
        let bias = config.kl_bias_correction && beta > 0.0;
        let kl_row: Vec<f64> = if bias {
            kl_row.iter().map(|v| v * s).collect()
        } else {
            kl_row
        };
        let kl_sum: f64 = kl_row.iter().sum();
        pg_loss += weight * l * rho_sum;
        kl += weight * kl_sum;
        // d l_i / d logp at the masked positions: the surrogate run's gradient is that of
        // its row sum `w_i L_i l_i` (all L_i tokens carry l_i), so divide by w_i L_i.
        let mut slopes = out
            .gradient
            .row(i)
            .iter()
            .zip(out.token_weights.row(i))
            .map(|(g, w)| {
                if *w == 0.0 {
                    0.0
                } else {
                    g / (w * count as f64)
                }
            });
        let row_gradient: Vec<f64> = grid.mask[i]
            .iter()
            .enumerate()
            .map(|(t, &m)| {
                let mut g = beta * kl_slope[t] * if bias { s } else { 1.0 };
                if m {
                    g += rho_sum * slopes.next().unwrap_or(0.0);
                    if bias {
                        // The slope of s_i = exp(masked mean log-ratio) is s_i / L_i.
                        g += beta * kl_raw_sum * s / count as f64;
                    }
                }
                weight * g
            })
            .collect();
        token_weights.push(vec![weight; width]);
        pg_per_token.push(rho.iter().map(|r| l * r).collect::<Vec<f64>>());
        kl_per_token.push(kl_row);
        ratio.push(vec![s; width]);
        gradient.push(row_gradient);
    }
    let loss = pg_loss + beta * kl;
    let finite = loss.is_finite() && gradient.iter().flatten().all(|g| g.is_finite());
    if !finite {
        return Err(FieldError::new(
            "logp",
            "the loss or its gradient overflows f64 for these inputs (ratios or KL too large)",
        ));
    }
    let mut response = Response {
        loss,
        pg_loss,
        kl,
        token_weights: Ragged::from_rows(&token_weights),
        kl_token_weights: None,
        clip_fraction: out.clip_fraction,
        ratio_mean: out.ratio_mean,
        ratio_max: out.ratio_max,
        ppo_kl: out.ppo_kl,
        ratio: Ragged::from_rows(&ratio),
        pg_loss_per_token: Ragged::from_rows(&pg_per_token),
        kl_per_token: Ragged::from_rows(&kl_per_token),
        gradient: Ragged::from_rows(&gradient),
        entropy: None,
        entropy_per_token: None,
        entropy_gradient: None,
        convention: config.convention,
    };
    // TRL's entropy bonus is the mean over the masked tokens, whatever the loss type.
    if let Some((
        coef,
        Entropy {
            reduced,
            per_token,
            gradient,
        },
    )) = entropy_of(compact, &uniform_weights(&compact.logp)).map_err(remap)?
    {
        response.loss -= coef * reduced;
        response.entropy = Some(reduced);
        response.entropy_per_token = Some(grid.spread(&per_token));
        response.entropy_gradient =
            gradient.map(|g| grid.spread_vectors(&g, request.logits.as_ref()));
    }
    let tokens = grid.counts.iter().sum();
    scale_response(&mut response, trl_scale(request, tokens)?);
    Ok(response)
}

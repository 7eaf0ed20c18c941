//! The GRPO policy loss in burn, term for term the loss of
//! [`arlbook_core::math::policy_loss`] (objective `ppo`, token-level ratios):
//!
//! ```text
//! x_ik = (logp_ik - logp_old_ik) * m_ik            m: 1 on generated tokens
//! q_ik = exp(x_ik)
//! l_ik = -min(q A_i, clip(q, 1 - eps_low, 1 + eps_high) A_i)     [A_i < 0, dual clip c: min(l, -c A_i)]
//! kl_ik = k1: logp - ref   k2: (logp - ref)^2 / 2   k3: exp(ref - logp) - (ref - logp) - 1
//! H_ik = -sum_j p_ikj log p_ikj,  p = softmax(z / temperature)
//! loss = sum_ik w_ik (m_ik l_ik + beta kl_ik) - entropy_coef * sum_ik u_ik H_ik
//! ```
//!
//! Under verl's convention `x_ik` is clamped to `[-20, 20]` (no slope where clamped)
//! and `k3` is verl's `low_var_kl` (its log-ratio clamped to +-20, its value to +-10),
//! as `core::math::policy_loss::library` and `core::math::kl` compute them. `m` are the
//! surrogate's multipliers (importance weights against the sampler, from
//! `core::math::sampler_correction`; 1 without them). The entropy
//! weights `u` are the reduction's (TRL: the token mean over the minibatch), as
//! `core::math::entropy` defines the bonus.
//!
//! `w_ik` are the reduction's weights from `core::math::reduction::row_weights`,
//! computed once over **all rows of the optimizer step** and handed to every
//! microbatch. Summing the microbatch losses (and their gradients) therefore gives
//! exactly the loss of the whole step under the chosen reduction: `token-mean` divides
//! by the step's total valid tokens, not by each microbatch's (a mean of means would
//! weight short microbatches up). A unit test checks the value and the gradient with
//! respect to `logp` against the core function on the same numbers.

use arlbook_core::math::kl::KlEstimator;
use burn::prelude::*;
use burn::tensor::activation::log_softmax;

/// The loss's settings (a subset of `PolicyLossConfig`: objective `ppo`, token ratios).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SurrogateSettings {
    /// Lower clip width.
    pub eps_low: f64,
    /// Upper clip width.
    pub eps_high: f64,
    /// Dual-clip bound for `A < 0`.
    pub dual_clip: Option<f64>,
    /// KL coefficient (0: the reference is not used).
    pub beta: f64,
    /// KL estimator.
    pub kl_estimator: KlEstimator,
    /// verl's `k3` clamps (`low_var_kl`).
    pub kl_clamp: bool,
    /// The clamp on each token's log-ratio (infinite for none; verl 20).
    pub log_ratio_limit: f64,
    /// Entropy bonus coefficient (0: no bonus).
    pub entropy_coef: f64,
}

impl Default for SurrogateSettings {
    /// Symmetric clip 0.2, no dual clip, no KL term, no clamps, no entropy bonus.
    fn default() -> Self {
        Self {
            eps_low: 0.2,
            eps_high: 0.2,
            dual_clip: None,
            beta: 0.0,
            kl_estimator: KlEstimator::K3,
            kl_clamp: false,
            log_ratio_limit: f64::INFINITY,
            entropy_coef: 0.0,
        }
    }
}

/// Per-token inputs of one microbatch, `[N, T]` (T = padded length minus one).
#[derive(Debug, Clone)]
pub struct SurrogateInputs {
    /// Behaviour log-probabilities (0 off the mask).
    pub old_logp: Tensor<2>,
    /// 1 on generated tokens, 0 elsewhere.
    pub mask: Tensor<2>,
    /// Reduction weights `w_ik` (0 off the mask).
    pub weights: Tensor<2>,
    /// Advantages `[N, 1]`.
    pub advantages: Tensor<2>,
    /// Reference log-probabilities, when `beta > 0`.
    pub ref_logp: Option<Tensor<2>>,
    /// The entropy bonus's terms, when `entropy_coef > 0`.
    pub entropy: Option<EntropyBonus>,
    /// Multipliers `m_ik >= 0` of each token's surrogate term (importance weights
    /// against the sampler), when there are any.
    pub multipliers: Option<Tensor<2>>,
}

/// The entropy of each position (with its graph back to the logits) and its weights.
#[derive(Debug, Clone)]
pub struct EntropyBonus {
    /// `H_ik` in nats, `[N, T]` (0 off the mask).
    pub entropy: Tensor<2>,
    /// `u_ik`, `[N, T]` (0 off the mask).
    pub weights: Tensor<2>,
}

/// `log pi(target)` per position: `[N, T]` from logits `[N, T, V]`, the temperature
/// they were sampled at, and optionally the nucleus mask (true = not kept).
pub fn token_logprobs(
    logits: Tensor<3>,
    targets: Tensor<2, Int>,
    temperature: f64,
    not_kept: Option<Tensor<3, Bool>>,
) -> Tensor<2> {
    let mut scaled = if (temperature - 1.0).abs() > 0.0 {
        logits.div_scalar(temperature)
    } else {
        logits
    };
    if let Some(mask) = not_kept {
        scaled = scaled.mask_fill(mask, -1.0e9);
    }
    let [n, t, _] = scaled.dims();
    log_softmax(scaled, 2)
        .gather(2, targets.reshape([n, t, 1]))
        .reshape([n, t])
}

/// Entropy (nats) of `softmax(logits / T)` per position, `[N, T]`, without gradient.
pub fn token_entropy(logits: Tensor<3>, temperature: f64) -> Tensor<2> {
    entropy_with_graph(logits.detach(), temperature)
}

/// Entropy (nats) of `softmax(logits / T)` per position, `[N, T]`, differentiable in
/// the logits (the entropy bonus).
pub fn entropy_with_graph(logits: Tensor<3>, temperature: f64) -> Tensor<2> {
    let logp = log_softmax(logits.div_scalar(temperature), 2);
    let [n, t, _] = logp.dims();
    (logp.clone().exp() * logp).sum_dim(2).neg().reshape([n, t])
}

/// The per-token KL estimate of `logp` against `ref_logp` (`clamp`: verl's `k3`
/// clamps, see `core::math::kl`).
pub fn kl_per_token(
    logp: Tensor<2>,
    ref_logp: Tensor<2>,
    estimator: KlEstimator,
    clamp: bool,
) -> Tensor<2> {
    match estimator {
        KlEstimator::K1 => logp - ref_logp,
        KlEstimator::K2 => (logp - ref_logp).square().mul_scalar(0.5),
        KlEstimator::Abs => (logp - ref_logp).abs(),
        KlEstimator::K3 if clamp => {
            let d = (ref_logp - logp).clamp(-K3_LOG_RATIO_CLAMP, K3_LOG_RATIO_CLAMP);
            (d.clone().exp() - d - 1.0).clamp(-K3_VALUE_CLAMP, K3_VALUE_CLAMP)
        }
        KlEstimator::K3 => {
            let d = ref_logp - logp;
            d.clone().exp() - d - 1.0
        }
    }
}

/// verl's `low_var_kl` clamps: its log-ratio to +-20, its value to +-10.
const K3_LOG_RATIO_CLAMP: f64 = 20.0;
const K3_VALUE_CLAMP: f64 = 10.0;

/// The weighted loss `sum w (l + beta kl)` of one microbatch, shape `[1]`.
pub fn surrogate_loss(
    logp: Tensor<2>,
    inputs: &SurrogateInputs,
    settings: &SurrogateSettings,
) -> Tensor<1> {
    let [n, t] = logp.dims();
    let mut log_ratio = (logp.clone() - inputs.old_logp.clone()) * inputs.mask.clone();
    if settings.log_ratio_limit.is_finite() {
        log_ratio = log_ratio.clamp(-settings.log_ratio_limit, settings.log_ratio_limit);
    }
    let ratio = log_ratio.exp();
    let advantages = inputs.advantages.clone().expand([n, t]);
    let unclipped = ratio.clone() * advantages.clone();
    let clipped = ratio.clamp(1.0 - settings.eps_low, 1.0 + settings.eps_high) * advantages.clone();
    let mut per_token = unclipped.min_pair(clipped).neg();
    if let Some(c) = settings.dual_clip {
        let bound = advantages.clone().mul_scalar(-c);
        let dual = per_token.clone().min_pair(bound);
        per_token = per_token.mask_where(advantages.lower_elem(0.0), dual);
    }
    if let Some(multipliers) = &inputs.multipliers {
        per_token = per_token * multipliers.clone();
    }
    if settings.beta > 0.0
        && let Some(ref_logp) = &inputs.ref_logp
    {
        let masked_logp = logp * inputs.mask.clone();
        let masked_ref = ref_logp.clone() * inputs.mask.clone();
        let kl = kl_per_token(
            masked_logp,
            masked_ref,
            settings.kl_estimator,
            settings.kl_clamp,
        );
        per_token = per_token + kl.mul_scalar(settings.beta);
    }
    let loss = (per_token * inputs.weights.clone()).sum();
    match &inputs.entropy {
        Some(bonus) if settings.entropy_coef > 0.0 => {
            let reduced = (bonus.entropy.clone() * bonus.weights.clone()).sum();
            loss - reduced.mul_scalar(settings.entropy_coef)
        }
        _ => loss,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arlbook_core::Ragged;
    use arlbook_core::math::clip::ClipWidths;
    use arlbook_core::math::convention::Convention;
    use arlbook_core::math::entropy::entropy_term;
    use arlbook_core::math::policy_loss::{
        PolicyLossConfig, PolicyLossInput, TokenAdvantages, policy_loss_scaled,
    };
    use arlbook_core::math::reduction::{Reduction, row_weights, row_weights_by};
    use arlbook_core::rng::RandomStream;

    struct Case {
        lengths: Vec<usize>,
        width: usize,
        logp: Vec<f64>,
        old: Vec<f64>,
        reference: Vec<f64>,
        advantages: Vec<f64>,
    }

    /// Random ragged rows padded to `width`, log-probabilities in (-3, 0), old and
    /// reference log-probabilities within +-0.4 so some ratios leave the clip band.
    fn case(seed: u64) -> Case {
        let mut rng = RandomStream::new(seed, 0);
        let rows = 5;
        let width = 9;
        let lengths: Vec<usize> = (0..rows)
            .map(|_| 1 + rng.below(width as u32) as usize)
            .collect();
        let mut logp = vec![0.0; rows * width];
        let mut old = vec![0.0; rows * width];
        let mut reference = vec![0.0; rows * width];
        for (i, &len) in lengths.iter().enumerate() {
            for k in 0..len {
                let at = i * width + k;
                logp[at] = -0.05 - 2.9 * rng.uniform();
                old[at] = (logp[at] + 0.8 * (rng.uniform() - 0.5)).min(0.0);
                reference[at] = (logp[at] + 0.8 * (rng.uniform() - 0.5)).min(0.0);
            }
        }
        let advantages = (0..rows).map(|_| 2.0 * rng.uniform() - 1.0).collect();
        Case {
            lengths,
            width,
            logp,
            old,
            reference,
            advantages,
        }
    }

    fn ragged(case: &Case, values: &[f64]) -> Ragged<f64> {
        let rows: Vec<Vec<f64>> = case
            .lengths
            .iter()
            .enumerate()
            .map(|(i, &len)| values[i * case.width..i * case.width + len].to_vec())
            .collect();
        Ragged::from_rows(&rows)
    }

    fn tensor(values: &[f64], shape: [usize; 2], device: &Device) -> Tensor<2> {
        let data: Vec<f32> = values.iter().map(|&v| v as f32).collect();
        Tensor::from_data(TensorData::new(data, shape), device)
    }

    fn check(
        seed: u64,
        reduction: Reduction,
        dual_clip: Option<f64>,
        beta: f64,
        estimator: KlEstimator,
    ) {
        check_under(
            seed,
            reduction,
            dual_clip,
            beta,
            estimator,
            Convention::Arlbook,
            false,
        );
    }

    /// Moves some tokens' old and reference log-probabilities 25 nats below the
    /// current one, past verl's clamps, and makes those rows' advantages negative (the
    /// side where the unclipped surrogate keeps its slope).
    fn push_past_the_clamps(c: &mut Case) {
        for i in [0, 2] {
            c.advantages[i] = -c.advantages[i].abs();
            let at = i * c.width;
            c.old[at] = c.logp[at] - 25.0;
            c.reference[at] = c.logp[at] - 25.0;
        }
    }

    fn check_under(
        seed: u64,
        reduction: Reduction,
        dual_clip: Option<f64>,
        beta: f64,
        estimator: KlEstimator,
        convention: Convention,
        multiplied: bool,
    ) {
        let mut c = case(seed);
        // Importance weights against a sampler: in [0, 3), some exactly 0 (masked).
        let multipliers: Option<Vec<f64>> = multiplied.then(|| {
            let mut rng = RandomStream::new(seed, 9);
            (0..c.logp.len())
                .map(|at| {
                    if at % 7 == 3 {
                        0.0
                    } else {
                        3.0 * rng.uniform()
                    }
                })
                .collect()
        });
        let verl = convention == Convention::Verl;
        if verl {
            push_past_the_clamps(&mut c);
        }
        let rows = c.lengths.len();
        let device = Device::flex().autodiff();
        let weights_per_row = row_weights_by(&c.lengths, reduction, None, convention).unwrap();
        let mut mask = vec![0.0; rows * c.width];
        let mut weights = vec![0.0; rows * c.width];
        for (i, &len) in c.lengths.iter().enumerate() {
            for k in 0..len {
                mask[i * c.width + k] = 1.0;
                weights[i * c.width + k] = weights_per_row[i];
            }
        }
        let shape = [rows, c.width];
        let logp = tensor(&c.logp, shape, &device).require_grad();
        let inputs = SurrogateInputs {
            old_logp: tensor(&c.old, shape, &device),
            mask: tensor(&mask, shape, &device),
            weights: tensor(&weights, shape, &device),
            advantages: tensor(&c.advantages, [rows, 1], &device),
            ref_logp: Some(tensor(&c.reference, shape, &device)),
            entropy: None,
            multipliers: multipliers.as_ref().map(|m| tensor(m, shape, &device)),
        };
        let kl_clamp = verl && estimator == KlEstimator::K3;
        let settings = SurrogateSettings {
            eps_low: 0.2,
            eps_high: 0.28,
            dual_clip,
            beta,
            kl_estimator: estimator,
            kl_clamp,
            log_ratio_limit: if verl { 20.0 } else { f64::INFINITY },
            entropy_coef: 0.0,
        };
        let loss = surrogate_loss(logp.clone(), &inputs, &settings);
        let grads = loss.backward();
        let loss_value = f64::from(loss.into_scalar::<f32>());
        let gradient: Vec<f32> = logp.grad(&grads).unwrap().try_into_vec_as::<f32>().unwrap();

        let logp_r = ragged(&c, &c.logp);
        let old_r = ragged(&c, &c.old);
        let ref_r = ragged(&c, &c.reference);
        let pg_scale = multipliers.as_ref().map(|m| ragged(&c, m));
        let expected = policy_loss_scaled(
            &PolicyLossInput {
                logp: &logp_r,
                old_logp: &old_r,
                ref_logp: Some(&ref_r),
                advantages: TokenAdvantages::PerSequence(&c.advantages),
            },
            &PolicyLossConfig {
                clip: ClipWidths {
                    eps_low: 0.2,
                    eps_high: 0.28,
                    dual_clip,
                },
                reduction,
                beta,
                kl_estimator: estimator,
                kl_clamp,
                convention,
                ..PolicyLossConfig::default()
            },
            pg_scale.as_ref(),
        )
        .unwrap();
        // Relative to the loss's size: past verl's clamp a ratio is e^20.
        assert!(
            (loss_value - expected.loss).abs() < 1e-5 * expected.loss.abs().max(1.0),
            "{reduction:?}: burn {loss_value} vs core {}",
            expected.loss
        );
        for (i, &len) in c.lengths.iter().enumerate() {
            for k in 0..len {
                let burn_grad = f64::from(gradient[i * c.width + k]);
                let core_grad = expected.gradient.row(i)[k];
                assert!(
                    (burn_grad - core_grad).abs() < 1e-5 * core_grad.abs().max(1.0),
                    "{reduction:?} d/dlogp[{i}][{k}]: burn {burn_grad} vs core {core_grad}"
                );
            }
            for k in len..c.width {
                assert_eq!(
                    gradient[i * c.width + k],
                    0.0,
                    "padding must carry no gradient"
                );
            }
        }
    }

    #[test]
    fn burn_loss_and_gradient_equal_the_core_policy_loss_for_every_reduction() {
        let reductions = [
            Reduction::TokenMean,
            Reduction::SeqMeanTokenMean,
            Reduction::SeqMeanTokenSum,
            Reduction::SeqMeanTokenSumNorm,
            Reduction::DrGrpo,
        ];
        for (seed, reduction) in reductions.into_iter().enumerate() {
            check(seed as u64, reduction, None, 0.0, KlEstimator::K3);
            check(seed as u64 + 10, reduction, Some(3.0), 0.0, KlEstimator::K3);
        }
    }

    #[test]
    fn burn_kl_terms_equal_the_core_kl_for_every_estimator() {
        for (seed, estimator) in [
            KlEstimator::K1,
            KlEstimator::K2,
            KlEstimator::K3,
            KlEstimator::Abs,
        ]
        .into_iter()
        .enumerate()
        {
            check(20 + seed as u64, Reduction::TokenMean, None, 0.1, estimator);
            check(
                30 + seed as u64,
                Reduction::SeqMeanTokenMean,
                Some(2.5),
                0.04,
                estimator,
            );
        }
    }

    #[test]
    fn microbatches_with_step_weights_sum_to_the_whole_step_loss() {
        // Splitting rows into microbatches and summing their weighted losses equals one
        // pass over all rows when the weights come from the whole step.
        let c = case(42);
        let rows = c.lengths.len();
        let device = Device::flex();
        let weights_per_row = row_weights(&c.lengths, Reduction::TokenMean, None).unwrap();
        let settings = SurrogateSettings::default();
        let build = |range: std::ops::Range<usize>| {
            let n = range.len();
            let pick = |values: &[f64]| -> Vec<f64> {
                values[range.start * c.width..range.end * c.width].to_vec()
            };
            let mut mask = vec![0.0; n * c.width];
            let mut weights = vec![0.0; n * c.width];
            for (r, i) in range.clone().enumerate() {
                for k in 0..c.lengths[i] {
                    mask[r * c.width + k] = 1.0;
                    weights[r * c.width + k] = weights_per_row[i];
                }
            }
            let shape = [n, c.width];
            let inputs = SurrogateInputs {
                old_logp: tensor(&pick(&c.old), shape, &device),
                mask: tensor(&mask, shape, &device),
                weights: tensor(&weights, shape, &device),
                advantages: tensor(&c.advantages[range.clone()], [n, 1], &device),
                ref_logp: None,
                entropy: None,
                multipliers: None,
            };
            f64::from(
                surrogate_loss(tensor(&pick(&c.logp), shape, &device), &inputs, &settings)
                    .into_scalar::<f32>(),
            )
        };
        let whole = build(0..rows);
        let split = build(0..2) + build(2..rows);
        assert!((whole - split).abs() < 1e-6, "{whole} vs {split}");
    }

    #[test]
    fn burn_follows_the_verl_and_trl_conventions_of_the_core() {
        // verl: log-ratios past +-20 clamped with no slope, k3 as low_var_kl, rows over
        // L + 1e-8; TRL: its row weights (no empty rows here, so arlbook's numbers).
        for (seed, reduction) in [Reduction::TokenMean, Reduction::SeqMeanTokenMean]
            .into_iter()
            .enumerate()
        {
            for convention in [Convention::Verl, Convention::Trl] {
                check_under(
                    50 + seed as u64,
                    reduction,
                    None,
                    0.05,
                    KlEstimator::K3,
                    convention,
                    false,
                );
            }
        }
    }

    #[test]
    fn burn_multipliers_equal_the_core_importance_weights() {
        // Each token's surrogate term times its weight against the sampler, the KL term
        // unweighted, as `policy_loss_scaled` computes it.
        for (seed, reduction) in [Reduction::TokenMean, Reduction::SeqMeanTokenSum]
            .into_iter()
            .enumerate()
        {
            check_under(
                60 + seed as u64,
                reduction,
                Some(3.0),
                0.02,
                KlEstimator::K3,
                Convention::Arlbook,
                true,
            );
        }
    }

    #[test]
    fn burn_entropy_bonus_equals_the_core_entropy_term() {
        // Loss = -coef * sum u H(softmax(z)); its value and d/dz against
        // core::math::entropy on the same logits.
        let (rows, width, vocab) = (3, 4, 5);
        let lengths = [4usize, 2, 3];
        let coef = 0.03;
        let mut rng = RandomStream::new(77, 0);
        let logits: Vec<f64> = (0..rows * width * vocab)
            .map(|_| 3.0 * rng.uniform() - 1.5)
            .collect();
        let weights_per_row = row_weights(&lengths, Reduction::SeqMeanTokenMean, None).unwrap();
        let mut mask = vec![0.0; rows * width];
        let mut weights = vec![0.0; rows * width];
        for (i, &len) in lengths.iter().enumerate() {
            for k in 0..len {
                mask[i * width + k] = 1.0;
                weights[i * width + k] = weights_per_row[i];
            }
        }
        let device = Device::flex().autodiff();
        let data: Vec<f32> = logits.iter().map(|&v| v as f32).collect();
        let z = Tensor::<3>::from_data(TensorData::new(data, [rows, width, vocab]), &device)
            .require_grad();
        let shape = [rows, width];
        let zeros = vec![0.0; rows * width];
        let inputs = SurrogateInputs {
            old_logp: tensor(&zeros, shape, &device),
            mask: tensor(&mask, shape, &device),
            weights: tensor(&weights, shape, &device),
            advantages: tensor(&[0.0; 3], [rows, 1], &device),
            ref_logp: None,
            multipliers: None,
            entropy: Some(EntropyBonus {
                entropy: entropy_with_graph(z.clone(), 1.0) * tensor(&mask, shape, &device),
                weights: tensor(&weights, shape, &device),
            }),
        };
        let settings = SurrogateSettings {
            entropy_coef: coef,
            ..SurrogateSettings::default()
        };
        let loss = surrogate_loss(tensor(&zeros, shape, &device), &inputs, &settings);
        let grads = loss.backward();
        let loss_value = f64::from(loss.into_scalar::<f32>());
        let gradient: Vec<f32> = z.grad(&grads).unwrap().try_into_vec_as::<f32>().unwrap();

        let ragged_logits: Vec<Vec<Vec<f64>>> = lengths
            .iter()
            .enumerate()
            .map(|(i, &len)| {
                (0..len)
                    .map(|k| {
                        let at = (i * width + k) * vocab;
                        logits[at..at + vocab].to_vec()
                    })
                    .collect()
            })
            .collect();
        let token_weights = Ragged::from_rows(
            &lengths
                .iter()
                .enumerate()
                .map(|(i, &len)| vec![weights_per_row[i]; len])
                .collect::<Vec<_>>(),
        );
        let term = entropy_term(&ragged_logits, &token_weights, coef).unwrap();
        assert!(
            (loss_value + coef * term.reduced).abs() < 1e-6,
            "burn {loss_value} vs core {}",
            -coef * term.reduced
        );
        for (i, &len) in lengths.iter().enumerate() {
            for k in 0..width {
                for j in 0..vocab {
                    let burn = f64::from(gradient[(i * width + k) * vocab + j]);
                    let core = if k < len { term.gradient[i][k][j] } else { 0.0 };
                    assert!(
                        (burn - core).abs() < 1e-6,
                        "d/dz[{i}][{k}][{j}]: burn {burn} vs core {core}"
                    );
                }
            }
        }
    }
}

//! The policy loss over ragged sequences, every objective, ratio level, reduction and
//! KL estimator, against the CPU.

use arlbook_core::Ragged;
use arlbook_core::gpu;
use arlbook_core::math::clip::ClipWidths;
use arlbook_core::math::kl::{KlEstimator, kl_point};
use arlbook_core::math::policy_loss::{
    Objective, PolicyLoss, PolicyLossConfig, PolicyLossInput, RatioLevel, TokenAdvantages,
    policy_loss,
};
use arlbook_core::math::reduction::Reduction;

use crate::support::{Inputs, assert_all_close, assert_close, context};

struct Batch {
    logp: Ragged<f64>,
    old: Ragged<f64>,
    reference: Ragged<f64>,
    per_sequence: Vec<f64>,
    per_token: Ragged<f64>,
}

fn random_batch(inputs: &mut Inputs, rows: usize) -> Batch {
    let (mut logp, mut old, mut reference, mut per_token) = (
        Ragged::default(),
        Ragged::default(),
        Ragged::default(),
        Ragged::default(),
    );
    let mut per_sequence = Vec::new();
    for i in 0..rows {
        // Ragged lengths, an empty sequence, and one long one.
        let len = match i % 5 {
            0 if i > 0 => 0,
            1 => 300,
            _ => 1 + inputs.below(40),
        };
        let row: Vec<f64> = (0..len).map(|_| inputs.uniform(-6.0, -0.01)).collect();
        // Old and reference policies nearby, sometimes far (extreme ratios).
        let spread = if inputs.coin(0.2) { 2.0 } else { 0.3 };
        let shift = |inputs: &mut Inputs, v: f64| (v + inputs.uniform(-spread, spread)).min(0.0);
        old.push_row(&row.iter().map(|&v| shift(inputs, v)).collect::<Vec<_>>());
        reference.push_row(&row.iter().map(|&v| shift(inputs, v)).collect::<Vec<_>>());
        per_token.push_row(
            &(0..len)
                .map(|_| inputs.uniform(-2.0, 2.0))
                .collect::<Vec<_>>(),
        );
        per_sequence.push(if i % 7 == 3 {
            0.0
        } else {
            inputs.uniform(-2.0, 2.0)
        });
        logp.push_row(&row);
    }
    Batch {
        logp,
        old,
        reference,
        per_sequence,
        per_token,
    }
}

fn compare(what: &str, gpu: &PolicyLoss, cpu: &PolicyLoss, kl_scale: f64) {
    // A reduced value's scale: the weighted sum of the magnitudes of its terms.
    let scale = |values: &Ragged<f64>| -> f64 {
        values
            .flat()
            .iter()
            .zip(cpu.token_weights.flat())
            .map(|(v, w)| (v * w).abs())
            .sum::<f64>()
    };
    let pg_scale = scale(&cpu.pg_loss_per_token);
    assert_close(
        &format!("{what} pg_loss"),
        gpu.pg_loss,
        cpu.pg_loss,
        pg_scale,
    );
    assert_close(&format!("{what} kl"), gpu.kl, cpu.kl, kl_scale);
    assert_close(
        &format!("{what} loss"),
        gpu.loss,
        cpu.loss,
        pg_scale + kl_scale,
    );
    assert_all_close(&format!("{what} ratio"), gpu.ratio.flat(), cpu.ratio.flat());
    assert_all_close(
        &format!("{what} pg_loss_per_token"),
        gpu.pg_loss_per_token.flat(),
        cpu.pg_loss_per_token.flat(),
    );
    assert_all_close(
        &format!("{what} gradient"),
        gpu.gradient.flat(),
        cpu.gradient.flat(),
    );
    assert_eq!(gpu.token_weights, cpu.token_weights, "{what} token_weights");
    assert_eq!(
        gpu.clip_fraction, cpu.clip_fraction,
        "{what} clip fractions"
    );
    assert_close(
        &format!("{what} ratio_mean"),
        gpu.ratio_mean,
        cpu.ratio_mean,
        0.0,
    );
    assert_close(
        &format!("{what} ratio_max"),
        gpu.ratio_max,
        cpu.ratio_max,
        0.0,
    );
}

/// The weighted sum of the KL terms' magnitudes.
fn kl_scale(input: &PolicyLossInput<'_>, config: &PolicyLossConfig, cpu: &PolicyLoss) -> f64 {
    let Some(reference) = input.ref_logp else {
        return 0.0;
    };
    input
        .logp
        .flat()
        .iter()
        .zip(reference.flat())
        .zip(cpu.token_weights.flat())
        .map(|((&a, &b), w)| (w * kl_point(a, b, config.kl_estimator, config.kl_clamp).value).abs())
        .sum()
}

const REDUCTIONS: [Reduction; 5] = [
    Reduction::TokenMean,
    Reduction::SeqMeanTokenMean,
    Reduction::SeqMeanTokenSum,
    Reduction::SeqMeanTokenSumNorm,
    Reduction::DrGrpo,
];

#[test]
fn policy_loss_matches_cpu_across_objectives_reductions_and_kl() {
    let Some(ctx) = context() else { return };
    let mut inputs = Inputs::new(5);
    let mut case = 0;
    for rows in [1usize, 6, 23] {
        let batch = random_batch(&mut inputs, rows);
        for objective in [Objective::Ppo, Objective::Cispo, Objective::Sapo] {
            for ratio_level in [RatioLevel::Token, RatioLevel::Sequence] {
                for (r, &reduction) in REDUCTIONS.iter().enumerate() {
                    case += 1;
                    // Every estimator meets cases with and without a reference.
                    let kl_estimator = [
                        KlEstimator::K1,
                        KlEstimator::K2,
                        KlEstimator::K3,
                        KlEstimator::Abs,
                    ][(case / 2) % 4];
                    let per_token = case % 2 == 0;
                    let input = PolicyLossInput {
                        logp: &batch.logp,
                        old_logp: &batch.old,
                        ref_logp: (case % 4 != 0).then_some(&batch.reference),
                        advantages: if per_token {
                            TokenAdvantages::PerToken(&batch.per_token)
                        } else {
                            TokenAdvantages::PerSequence(&batch.per_sequence)
                        },
                    };
                    let config = PolicyLossConfig {
                        objective,
                        ratio_level,
                        clip: ClipWidths {
                            eps_low: 0.2,
                            eps_high: [0.2, 0.28][r % 2],
                            dual_clip: (objective == Objective::Ppo && case % 3 == 0)
                                .then_some(3.0),
                        },
                        reduction,
                        constant: (r == 4 && case % 2 == 1).then_some(512.0),
                        beta: if input.ref_logp.is_some() { 0.04 } else { 0.0 },
                        kl_estimator,
                        kl_clamp: case % 5 == 0,
                        ..PolicyLossConfig::default()
                    };
                    let what = format!(
                        "case {case}: {rows} rows {objective:?} {ratio_level:?} {reduction:?} \
                         {kl_estimator:?} per_token={per_token}"
                    );
                    let cpu = policy_loss(&input, &config).unwrap();
                    let gpu =
                        gpu::block_on(gpu::policy_loss::policy_loss(ctx, &input, &config)).unwrap();
                    compare(&what, &gpu, &cpu, kl_scale(&input, &config, &cpu));
                }
            }
        }
    }
}

#[test]
fn k3_near_the_reference_keeps_its_digits() {
    let Some(ctx) = context() else { return };
    // log-ratios of 1e-4: k3 is about 5e-9, which a naive f32 formula rounds to 0.
    let logp = Ragged::from_rows(&[vec![-1.0, -2.0, -0.5]]);
    let reference = Ragged::from_rows(&[vec![-1.0001, -2.0001, -0.4999]]);
    let input = PolicyLossInput {
        logp: &logp,
        old_logp: &logp,
        ref_logp: Some(&reference),
        advantages: TokenAdvantages::PerSequence(&[1.0]),
    };
    let config = PolicyLossConfig {
        beta: 1.0,
        ..PolicyLossConfig::default()
    };
    let cpu = policy_loss(&input, &config).unwrap();
    let gpu = gpu::block_on(gpu::policy_loss::policy_loss(ctx, &input, &config)).unwrap();
    assert!(cpu.kl > 0.0);
    assert_close("kl", gpu.kl, cpu.kl, 0.0);
    compare("near reference", &gpu, &cpu, cpu.kl);
    assert_all_close("gradient", gpu.gradient.flat(), cpu.gradient.flat());
}

#[test]
fn long_sequences_summed_in_chunks_of_any_length_match_cpu() {
    let Some(ctx) = context() else { return };
    let mut inputs = Inputs::new(8);
    let mut batch = random_batch(&mut inputs, 4);
    // Two long sequences on top: thousands of tokens, many chunks each.
    for len in [4097usize, 10_000] {
        let row: Vec<f64> = (0..len).map(|_| inputs.uniform(-6.0, -0.01)).collect();
        let near = |inputs: &mut Inputs, v: f64| (v + inputs.uniform(-0.3, 0.3)).min(0.0);
        batch.old.push_row(
            &row.iter()
                .map(|&v| near(&mut inputs, v))
                .collect::<Vec<_>>(),
        );
        batch.reference.push_row(
            &row.iter()
                .map(|&v| near(&mut inputs, v))
                .collect::<Vec<_>>(),
        );
        batch.per_sequence.push(inputs.uniform(-2.0, 2.0));
        batch.logp.push_row(&row);
    }
    let input = PolicyLossInput {
        logp: &batch.logp,
        old_logp: &batch.old,
        ref_logp: Some(&batch.reference),
        advantages: TokenAdvantages::PerSequence(&batch.per_sequence),
    };
    for ratio_level in [RatioLevel::Token, RatioLevel::Sequence] {
        let config = PolicyLossConfig {
            ratio_level,
            beta: 0.04,
            clip: ClipWidths {
                eps_low: 0.2,
                eps_high: 0.28,
                dual_clip: Some(3.0),
            },
            ..PolicyLossConfig::default()
        };
        let cpu = policy_loss(&input, &config).unwrap();
        for chunk in [1usize, 7, gpu::policy_loss::CHUNK_TOKENS, 100_000] {
            let gpu = gpu::block_on(gpu::policy_loss::policy_loss_chunked(
                ctx, &input, &config, None, chunk,
            ))
            .unwrap();
            compare(
                &format!("{ratio_level:?} chunk {chunk}"),
                &gpu,
                &cpu,
                kl_scale(&input, &config, &cpu),
            );
        }
    }
}

use super::*;
use crate::math::advantage::{AdvantageOptions, group_advantages};
use proptest::prelude::*;

const SQRT3: f64 = 1.732_050_807_568_877_2;

fn article_batch() -> (Ragged<f64>, Vec<f64>) {
    let lens = [2, 4, 4, 6];
    let rows: Vec<Vec<f64>> = lens.iter().map(|&l| vec![-0.7; l]).collect();
    let rewards = Ragged::from_rows(&[vec![1.0, 0.0, 0.0, 0.0]]);
    let opts = AdvantageOptions {
        eps: 0.0,
        ..AdvantageOptions::default()
    };
    let adv = group_advantages(&rewards, &opts).unwrap().advantages;
    (Ragged::from_rows(&rows), adv.flat().to_vec())
}

fn run(
    logp: &Ragged<f64>,
    old: &Ragged<f64>,
    adv: &[f64],
    config: &PolicyLossConfig,
) -> PolicyLoss {
    let input = PolicyLossInput {
        logp,
        old_logp: old,
        ref_logp: None,
        advantages: TokenAdvantages::PerSequence(adv),
    };
    policy_loss(&input, config).unwrap()
}

fn with_reduction(reduction: Reduction) -> PolicyLossConfig {
    PolicyLossConfig {
        reduction,
        ..PolicyLossConfig::default()
    }
}

#[test]
fn article_reductions_at_ratio_one_give_0_then_0_2887_then_0_1925() {
    let (logp, adv) = article_batch();
    let seq = run(
        &logp,
        &logp,
        &adv,
        &with_reduction(Reduction::SeqMeanTokenMean),
    );
    let tok = run(&logp, &logp, &adv, &with_reduction(Reduction::TokenMean));
    let drg = run(&logp, &logp, &adv, &with_reduction(Reduction::DrGrpo));
    assert!(seq.loss.abs() < 1e-15);
    assert!((tok.loss - 1.0 / (2.0 * SQRT3)).abs() < 1e-14);
    assert!((drg.loss - 1.0 / (3.0 * SQRT3)).abs() < 1e-14);
    assert!((tok.loss - 0.2887).abs() < 5e-5 && (drg.loss - 0.1925).abs() < 5e-5);
    // A zero loss is not a zero gradient: the short successful row still pushes up.
    assert!(seq.gradient.row(0)[0] < 0.0);
}

#[test]
fn article_clipped_contributions_at_ratio_1_3() {
    let logp = Ragged::from_rows(&[vec![-1.0], vec![-1.0]]);
    let old = logp.map(|x| x - 1.3f64.ln());
    let adv = [SQRT3, -1.0 / SQRT3];
    let out = run(
        &logp,
        &old,
        &adv,
        &with_reduction(Reduction::SeqMeanTokenSum),
    );
    let per_token = out.pg_loss_per_token.flat();
    assert!((per_token[0] + 2.078).abs() < 5e-4);
    // -1.3/sqrt3 = -0.75056; the article's -0.750 uses the rounded -0.577.
    assert!((per_token[1] - 1.3 / SQRT3).abs() < 1e-12);
    assert!((per_token[1] - 0.750).abs() < 1e-3);
    assert_eq!(out.gradient.row(0)[0], 0.0);
    assert!(
        out.gradient.row(1)[0] > 0.0,
        "the failing token is still pushed down"
    );
    assert_eq!(out.clip_fraction.high, 0.5);
    assert_eq!(out.clip_fraction.low, 0.0);
}

#[test]
fn sequence_ratio_is_the_geometric_mean_of_token_ratios() {
    let logp = Ragged::from_rows(&[vec![-1.0, -2.0, -0.5]]);
    let old = Ragged::from_rows(&[vec![-1.2, -1.7, -0.6]]);
    let config = PolicyLossConfig {
        ratio_level: RatioLevel::Sequence,
        ..PolicyLossConfig::default()
    };
    let out = run(&logp, &old, &[1.0], &config);
    let want = (0.2f64.exp() * (-0.3f64).exp() * 0.1f64.exp()).powf(1.0 / 3.0);
    for &q in out.ratio.flat() {
        assert!((q - want).abs() < 1e-15);
    }
}

#[test]
fn cispo_gradient_holds_the_clipped_weight_fixed() {
    let logp = Ragged::from_rows(&[vec![-0.5, -2.0]]);
    let old = Ragged::from_rows(&[vec![-1.0, -2.0]]);
    let config = PolicyLossConfig {
        objective: Objective::Cispo,
        ..PolicyLossConfig::default()
    };
    let out = run(&logp, &old, &[2.0], &config);
    // Token 0: ratio e^0.5 > 1.2, weight 1.2; token 1: ratio 1. Token mean: w = 1/2.
    assert!((out.gradient.row(0)[0] + 0.5 * 1.2 * 2.0).abs() < 1e-15);
    assert!((out.gradient.row(0)[1] + 0.5 * 2.0).abs() < 1e-15);
    assert!((out.loss - 0.5 * (1.2 * 2.0 * 0.5 + 2.0 * 2.0)).abs() < 1e-15);
}

#[test]
fn sapo_at_ratio_one_has_the_vanilla_gradient() {
    let logp = Ragged::from_rows(&[vec![-1.0]]);
    let config = PolicyLossConfig {
        objective: Objective::Sapo,
        ..PolicyLossConfig::default()
    };
    let out = run(&logp, &logp, &[1.5], &config);
    assert!((out.gradient.row(0)[0] + 1.5).abs() < 1e-15);
    assert!((out.loss + 2.0 * 1.5).abs() < 1e-15);
}

#[test]
fn missing_reference_with_beta_is_named() {
    let logp = Ragged::from_rows(&[vec![-1.0]]);
    let input = PolicyLossInput {
        logp: &logp,
        old_logp: &logp,
        ref_logp: None,
        advantages: TokenAdvantages::PerSequence(&[1.0]),
    };
    let config = PolicyLossConfig {
        beta: 0.1,
        ..PolicyLossConfig::default()
    };
    assert_eq!(policy_loss(&input, &config).unwrap_err().field, "ref_logp");
    let cispo_dual = PolicyLossConfig {
        objective: Objective::Cispo,
        clip: ClipWidths {
            dual_clip: Some(3.0),
            ..ClipWidths::symmetric(0.2)
        },
        ..PolicyLossConfig::default()
    };
    assert_eq!(
        policy_loss(&input, &cispo_dual).unwrap_err().field,
        "dual_clip"
    );
    let bad_old = Ragged::from_rows(&[vec![0.5]]);
    let input = PolicyLossInput {
        old_logp: &bad_old,
        ..input
    };
    assert_eq!(
        policy_loss(&input, &PolicyLossConfig::default())
            .unwrap_err()
            .field,
        "old_logp[0][0]"
    );
}

const REDUCTIONS: [Reduction; 5] = [
    Reduction::SeqMeanTokenMean,
    Reduction::TokenMean,
    Reduction::SeqMeanTokenSum,
    Reduction::SeqMeanTokenSumNorm,
    Reduction::DrGrpo,
];

prop_compose! {
    fn batch()(lens in proptest::collection::vec(1usize..5, 1..4))
        (logp in proptest::collection::vec(proptest::collection::vec(-4.0f64..-0.05, 4), lens.len()),
         shift in proptest::collection::vec(proptest::collection::vec(-0.6f64..0.6, 4), lens.len()),
         reference in proptest::collection::vec(proptest::collection::vec(-4.0f64..-0.05, 4), lens.len()),
         adv in proptest::collection::vec(-2.0f64..2.0, lens.len()),
         lens in Just(lens))
        -> (Ragged<f64>, Ragged<f64>, Ragged<f64>, Vec<f64>)
    {
        let cut = |rows: &[Vec<f64>]| -> Vec<Vec<f64>> {
            rows.iter().zip(&lens).map(|(r, &l)| r[..l].to_vec()).collect()
        };
        let logp_rows = cut(&logp);
        let old_rows: Vec<Vec<f64>> = logp_rows.iter().zip(cut(&shift))
            .map(|(r, s)| r.iter().zip(s).map(|(a, b)| (a + b).min(0.0)).collect()).collect();
        (Ragged::from_rows(&logp_rows), Ragged::from_rows(&old_rows), Ragged::from_rows(&cut(&reference)), adv)
    }
}

fn config_strategy() -> impl Strategy<Value = PolicyLossConfig> {
    (
        prop_oneof![Just(Objective::Ppo), Just(Objective::Sapo)],
        prop_oneof![Just(RatioLevel::Token), Just(RatioLevel::Sequence)],
        0usize..5,
        0.05f64..0.4,
        0.05f64..0.4,
        proptest::option::of(1.2f64..2.0),
        0.0f64..0.5,
        prop_oneof![
            Just(KlEstimator::K1),
            Just(KlEstimator::K2),
            Just(KlEstimator::K3)
        ],
    )
        .prop_map(
            |(objective, ratio_level, r, lo, hi, dual, beta, est)| PolicyLossConfig {
                objective,
                ratio_level,
                clip: ClipWidths {
                    eps_low: lo,
                    eps_high: hi,
                    dual_clip: if objective == Objective::Ppo {
                        dual
                    } else {
                        None
                    },
                },
                reduction: REDUCTIONS[r],
                constant: if r >= 3 { Some(3.5) } else { None },
                beta,
                kl_estimator: est,
                ..PolicyLossConfig::default()
            },
        )
}

proptest! {
    /// The analytic gradient equals a central finite difference of the loss, for token
    /// and sequence ratios, every reduction and KL estimator, away from clip kinks.
    #[test]
    fn gradient_matches_finite_differences(
        (logp, old, reference, adv) in batch(), config in config_strategy(),
    ) {
        let loss_at = |lp: &Ragged<f64>| {
            let input = PolicyLossInput { logp: lp, old_logp: &old, ref_logp: Some(&reference),
                advantages: TokenAdvantages::PerSequence(&adv) };
            policy_loss(&input, &config).unwrap()
        };
        let base = loss_at(&logp);
        let kinks = [config.clip.ratio_low(), config.clip.ratio_high(), config.clip.dual_clip.unwrap_or(-9.0)];
        prop_assume!(base.ratio.flat().iter().all(|q| kinks.iter().all(|k| (q - k).abs() > 1e-3)));
        let h = 1e-6;
        for j in 0..logp.total_len() {
            let shifted = |d: f64| {
                let mut flat = logp.flat().to_vec();
                flat[j] += d;
                Ragged::from_flat(flat, &logp.lengths()).unwrap()
            };
            let fd = (loss_at(&shifted(h)).loss - loss_at(&shifted(-h)).loss) / (2.0 * h);
            let got = base.gradient.flat()[j];
            prop_assert!((got - fd).abs() < 1e-6 * (1.0 + fd.abs()), "token {j}: {got} vs {fd}");
        }
    }

    /// Groups whose rewards are all equal carry no policy gradient, whatever the ratios.
    #[test]
    fn all_equal_rewards_give_zero_policy_gradient(
        (logp, old, _reference, adv) in batch(), config in config_strategy(), value in 0.0f64..1.0,
    ) {
        let rewards = Ragged::from_rows(&[vec![value; adv.len()]]);
        let zero = group_advantages(&rewards, &AdvantageOptions::default()).unwrap().advantages;
        let config = PolicyLossConfig { beta: 0.0, ..config };
        let out = run(&logp, &old, zero.flat(), &config);
        prop_assert!(out.gradient.flat().iter().all(|&g| g == 0.0));
    }

    /// The token weight map reproduces pg_loss from the per-token losses.
    #[test]
    fn token_weights_reproduce_pg_loss((logp, old, _r, adv) in batch(), config in config_strategy()) {
        let config = PolicyLossConfig { beta: 0.0, ..config };
        let out = run(&logp, &old, &adv, &config);
        let direct: f64 = out.token_weights.flat().iter().zip(out.pg_loss_per_token.flat()).map(|(w, l)| w * l).sum();
        prop_assert!((direct - out.pg_loss).abs() < 1e-12 * (1.0 + direct.abs()));
        prop_assert!(out.clip_fraction.total <= 1.0 + 1e-12);
    }
}

/// The token pass checks the log-probabilities as it reads them; the error must still be
/// the one `validate` reports first, on batches large enough to be split across threads.
#[test]
fn bad_log_probabilities_in_a_large_batch_are_named_in_validation_order() {
    let lens = vec![700usize; 200];
    let rows: Vec<Vec<f64>> = lens.iter().map(|&l| vec![-0.5; l]).collect();
    let good = Ragged::from_rows(&rows);
    let adv = vec![0.5; lens.len()];
    let mut late_nan = good.flat().to_vec();
    late_nan[150 * 700 + 3] = f64::NAN;
    let late_nan = Ragged::from_flat(late_nan, &lens).unwrap();
    let mut positive = good.flat().to_vec();
    positive[199 * 700] = 0.25;
    let positive = Ragged::from_flat(positive, &lens).unwrap();
    let error = |logp: &Ragged<f64>, old: &Ragged<f64>, reference: Option<&Ragged<f64>>, beta| {
        let input = PolicyLossInput {
            logp,
            old_logp: old,
            ref_logp: reference,
            advantages: TokenAdvantages::PerSequence(&adv),
        };
        let config = PolicyLossConfig {
            beta,
            ..PolicyLossConfig::default()
        };
        policy_loss(&input, &config).unwrap_err().field
    };
    assert_eq!(error(&good, &late_nan, None, 0.0), "old_logp[150][3]");
    assert_eq!(error(&positive, &late_nan, None, 0.0), "logp[199][0]");
    assert_eq!(
        error(&good, &good, Some(&positive), 0.1),
        "ref_logp[199][0]"
    );
    // A settings error comes after the value checks in `validate`'s order.
    assert_eq!(error(&late_nan, &good, None, -1.0), "logp[150][3]");
    assert_eq!(error(&good, &good, None, -1.0), "beta");
}

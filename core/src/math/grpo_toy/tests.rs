//! Checks of the toy's update: the gradient against finite differences of the reduced
//! loss, zero advantages leaving the table alone, and determinism for a seed.

use proptest::prelude::*;

use super::*;
use crate::math::advantage::AdvantageOptions;
use crate::math::clip::ClipWidths;
use crate::math::kl::KlEstimator;
use crate::math::reduction::Reduction;
use crate::rng::RandomStream;

const REDUCTIONS: [Reduction; 5] = [
    Reduction::TokenMean,
    Reduction::SeqMeanTokenMean,
    Reduction::SeqMeanTokenSum,
    Reduction::SeqMeanTokenSumNorm,
    Reduction::DrGrpo,
];

/// A table with logits drawn uniformly from `[-scale, scale]`.
fn random_table(
    vocab: usize,
    max_length: usize,
    scale: f64,
    stream: &mut RandomStream,
) -> LogitTable {
    let logits = (0..max_length * vocab * vocab)
        .map(|_| scale * (2.0 * stream.uniform() - 1.0))
        .collect();
    LogitTable::from_logits(vocab, max_length, logits).unwrap()
}

/// `n` responses drawn from `table` with the toy's sampler.
fn sample(table: &LogitTable, n: usize, stream: &mut RandomStream) -> Vec<Vec<usize>> {
    let probs: Vec<f64> = table.log_probs().iter().map(|l| l.exp()).collect();
    (0..n)
        .map(|_| table::sample_response(&probs, table.vocab(), table.max_length(), stream))
        .collect()
}

fn settings(reduction: Reduction, beta: f64, kl_estimator: KlEstimator) -> UpdateSettings {
    UpdateSettings {
        clip: ClipWidths {
            eps_low: 0.2,
            eps_high: 0.28,
            dual_clip: None,
        },
        reduction,
        constant: Some(6.0),
        beta,
        kl_estimator,
        epochs: 1,
    }
}

#[test]
fn the_table_gradient_matches_central_differences_of_the_reduced_loss() {
    let (vocab, max_length) = (5, 6);
    let mut stream = RandomStream::new(11, 0);
    let old = random_table(vocab, max_length, 1.0, &mut stream);
    let reference = random_table(vocab, max_length, 1.0, &mut stream);
    // The current table is a step away from the sampling one, so ratios differ from 1
    // and some tokens sit on a clipped side.
    let mut current = old.clone();
    for z in current.logits_mut() {
        *z += 0.4 * (2.0 * stream.uniform() - 1.0);
    }
    let responses = sample(&old, 12, &mut stream);
    let advantages: Vec<f64> = (0..12).map(|_| 2.0 * stream.uniform() - 1.0).collect();
    let batch = Batch {
        responses,
        advantages,
    };
    let old_logp = update::token_log_probs(&old, &old.log_probs(), &batch.responses);
    let ref_logp = update::token_log_probs(&reference, &reference.log_probs(), &batch.responses);
    let mut clipped_somewhere = false;
    for reduction in REDUCTIONS {
        for (beta, estimator) in [
            (0.0, KlEstimator::K3),
            (0.3, KlEstimator::K1),
            (0.3, KlEstimator::K2),
            (0.3, KlEstimator::K3),
        ] {
            let s = settings(reduction, beta, estimator);
            let (loss, gradient) =
                loss_and_gradient(&current, &batch, &old_logp, Some(&ref_logp), &s).unwrap();
            clipped_somewhere |= loss.clip_fraction.total > 0.0;
            let scale = gradient.iter().fold(0.0f64, |m, g| m.max(g.abs()));
            assert!(scale > 0.0);
            let h = 1e-6;
            for (i, &analytic) in gradient.iter().enumerate() {
                let at = |delta: f64| {
                    let mut table = current.clone();
                    table.logits_mut()[i] += delta;
                    loss_and_gradient(&table, &batch, &old_logp, Some(&ref_logp), &s)
                        .unwrap()
                        .0
                        .loss
                };
                let numeric = (at(h) - at(-h)) / (2.0 * h);
                assert!(
                    (numeric - analytic).abs() <= 1e-6 * scale,
                    "{reduction:?} beta {beta} {estimator:?} logit {i}: {numeric} vs {analytic}"
                );
            }
        }
    }
    assert!(
        clipped_somewhere,
        "the check should cover clipped tokens too"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// With every advantage 0 the surrogate has no slope; at the reference k2 and k3
    /// have none either. So the table does not move, under either optimiser, for any
    /// reduction and number of epochs. (k1's slope is 1 everywhere, so it would move.)
    #[test]
    fn zero_advantages_leave_the_table_unchanged(
        seed in 0u64..1000,
        reduction in 0usize..5,
        epochs in 1usize..5,
        adam in any::<bool>(),
        beta in prop_oneof![Just(0.0), 0.01f64..2.0],
        k3 in any::<bool>(),
    ) {
        let mut stream = RandomStream::new(seed, 0);
        let table = random_table(4, 5, 2.0, &mut stream);
        let responses = sample(&table, 6, &mut stream);
        let batch = Batch { advantages: vec![0.0; responses.len()], responses };
        let estimator = if k3 { KlEstimator::K3 } else { KlEstimator::K2 };
        let s = UpdateSettings { epochs, ..settings(REDUCTIONS[reduction], beta, estimator) };
        let kind = if adam { OptimizerKind::Adam } else { OptimizerKind::Sgd };
        let mut optimizer = Optimizer::new(kind, 0.5, table.logits().len());
        let mut updated = table.clone();
        let stats = update(&mut updated, &table, &mut optimizer, &batch, &s).unwrap();
        prop_assert_eq!(updated.logits(), table.logits());
        prop_assert_eq!(stats.clip_low + stats.clip_high, 0.0);
    }
}

#[test]
fn k1_at_the_reference_still_moves_the_table() {
    // The contrast to the property above: its per-sample slope is 1, not 0.
    let mut stream = RandomStream::new(3, 0);
    let table = random_table(4, 5, 2.0, &mut stream);
    let responses = sample(&table, 6, &mut stream);
    let batch = Batch {
        advantages: vec![0.0; responses.len()],
        responses,
    };
    let s = settings(Reduction::TokenMean, 0.5, KlEstimator::K1);
    let mut optimizer = Optimizer::new(OptimizerKind::Sgd, 0.5, table.logits().len());
    let mut updated = table.clone();
    update(&mut updated, &table, &mut optimizer, &batch, &s).unwrap();
    assert_ne!(updated.logits(), table.logits());
}

fn toy(steps: usize) -> ToySettings {
    ToySettings {
        task: Task {
            vocab: 6,
            max_length: 8,
            target: vec![2, 3],
            length_penalty: 0.0,
        },
        initial: InitialTable::default(),
        groups: 4,
        group_size: 8,
        steps,
        advantage: AdvantageOptions::default(),
        dynamic_sampling: false,
        update: UpdateSettings {
            epochs: 4,
            ..settings(Reduction::TokenMean, 0.0, KlEstimator::K3)
        },
        optimizer: OptimizerKind::Sgd,
        learning_rate: 10.0,
    }
}

#[test]
fn a_target_no_response_hits_never_moves_the_table() {
    // Eight 5s in a row and nothing else: about one response in 1.7 million.
    for optimizer in [OptimizerKind::Sgd, OptimizerKind::Adam] {
        let settings = ToySettings {
            task: Task {
                target: vec![5; 8],
                ..toy(0).task
            },
            optimizer,
            ..toy(60)
        };
        let run = train(&settings, 1, 0).unwrap();
        assert!(run.curves.pass_rate.iter().all(|&p| p == 0.0));
        assert!(run.curves.effective_groups.iter().all(|&e| e == 0.0));
        assert_eq!(run.table, settings.initial.table(6, 8));
        assert!(run.curves.kl.iter().all(|&kl| kl == 0.0));
    }
}

#[test]
fn a_run_is_a_function_of_its_seed_and_stream() {
    let settings = ToySettings {
        dynamic_sampling: true,
        update: UpdateSettings {
            beta: 0.05,
            kl_estimator: KlEstimator::K2,
            ..toy(0).update
        },
        ..toy(40)
    };
    let a = train(&settings, 9, 2).unwrap();
    let b = train(&settings, 9, 2).unwrap();
    assert_eq!(a, b);
    assert_ne!(a.curves, train(&settings, 10, 2).unwrap().curves);
    assert_ne!(a.curves, train(&settings, 9, 3).unwrap().curves);
}

#[test]
fn dynamic_sampling_drops_exactly_the_all_equal_groups() {
    let responses: Vec<Vec<usize>> = (0..6).map(|i| vec![1 + i % 3, 0]).collect();
    let rewards = [1.0, 0.0, 1.0, 1.0, 0.0, 0.0];
    // Groups of two: (1, 0) mixed, (1, 1) equal, (0, 0) equal.
    let options = AdvantageOptions::default();
    let (all, mixed) = build_batch(&responses, &rewards, 2, &options, false).unwrap();
    assert_eq!(mixed, 1);
    assert_eq!(all.responses.len(), 6);
    assert_eq!(&all.advantages[2..], &[0.0; 4]);
    let (kept, mixed) = build_batch(&responses, &rewards, 2, &options, true).unwrap();
    assert_eq!(mixed, 1);
    assert_eq!(kept.responses, responses[..2].to_vec());
    assert!(kept.advantages[0] > 0.0 && kept.advantages[1] < 0.0);
}

#[test]
fn the_curves_describe_the_rollouts() {
    let run = train(&toy(30), 5, 0).unwrap();
    let c = &run.curves;
    for i in 0..30 {
        let p = c.pass_rate[i];
        let mixed = p * c.length_passing[i] + (1.0 - p) * c.length_failing[i];
        assert!((mixed - c.length[i]).abs() < 1e-12, "step {i}");
        assert!((c.tokens[i] - 32.0 * c.length[i]).abs() < 1e-9);
        assert!(c.entropy[i] > 0.0 && c.entropy[i] <= 6f64.ln() + 1e-12);
        assert!(c.kl[i] >= 0.0);
        assert!(
            (c.reward[i] - p).abs() < 1e-15,
            "no length penalty: reward = pass rate"
        );
    }
    // The uniform start: log 6 nats, no KL, about a sixth of the tokens are the end token.
    assert!((c.entropy[0] - 6f64.ln()).abs() < 1e-12);
    assert_eq!(c.kl[0], 0.0);
}

#[test]
fn a_run_advanced_in_pieces_equals_the_whole_run() {
    let settings = ToySettings {
        dynamic_sampling: true,
        optimizer: OptimizerKind::Adam,
        learning_rate: 0.05,
        ..toy(45)
    };
    let whole = train(&settings, 3, 1).unwrap();
    let mut pieces = ToyRun::new(&settings, 3, 1).unwrap();
    let mut taken = Vec::new();
    for count in [1, 0, 7, 13, 30] {
        taken.push(pieces.advance(count).unwrap());
        assert_eq!(pieces.curves().reward.len(), pieces.steps_done());
    }
    assert_eq!(
        taken,
        [1, 0, 7, 13, 24],
        "the last piece stops at the run's end"
    );
    assert!(pieces.finished());
    assert_eq!(pieces.into_run(), whole);
}

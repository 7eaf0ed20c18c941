//! The padded arrays: next-token shift, loss mask alignment, and the reward schemes.

use arlbook_core::agent::reward::discounted_return;
use arlbook_core::agent::tokenizer::{CALL, END, PAD};
use arlbook_core::agent::{
    EpisodeIds, EpisodeRecord, HarnessConfig, RewardScheme, SpanRole, Split, Teacher,
    UniformRandom, article_example, generate_task, pad_records, run_episode, turn_rewards,
};

fn records() -> Vec<EpisodeRecord> {
    let config = HarnessConfig::default();
    let mut out = Vec::new();
    for seed in 0..4 {
        let task = generate_task(Split::Train, seed);
        let ids = EpisodeIds {
            group_id: seed,
            sample_id: 0,
        };
        out.push(run_episode(
            &task,
            &mut Teacher::new(&task),
            &config,
            ids,
            seed,
        ));
        let ids = EpisodeIds {
            group_id: seed,
            sample_id: 1,
        };
        out.push(run_episode(&task, &mut UniformRandom, &config, ids, seed));
    }
    out
}

/// The role of every token position of a record.
fn roles(record: &EpisodeRecord) -> Vec<SpanRole> {
    let mut out = Vec::new();
    for span in &record.spans {
        out.extend(std::iter::repeat_n(span.role, span.end - span.start));
    }
    out
}

#[test]
fn only_generated_targets_carry_loss_after_the_shift() {
    let records = records();
    let batch = pad_records(&records);
    let s = batch.seq_len;
    assert_eq!(s, records.iter().map(|r| r.tokens.len()).max().unwrap());
    let mut end_targets_with_loss = 0;
    for (row, record) in records.iter().enumerate() {
        let roles = roles(record);
        let len = record.tokens.len();
        for j in 0..s - 1 {
            let target = j + 1;
            let mask = batch.loss_mask[row * (s - 1) + j];
            let id = batch.target_ids[row * (s - 1) + j];
            assert_eq!(id, batch.input_ids[row * s + target]);
            if target >= len {
                assert_eq!(id, PAD);
                assert_eq!(mask, 0, "padding carries no loss");
                assert_eq!(batch.attention_mask[row * s + target], 0);
                continue;
            }
            let expected = u8::from(roles[target] == SpanRole::Action);
            assert_eq!(
                mask, expected,
                "row {row} target {target} {:?}",
                roles[target]
            );
            if mask == 1 && id == END {
                end_targets_with_loss += 1;
            }
            if mask == 1 {
                // The input position of a first generated token is the hand-over token.
                if roles[j] != SpanRole::Action {
                    assert_eq!(record.tokens[j], CALL);
                }
            }
        }
        let loss_tokens: usize = batch.loss_mask[row * (s - 1)..(row + 1) * (s - 1)]
            .iter()
            .map(|&m| usize::from(m))
            .sum();
        assert_eq!(loss_tokens, record.generated_tokens());
        assert_eq!(batch.generated_tokens[row], record.generated_tokens());
    }
    assert!(
        end_targets_with_loss > 0,
        "generated end tokens must carry loss"
    );
}

#[test]
fn old_logp_sits_on_the_shifted_generated_targets() {
    let records = records();
    let batch = pad_records(&records);
    let s = batch.seq_len;
    for (row, record) in records.iter().enumerate() {
        let stored: Vec<f64> = record
            .calls
            .iter()
            .flat_map(|c| c.behaviour_logprobs.iter().copied())
            .collect();
        let gathered: Vec<f64> = (0..s - 1)
            .filter(|&j| batch.loss_mask[row * (s - 1) + j] == 1)
            .map(|j| batch.old_logp[row * (s - 1) + j])
            .collect();
        assert_eq!(gathered, stored);
    }
}

#[test]
fn potential_shaping_telescopes_to_the_sparse_return_minus_the_start_potential() {
    for record in records() {
        let sparse = turn_rewards(&record, RewardScheme::Sparse).unwrap();
        let shaped = turn_rewards(&record, RewardScheme::Potential { gamma: 1.0 }).unwrap();
        let gap = discounted_return(&shaped, 1.0) - discounted_return(&sparse, 1.0);
        assert!(
            (gap + record.visible_pass_fraction[0]).abs() < 1e-12,
            "{gap}"
        );
    }
}

#[test]
fn naive_bonus_pays_for_every_test_run() {
    let task = article_example();
    let record = run_episode(
        &task,
        &mut Teacher::new(&task),
        &HarnessConfig::default(),
        EpisodeIds::default(),
        0,
    );
    let rewards = turn_rewards(&record, RewardScheme::NaiveBonus { bonus: 0.1 }).unwrap();
    assert_eq!(rewards, vec![0.1, 0.0, 0.0, 0.1, 1.0]);
    let shaped = turn_rewards(&record, RewardScheme::Potential { gamma: 1.0 }).unwrap();
    // Phi goes 2/3, 2/3, 2/3, 1, 1, then 0 at the end.
    let expected = [0.0, 0.0, 1.0 / 3.0, 0.0, 1.0 - 1.0];
    for (got, want) in shaped.iter().zip(expected) {
        assert!((got - want).abs() < 1e-12, "{shaped:?}");
    }
}

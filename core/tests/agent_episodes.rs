//! Episodes through the harness: baselines, determinism, budgets, malformed calls,
//! environment faults and the exactness of the record.

use arlbook_core::agent::harness::FAULT_OBSERVATION;
use arlbook_core::agent::tokenizer::{END, tokenizer};
use arlbook_core::agent::{
    EndReason, EpisodeIds, EpisodeRecord, EpisodeStats, Generation, HarnessConfig, Policy,
    PolicyInfo, SamplingSettings, Split, Teacher, ToolCall, UniformRandom, article_example,
    generate_task, run_episode,
};
use arlbook_core::rng::RandomStream;

fn teacher_episode(split: Split, seed: u64, config: &HarnessConfig) -> EpisodeRecord {
    let task = generate_task(split, seed);
    run_episode(
        &task,
        &mut Teacher::new(&task),
        config,
        EpisodeIds::default(),
        seed,
    )
}

/// Emits fixed action texts in order (then `finish()`), each followed by the end token.
struct Scripted(Vec<&'static str>, usize);

impl Policy for Scripted {
    fn info(&self) -> PolicyInfo {
        PolicyInfo {
            name: "scripted-test".into(),
            version: "0".into(),
            sampling: SamplingSettings::default(),
        }
    }
    fn next_tokens(&mut self, _: &[u32], max_new: usize, _: &mut RandomStream) -> Generation {
        let text = self.0.get(self.1).copied().unwrap_or("finish()");
        self.1 += 1;
        let mut tokens = tokenizer().encode(text);
        tokens.push(END);
        tokens.truncate(max_new);
        let logprobs = vec![-0.5; tokens.len()];
        Generation { tokens, logprobs }
    }
}

#[test]
fn teacher_solves_train_and_validation_tasks() {
    let config = HarnessConfig::default();
    for split in [Split::Train, Split::Validation, Split::Test] {
        let mut stats = EpisodeStats::default();
        for seed in 0..200 {
            let record = teacher_episode(split, seed, &config);
            record.check_consistency().unwrap();
            stats.add(&record);
        }
        assert!(
            stats.success_rate() >= 0.99,
            "{split:?}: {}",
            stats.success_rate()
        );
        assert!(stats.max_tokens <= 1024, "{split:?}: {}", stats.max_tokens);
    }
}

#[test]
fn teacher_repairs_the_article_example_in_five_calls() {
    let task = article_example();
    let record = run_episode(
        &task,
        &mut Teacher::new(&task),
        &HarnessConfig::default(),
        EpisodeIds::default(),
        0,
    );
    let calls: Vec<_> = record
        .calls
        .iter()
        .map(|c| c.call.clone().unwrap())
        .collect();
    assert_eq!(calls[0], ToolCall::RunTests);
    assert_eq!(calls[1], ToolCall::ReadCode);
    assert_eq!(calls[2].to_text(), "write_code(2, \"best = xs[0]\")");
    assert_eq!(calls[3], ToolCall::RunTests);
    assert_eq!(calls[4], ToolCall::Finish);
    assert_eq!(record.reward, 1.0);
    assert_eq!(record.end_reason, EndReason::Finish);
    assert!(record.terminated && !record.truncated);
    assert_eq!(
        record.calls[0].observation_text,
        "3 tests: 2 passed, 1 failed\nfail find_max([-2, -5, -8]): expected -2, got 0"
    );
    assert_eq!(
        record.visible_pass_fraction,
        vec![2.0 / 3.0, 2.0 / 3.0, 2.0 / 3.0, 1.0, 1.0, 1.0]
    );
}

#[test]
fn random_policy_rarely_succeeds() {
    let config = HarnessConfig::default();
    let mut stats = EpisodeStats::default();
    for seed in 0..200 {
        let task = generate_task(Split::Train, seed);
        let record = run_episode(
            &task,
            &mut UniformRandom,
            &config,
            EpisodeIds::default(),
            seed,
        );
        record.check_consistency().unwrap();
        stats.add(&record);
    }
    assert!(stats.success_rate() <= 0.02, "{}", stats.success_rate());
}

#[test]
fn episodes_are_deterministic_for_a_seed() {
    let config = HarnessConfig::default();
    let task = generate_task(Split::Train, 5);
    let ids = EpisodeIds {
        group_id: 3,
        sample_id: 1,
    };
    let a = run_episode(&task, &mut UniformRandom, &config, ids, 11);
    let b = run_episode(&task, &mut UniformRandom, &config, ids, 11);
    assert_eq!(a, b);
    let other = EpisodeIds {
        group_id: 3,
        sample_id: 2,
    };
    let c = run_episode(&task, &mut UniformRandom, &config, other, 11);
    assert_ne!(a.tokens, c.tokens);
}

#[test]
fn record_survives_json_and_every_text_round_trips_through_the_tokenizer() {
    let record = teacher_episode(Split::Validation, 3, &HarnessConfig::default());
    let json = serde_json::to_string(&record).unwrap();
    let back: EpisodeRecord = serde_json::from_str(&json).unwrap();
    assert_eq!(back, record);
    let t = tokenizer();
    for seed in 0..100 {
        let record = teacher_episode(Split::Train, seed, &HarnessConfig::default());
        for call in &record.calls {
            assert_eq!(
                t.decode(&t.encode(&call.observation_text)),
                call.observation_text
            );
            assert_eq!(t.decode(&t.encode(&call.action_text)), call.action_text);
        }
    }
}

#[test]
fn malformed_calls_become_observations_then_end_the_episode() {
    let task = article_example();
    let mut policy = Scripted(
        vec![
            "run_tests(",
            "compile()",
            "write_code(99, \"x = 1\")",
            "oops",
            "(",
            ")",
        ],
        0,
    );
    let record = run_episode(
        &task,
        &mut policy,
        &HarnessConfig::default(),
        EpisodeIds::default(),
        0,
    );
    record.check_consistency().unwrap();
    let errors: Vec<_> = record
        .calls
        .iter()
        .map(|c| c.observation_text.as_str())
        .collect();
    assert!(errors[0].contains("must end with ')'"), "{}", errors[0]);
    assert!(errors[1].contains("unknown tool"));
    // A well-formed call with a bad line resets the malformed count.
    assert!(errors[2].contains("out of range"));
    assert!(record.calls[2].call.is_some());
    assert_eq!(record.calls.len(), 6);
    assert_eq!(record.end_reason, EndReason::MalformedLimit);
    assert!(record.terminated && !record.truncated);
    assert_eq!(record.reward, 0.0);
}

#[test]
fn turn_budget_truncates() {
    let config = HarnessConfig {
        max_turns: 2,
        ..HarnessConfig::default()
    };
    let record = teacher_episode(Split::Train, 1, &config);
    record.check_consistency().unwrap();
    assert_eq!(record.calls.len(), 2);
    assert_eq!(record.end_reason, EndReason::TurnBudget);
    assert!(record.truncated && !record.terminated);
    assert_eq!(record.reward, 0.0);
}

#[test]
fn token_budget_truncates_and_no_call_sees_more_than_the_budget() {
    let config = HarnessConfig {
        max_context_tokens: 150,
        ..HarnessConfig::default()
    };
    let record = teacher_episode(Split::Train, 1, &config);
    record.check_consistency().unwrap();
    assert_eq!(record.end_reason, EndReason::TokenBudget);
    assert!(record.truncated);
    for call in &record.calls {
        assert!(call.context_ids.len() + call.generated_ids.len() <= 150);
    }
}

#[test]
fn environment_faults_are_flagged_and_kept_out_of_the_reward() {
    let config = HarnessConfig {
        fault_probability: 1.0,
        ..HarnessConfig::default()
    };
    let record = teacher_episode(Split::Train, 4, &config);
    record.check_consistency().unwrap();
    assert_eq!(record.end_reason, EndReason::EnvFault);
    assert!(record.env_fault && !record.terminated && !record.truncated);
    assert_eq!(record.training_reward(), None);
    assert!(record.calls.last().unwrap().env_fault);
    assert_eq!(
        record.calls.last().unwrap().observation_text,
        FAULT_OBSERVATION
    );

    // At a moderate rate some episodes fault and the rest still succeed.
    let config = HarnessConfig {
        fault_probability: 0.1,
        ..HarnessConfig::default()
    };
    let mut stats = EpisodeStats::default();
    for seed in 0..200 {
        let record = teacher_episode(Split::Train, seed, &config);
        assert_eq!(record.env_fault, record.training_reward().is_none());
        assert!(!(record.env_fault && record.success()));
        stats.add(&record);
    }
    assert!(stats.env_faults > 0);
    assert!(stats.success_rate_without_faults() >= 0.99);
}

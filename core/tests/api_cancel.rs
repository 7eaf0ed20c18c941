//! Cancelled work stops (`arlbook_core::cancel`): every long loop of the compute API
//! checks the caller's token, and the API refuses what a stopped computation left.
//!
//! The loop tests run each sampler under a token cancelled before it starts: a loop
//! that checks stops at its first check and draws (almost) nothing, which is visible in
//! its result; a loop that does not check would draw everything and give the same
//! result as without the token. No test measures time.

use arlbook_core::api::{self, examples};
use arlbook_core::cancel::{self, CHECK_EVERY, CancelToken};
use arlbook_core::math::bandit::{self, Baseline, TwoArmed};
use arlbook_core::math::{importance, kl_estimation, kl_regularized, lag, sampling};
use arlbook_core::rng::RandomStream;

fn cancelled() -> CancelToken {
    let token = CancelToken::new();
    token.cancel();
    token
}

fn under_cancelled<R>(work: impl FnOnce() -> R) -> R {
    cancel::with(Some(&cancelled()), work)
}

#[test]
fn every_entry_refuses_to_answer_once_cancelled_and_answers_without_a_token() {
    for entry in api::ENTRIES {
        let request = examples::example(entry.name).expect("every entry has an example");
        let err =
            under_cancelled(|| api::compute(entry.name, request.clone())).expect_err(entry.name);
        assert_eq!(err.field, "(request)", "{}", entry.name);
        assert!(err.message.contains("stopped"), "{}: {err}", entry.name);
        assert!(api::compute(entry.name, request).is_ok(), "{}", entry.name);
    }
}

#[test]
fn a_token_not_cancelled_changes_nothing() {
    let request = examples::example("importance-sampling").unwrap();
    let plain = api::compute("importance-sampling", request.clone()).unwrap();
    let token = CancelToken::new();
    let with_token = cancel::with(Some(&token), || {
        api::compute("importance-sampling", request)
    });
    assert_eq!(with_token.unwrap(), plain);
}

#[test]
fn importance_sampling_draws_stop() {
    let problem = importance::Problem::new(vec![0.5, 0.5], vec![0.9, 0.1], vec![1.0, 2.0]).unwrap();
    let draws = 50 * CHECK_EVERY;
    let full = importance::sample_replicate(&problem, draws, &mut RandomStream::new(1, 0));
    let stopped = under_cancelled(|| {
        importance::sample_replicate(&problem, draws, &mut RandomStream::new(1, 0))
    });
    assert!(full.ess > 1.0, "{full:?}");
    // Stopped before the first draw: no weight was drawn.
    assert_eq!(stopped.ess, 0.0, "{stopped:?}");
}

#[test]
fn kl_estimator_draws_stop() {
    let problem = kl_estimation::Problem::new(&[0.2, 0.3, 0.5], &[0.6, 0.3, 0.1]).unwrap();
    let draws = 50 * CHECK_EVERY;
    let full = kl_estimation::sample_replicate(&problem, draws, &mut RandomStream::new(1, 0));
    let stopped = under_cancelled(|| {
        kl_estimation::sample_replicate(&problem, draws, &mut RandomStream::new(1, 0))
    });
    assert!(full[0] != 0.0);
    assert_eq!(stopped, [0.0; 3]);
}

#[test]
fn bandit_draws_stop_on_every_thread() {
    let arms = TwoArmed::new(0.5, 0.9, 0.1).unwrap();
    let run = || bandit::sample_estimates(&arms, Baseline::None, 4, 1 << 20, 8, 3).unwrap();
    let full = run();
    let stopped = under_cancelled(run);
    assert!(full.iter().all(|&e| e != 0.0), "{full:?}");
    // Every chunk, on whichever thread it fell, was skipped.
    assert!(stopped.iter().all(|&e| e == 0.0), "{stopped:?}");
}

#[test]
fn the_lag_simulation_stops() {
    let config = lag::LagConfig {
        workers: 4,
        duration: lag::DurationDistribution::Uniform { min: 1.0, max: 2.0 },
        batch_size: 4,
        max_lag: 1,
        updates: 100 * CHECK_EVERY,
    };
    let full = lag::simulate(&config, &mut RandomStream::new(2, 0));
    let stopped = under_cancelled(|| lag::simulate(&config, &mut RandomStream::new(2, 0)));
    assert_eq!(full.completed, (config.batch_size * config.updates) as u64);
    assert_eq!(stopped.completed, 0);
}

#[test]
fn dynamic_sampling_stops() {
    let draw = || {
        let mut stream = RandomStream::new(4, 0);
        sampling::simulate_dynamic_sampling(0.5, 4, u64::MAX, 100 * CHECK_EVERY as u64, &mut stream)
    };
    let full = draw();
    let stopped = under_cancelled(draw);
    assert!(full.capped);
    assert_eq!(stopped.groups_drawn, 0);
    assert!(!stopped.capped);
}

#[test]
fn the_kl_regularised_frontier_stops() {
    let problem = kl_regularized::Problem::new(&[0.5, 0.5], &[1.0, 0.0]).unwrap();
    assert_eq!(problem.frontier(0.1, 10.0, 50).unwrap().len(), 50);
    let err = under_cancelled(|| problem.frontier(0.1, 10.0, 50)).unwrap_err();
    assert_eq!(err, cancel::cancelled_error());
}

#[test]
fn a_computation_cancelled_from_another_thread_ends_in_the_cancelled_error() {
    // The largest importance-sampling request the budget allows: seconds of work, far
    // more than the moment it takes to cancel it.
    let request = serde_json::json!({
        "mu": [0.5, 0.5], "pi": [0.9, 0.1], "values": [1.0, 2.0],
        "samples": 1_000_000, "estimates": 45,
    });
    let token = CancelToken::new();
    let worker = {
        let token = token.clone();
        std::thread::spawn(move || {
            cancel::with(Some(&token), || {
                api::compute("importance-sampling", request)
            })
        })
    };
    token.cancel();
    let err = worker.join().unwrap().unwrap_err();
    assert_eq!(err, cancel::cancelled_error());
}

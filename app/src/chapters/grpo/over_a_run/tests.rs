//! The figure against the `grpo-toy` entry, its streaming against the whole run, and
//! the claims its caption makes, each at its settings over several seeds.

use arlbook_core::api::{Entry, grpo_toy::GrpoToy};

use super::*;
use crate::figure::compute_at_query;

fn at(query: &str) -> Output {
    compute_at_query::<GrpoRun>(query).unwrap()
}

/// Mean over the runs and over the last 50 steps of `curve`.
fn late(output: &Output, curve: fn(&Curves) -> &[f64]) -> f64 {
    let points = band(&output.runs, curve);
    let tail = &points[points.len() - 50..];
    tail.iter().map(|&(_, mean, _, _)| mean).sum::<f64>() / tail.len() as f64
}

#[test]
fn the_runs_are_the_entrys_runs() {
    let query = "steps=60&beta=0.05&kl_estimator=k2&dynamic_sampling=1&seed=4";
    let output = at(query);
    let state = State::from_pairs(GrpoRun::META.controls, &crate::query::parse(query), "");
    let answer = GrpoToy::compute(&request(&state).unwrap()).unwrap();
    assert_eq!(output.runs.len(), RUNS);
    for (part, run) in output.runs.iter().zip(&answer.runs) {
        assert_eq!(part.curves, run.curves);
        assert!(part.diverged.is_none());
    }
    assert!(output.complete);
    assert_eq!(output.learning_rate, answer.learning_rate);
}

#[test]
fn streamed_in_pieces_it_reaches_the_same_runs() {
    let query = "steps=40&seed=11";
    let state = State::from_pairs(GrpoRun::META.controls, &crate::query::parse(query), "");
    // Out of time after every second check: a few steps per call.
    let calls = std::cell::Cell::new(0_usize);
    let out_of_time = || {
        calls.set(calls.get() + 1);
        calls.get().is_multiple_of(2)
    };
    let mut parts = Vec::new();
    loop {
        let output = GrpoRun::compute_within(&state, &out_of_time).unwrap();
        let done = output.complete;
        parts.push(output);
        if done {
            break;
        }
    }
    assert!(parts.len() > 10, "the run came in {} parts", parts.len());
    // New settings: one step of each run, drawn at once.
    let first = &parts[0];
    assert!(!first.complete);
    assert!(first.runs.iter().all(|r| r.curves.reward.len() == 1));
    let last = parts.last().unwrap();
    let whole = GrpoToy::compute(&request(&state).unwrap()).unwrap();
    for (part, run) in last.runs.iter().zip(&whole.runs) {
        assert_eq!(part.curves, run.curves);
    }
}

#[test]
fn the_shown_share_cuts_the_runs_and_a_shorter_view_needs_no_training() {
    let half = at("steps=40&shown=50");
    assert_eq!((half.shown, half.steps), (20, 40));
    assert!(half.runs.iter().all(|r| r.curves.length.len() == 20));
    assert_eq!(half.last(|c| &c.length).0, 20);
    let whole = at("steps=40");
    for (a, b) in half.runs.iter().zip(&whole.runs) {
        assert_eq!(a.curves, b.curves.truncated(20));
    }
    // The runs are kept: showing less of them again takes no step at all.
    let instant = compute_at_query_within("steps=40&shown=1", &|| true);
    assert!(instant.complete);
    assert_eq!(instant.shown, 1);
}

fn compute_at_query_within(query: &str, out_of_time: &dyn Fn() -> bool) -> Output {
    let state = State::from_pairs(GrpoRun::META.controls, &crate::query::parse(query), "");
    GrpoRun::compute_within(&state, out_of_time).unwrap()
}

#[test]
fn a_run_that_diverges_is_shown_up_to_its_last_step() {
    let output = at("learning_rate=40&beta=1&eps_high=1&steps=200");
    assert!(output.complete);
    assert!(output.diverged() > 0, "the corner should blow up");
    for run in &output.runs {
        match &run.diverged {
            Some((step, why)) => {
                assert_eq!(run.curves.reward.len(), step - 1);
                assert!(why.contains("diverged"), "{why}");
            }
            None => assert_eq!(run.curves.reward.len(), 200),
        }
    }
    let readouts = GrpoRun::readouts(&output);
    assert!(readouts.iter().all(|r| r.value.is_finite()));
}

#[test]
fn bad_settings_name_their_control() {
    let state =
        |query: &str| State::from_pairs(GrpoRun::META.controls, &crate::query::parse(query), "");
    let mut s = state("");
    s.set("reduction", "mean".to_owned());
    assert_eq!(GrpoRun::compute(&s).unwrap_err().field, "reduction");
    let mut s = state("");
    s.set("eps_low", "x".to_owned());
    assert_eq!(GrpoRun::compute(&s).unwrap_err().field, "eps_low");
}

const SEEDS: [&str; 3] = ["0", "33", "66"];

/// The caption: under seq-mean-token-mean the answers end shorter than under
/// token-mean, by at least a token, in every seed.
#[test]
fn the_per_sequence_mean_shortens_the_answers() {
    for seed in SEEDS {
        let token_mean = late(&at(&format!("seed={seed}")), |c| &c.length);
        let per_sequence = late(
            &at(&format!("seed={seed}&reduction=seq-mean-token-mean")),
            |c| &c.length,
        );
        assert!(
            per_sequence < token_mean - 1.0,
            "seed {seed}: {per_sequence} against {token_mean}"
        );
    }
}

/// The caption: from a peaked start, `eps_high = eps_low` ends with less entropy than
/// `eps_high = 0.4`, in every seed.
#[test]
fn a_wider_upper_clip_keeps_more_entropy() {
    for seed in SEEDS {
        let symmetric = late(&at(&format!("seed={seed}&favoured_logit=3")), |c| {
            &c.entropy
        });
        let wider = late(
            &at(&format!("seed={seed}&favoured_logit=3&eps_high=0.4")),
            |c| &c.entropy,
        );
        assert!(
            wider > symmetric + 0.05,
            "seed {seed}: {wider} against {symmetric}"
        );
    }
}

/// The caption: beta = 0.2 holds the KL to the start well below the unanchored run's
/// and keeps the pass rate below 0.95, in every seed.
#[test]
fn the_kl_anchor_holds_the_policy_near_its_start() {
    for seed in SEEDS {
        let free = at(&format!("seed={seed}"));
        let anchored = at(&format!("seed={seed}&beta=0.2"));
        let (kl_free, kl_anchored) = (late(&free, |c| &c.kl), late(&anchored, |c| &c.kl));
        assert!(
            kl_anchored < 0.5 * kl_free,
            "seed {seed}: {kl_anchored} against {kl_free}"
        );
        assert!(late(&anchored, |c| &c.pass_rate) < 0.95);
        assert!(late(&free, |c| &c.pass_rate) > 0.98);
    }
}

#[test]
fn the_largest_run_the_controls_reach_is_about_two_budgets() {
    let state = State::from_pairs(
        GrpoRun::META.controls,
        &crate::query::parse("group_size=16&groups=8&epochs=8&steps=400"),
        "",
    );
    let work = request(&state).unwrap().work();
    let budgets = work as f64 / arlbook_core::api::MAX_WORK as f64;
    assert!(budgets > 1.0 && budgets < 2.5, "{budgets}");
}

//! The Rust side of `cargo xtask bench core` (see `xtask/bench/numpy_core.py` for numpy's).
//!
//! Usage: `bench_core DATA_FILE BANDIT_SAMPLES REPEATS`. Writes the policy-loss inputs
//! to `DATA_FILE` (little-endian: header, lengths, advantages, `logp`, `old_logp`,
//! `ref_logp`) so numpy computes on the same numbers, then prints one JSON line per
//! workload with the best wall time per call over `REPEATS` calls.

use std::io::Write;
use std::time::Instant;

use arlbook_core::Ragged;
use arlbook_core::math::bandit::{Baseline, TwoArmed, sample_estimates};
use arlbook_core::math::clip::ClipWidths;
use arlbook_core::math::kl::KlEstimator;
use arlbook_core::math::policy_loss::{
    PolicyLossConfig, PolicyLossInput, TokenAdvantages, policy_loss,
};
use arlbook_core::math::reduction::Reduction;
use arlbook_core::rng::{Philox4x32, RandomStream};

const SEQUENCES: usize = 4096;
const EPS_LOW: f64 = 0.2;
const EPS_HIGH: f64 = 0.28;
const BETA: f64 = 0.04;

fn best_of<T>(repeats: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut best = f64::INFINITY;
    let mut value = f();
    for _ in 0..repeats {
        let start = Instant::now();
        value = f();
        best = best.min(start.elapsed().as_secs_f64());
    }
    (best, value)
}

struct PolicyData {
    lengths: Vec<usize>,
    advantages: Vec<f64>,
    logp: Ragged<f64>,
    old_logp: Ragged<f64>,
    ref_logp: Ragged<f64>,
}

/// 4,096 ragged sequences of 1..=511 tokens (about a million in all).
fn make_policy_data() -> PolicyData {
    let mut rng = RandomStream::new(2024, 0);
    let lengths: Vec<usize> = (0..SEQUENCES)
        .map(|_| 1 + rng.below(511) as usize)
        .collect();
    let total: usize = lengths.iter().sum();
    let advantages: Vec<f64> = (0..SEQUENCES).map(|_| 2.0 * rng.uniform() - 1.0).collect();
    let mut logp = Vec::with_capacity(total);
    let mut old_logp = Vec::with_capacity(total);
    let mut ref_logp = Vec::with_capacity(total);
    for _ in 0..total {
        // Log-probabilities stay below -0.3 so the perturbed ones remain <= 0.
        let old = -0.3 - 4.0 * rng.uniform_open_low();
        old_logp.push(old);
        logp.push(old + 0.6 * (rng.uniform() - 0.5));
        ref_logp.push(old + 0.4 * (rng.uniform() - 0.5));
    }
    let ragged = |v: Vec<f64>| Ragged::from_flat(v, &lengths).expect("lengths add up");
    PolicyData {
        advantages,
        logp: ragged(logp),
        old_logp: ragged(old_logp),
        ref_logp: ragged(ref_logp),
        lengths,
    }
}

fn write_policy_data(path: &str, data: &PolicyData) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    out.write_all(&(data.lengths.len() as i64).to_le_bytes())?;
    out.write_all(&(data.logp.total_len() as i64).to_le_bytes())?;
    for x in [EPS_LOW, EPS_HIGH, BETA, 0.0] {
        out.write_all(&x.to_le_bytes())?;
    }
    for &len in &data.lengths {
        out.write_all(&(len as i64).to_le_bytes())?;
    }
    for values in [
        &data.advantages[..],
        data.logp.flat(),
        data.old_logp.flat(),
        data.ref_logp.flat(),
    ] {
        for x in values {
            out.write_all(&x.to_le_bytes())?;
        }
    }
    out.flush()
}

/// Checks, in this optimised build, that the batched Philox blocks the bandit sampler
/// uses are the sequential stream's words (unit tests run unoptimised, and an optimiser
/// bug once broke a vectorised version), and that the threaded count-based sampler gives
/// the per-sample estimator's value.
fn self_check() -> Result<(), Box<dyn std::error::Error>> {
    let generator = Philox4x32::new(7);
    let mut blocks = vec![[0u32; 4]; 10_000];
    generator.fill_blocks(3, 0, &mut blocks);
    let mut stream = RandomStream::new(7, 3);
    if blocks.iter().any(|b| *b != stream.next_block()) {
        return Err("Philox4x32::fill_blocks differs from RandomStream in this build".into());
    }
    let bandit = TwoArmed::new(0.3, 0.8, 0.35)?;
    let (group_size, samples) = (4, 300_000);
    let fast = sample_estimates(&bandit, Baseline::LeaveOneOut, group_size, samples, 2, 5)?;
    for (r, &value) in fast.iter().enumerate() {
        let mut stream = RandomStream::new(5, r as u64);
        let mut total = 0.0;
        for _ in 0..samples / group_size {
            let mut rewards = [0.0; 4];
            let mut scores = [0.0; 4];
            for (reward, score) in rewards.iter_mut().zip(&mut scores) {
                let chose_a = stream.bernoulli(bandit.p);
                let q = if chose_a { bandit.q_a } else { bandit.q_b };
                *reward = f64::from(u8::from(stream.bernoulli(q)));
                *score = if chose_a { 1.0 - bandit.p } else { -bandit.p };
            }
            let sum: f64 = rewards.iter().sum();
            for (reward, score) in rewards.iter().zip(&scores) {
                total += (reward - (sum - reward) / 3.0) * score;
            }
        }
        let reference = total / samples as f64;
        if (value - reference).abs() > 1e-12 {
            return Err(format!("bandit sampler {value} vs per-sample {reference}").into());
        }
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, path, samples, repeats] = args.as_slice() else {
        return Err("usage: bench_core DATA_FILE BANDIT_SAMPLES REPEATS".into());
    };
    let samples: usize = samples.parse()?;
    let repeats: usize = repeats.parse()?;
    self_check()?;

    let data = make_policy_data();
    write_policy_data(path, &data)?;
    let config = PolicyLossConfig {
        clip: ClipWidths {
            eps_low: EPS_LOW,
            eps_high: EPS_HIGH,
            dual_clip: None,
        },
        reduction: Reduction::TokenMean,
        beta: BETA,
        kl_estimator: KlEstimator::K3,
        ..PolicyLossConfig::default()
    };
    let input = PolicyLossInput {
        logp: &data.logp,
        old_logp: &data.old_logp,
        ref_logp: Some(&data.ref_logp),
        advantages: TokenAdvantages::PerSequence(&data.advantages),
    };
    let (seconds, result) = best_of(repeats, || policy_loss(&input, &config));
    let result = result?;
    let gradient_sum: f64 = result.gradient.flat().iter().map(|g| g.abs()).sum();
    println!(
        "{{\"name\":\"policy-loss\",\"size\":{},\"seconds\":{seconds},\"value\":{},\"clip_low\":{},\"clip_high\":{},\"gradient_sum\":{gradient_sum}}}",
        data.logp.total_len(),
        result.loss,
        result.clip_fraction.low,
        result.clip_fraction.high
    );

    let bandit = TwoArmed::new(0.5, 0.75, 0.35)?;
    let (seconds, estimates) = best_of(repeats, || {
        sample_estimates(&bandit, Baseline::LeaveOneOut, 4, samples, 1, 7)
    });
    let estimate = estimates?.first().copied().unwrap_or(f64::NAN);
    println!(
        "{{\"name\":\"bandit\",\"size\":{samples},\"seconds\":{seconds},\"value\":{estimate}}}"
    );
    Ok(())
}

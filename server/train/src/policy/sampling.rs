//! Drawing the next token from the model's logits, and the log-probability the trainer
//! must later compare against.
//!
//! With temperature `T` the sampling distribution is `softmax(z / T)`. With nucleus
//! sampling (`top_p`) it is that distribution restricted to the smallest set of tokens,
//! taken from the most likely down, whose probability reaches `top_p`, renormalised.
//! The behaviour log-probability `log mu(y)` recorded for the importance ratio is the
//! log-probability under the distribution actually sampled from, so the trainer must
//! score the token the same way: divide the logits by the same `T` (TRL does the same,
//! `logits / temperature`) and, under `top_p`, mask the tokens that were not kept
//! before the softmax. The kept set is recorded per token as a [`KeepMask`] for that
//! purpose (vLLM and verl call this the sampling mask).
//!
//! Draws come from the episode's [`RandomStream`] (one `uniform_f32` per token through
//! `categorical`), so a seed reproduces a rollout.

use arlbook_core::agent::{PolicyInfo, SamplingSettings};
use arlbook_core::rng::RandomStream;

use crate::config::TrainConfig;

/// The sampler of rollouts.
pub fn sampler(config: &TrainConfig) -> Sampler {
    Sampler {
        temperature: config.grpo.temperature,
        top_p: config.grpo.top_p,
    }
}

/// The policy info stamped on records.
pub fn policy_info(config: &TrainConfig, version: String) -> PolicyInfo {
    PolicyInfo {
        name: "arlbook-transformer".to_owned(),
        version,
        sampling: SamplingSettings {
            temperature: config.grpo.temperature,
            top_k: None,
            top_p: config.grpo.top_p,
        },
    }
}

/// The tokens nucleus sampling kept for one step, as a bitset over the vocabulary.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KeepMask(pub Vec<u64>);

impl KeepMask {
    /// Whether `token` was in the kept set.
    pub fn keeps(&self, token: usize) -> bool {
        self.0
            .get(token / 64)
            .is_some_and(|word| word >> (token % 64) & 1 == 1)
    }

    fn set(&mut self, token: usize) {
        self.0[token / 64] |= 1 << (token % 64);
    }
}

/// How tokens are drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampler {
    /// Softmax temperature `T > 0`; `0` means greedy (argmax, log-probability 0).
    pub temperature: f64,
    /// Nucleus mass in `(0, 1]`, or `None` for the whole vocabulary.
    pub top_p: Option<f64>,
}

/// One drawn token.
#[derive(Debug, Clone, PartialEq)]
pub struct Draw {
    /// The token id.
    pub token: u32,
    /// `log mu(token)` under the sampling distribution.
    pub logprob: f64,
    /// The kept set, when `top_p` restricted it.
    pub keep: Option<KeepMask>,
    /// Entropy (nats) of the model's tempered distribution before any restriction.
    pub entropy: f64,
}

/// `log softmax(logits / T)` in `f64`.
pub fn tempered_log_softmax(logits: &[f32], temperature: f64) -> Vec<f64> {
    let scaled: Vec<f64> = logits.iter().map(|&z| f64::from(z) / temperature).collect();
    let max = scaled.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let log_total = scaled.iter().map(|z| (z - max).exp()).sum::<f64>().ln() + max;
    scaled.iter().map(|z| z - log_total).collect()
}

impl Sampler {
    /// Draws one token from `logits` (one row of the vocabulary).
    pub fn draw(&self, logits: &[f32], rng: &mut RandomStream) -> Draw {
        if self.temperature <= 0.0 {
            let token = argmax(logits);
            let logp = tempered_log_softmax(logits, 1.0);
            return Draw {
                token: token as u32,
                logprob: 0.0,
                keep: None,
                entropy: entropy(&logp),
            };
        }
        let logp = tempered_log_softmax(logits, self.temperature);
        let entropy = entropy(&logp);
        let probs: Vec<f64> = logp.iter().map(|l| l.exp()).collect();
        match self.top_p {
            Some(top_p) if top_p < 1.0 => {
                let (restricted, keep) = nucleus(&probs, top_p);
                let token = rng.categorical(&restricted);
                Draw {
                    token: token as u32,
                    logprob: restricted[token].ln(),
                    keep: Some(keep),
                    entropy,
                }
            }
            _ => {
                let token = rng.categorical(&probs);
                Draw {
                    token: token as u32,
                    logprob: logp[token],
                    keep: None,
                    entropy,
                }
            }
        }
    }
}

/// The index of the largest value (the first of equal ones; 0 for an empty slice).
pub(crate) fn argmax(values: &[f32]) -> usize {
    values
        .iter()
        .enumerate()
        .fold((0, f32::NEG_INFINITY), |best, (i, &v)| {
            if v > best.1 { (i, v) } else { best }
        })
        .0
}

/// `-sum p log p` from log-probabilities.
fn entropy(logp: &[f64]) -> f64 {
    -logp
        .iter()
        .filter(|l| l.is_finite())
        .map(|&l| l.exp() * l)
        .sum::<f64>()
}

/// The nucleus of `probs`: kept tokens renormalised (others 0), and the kept set.
/// Ties are broken by the lower token id, so the set is deterministic.
fn nucleus(probs: &[f64], top_p: f64) -> (Vec<f64>, KeepMask) {
    let mut order: Vec<usize> = (0..probs.len()).collect();
    order.sort_by(|&a, &b| probs[b].total_cmp(&probs[a]).then(a.cmp(&b)));
    let mut keep = KeepMask(vec![0; probs.len().div_ceil(64)]);
    let mut mass = 0.0;
    for &token in &order {
        keep.set(token);
        mass += probs[token];
        if mass >= top_p {
            break;
        }
    }
    let restricted = probs
        .iter()
        .enumerate()
        .map(|(t, &p)| if keep.keeps(t) { p / mass } else { 0.0 })
        .collect();
    (restricted, keep)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_softmax_matches_the_definition() {
        let logits = [1.0f32, 2.0, 3.0];
        let logp = tempered_log_softmax(&logits, 1.0);
        let total: f64 = [1.0f64, 2.0, 3.0].iter().map(|z| z.exp()).sum();
        for (l, z) in logp.iter().zip([1.0f64, 2.0, 3.0]) {
            assert!((l - (z - total.ln())).abs() < 1e-12);
        }
        // Temperature 2 halves the logits.
        let hot = tempered_log_softmax(&logits, 2.0);
        let total2: f64 = [0.5f64, 1.0, 1.5].iter().map(|z| z.exp()).sum();
        assert!((hot[2] - (1.5 - total2.ln())).abs() < 1e-12);
    }

    #[test]
    fn draws_follow_the_distribution_and_report_their_logprob() {
        let logits = [0.0f32, (3.0f32).ln()]; // probabilities 1/4, 3/4
        let sampler = Sampler {
            temperature: 1.0,
            top_p: None,
        };
        let mut rng = RandomStream::new(5, 0);
        let draws: Vec<Draw> = (0..20_000)
            .map(|_| sampler.draw(&logits, &mut rng))
            .collect();
        let ones = draws.iter().filter(|d| d.token == 1).count() as f64 / 20_000.0;
        assert!((ones - 0.75).abs() < 0.015, "{ones}");
        let d = draws.iter().find(|d| d.token == 0).unwrap();
        assert!((d.logprob - 0.25f64.ln()).abs() < 1e-6);
    }

    #[test]
    fn nucleus_keeps_the_smallest_set_reaching_top_p_and_renormalises() {
        let probs = [0.5, 0.3, 0.15, 0.05];
        let (restricted, keep) = nucleus(&probs, 0.8);
        assert!(keep.keeps(0) && keep.keeps(1) && !keep.keeps(2) && !keep.keeps(3));
        assert!((restricted[0] - 0.625).abs() < 1e-12);
        assert!((restricted[1] - 0.375).abs() < 1e-12);
        assert_eq!(restricted[2], 0.0);
        let sampler = Sampler {
            temperature: 1.0,
            top_p: Some(0.8),
        };
        let logits: Vec<f32> = probs.iter().map(|p: &f64| p.ln() as f32).collect();
        let mut rng = RandomStream::new(1, 2);
        for _ in 0..200 {
            let d = sampler.draw(&logits, &mut rng);
            assert!(d.token < 2);
            assert!(d.keep.as_ref().unwrap().keeps(d.token as usize));
        }
    }

    #[test]
    fn greedy_takes_the_argmax() {
        let sampler = Sampler {
            temperature: 0.0,
            top_p: None,
        };
        let mut rng = RandomStream::new(0, 0);
        assert_eq!(sampler.draw(&[0.1, 3.0, -1.0], &mut rng).token, 1);
    }
}

//! Policy gradient on a one-step bandit: the exact gradient and the sampled estimator
//! with three baselines.
//!
//! Two actions, `pi(A) = p = sigma(z)`, `pi(B) = 1 - p`, reward 1 with probability
//! `q_A` or `q_B`. The exact gradient of `J = p q_A + (1 - p) q_B` with respect to the
//! logit difference `z` is `dJ/dz = (q_A - q_B) p (1 - p)`. With `K` actions and softmax
//! logits the same computation gives `dJ/dz_k = pi_k (q_k - sum_j pi_j q_j)`.
//!
//! The sampled estimator (REINFORCE, Williams 1992) draws `N` samples in groups of `G`
//! and averages `(R_i - b_i) (1{a_i = A} - p)`, where `1{a = A} - p` is the score
//! `d log pi(a) / dz`. Baselines:
//! - none: `b_i = 0`;
//! - group mean: `b_i = (1/G) sum_j R_j`, which includes the sample's own reward and so
//!   shrinks the expected gradient by `(G - 1)/G`;
//! - leave-one-out: `b_i = (1/(G-1)) sum_{j != i} R_j`, independent of sample `i` and so
//!   unbiased (Kool, van Hoof and Welling 2019, "Buy 4 REINFORCE samples, get a baseline
//!   for free"; the RLOO estimator).
//!
//! ## Design
//! - `N` must be a multiple of `G`; a partial last group would have its own shrinkage.
//! - With `G = 1`, leave-one-out has no other sample and uses `b = 0` (the no-baseline
//!   estimator), and the group mean is the sample itself, so every estimate is 0.
//! - The sampler keeps integer counts per replicate, never a per-sample buffer, so an
//!   estimate over ten million samples allocates almost nothing; the counts make the
//!   result exact under any split of the work across threads (`bandit/sampler.rs`).

use crate::error::{FieldError, Result, check};

mod sampler;
pub use sampler::SampleCounts;

/// What is subtracted from each reward before it multiplies the score.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Baseline {
    /// No baseline: `b_i = 0`.
    None,
    /// The mean reward of the group, including the sample itself.
    GroupMean,
    /// The mean reward of the other `G - 1` samples of the group.
    LeaveOneOut,
}

/// The logistic function `1 / (1 + e^{-z})`.
pub fn sigmoid(z: f64) -> f64 {
    if z >= 0.0 {
        1.0 / (1.0 + (-z).exp())
    } else {
        let e = z.exp();
        e / (1.0 + e)
    }
}

/// Softmax of `logits`, shifted by the maximum so large logits do not overflow.
pub fn softmax(logits: &[f64]) -> Vec<f64> {
    let max = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let exps: Vec<f64> = logits.iter().map(|&z| (z - max).exp()).collect();
    let total: f64 = exps.iter().sum();
    exps.iter().map(|&e| e / total).collect()
}

/// The problem: probability `p` of action A and success probabilities `q_a`, `q_b`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TwoArmed {
    /// `pi(A) = sigma(z)`.
    pub p: f64,
    /// Probability of reward 1 after action A.
    pub q_a: f64,
    /// Probability of reward 1 after action B.
    pub q_b: f64,
}

impl TwoArmed {
    /// Validates the three probabilities (fields `p`, `q[0]`, `q[1]`).
    pub fn new(p: f64, q_a: f64, q_b: f64) -> Result<Self> {
        check::probability("p", p)?;
        check::probability("q[0]", q_a)?;
        check::probability("q[1]", q_b)?;
        Ok(Self { p, q_a, q_b })
    }

    /// The exact gradient `(q_A - q_B) p (1 - p)` of the expected reward w.r.t. `z`.
    pub fn exact_gradient(&self) -> f64 {
        (self.q_a - self.q_b) * self.p * (1.0 - self.p)
    }

    /// Expected reward of one sample, `p q_A + (1 - p) q_B`.
    pub fn mean_reward(&self) -> f64 {
        self.p * self.q_a + (1.0 - self.p) * self.q_b
    }
}

/// The exact gradient `pi_k (q_k - sum_j pi_j q_j)` of the expected reward with respect to
/// each softmax logit.
pub fn exact_gradient_softmax(logits: &[f64], q: &[f64]) -> Result<Vec<f64>> {
    check::non_empty("logits", logits)?;
    check::all_finite("logits", logits)?;
    check::same_len("q", q.len(), "logits", logits.len())?;
    check::all_probabilities("q", q)?;
    let pi = softmax(logits);
    let mean_q: f64 = pi.iter().zip(q).map(|(p, q)| p * q).sum();
    Ok(pi.iter().zip(q).map(|(p, q)| p * (q - mean_q)).collect())
}

/// The factor by which the baseline scales the expected estimate relative to
/// the exact gradient: 1 for none and leave-one-out, `(G-1)/G` for the group mean.
pub fn shrinkage_factor(baseline: Baseline, group_size: usize) -> f64 {
    match baseline {
        Baseline::None | Baseline::LeaveOneOut => 1.0,
        Baseline::GroupMean => (group_size as f64 - 1.0) / group_size as f64,
    }
}

/// The expected value of one estimate, in closed form: the exact gradient times
/// [`shrinkage_factor`]. The group mean's own-reward term has expectation
/// `E[R_i s_i]/G = g/G`; the other rewards are independent of `s_i`, whose mean is 0.
pub fn expected_estimate(baseline: Baseline, bandit: &TwoArmed, group_size: usize) -> f64 {
    bandit.exact_gradient() * shrinkage_factor(baseline, group_size)
}

/// The exact variance of one estimate over `samples` draws in groups of `group_size`.
///
/// Within a group the estimate is `Y/G` with `Y = alpha sum_i R_i s_i - beta sum_{i != j}
/// R_j s_i`, where `(alpha, beta)` is `(1, 0)` for none, `((G-1)/G, 1/G)` for the group
/// mean and `(1, 1/(G-1))` for leave-one-out. With `v = p(1-p)`, `m = E[R]`,
/// `g = E[R s]`, `c = E[R s^2]` (rewards are 0/1, so `R^2 = R`):
/// `Var(sum R_i s_i) = G (c - g^2)`,
/// `E[T^2] = G(G-1) (v m + (G-2) v m^2 + g^2)` for `T = sum_{i != j} R_j s_i`, and
/// `Cov(sum R_i s_i, T) = G(G-1) c m`. Groups are independent, so the variance of the
/// average over `N/G` groups is `Var(Y) / (N G)`.
pub fn estimate_variance(
    baseline: Baseline,
    bandit: &TwoArmed,
    group_size: usize,
    samples: usize,
) -> f64 {
    let TwoArmed { p, q_a, q_b } = *bandit;
    let g_size = group_size as f64;
    let v = p * (1.0 - p);
    let m = bandit.mean_reward();
    let g = bandit.exact_gradient();
    let c = p * (1.0 - p) * (1.0 - p) * q_a + (1.0 - p) * p * p * q_b;
    let (alpha, beta) = match baseline {
        Baseline::None => (1.0, 0.0),
        Baseline::LeaveOneOut if group_size == 1 => (1.0, 0.0),
        Baseline::LeaveOneOut => (1.0, 1.0 / (g_size - 1.0)),
        Baseline::GroupMean => ((g_size - 1.0) / g_size, 1.0 / g_size),
    };
    let pairs = g_size * (g_size - 1.0);
    let var_direct = g_size * (c - g * g);
    let second_moment_cross = pairs * (v * m + (g_size - 2.0) * v * m * m + g * g);
    let covariance = pairs * c * m;
    let var_group = alpha * alpha * var_direct + beta * beta * second_moment_cross
        - 2.0 * alpha * beta * covariance;
    (var_group / (samples as f64 * g_size)).max(0.0)
}

/// Checks `group_size >= 1`, `samples >= 1` and that `samples` is a multiple of it.
pub fn check_grouping(group_size: usize, samples: usize) -> Result<()> {
    check::count("group_size", group_size, 1, usize::MAX)?;
    check::count("samples", samples, 1, usize::MAX)?;
    if !samples.is_multiple_of(group_size) {
        return Err(FieldError::new(
            "samples",
            format!("must be a multiple of group_size ({group_size}), got {samples}"),
        ));
    }
    Ok(())
}

/// The estimate of one replicate from its integer counts (see [`SampleCounts`]):
/// `sum_i (R_i - b_i) s_i / N` is `(n_AR - p n_R) / N` without a baseline,
/// `centred / (G N)` with the group mean and `centred / ((G - 1) N)` leave-one-out
/// (`G / (G - 1)` times the group-mean form). The CPU sampler and the GPU kernel both
/// produce these counts, and both finish them here, so they agree exactly.
pub fn estimate_from_counts(
    p: f64,
    baseline: Baseline,
    group_size: usize,
    samples: usize,
    counts: &SampleCounts,
) -> f64 {
    let n = samples as f64;
    let g = group_size as f64;
    let centred = counts.centred as f64;
    match baseline {
        Baseline::None => (counts.rewarded_a as f64 - p * counts.rewarded as f64) / n,
        Baseline::LeaveOneOut if group_size == 1 => {
            (counts.rewarded_a as f64 - p * counts.rewarded as f64) / n
        }
        Baseline::GroupMean => centred / g / n,
        Baseline::LeaveOneOut => centred / (g - 1.0) / n,
    }
}

/// `estimates` independent estimates of `samples` draws each, in groups of `group_size`.
///
/// Draw order: replicate `r` reads `RandomStream::new(seed, r)`; sample `i` takes one
/// uniform for the action (`A` when `u < p`), then one for the reward (1 when
/// `u < q_action`); groups are consecutive runs of `group_size` samples. The thresholds
/// `p`, `q_A`, `q_B` are rounded to `f32` (as a GPU kernel has them). The estimate is
/// finished from exact integer counts ([`estimate_from_counts`]); long runs are cut into
/// fixed chunks drawn on several threads, with the same result for any thread count (see
/// `bandit/sampler.rs`).
pub fn sample_estimates(
    bandit: &TwoArmed,
    baseline: Baseline,
    group_size: usize,
    samples: usize,
    estimates: usize,
    seed: u64,
) -> Result<Vec<f64>> {
    check_grouping(group_size, samples)?;
    Ok(
        sampler::replicate_counts(bandit, group_size, samples, estimates, seed)
            .iter()
            .map(|counts| estimate_from_counts(bandit.p, baseline, group_size, samples, counts))
            .collect(),
    )
}

/// Mean and sample variance (divisor `M - 1`) of `values`; the variance is 0 for fewer
/// than two values.
pub fn mean_and_sample_variance(values: &[f64]) -> (f64, f64) {
    if values.is_empty() {
        return (0.0, 0.0);
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    if values.len() < 2 {
        return (mean, 0.0);
    }
    let squares: f64 = values.iter().map(|v| (v - mean) * (v - mean)).sum();
    (mean, squares / (n - 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::RandomStream;
    use proptest::prelude::*;

    const BASELINES: [Baseline; 3] = [Baseline::None, Baseline::GroupMean, Baseline::LeaveOneOut];

    /// Mean and variance of one estimate over a single group, by summing over all `4^G`
    /// (action, reward) outcomes with their probabilities.
    fn enumerate_group(bandit: &TwoArmed, baseline: Baseline, g: usize) -> (f64, f64) {
        let (mut mean, mut second) = (0.0, 0.0);
        for code in 0..4usize.pow(g as u32) {
            let mut prob = 1.0;
            let mut rewards = vec![0.0; g];
            let mut scores = vec![0.0; g];
            for i in 0..g {
                let outcome = (code >> (2 * i)) & 3;
                let chose_a = outcome & 1 == 1;
                let success = outcome & 2 == 2;
                let q = if chose_a { bandit.q_a } else { bandit.q_b };
                prob *= if chose_a { bandit.p } else { 1.0 - bandit.p };
                prob *= if success { q } else { 1.0 - q };
                rewards[i] = if success { 1.0 } else { 0.0 };
                scores[i] = if chose_a { 1.0 - bandit.p } else { -bandit.p };
            }
            let total_r: f64 = rewards.iter().sum();
            let estimate: f64 = (0..g)
                .map(|i| {
                    let b = match baseline {
                        Baseline::None => 0.0,
                        Baseline::GroupMean => total_r / g as f64,
                        Baseline::LeaveOneOut if g == 1 => 0.0,
                        Baseline::LeaveOneOut => (total_r - rewards[i]) / (g as f64 - 1.0),
                    };
                    (rewards[i] - b) * scores[i]
                })
                .sum::<f64>()
                / g as f64;
            mean += prob * estimate;
            second += prob * estimate * estimate;
        }
        (mean, second - mean * mean)
    }

    #[test]
    fn article_gradient_is_0_1_at_p_half() {
        let bandit = TwoArmed::new(0.5, 0.75, 0.35).unwrap();
        assert!((bandit.exact_gradient() - 0.1).abs() < 1e-15);
        assert_eq!(sigmoid(0.0), 0.5);
    }

    #[test]
    fn softmax_gradient_on_two_actions_matches_sigmoid_form() {
        let z = 0.7;
        let grad = exact_gradient_softmax(&[z, 0.0], &[0.75, 0.35]).unwrap();
        let bandit = TwoArmed::new(sigmoid(z), 0.75, 0.35).unwrap();
        assert!((grad[0] - bandit.exact_gradient()).abs() < 1e-14);
        assert!((grad[1] + bandit.exact_gradient()).abs() < 1e-14);
    }

    #[test]
    fn softmax_gradient_matches_finite_differences() {
        let logits = [0.3, -1.2, 0.8, 0.0];
        let q = [0.2, 0.9, 0.5, 0.1];
        let objective = |z: &[f64]| -> f64 { softmax(z).iter().zip(&q).map(|(p, q)| p * q).sum() };
        let grad = exact_gradient_softmax(&logits, &q).unwrap();
        for k in 0..logits.len() {
            let h = 1e-6;
            let mut up = logits;
            let mut down = logits;
            up[k] += h;
            down[k] -= h;
            let numeric = (objective(&up) - objective(&down)) / (2.0 * h);
            assert!(
                (numeric - grad[k]).abs() < 1e-8,
                "k={k}: {numeric} vs {}",
                grad[k]
            );
        }
    }

    #[test]
    fn group_mean_in_groups_of_four_shrinks_by_a_quarter() {
        let bandit = TwoArmed::new(0.5, 0.75, 0.35).unwrap();
        let expected = expected_estimate(Baseline::GroupMean, &bandit, 4);
        assert!((expected - 0.075).abs() < 1e-15);
    }

    #[test]
    fn samples_not_a_multiple_of_group_size_names_samples() {
        let err = check_grouping(4, 10).unwrap_err();
        assert_eq!(err.field, "samples");
        assert_eq!(check_grouping(0, 4).unwrap_err().field, "group_size");
    }

    #[test]
    fn bad_probability_names_its_field() {
        assert_eq!(TwoArmed::new(0.5, 1.5, 0.3).unwrap_err().field, "q[0]");
        assert_eq!(TwoArmed::new(f64::NAN, 0.5, 0.3).unwrap_err().field, "p");
    }

    /// The estimator written out per sample in `f64` with explicit baselines, from one
    /// sequential stream: what the counts must reproduce up to rounding.
    fn per_sample_estimate(
        bandit: &TwoArmed,
        baseline: Baseline,
        g: usize,
        n: usize,
        r: u64,
    ) -> f64 {
        let mut stream = RandomStream::new(5, r);
        let mut total = 0.0;
        for _ in 0..n / g {
            let (mut rewards, mut scores) = (vec![0.0; g], vec![0.0; g]);
            for i in 0..g {
                let chose_a = stream.bernoulli(bandit.p);
                let q = if chose_a { bandit.q_a } else { bandit.q_b };
                rewards[i] = if stream.bernoulli(q) { 1.0 } else { 0.0 };
                scores[i] = if chose_a { 1.0 - bandit.p } else { -bandit.p };
            }
            let sum_r: f64 = rewards.iter().sum();
            for i in 0..g {
                let b = match baseline {
                    Baseline::None => 0.0,
                    Baseline::GroupMean => sum_r / g as f64,
                    Baseline::LeaveOneOut if g == 1 => 0.0,
                    Baseline::LeaveOneOut => (sum_r - rewards[i]) / (g as f64 - 1.0),
                };
                total += (rewards[i] - b) * scores[i];
            }
        }
        total / n as f64
    }

    #[test]
    fn count_based_estimates_equal_the_per_sample_formula() {
        let bandit = TwoArmed::new(0.3, 0.8, 0.35).unwrap();
        for baseline in BASELINES {
            for (g, n) in [(1, 7), (2, 40), (4, 200_000), (5, 1_000)] {
                let fast = sample_estimates(&bandit, baseline, g, n, 3, 5).unwrap();
                for (r, &value) in fast.iter().enumerate() {
                    let slow = per_sample_estimate(&bandit, baseline, g, n, r as u64);
                    assert!(
                        (value - slow).abs() < 1e-12,
                        "{baseline:?} G={g} N={n}: {value} vs {slow}"
                    );
                }
            }
        }
    }

    #[test]
    fn sampled_estimates_are_deterministic_per_seed() {
        let bandit = TwoArmed::new(0.5, 0.75, 0.35).unwrap();
        let a = sample_estimates(&bandit, Baseline::LeaveOneOut, 4, 24, 5, 9).unwrap();
        let b = sample_estimates(&bandit, Baseline::LeaveOneOut, 4, 24, 5, 9).unwrap();
        let c = sample_estimates(&bandit, Baseline::LeaveOneOut, 4, 24, 5, 10).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn monte_carlo_mean_and_variance_match_closed_forms() {
        // p = 0.5 and q values on the f32 grid, so the sampler's f32 thresholds are exact.
        let bandit = TwoArmed::new(0.5, 0.75, 0.375).unwrap();
        let (samples, replicates) = (8, 40_000);
        for baseline in BASELINES {
            let values = sample_estimates(&bandit, baseline, 4, samples, replicates, 3).unwrap();
            let (mean, variance) = mean_and_sample_variance(&values);
            let theory_mean = expected_estimate(baseline, &bandit, 4);
            let theory_var = estimate_variance(baseline, &bandit, 4, samples);
            let se = (theory_var / replicates as f64).sqrt();
            assert!(
                (mean - theory_mean).abs() < 5.0 * se,
                "{baseline:?}: mean {mean}"
            );
            // The variance of a sample variance is about 2 sigma^4 / M for light tails.
            let var_se = theory_var * (3.0 / replicates as f64).sqrt();
            assert!(
                (variance - theory_var).abs() < 5.0 * var_se,
                "{baseline:?}: variance {variance} vs {theory_var}"
            );
        }
    }

    #[test]
    fn leave_one_out_has_lower_variance_than_no_baseline_here() {
        let bandit = TwoArmed::new(0.5, 0.75, 0.35).unwrap();
        let none = estimate_variance(Baseline::None, &bandit, 4, 24);
        let loo = estimate_variance(Baseline::LeaveOneOut, &bandit, 4, 24);
        assert!(loo < none, "loo {loo} none {none}");
    }

    proptest! {
        #[test]
        fn expectation_and_variance_match_exact_enumeration(
            p in 0.0f64..=1.0,
            q_a in 0.0f64..=1.0,
            q_b in 0.0f64..=1.0,
            g in 1usize..=3,
        ) {
            let bandit = TwoArmed::new(p, q_a, q_b).unwrap();
            for baseline in BASELINES {
                let (mean, variance) = enumerate_group(&bandit, baseline, g);
                let closed_mean = expected_estimate(baseline, &bandit, g);
                let closed_var = estimate_variance(baseline, &bandit, g, g);
                prop_assert!((mean - closed_mean).abs() < 1e-12, "{baseline:?} G={g}: {mean} vs {closed_mean}");
                prop_assert!((variance - closed_var).abs() < 1e-12, "{baseline:?} G={g}: {variance} vs {closed_var}");
            }
            // Leave-one-out is unbiased; the self-inclusive mean shrinks by (G-1)/G.
            let exact = bandit.exact_gradient();
            let (loo, _) = enumerate_group(&bandit, Baseline::LeaveOneOut, g);
            let (mean_b, _) = enumerate_group(&bandit, Baseline::GroupMean, g);
            prop_assert!((loo - exact).abs() < 1e-12);
            prop_assert!((mean_b - exact * (g as f64 - 1.0) / g as f64).abs() < 1e-12);
        }

        #[test]
        fn variance_shrinks_as_one_over_samples(groups in 1usize..20, g in 1usize..6) {
            let bandit = TwoArmed::new(0.3, 0.6, 0.2).unwrap();
            for baseline in BASELINES {
                let one = estimate_variance(baseline, &bandit, g, g);
                let many = estimate_variance(baseline, &bandit, g, g * groups);
                prop_assert!((one / groups as f64 - many).abs() < 1e-15);
            }
        }
    }
}

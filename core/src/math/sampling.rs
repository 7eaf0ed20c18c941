//! Mixed groups and the cost of dynamic sampling.
//!
//! With `G` independent rollouts of success probability `p` and a 0/1 reward, a group
//! carries a comparison signal only when it holds both a success and a failure:
//! `P(mixed) = 1 - p^G - (1 - p)^G`. Dynamic sampling (Yu et al. 2025, DAPO, §3.2)
//! keeps drawing groups until `B` mixed ones are found; the number of groups drawn is
//! negative binomial with mean `B / P(mixed)` and variance `B (1 - P) / P^2`, so the
//! expected rollout cost is `B G / P(mixed)`.
//!
//! ## Design
//! `1 - (1 - s)^G` is computed as `-expm1(G ln1p(-s))` with `s = min(p, 1 - p)` (the
//! formula is symmetric in `p` and `1 - p`), so tiny probabilities keep their digits.

use crate::error::{FieldError, Result, check};
use crate::rng::RandomStream;

/// `P(mixed) = 1 - p^G - (1 - p)^G` for success probability `p` and group size `G`.
pub fn mixed_group_probability(p: f64, group_size: u64) -> Result<f64> {
    check::probability("p", p)?;
    check::count(
        "group_size",
        usize::try_from(group_size).unwrap_or(usize::MAX),
        1,
        1 << 20,
    )?;
    let g = group_size as f64;
    let s = p.min(1.0 - p);
    let none_of_the_rare = -(g * (-s).ln_1p()).exp_m1();
    Ok((none_of_the_rare - s.powf(g)).max(0.0))
}

/// `P(mixed)` on a grid: `result[i][j]` is for `ps[i]` and `group_sizes[j]`. Errors name
/// `p[i]` or `group_size[j]`.
pub fn mixed_group_grid(ps: &[f64], group_sizes: &[u64]) -> Result<Vec<Vec<f64>>> {
    ps.iter()
        .enumerate()
        .map(|(i, &p)| {
            group_sizes
                .iter()
                .enumerate()
                .map(|(j, &g)| {
                    mixed_group_probability(p, g).map_err(|e| {
                        if e.field == "p" {
                            FieldError::new(format!("p[{i}]"), e.message)
                        } else {
                            FieldError::new(format!("group_size[{j}]"), e.message)
                        }
                    })
                })
                .collect()
        })
        .collect()
}

/// Expected number of groups drawn to find `mixed_groups` mixed ones, `B / P(mixed)`;
/// `None` when no group can be mixed (`p` is 0 or 1, or `G = 1`) or the mean overflows.
pub fn expected_groups_drawn(probability_mixed: f64, mixed_groups: u64) -> Option<f64> {
    Some(mixed_groups as f64 / probability_mixed)
        .filter(|v| probability_mixed > 0.0 && v.is_finite())
}

/// Variance of the number of groups drawn, `B (1 - P) / P^2` (negative binomial).
pub fn groups_drawn_variance(probability_mixed: f64, mixed_groups: u64) -> Option<f64> {
    Some(mixed_groups as f64 * (1.0 - probability_mixed) / (probability_mixed * probability_mixed))
        .filter(|v| probability_mixed > 0.0 && v.is_finite())
}

/// One run of dynamic sampling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DynamicSamplingRun {
    /// Groups drawn, mixed or not.
    pub groups_drawn: u64,
    /// Mixed groups found (equals the target unless the cap stopped the run).
    pub mixed_found: u64,
    /// Whether `max_groups` stopped the run before the target was met.
    pub capped: bool,
}

/// Draws groups until `mixed_groups` mixed ones are found or `max_groups` have been drawn.
///
/// Draw order: group after group; within a group, `G` Bernoulli(`p`) draws (one uniform
/// each, compared in `f32`), all `G` drawn even once the group is known to be mixed, so
/// a group always costs `G` words of the stream.
pub fn simulate_dynamic_sampling(
    p: f64,
    group_size: u64,
    mixed_groups: u64,
    max_groups: u64,
    stream: &mut RandomStream,
) -> DynamicSamplingRun {
    let below = SuccessThreshold::new(p);
    let mut run = DynamicSamplingRun {
        groups_drawn: 0,
        mixed_found: 0,
        capped: false,
    };
    while run.mixed_found < mixed_groups {
        if run.groups_drawn == max_groups {
            run.capped = true;
            break;
        }
        if crate::cancel::due(run.groups_drawn as usize) {
            break;
        }
        let mut successes = 0u64;
        if group_size.is_multiple_of(4) {
            // Groups of whole blocks stay on block boundaries: a block per four draws.
            for _ in 0..group_size / 4 {
                successes += stream
                    .next_block()
                    .iter()
                    .map(|&word| u64::from(below.success(word)))
                    .sum::<u64>();
            }
        } else {
            for _ in 0..group_size {
                successes += u64::from(below.success(stream.next_u32()));
            }
        }
        run.groups_drawn += 1;
        if successes != 0 && successes != group_size {
            run.mixed_found += 1;
        }
    }
    run
}

/// A Bernoulli(`p`) draw on a random word as an integer comparison: the stream's
/// `bernoulli` is true when `(word >> 8) · 2⁻²⁴ < p` in `f32`; both sides scaled by
/// `2²⁴` are exact, so that is `(word >> 8) < ceil(p_f32 · 2²⁴)`, the same decision
/// without converting the word to a float.
#[derive(Debug, Clone, Copy)]
struct SuccessThreshold(u32);

impl SuccessThreshold {
    fn new(p: f64) -> Self {
        let scaled = (f64::from(p as f32) * 16_777_216.0).ceil();
        Self(scaled.clamp(0.0, 16_777_216.0) as u32)
    }

    #[inline]
    fn success(self, word: u32) -> bool {
        (word >> 8) < self.0
    }
}

/// `replicates` runs; replicate `r` draws from `RandomStream::new(seed, r)`.
pub fn simulate_replicates(
    p: f64,
    group_size: u64,
    mixed_groups: u64,
    max_groups: u64,
    replicates: usize,
    seed: u64,
) -> Result<Vec<DynamicSamplingRun>> {
    check::probability("p", p)?;
    check::count(
        "group_size",
        usize::try_from(group_size).unwrap_or(usize::MAX),
        1,
        1 << 20,
    )?;
    Ok((0..replicates)
        .map(|r| {
            let mut stream = RandomStream::new(seed, r as u64);
            simulate_dynamic_sampling(p, group_size, mixed_groups, max_groups, &mut stream)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn article_half_in_groups_of_four_is_87_5_percent() {
        assert!((mixed_group_probability(0.5, 4).unwrap() - 0.875).abs() < 1e-15);
    }

    #[test]
    fn article_one_percent_in_groups_of_four_is_3_94_percent() {
        let p = mixed_group_probability(0.01, 4).unwrap();
        assert!((p - 0.0394).abs() < 5e-5, "{p}");
    }

    #[test]
    fn article_one_percent_in_groups_of_sixteen_is_14_85_percent() {
        let p = mixed_group_probability(0.01, 16).unwrap();
        assert!((p - 0.1485).abs() < 5e-5, "{p}");
    }

    #[test]
    fn degenerate_groups_are_never_mixed() {
        assert_eq!(mixed_group_probability(0.0, 8).unwrap(), 0.0);
        assert_eq!(mixed_group_probability(1.0, 8).unwrap(), 0.0);
        assert_eq!(mixed_group_probability(0.3, 1).unwrap(), 0.0);
        assert_eq!(expected_groups_drawn(0.0, 4), None);
    }

    #[test]
    fn grid_errors_name_the_grid_entry() {
        assert_eq!(
            mixed_group_grid(&[0.5, 1.5], &[4]).unwrap_err().field,
            "p[1]"
        );
        assert_eq!(
            mixed_group_grid(&[0.5], &[4, 0]).unwrap_err().field,
            "group_size[1]"
        );
        let grid = mixed_group_grid(&[0.5, 0.01], &[4, 16]).unwrap();
        assert_eq!(grid.len(), 2);
        assert_eq!(grid[0].len(), 2);
    }

    #[test]
    fn tiny_probabilities_keep_their_digits() {
        // 1 - (1 - 1e-12)^4 - 1e-48 = 4e-12 - 6e-24 + ...
        let p = mixed_group_probability(1e-12, 4).unwrap();
        assert!((p / 4e-12 - 1.0).abs() < 1e-9, "{p}");
    }

    #[test]
    fn simulated_groups_drawn_match_the_negative_binomial_mean_and_variance() {
        let (p, g, b) = (0.125, 4, 8);
        let prob = mixed_group_probability(p, g).unwrap();
        let replicates = 20_000;
        let runs = simulate_replicates(p, g, b, u64::MAX, replicates, 17).unwrap();
        assert!(runs.iter().all(|r| !r.capped && r.mixed_found == b));
        let counts: Vec<f64> = runs.iter().map(|r| r.groups_drawn as f64).collect();
        let (mean, variance) = crate::math::bandit::mean_and_sample_variance(&counts);
        let theory_mean = expected_groups_drawn(prob, b).unwrap();
        let theory_var = groups_drawn_variance(prob, b).unwrap();
        let se = (theory_var / replicates as f64).sqrt();
        assert!(
            (mean - theory_mean).abs() < 5.0 * se,
            "{mean} vs {theory_mean}"
        );
        assert!(
            (variance / theory_var - 1.0).abs() < 0.06,
            "{variance} vs {theory_var}"
        );
    }

    #[test]
    fn the_integer_threshold_decides_as_the_streams_bernoulli_draw() {
        let step = f64::from(crate::rng::UNIFORM_STEP);
        let mut ps = vec![0.0, 1.0, step, 2.0 * step, 1.0 - step, 0.5, 0.01, 0.999];
        ps.extend((1..200).map(|i| f64::from(i) / 199.0 - 1e-9));
        ps.extend((0..50).map(|i| 0.3 + f64::from(i) * step * 0.5));
        for p in ps {
            let threshold = SuccessThreshold::new(p);
            // Words at and around the decision boundary, and a stream's worth.
            let edge = (f64::from(p as f32) / step) as u32;
            let mut words: Vec<u32> = [edge.saturating_sub(1), edge, edge + 1]
                .iter()
                .flat_map(|&x| [x << 8, (x << 8) | 0xff])
                .collect();
            let mut stream = RandomStream::new(3, 1);
            words.extend((0..2_000).map(|_| stream.next_u32()));
            for word in words {
                let by_float = crate::rng::uniform_from_word(word) < p as f32;
                assert_eq!(threshold.success(word), by_float, "p {p}, word {word:#x}");
            }
        }
    }

    #[test]
    fn runs_match_a_plain_draw_by_draw_simulation() {
        fn plain(p: f64, g: u64, b: u64, cap: u64, stream: &mut RandomStream) -> (u64, u64) {
            let (mut drawn, mut mixed) = (0, 0);
            while mixed < b && drawn < cap {
                let successes: u64 = (0..g).map(|_| u64::from(stream.bernoulli(p))).sum();
                drawn += 1;
                if successes != 0 && successes != g {
                    mixed += 1;
                }
            }
            (drawn, mixed)
        }
        for (p, g) in [
            (0.01, 4),
            (0.3, 3),
            (0.5, 8),
            (0.07, 5),
            (0.9, 16),
            (0.2, 1),
        ] {
            for r in 0..5 {
                let run = simulate_dynamic_sampling(p, g, 6, 5_000, &mut RandomStream::new(9, r));
                let expected = plain(p, g, 6, 5_000, &mut RandomStream::new(9, r));
                assert_eq!((run.groups_drawn, run.mixed_found), expected, "p {p} G {g}");
            }
        }
    }

    #[test]
    fn the_cap_stops_a_hopeless_run() {
        let run = simulate_dynamic_sampling(0.0, 4, 1, 50, &mut RandomStream::new(0, 0));
        assert!(run.capped);
        assert_eq!(run.groups_drawn, 50);
    }

    proptest! {
        #[test]
        fn closed_form_matches_enumeration_and_symmetry(p in 0.0f64..=1.0, g in 1u64..=10) {
            // Sum over all 2^G outcomes of the probability of a mixed one.
            let mut brute = 0.0;
            for code in 0u32..(1 << g) {
                let successes = code.count_ones() as i32;
                if successes != 0 && successes != g as i32 {
                    brute += p.powi(successes) * (1.0 - p).powi(g as i32 - successes);
                }
            }
            let closed = mixed_group_probability(p, g).unwrap();
            prop_assert!((closed - brute).abs() < 1e-12);
            prop_assert!((closed - mixed_group_probability(1.0 - p, g).unwrap()).abs() < 1e-12);
        }

        #[test]
        fn larger_groups_are_more_often_mixed(p in 0.001f64..0.999, g in 1u64..64) {
            let small = mixed_group_probability(p, g).unwrap();
            let large = mixed_group_probability(p, g + 1).unwrap();
            prop_assert!(large >= small);
        }
    }
}

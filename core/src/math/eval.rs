//! Evaluation statistics: unbiased pass@k, binomial intervals, paired differences and a
//! problem-level bootstrap.
//!
//! - pass@k (Chen et al. 2021, "Evaluating large language models trained on code",
//!   §3.1): with `c` of `n` samples correct, `1 - C(n-c, k) / C(n, k)`, computed as
//!   `1 - prod_{i=n-c+1}^{n} (1 - k/i)` so no binomial coefficient is ever formed. The
//!   plug-in `1 - (1 - c/n)^k` is biased low.
//! - Binomial standard error `sqrt(p(1-p)/n)`, the normal 95% half-width `1.96 SE`, and
//!   the Wilson score interval (Wilson 1927), which stays inside `[0, 1]`.
//! - Comparing two systems on the same problems: the mean of per-problem differences and
//!   its standard error `sd(d) / sqrt(n)`.
//! - Percentile bootstrap over problems (Efron and Tibshirani 1993, ch. 13): resample
//!   problems with replacement, so repeated attempts on one problem stay together.
//! - Clustered statistics, for tasks that share a problem key: the cluster bootstrap
//!   resamples whole clusters (Davison and Hinkley 1997, section 3.8; Cameron, Gelbach and
//!   Miller 2008) and takes the mean over every task of the drawn clusters; the
//!   cluster-robust standard error of a mean over `N` tasks in `m` clusters with
//!   cluster sums `S_c` and sizes `n_c` is
//!   `sqrt(m / (m - 1) * sum_c (S_c - mean n_c)^2) / N` (the CR1 sandwich of a
//!   regression on a constant). With one task per cluster both reduce to the plain
//!   bootstrap and `sd / sqrt(N)`.

use crate::error::{FieldError, Result, check};
use crate::rng::RandomStream;

/// The normal quantile for a two-sided 95% interval.
pub const Z_95: f64 = 1.96;

fn check_counts(n: u64, c: u64, k: u64) -> Result<()> {
    if n == 0 {
        return Err(FieldError::new("n", "must be at least 1"));
    }
    if c > n {
        return Err(FieldError::new("c", format!("must be <= n ({n}), got {c}")));
    }
    if k == 0 || k > n {
        return Err(FieldError::new(
            "k",
            format!("must be in [1, n = {n}], got {k}"),
        ));
    }
    Ok(())
}

/// Below this the product of pass@k's factors (all in `(0, 1]`) makes `1 - product`
/// round to exactly 1, so the loop stops there with the same answer.
const NEGLIGIBLE: f64 = 1.0 / (1u64 << 60) as f64;

/// Unbiased pass@k, `1 - C(n-c, k)/C(n, k)`; 1 when fewer than `k` samples failed.
///
/// The ratio is a product of `min(c, k)` factors: `prod_{i=n-c+1}^{n} (1 - k/i)` when
/// `c <= k`, else `prod_{j=0}^{k-1} (1 - c/(n-j))`, each in `(0, 1]`; the loop stops once
/// the product is below `2^-60` (the answer is then exactly 1), so it runs at most
/// [`pass_at_k_terms`] times, never `O(n)`.
pub fn pass_at_k(n: u64, c: u64, k: u64) -> Result<f64> {
    check_counts(n, c, k)?;
    if n - c < k {
        return Ok(1.0);
    }
    let mut all_fail = 1.0;
    if c <= k {
        // i = n - c + 1 ..= n, ascending; n - j never underflows for j < c <= n.
        for j in (0..c).rev() {
            all_fail *= 1.0 - k as f64 / (n - j) as f64;
            if all_fail < NEGLIGIBLE {
                break;
            }
        }
    } else {
        // n - j >= n - k + 1 > c for j < k <= n - c.
        for j in 0..k {
            all_fail *= 1.0 - c as f64 / (n - j) as f64;
            if all_fail < NEGLIGIBLE {
                break;
            }
        }
    }
    Ok(1.0 - all_fail)
}

/// An upper bound on the factors [`pass_at_k`] multiplies for valid `n`, `c`, `k`: at
/// most `min(c, k)`, and, since every factor is at most `1 - max(c, k)/n`, at most
/// `42 n / max(c, k) + 2` before the product falls below `2^-60`. 0 when `n - c < k`
/// or the counts are invalid.
pub fn pass_at_k_terms(n: u64, c: u64, k: u64) -> u64 {
    if check_counts(n, c, k).is_err() || n - c < k {
        return 0;
    }
    let largest = c.max(k) as f64;
    let until_negligible = (42.0 * n as f64 / largest).ceil() + 2.0;
    let at_most = c.min(k);
    if until_negligible < at_most as f64 {
        until_negligible as u64
    } else {
        at_most
    }
}

/// The plug-in `1 - (1 - c/n)^k`.
pub fn pass_at_k_plug_in(n: u64, c: u64, k: u64) -> Result<f64> {
    check_counts(n, c, k)?;
    Ok(1.0 - (1.0 - c as f64 / n as f64).powf(k as f64))
}

/// Per-task pass@k for `n[i]` samples and `c[i]` successes; errors name `n[i]`, `c[i]`,
/// `k`.
pub fn pass_at_k_per_task(n: &[u64], c: &[u64], k: u64) -> Result<Vec<f64>> {
    check::non_empty("c", c)?;
    check::same_len("n", n.len(), "c", c.len())?;
    n.iter()
        .zip(c)
        .enumerate()
        .map(|(i, (&n_i, &c_i))| {
            pass_at_k(n_i, c_i, k).map_err(|e| {
                if e.field == "k" {
                    e
                } else {
                    FieldError::new(format!("{}[{i}]", e.field), e.message)
                }
            })
        })
        .collect()
}

/// `sqrt(p (1 - p) / n)`.
pub fn binomial_se(p: f64, n: u64) -> Result<f64> {
    check::probability("p", p)?;
    if n == 0 {
        return Err(FieldError::new("n", "must be at least 1"));
    }
    Ok((p * (1.0 - p) / n as f64).sqrt())
}

/// The Wilson score interval for proportion `p` over `n` trials at normal quantile `z`.
pub fn wilson_interval(p: f64, n: u64, z: f64) -> Result<[f64; 2]> {
    binomial_se(p, n)?;
    let n = n as f64;
    let z2 = z * z;
    let denominator = 1.0 + z2 / n;
    let center = (p + z2 / (2.0 * n)) / denominator;
    let half = z / denominator * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    Ok([(center - half).max(0.0), (center + half).min(1.0)])
}

/// A paired comparison of two systems on the same problems.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct PairedDifference {
    /// Mean of `a_i - b_i`.
    pub mean: f64,
    /// `sd(d) / sqrt(n)`, with the sample standard deviation (divisor `n - 1`).
    pub se: f64,
    /// `1.96 se`.
    pub half_width_95: f64,
}

/// Mean per-problem difference of scores `a` and `b` and its standard error. Needs at
/// least two problems.
pub fn paired_difference(a: &[f64], b: &[f64]) -> Result<PairedDifference> {
    check::all_finite("a", a)?;
    check::all_finite("b", b)?;
    check::same_len("b", b.len(), "a", a.len())?;
    if a.len() < 2 {
        return Err(FieldError::new(
            "a",
            "needs at least two problems for a standard error",
        ));
    }
    let n = a.len() as f64;
    let diffs: Vec<f64> = a.iter().zip(b).map(|(x, y)| x - y).collect();
    let mean = diffs.iter().sum::<f64>() / n;
    let var = diffs.iter().map(|d| (d - mean) * (d - mean)).sum::<f64>() / (n - 1.0);
    let se = (var / n).sqrt();
    Ok(PairedDifference {
        mean,
        se,
        half_width_95: Z_95 * se,
    })
}

/// Linear-interpolation quantile (Hyndman and Fan type 7) of sorted values.
fn quantile_sorted(sorted: &[f64], level: f64) -> f64 {
    let position = level * (sorted.len() - 1) as f64;
    let low = position.floor() as usize;
    let high = position.ceil() as usize;
    sorted[low] + (sorted[high] - sorted[low]) * (position - low as f64)
}

/// Percentile bootstrap interval for the mean of per-problem `values`.
///
/// Resample `b` draws from `RandomStream::new(seed, b)`: `n` indices by `below(n)`, in
/// order. The interval is the `(1 - level)/2` and `(1 + level)/2` type-7 quantiles of the
/// `resamples` means.
pub fn bootstrap_mean_ci(
    values: &[f64],
    resamples: usize,
    level: f64,
    seed: u64,
) -> Result<[f64; 2]> {
    check::non_empty("values", values)?;
    check::all_finite("values", values)?;
    check::count("resamples", resamples, 2, usize::MAX)?;
    check::in_range("level", level, 0.0, 1.0)?;
    let n = values.len();
    if n > u32::MAX as usize {
        return Err(FieldError::new("values", "too many problems"));
    }
    let mut means: Vec<f64> = (0..resamples)
        .map(|b| {
            let mut stream = RandomStream::new(seed, b as u64);
            let total: f64 = (0..n)
                .map(|_| values[stream.below(n as u32) as usize])
                .sum();
            total / n as f64
        })
        .collect();
    Ok(percentile_interval(&mut means, level))
}

/// The central `level` interval of resampled statistics: their `(1 - level)/2` and
/// `(1 + level)/2` type-7 quantiles (sorts `values`).
fn percentile_interval(values: &mut [f64], level: f64) -> [f64; 2] {
    values.sort_by(f64::total_cmp);
    [
        quantile_sorted(values, (1.0 - level) / 2.0),
        quantile_sorted(values, f64::midpoint(1.0, level)),
    ]
}

/// Clusters of `labels`: for each distinct label in order of first appearance, the
/// indices that carry it.
pub fn clusters_of<T: PartialEq>(labels: &[T]) -> Vec<Vec<usize>> {
    let mut firsts: Vec<&T> = Vec::new();
    let mut members: Vec<Vec<usize>> = Vec::new();
    for (i, label) in labels.iter().enumerate() {
        match firsts.iter().position(|f| *f == label) {
            Some(c) => members[c].push(i),
            None => {
                firsts.push(label);
                members.push(vec![i]);
            }
        }
    }
    members
}

fn check_clusters(values: &[f64], clusters: &[Vec<usize>]) -> Result<()> {
    check::non_empty("values", values)?;
    check::all_finite("values", values)?;
    let mut seen = vec![false; values.len()];
    for (c, members) in clusters.iter().enumerate() {
        if members.is_empty() {
            return Err(FieldError::new(format!("clusters[{c}]"), "is empty"));
        }
        for &i in members {
            if i >= values.len() || seen[i] {
                return Err(FieldError::new(
                    format!("clusters[{c}]"),
                    "must name each value exactly once",
                ));
            }
            seen[i] = true;
        }
    }
    if seen.iter().any(|&s| !s) {
        return Err(FieldError::new(
            "clusters",
            "must cover every value exactly once",
        ));
    }
    if clusters.len() > u32::MAX as usize {
        return Err(FieldError::new("clusters", "too many clusters"));
    }
    Ok(())
}

/// Percentile bootstrap interval of the mean of `values` when tasks come in
/// `clusters` (index lists, each value in exactly one).
///
/// Resample `b` draws from `RandomStream::new(seed, b)`: `m` cluster indices by
/// `below(m)`, in order; its statistic is the sum of the drawn clusters' values over
/// their total size. With singleton clusters in index order the draws, and so the
/// interval, are exactly [`bootstrap_mean_ci`]'s.
pub fn cluster_bootstrap_mean_ci(
    values: &[f64],
    clusters: &[Vec<usize>],
    resamples: usize,
    level: f64,
    seed: u64,
) -> Result<[f64; 2]> {
    check_clusters(values, clusters)?;
    check::count("resamples", resamples, 2, usize::MAX)?;
    check::in_range("level", level, 0.0, 1.0)?;
    let sums: Vec<f64> = clusters
        .iter()
        .map(|members| members.iter().map(|&i| values[i]).sum())
        .collect();
    let m = clusters.len();
    let mut means: Vec<f64> = (0..resamples)
        .map(|b| {
            let mut stream = RandomStream::new(seed, b as u64);
            let (mut total, mut size) = (0.0, 0usize);
            for _ in 0..m {
                let c = stream.below(m as u32) as usize;
                total += sums[c];
                size += clusters[c].len();
            }
            total / size as f64
        })
        .collect();
    Ok(percentile_interval(&mut means, level))
}

/// The cluster-robust (CR1) standard error of the mean of `values`:
/// `sqrt(m / (m - 1) * sum_c (S_c - mean n_c)^2) / N`. Needs at least two clusters.
pub fn clustered_mean_se(values: &[f64], clusters: &[Vec<usize>]) -> Result<f64> {
    check_clusters(values, clusters)?;
    if clusters.len() < 2 {
        return Err(FieldError::new(
            "clusters",
            "needs at least two clusters for a standard error",
        ));
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let m = clusters.len() as f64;
    let spread: f64 = clusters
        .iter()
        .map(|members| {
            let sum: f64 = members.iter().map(|&i| values[i]).sum();
            let residual = sum - mean * members.len() as f64;
            residual * residual
        })
        .sum();
    Ok((m / (m - 1.0) * spread).sqrt() / n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The loop pass@k used before the closed form: `c` factors.
    fn pass_at_k_by_the_old_loop(n: u64, c: u64, k: u64) -> f64 {
        if n - c < k {
            return 1.0;
        }
        let all_fail: f64 = (n - c + 1..=n).map(|i| 1.0 - k as f64 / i as f64).product();
        1.0 - all_fail
    }

    #[test]
    fn pass_at_k_matches_the_old_loop_on_small_counts() {
        for n in 1..=60u64 {
            for c in 0..=n {
                for k in 1..=n {
                    let new = pass_at_k(n, c, k).unwrap();
                    let old = pass_at_k_by_the_old_loop(n, c, k);
                    assert!((new - old).abs() <= 1e-12, "{n} {c} {k}: {new} {old}");
                    if c <= k {
                        assert_eq!(new.to_bits(), old.to_bits(), "{n} {c} {k}");
                    }
                    let terms = pass_at_k_terms(n, c, k);
                    assert!(terms <= c.min(k), "{n} {c} {k}");
                }
            }
        }
        for (n, c, k) in [
            (2000, 1500, 300),
            (100_000, 3, 50_000),
            (100_000, 70_000, 9),
        ] {
            let (new, old) = (
                pass_at_k(n, c, k).unwrap(),
                pass_at_k_by_the_old_loop(n, c, k),
            );
            assert!((new - old).abs() <= 1e-12, "{n} {c} {k}: {new} {old}");
        }
    }

    #[test]
    fn pass_at_k_of_huge_counts_is_quick_and_does_not_overflow() {
        // Was O(c) = 5e15 iterations.
        assert_eq!(
            pass_at_k(10_000_000_000_000_000, 5_000_000_000_000_000, 1).unwrap(),
            0.5
        );
        assert_eq!(
            pass_at_k_terms(10_000_000_000_000_000, 5_000_000_000_000_000, 1),
            1
        );
        // Was an overflow of n - c + 1.
        assert_eq!(pass_at_k(u64::MAX, 0, u64::MAX).unwrap(), 0.0);
        assert_eq!(pass_at_k(u64::MAX, 3, u64::MAX - 3).unwrap(), 1.0);
        assert_eq!(pass_at_k_terms(u64::MAX, u64::MAX / 2, u64::MAX / 4), 86);
        assert_eq!(
            pass_at_k(u64::MAX, u64::MAX / 2, u64::MAX / 4).unwrap(),
            1.0
        );
    }

    #[test]
    fn clusters_group_equal_labels_in_order_of_first_appearance() {
        assert_eq!(
            clusters_of(&["b", "a", "b", "c", "a"]),
            vec![vec![0, 2], vec![1, 4], vec![3]]
        );
    }

    #[test]
    fn singleton_clusters_reduce_to_the_plain_statistics() {
        let values: Vec<f64> = (0..57)
            .map(|i| f64::from((i * 7 % 5) as u8) / 4.0)
            .collect();
        let singletons: Vec<Vec<usize>> = (0..values.len()).map(|i| vec![i]).collect();
        assert_eq!(
            cluster_bootstrap_mean_ci(&values, &singletons, 500, 0.95, 3).unwrap(),
            bootstrap_mean_ci(&values, 500, 0.95, 3).unwrap()
        );
        let zeros = vec![0.0; values.len()];
        let plain = paired_difference(&values, &zeros).unwrap().se;
        assert!((clustered_mean_se(&values, &singletons).unwrap() - plain).abs() < 1e-15);
    }

    #[test]
    fn clustered_se_matches_a_hand_computation() {
        // Clusters {1, 1}, {0}, {0, 0, 1}: N = 6, mean 1/2, sums 2, 0, 1, sizes 2, 1, 3;
        // residuals 1, -1/2, -1/2; m / (m - 1) = 3/2; se = sqrt(3/2 * 3/2) / 6 = 1/4.
        let values = [1.0, 1.0, 0.0, 0.0, 0.0, 1.0];
        let clusters = vec![vec![0, 1], vec![2], vec![3, 4, 5]];
        assert!((clustered_mean_se(&values, &clusters).unwrap() - 0.25).abs() < 1e-15);
    }

    #[test]
    fn correlated_clusters_widen_the_interval() {
        // 20 keys of 5 tasks each; within a key every task has the same outcome, so the
        // effective sample size is 20, not 100.
        let values: Vec<f64> = (0..100)
            .map(|i| f64::from(u8::from((i / 5) % 2 == 0)))
            .collect();
        let keys: Vec<usize> = (0..100).map(|i| i / 5).collect();
        let clusters = clusters_of(&keys);
        let [lo, hi] = cluster_bootstrap_mean_ci(&values, &clusters, 4000, 0.95, 1).unwrap();
        let [plo, phi] = bootstrap_mean_ci(&values, 4000, 0.95, 1).unwrap();
        assert!(
            hi - lo > 1.8 * (phi - plo),
            "[{lo}, {hi}] vs [{plo}, {phi}]"
        );
        // sqrt(0.25 / 20) = 0.112; CR1 adds sqrt(20/19).
        let se = clustered_mean_se(&values, &clusters).unwrap();
        assert!(
            (se - (0.25f64 / 20.0 * 20.0 / 19.0).sqrt()).abs() < 1e-12,
            "{se}"
        );
    }

    #[test]
    fn malformed_clusters_name_the_field() {
        let values = [1.0, 0.0, 1.0];
        assert_eq!(
            cluster_bootstrap_mean_ci(&values, &[vec![0, 1]], 10, 0.95, 0)
                .unwrap_err()
                .field,
            "clusters"
        );
        assert_eq!(
            clustered_mean_se(&values, &[vec![0, 1], vec![1, 2]])
                .unwrap_err()
                .field,
            "clusters[1]"
        );
        assert_eq!(
            clustered_mean_se(&values, &[vec![0, 1, 2]])
                .unwrap_err()
                .field,
            "clusters"
        );
    }

    /// `C(n, k)` by the multiplicative formula in exact integers (small `n` only).
    fn choose(n: u64, k: u64) -> u128 {
        if k > n {
            return 0;
        }
        (0..k).fold(1u128, |acc, i| acc * u128::from(n - i) / u128::from(i + 1))
    }

    #[test]
    fn article_pass_at_3_with_2_of_10_is_0_533() {
        let estimate = pass_at_k(10, 2, 3).unwrap();
        assert!((estimate - (1.0 - 56.0 / 120.0)).abs() < 1e-15);
        assert!((estimate - 0.533).abs() < 5e-4);
    }

    #[test]
    fn article_plug_in_gives_0_488() {
        assert!((pass_at_k_plug_in(10, 2, 3).unwrap() - 0.488).abs() < 1e-12);
    }

    #[test]
    fn article_standard_error_for_200_tasks_at_half_is_0_035() {
        let se = binomial_se(0.5, 200).unwrap();
        assert!((se - 0.035).abs() < 5e-4, "{se}");
        let half_width_points = 100.0 * Z_95 * se;
        assert!(
            (half_width_points - 6.9).abs() < 0.05,
            "{half_width_points}"
        );
    }

    #[test]
    fn impossible_counts_name_their_field() {
        assert_eq!(pass_at_k(10, 11, 3).unwrap_err().field, "c");
        assert_eq!(pass_at_k(10, 2, 11).unwrap_err().field, "k");
        assert_eq!(pass_at_k(0, 0, 1).unwrap_err().field, "n");
        assert_eq!(
            pass_at_k_per_task(&[5, 5], &[1, 6], 1).unwrap_err().field,
            "c[1]"
        );
        assert_eq!(binomial_se(1.2, 10).unwrap_err().field, "p");
    }

    #[test]
    fn wilson_interval_contains_the_estimate_and_stays_in_range() {
        let [lo, hi] = wilson_interval(0.0, 20, Z_95).unwrap();
        assert_eq!(lo, 0.0);
        assert!(hi > 0.0 && hi < 0.2);
        let [lo, hi] = wilson_interval(0.5, 200, Z_95).unwrap();
        // Close to the normal interval in the middle of the range.
        assert!((lo - (0.5 - 0.069)).abs() < 0.002 && (hi - (0.5 + 0.069)).abs() < 0.002);
    }

    #[test]
    fn paired_difference_of_identical_systems_is_zero() {
        let a = [1.0, 0.0, 1.0, 1.0];
        let d = paired_difference(&a, &a).unwrap();
        assert_eq!((d.mean, d.se), (0.0, 0.0));
        let d = paired_difference(&[1.0, 1.0, 0.0, 1.0], &[0.0, 1.0, 0.0, 0.0]).unwrap();
        assert!((d.mean - 0.5).abs() < 1e-15);
        // diffs (1, 0, 0, 1): sample variance 1/3, se = sqrt(1/12).
        assert!((d.se - (1.0f64 / 12.0).sqrt()).abs() < 1e-15);
    }

    #[test]
    fn bootstrap_interval_brackets_the_mean_and_matches_the_normal_width() {
        let values: Vec<f64> = (0..200).map(|i| f64::from(i % 2)).collect();
        let [lo, hi] = bootstrap_mean_ci(&values, 4000, 0.95, 1).unwrap();
        assert!(lo < 0.5 && 0.5 < hi);
        // The bootstrap SE of a 0/1 mean is about sqrt(0.25/200) = 0.035.
        assert!(((hi - lo) / 2.0 - 0.069).abs() < 0.01, "[{lo}, {hi}]");
        assert_eq!(bootstrap_mean_ci(&values, 4000, 0.95, 1).unwrap(), [lo, hi]);
    }

    proptest! {
        #[test]
        fn pass_at_1_is_the_success_fraction(n in 1u64..500, c_frac in 0.0f64..=1.0) {
            let c = (c_frac * n as f64).round() as u64;
            prop_assert!((pass_at_k(n, c, 1).unwrap() - c as f64 / n as f64).abs() < 1e-12);
        }

        #[test]
        fn pass_at_k_grows_with_k(n in 1u64..200, c_frac in 0.0f64..=1.0) {
            let c = (c_frac * n as f64).round() as u64;
            let values: Vec<f64> = (1..=n).map(|k| pass_at_k(n, c, k).unwrap()).collect();
            prop_assert!(values.windows(2).all(|w| w[1] >= w[0] - 1e-12));
        }

        #[test]
        fn pass_at_k_matches_subset_enumeration(n in 1u64..=10, c_raw in 0u64..=10, k_raw in 1u64..=10) {
            let c = c_raw.min(n);
            let k = k_raw.min(n);
            // Fraction of k-subsets of the n samples that contain a correct one; the
            // first c samples are the correct ones.
            let (mut hit, mut total) = (0u64, 0u64);
            for subset in 0u32..(1 << n) {
                if u64::from(subset.count_ones()) == k {
                    total += 1;
                    if subset & ((1u32 << c) - 1) != 0 {
                        hit += 1;
                    }
                }
            }
            let brute = hit as f64 / total as f64;
            prop_assert!((pass_at_k(n, c, k).unwrap() - brute).abs() < 1e-12);
            let ratio = 1.0 - choose(n - c, k) as f64 / choose(n, k) as f64;
            prop_assert!((pass_at_k(n, c, k).unwrap() - ratio).abs() < 1e-12);
        }

        #[test]
        fn unbiased_estimate_is_at_least_the_plug_in(n in 1u64..100, c_frac in 0.0f64..=1.0, k_frac in 0.0f64..=1.0) {
            let c = (c_frac * n as f64).round() as u64;
            let k = 1 + (k_frac * (n - 1) as f64).round() as u64;
            prop_assert!(pass_at_k(n, c, k).unwrap() >= pass_at_k_plug_in(n, c, k).unwrap() - 1e-12);
        }
    }
}

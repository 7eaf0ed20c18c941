//! Direct preference optimisation on a categorical policy over whole responses.
//!
//! For a preference pair (chosen `w`, rejected `l`) the implicit rewards are
//! `beta log(pi(w) / pi_ref(w))` and `beta log(pi(l) / pi_ref(l))`, their difference is
//! `h = beta [log(pi(w)/pi_ref(w)) - log(pi(l)/pi_ref(l))]`, and the sigmoid loss with
//! label smoothing `eps` (conservative DPO) is
//!
//! ```text
//! loss = -(1 - eps) log sigmoid(h) - eps log sigmoid(-h)
//! ```
//!
//! exactly as TRL's `DPOTrainer` computes it for `loss_type = "sigmoid"` (its `logits`
//! is the bracket, its `chosen_rewards` / `rejected_rewards` the implicit rewards and
//! `rewards/accuracies` the share of pairs whose chosen reward is larger). Rafailov et
//! al. 2023, "Direct preference optimization", eq. 7.
//!
//! With the policy given by logits `theta` (`pi = softmax(theta)`), the normaliser
//! cancels in `h`, so `d h / d theta = beta (e_w - e_l)` and
//! `d loss / d theta = loss'(h) beta (e_w - e_l)`, with
//! `loss'(h) = -(1 - eps) sigmoid(-h) + eps sigmoid(h)`.
//!
//! ## The fit
//! Under Bradley-Terry preferences from rewards `r` (`P(a beats b) = sigmoid(r_a - r_b)`)
//! and pairs of responses drawn from `pi_ref`, the expected loss is minimised (with
//! `eps = 0`) where `h = r_w - r_l` for every pair, that is where
//! `pi(y) ∝ pi_ref(y) exp(r(y) / beta)`: the optimum of the KL-regularised objective
//! (see [`crate::math::kl_regularized`]). [`fit`] minimises either that expected loss or
//! the loss over `N` sampled pairs by Newton steps with a backtracking line search,
//! starting from the reference. With few pairs the empirical loss can be driven to 0
//! by pushing a response that always won further and further (the pairs are
//! separable); the fit then stops at its step limit and says it did not converge.
//! Responses that never appear in a pair are not identified by the loss; they keep
//! their reference log-ratio relative to the others' mean.

use serde::{Deserialize, Serialize};

use crate::error::{FieldError, Result, check};
use crate::math::distill::log_softmax;
use crate::rng::RandomStream;

/// Most responses a DPO request may have (the fit solves a `K x K` system per step).
pub const MAX_RESPONSES: usize = 64;
/// `beta` lies in `[1 / MAX_SCALE, MAX_SCALE]` and every reward within `±MAX_SCALE`, so
/// margins, gradients and Newton's curvature (`beta^2`) stay inside `f64`.
pub const MAX_SCALE: f64 = 1e6;

/// `log sigmoid(x)`, stable for large `|x|`.
pub fn log_sigmoid(x: f64) -> f64 {
    -((-x).max(0.0) + (-x.abs()).exp().ln_1p())
}

/// `sigmoid(x)`, stable for large `|x|`.
pub fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// The smoothed sigmoid loss at margin `h` and its first two derivatives in `h`.
fn loss_terms(h: f64, smoothing: f64) -> (f64, f64, f64) {
    let value = -(1.0 - smoothing) * log_sigmoid(h) - smoothing * log_sigmoid(-h);
    let slope = -(1.0 - smoothing) * sigmoid(-h) + smoothing * sigmoid(h);
    let curvature = sigmoid(h) * sigmoid(-h);
    (value, slope, curvature)
}

/// One pair's numbers (serialised as the `dpo` entry's `batch.pairs`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PairLoss {
    /// `beta log(pi(w) / pi_ref(w))`.
    pub chosen_reward: f64,
    /// `beta log(pi(l) / pi_ref(l))`.
    pub rejected_reward: f64,
    /// `h`, their difference.
    pub margin: f64,
    /// The pair's loss.
    pub loss: f64,
}

/// The loss over a batch of pairs (serialised as the `dpo` entry's `batch`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchLoss {
    /// Each pair, in order.
    pub pairs: Vec<PairLoss>,
    /// Mean loss over the pairs.
    pub loss: f64,
    /// Share of pairs with chosen reward > rejected reward.
    pub reward_accuracy: f64,
    /// `d (mean loss) / d theta` (the policy's logits), one entry per response.
    pub gradient: Vec<f64>,
}

/// Validated inputs: the reference and the policy, as log-probabilities, and `beta`.
#[derive(Debug, Clone, PartialEq)]
pub struct Setup {
    /// `log pi_ref(y)`.
    pub log_reference: Vec<f64>,
    /// `log pi(y)`.
    pub log_policy: Vec<f64>,
    /// `beta > 0`.
    pub beta: f64,
    /// Label smoothing `eps` in `[0, 0.5)`.
    pub label_smoothing: f64,
}

fn strictly_positive_distribution(field: &str, probs: &[f64]) -> Result<Vec<f64>> {
    check::count(&format!("{field} (length)"), probs.len(), 2, MAX_RESPONSES)
        .map_err(|e| FieldError::new(field, e.message))?;
    let probs = check::distribution(field, probs)?;
    if let Some(i) = probs.iter().position(|&p| p <= 0.0) {
        return Err(FieldError::new(
            format!("{field}[{i}]"),
            "must be > 0: the implicit reward log(pi / pi_ref) needs every response possible",
        ));
    }
    Ok(probs.iter().map(|p| p.ln()).collect())
}

impl Setup {
    /// Checks `reference` and `policy` (distributions over the same `K <= 64`
    /// responses, every entry positive), `beta` in `[1e-6, 1e6]` and `label_smoothing` in
    /// `[0, 0.5)`.
    pub fn new(reference: &[f64], policy: &[f64], beta: f64, label_smoothing: f64) -> Result<Self> {
        let log_reference = strictly_positive_distribution("reference", reference)?;
        check::same_len("policy", policy.len(), "reference", reference.len())?;
        let log_policy = strictly_positive_distribution("policy", policy)?;
        check::in_range("beta", beta, 1.0 / MAX_SCALE, MAX_SCALE)?;
        if !(0.0..0.5).contains(&label_smoothing) {
            return Err(FieldError::new(
                "label_smoothing",
                format!("must be in [0, 0.5), got {label_smoothing}"),
            ));
        }
        Ok(Self {
            log_reference,
            log_policy,
            beta,
            label_smoothing,
        })
    }

    /// Number of responses.
    pub fn responses(&self) -> usize {
        self.log_reference.len()
    }

    /// `beta log(pi(y) / pi_ref(y))` for every response.
    pub fn implicit_rewards(&self) -> Vec<f64> {
        self.log_policy
            .iter()
            .zip(&self.log_reference)
            .map(|(p, r)| self.beta * (p - r))
            .collect()
    }

    /// The loss of the pairs `(chosen, rejected)` (field `pairs`).
    pub fn batch_loss(&self, pairs: &[[usize; 2]]) -> Result<BatchLoss> {
        check::non_empty("pairs", pairs)?;
        let k = self.responses();
        for (i, pair) in pairs.iter().enumerate() {
            for (j, &y) in pair.iter().enumerate() {
                if y >= k {
                    return Err(FieldError::new(
                        format!("pairs[{i}][{j}]"),
                        format!("names response {y}, but there are {k} (0 to {})", k - 1),
                    ));
                }
            }
        }
        let rewards = self.implicit_rewards();
        let n = pairs.len() as f64;
        let mut gradient = vec![0.0; k];
        let mut out = Vec::with_capacity(pairs.len());
        for &[w, l] in pairs {
            let margin = rewards[w] - rewards[l];
            let (loss, slope, _) = loss_terms(margin, self.label_smoothing);
            gradient[w] += slope * self.beta / n;
            gradient[l] -= slope * self.beta / n;
            out.push(PairLoss {
                chosen_reward: rewards[w],
                rejected_reward: rewards[l],
                margin,
                loss,
            });
        }
        Ok(BatchLoss {
            loss: out.iter().map(|p| p.loss).sum::<f64>() / n,
            reward_accuracy: out
                .iter()
                .filter(|p| p.chosen_reward > p.rejected_reward)
                .count() as f64
                / n,
            pairs: out,
            gradient,
        })
    }
}

/// Where the fit's preference pairs come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairSource {
    /// Every ordered pair of distinct responses, weighted by `pi_ref(a) pi_ref(b)` and
    /// the Bradley-Terry probability of its label: the loss of infinitely many pairs.
    Expected,
    /// `pairs` draws of two responses from `pi_ref` (stream 0 of `seed`), each labelled by
    /// one Bernoulli draw of `sigmoid(r_1 - r_2)`. Draw order per pair: the first
    /// response, the second, the label. Pairs of one response twice carry no signal
    /// and are dropped.
    Sampled {
        /// Pairs drawn.
        pairs: usize,
        /// Seed.
        seed: u64,
    },
}

/// The fitted policy and how the fit went (the `dpo` entry's `fit`, with the optimum).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fit {
    /// The fitted `pi(y)`.
    pub policy: Vec<f64>,
    /// `beta log(pi(y) / pi_ref(y))`.
    pub implicit_rewards: Vec<f64>,
    /// The (expected or empirical) loss at the fit.
    pub loss: f64,
    /// The loss at the reference (`log 2` without smoothing).
    pub initial_loss: f64,
    /// Newton steps taken.
    pub iterations: usize,
    /// Largest `|d loss / d theta|` at the fit.
    pub gradient_norm: f64,
    /// Whether the Newton steps shrank to nothing within the step limit.
    pub converged: bool,
    /// Pairs of two distinct responses the loss used (`None`, and absent from JSON, for
    /// the expected loss).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pairs_used: Option<usize>,
}

/// The fit has converged when a Newton step moves no log-ratio by more than this
/// (relative to the largest): Newton's steps shrink quadratically near the optimum,
/// while on separable pairs they stay near `1 / beta` for ever.
const STEP_TOLERANCE: f64 = 1e-12;
/// Where no step lowers the loss any more, the fit counts as converged if no gradient
/// entry exceeds this.
const GRADIENT_TOLERANCE: f64 = 1e-9;

/// The pair weights `W[w][l]` (chosen `w`, rejected `l`), normalised to sum to 1, and
/// the number of pairs used for a sampled source.
fn pair_weights(
    log_reference: &[f64],
    rewards: &[f64],
    source: PairSource,
) -> (Vec<Vec<f64>>, Option<usize>) {
    match source {
        PairSource::Expected => {
            let k = log_reference.len();
            let mut weights = vec![vec![0.0; k]; k];
            for a in 0..k {
                for b in 0..k {
                    if a != b {
                        weights[a][b] = (log_reference[a] + log_reference[b]).exp()
                            * sigmoid(rewards[a] - rewards[b]);
                    }
                }
            }
            (normalised(weights), None)
        }
        PairSource::Sampled { pairs, seed } => {
            let mut counts = sampled_pair_counts(log_reference, rewards, seed, &[pairs]);
            let (weights, used) = counts.remove(0);
            (normalised(weights), Some(used))
        }
    }
}

/// Divides the weights by their sum (when it is positive).
fn normalised(mut weights: Vec<Vec<f64>>) -> Vec<Vec<f64>> {
    let total: f64 = weights.iter().flatten().sum();
    if total > 0.0 {
        for w in weights.iter_mut().flatten() {
            *w /= total;
        }
    }
    weights
}

/// Counts of the sampled pairs by (chosen, rejected), and the pairs of two distinct
/// responses, after the first `n` pairs of one stream for each `n` in `stops`
/// (ascending). The first `n` pairs are the pairs a sample of `n` draws: each pair reads
/// the stream after the one before it, so one pass gives every prefix.
fn sampled_pair_counts(
    log_reference: &[f64],
    rewards: &[f64],
    seed: u64,
    stops: &[usize],
) -> Vec<(Vec<Vec<f64>>, usize)> {
    let k = log_reference.len();
    let reference: Vec<f64> = log_reference.iter().map(|l| l.exp()).collect();
    // Bradley-Terry's win probability of each ordered pair, computed once.
    let wins: Vec<Vec<f64>> = rewards
        .iter()
        .map(|a| rewards.iter().map(|b| sigmoid(a - b)).collect())
        .collect();
    let mut stream = RandomStream::new(seed, 0);
    let mut counts = vec![vec![0.0; k]; k];
    let mut used = 0;
    let mut drawn = 0;
    let mut snapshots = Vec::with_capacity(stops.len());
    for &stop in stops {
        while drawn < stop {
            let first = stream.categorical(&reference);
            let second = stream.categorical(&reference);
            let first_wins = stream.bernoulli(wins[first][second]);
            if first != second {
                let (w, l) = if first_wins {
                    (first, second)
                } else {
                    (second, first)
                };
                counts[w][l] += 1.0;
                used += 1;
            }
            drawn += 1;
        }
        snapshots.push((counts.clone(), used));
    }
    snapshots
}

/// Loss, gradient and Hessian in the log-ratio offsets `d` (`log pi = log_softmax(log
/// pi_ref + d)`, so `d theta = d d`).
fn loss_and_derivatives(
    weights: &[Vec<f64>],
    d: &[f64],
    beta: f64,
    smoothing: f64,
    with_hessian: bool,
) -> (f64, Vec<f64>, Vec<Vec<f64>>) {
    let k = d.len();
    let mut loss = 0.0;
    let mut gradient = vec![0.0; k];
    let mut hessian = vec![vec![0.0; if with_hessian { k } else { 0 }]; k];
    for w in 0..k {
        for l in 0..k {
            let weight = weights[w][l];
            if weight == 0.0 {
                continue;
            }
            let (value, slope, curvature) = loss_terms(beta * (d[w] - d[l]), smoothing);
            loss += weight * value;
            gradient[w] += weight * slope * beta;
            gradient[l] -= weight * slope * beta;
            if with_hessian {
                let c = weight * curvature * beta * beta;
                hessian[w][w] += c;
                hessian[l][l] += c;
                hessian[w][l] -= c;
                hessian[l][w] -= c;
            }
        }
    }
    (loss, gradient, hessian)
}

/// Solves `a x = b` by Gaussian elimination with partial pivoting (`a` is small).
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Vec<f64> {
    let k = b.len();
    for col in 0..k {
        let pivot = (col..k)
            .max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))
            .unwrap_or(col);
        a.swap(col, pivot);
        b.swap(col, pivot);
        let p = a[col][col];
        if p == 0.0 {
            continue;
        }
        let (upper, lower) = a.split_at_mut(col + 1);
        let pivot_row = &upper[col];
        for (offset, row) in lower.iter_mut().enumerate() {
            let factor = row[col] / p;
            if factor != 0.0 {
                for (x, y) in row[col..].iter_mut().zip(&pivot_row[col..]) {
                    *x -= factor * y;
                }
                b[col + 1 + offset] -= factor * b[col];
            }
        }
    }
    let mut x = vec![0.0; k];
    for row in (0..k).rev() {
        let tail: f64 = (row + 1..k).map(|c| a[row][c] * x[c]).sum();
        x[row] = if a[row][row] == 0.0 {
            0.0
        } else {
            (b[row] - tail) / a[row][row]
        };
    }
    x
}

/// Fits the policy that minimises the DPO loss of preferences from `rewards` (field
/// `rewards`), starting from the reference, in at most `max_iterations` Newton steps.
pub fn fit(
    setup: &Setup,
    rewards: &[f64],
    source: PairSource,
    max_iterations: usize,
) -> Result<Fit> {
    check_rewards(setup, rewards)?;
    let (weights, pairs_used) = pair_weights(&setup.log_reference, rewards, source);
    Ok(fit_weights(setup, &weights, pairs_used, max_iterations))
}

/// Fits on the first `n` sampled pairs of stream 0 of `seed` for each `n` of `pairs`
/// (any order): the fits separate [`PairSource::Sampled`] requests give, from one pass
/// over the largest sample.
pub fn fit_prefixes(
    setup: &Setup,
    rewards: &[f64],
    seed: u64,
    pairs: &[usize],
    max_iterations: usize,
) -> Result<Vec<Fit>> {
    check_rewards(setup, rewards)?;
    let mut stops = pairs.to_vec();
    stops.sort_unstable();
    stops.dedup();
    let counts = sampled_pair_counts(&setup.log_reference, rewards, seed, &stops);
    let fits: Vec<Fit> = counts
        .into_iter()
        .map(|(weights, used)| fit_weights(setup, &normalised(weights), Some(used), max_iterations))
        .collect();
    Ok(pairs
        .iter()
        .map(|n| fits[stops.partition_point(|s| s < n)].clone())
        .collect())
}

fn check_rewards(setup: &Setup, rewards: &[f64]) -> Result<()> {
    check::same_len("rewards", rewards.len(), "reference", setup.responses())?;
    for (i, &r) in rewards.iter().enumerate() {
        check::in_range(&format!("rewards[{i}]"), r, -MAX_SCALE, MAX_SCALE)?;
    }
    Ok(())
}

/// Newton's method from the reference on the normalised pair weights.
fn fit_weights(
    setup: &Setup,
    weights: &[Vec<f64>],
    pairs_used: Option<usize>,
    max_iterations: usize,
) -> Fit {
    let k = setup.responses();
    let (beta, smoothing) = (setup.beta, setup.label_smoothing);
    let mut d = vec![0.0; k];
    let (initial_loss, _, _) = loss_and_derivatives(weights, &d, beta, smoothing, false);
    let (mut loss, mut gradient, mut hessian) =
        loss_and_derivatives(weights, &d, beta, smoothing, true);
    let largest = |g: &[f64]| g.iter().fold(0.0_f64, |m, v| m.max(v.abs()));
    let mut iterations = 0;
    let mut converged = largest(&gradient) == 0.0;
    while !converged && iterations < max_iterations {
        // The loss depends on differences of d only: pin the mean with a rank-one term,
        // and damp slightly so responses outside every pair stay where they are.
        let scale = (0..k)
            .map(|i| hessian[i][i])
            .fold(0.0_f64, f64::max)
            .max(1e-300);
        for (i, row) in hessian.iter_mut().enumerate() {
            for (j, h) in row.iter_mut().enumerate() {
                *h += scale / k as f64 + if i == j { 1e-9 * scale } else { 0.0 };
            }
        }
        let step = solve(hessian, gradient.iter().map(|g| -g).collect());
        let slope: f64 = step.iter().zip(&gradient).map(|(s, g)| s * g).sum();
        let mut t = 1.0;
        let (candidate, candidate_loss) = loop {
            let candidate: Vec<f64> = d.iter().zip(&step).map(|(x, s)| x + t * s).collect();
            let candidate_loss =
                loss_and_derivatives(weights, &candidate, beta, smoothing, false).0;
            if candidate_loss <= loss + 1e-4 * t * slope || t < 1e-12 {
                break (candidate, candidate_loss);
            }
            t *= 0.5;
        };
        iterations += 1;
        if candidate_loss > loss {
            // At the floor of f64: no step lowers the loss any more.
            converged = largest(&gradient) <= GRADIENT_TOLERANCE;
            break;
        }
        let moved = t * largest(&step);
        d = candidate;
        (loss, gradient, hessian) = loss_and_derivatives(weights, &d, beta, smoothing, true);
        converged = moved <= STEP_TOLERANCE * (1.0 + largest(&d)) || largest(&gradient) == 0.0;
    }
    let logits: Vec<f64> = setup
        .log_reference
        .iter()
        .zip(&d)
        .map(|(r, x)| r + x)
        .collect();
    let log_policy = log_softmax(&logits);
    let gradient_norm = largest(&gradient);
    Fit {
        implicit_rewards: log_policy
            .iter()
            .zip(&setup.log_reference)
            .map(|(p, r)| beta * (p - r))
            .collect(),
        policy: log_policy.iter().map(|l| l.exp()).collect(),
        loss,
        initial_loss,
        iterations,
        gradient_norm,
        converged,
        pairs_used,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::kl_regularized::Problem;
    use proptest::prelude::*;

    fn normalise(w: &[f64]) -> Vec<f64> {
        let s: f64 = w.iter().sum();
        w.iter().map(|x| x / s).collect()
    }

    /// TRL's sigmoid loss, restated from `DPOTrainer.dpo_loss` with plain logarithms.
    fn trl_sigmoid_loss(pw: f64, pl: f64, rw: f64, rl: f64, beta: f64, eps: f64) -> f64 {
        let logits = (pw - pl) - (rw - rl);
        let logsig = |x: f64| -(1.0 + (-x).exp()).ln();
        -logsig(beta * logits) * (1.0 - eps) - logsig(-beta * logits) * eps
    }

    #[test]
    fn a_pair_by_hand() {
        // pi/pi_ref = 2 for the chosen, 1/2 for the rejected, beta 0.1:
        // h = 0.1 ln 4 and loss = ln(1 + 4^-0.1) = 0.626_232_806_4 (Python, math.log).
        let setup = Setup::new(&[0.25, 0.5, 0.25], &[0.5, 0.375, 0.125], 0.1, 0.0).unwrap();
        let out = setup.batch_loss(&[[0, 2]]).unwrap();
        let h = 0.1 * 4f64.ln();
        assert!((out.pairs[0].margin - h).abs() < 1e-15);
        assert!((out.loss - (1.0 + 4f64.powf(-0.1)).ln()).abs() < 1e-15);
        assert!((out.loss - 0.626_232_806_4).abs() < 1e-10);
        assert_eq!(out.reward_accuracy, 1.0);
    }

    #[test]
    fn at_the_reference_every_pair_costs_log_two() {
        let reference = [0.2, 0.3, 0.5];
        let setup = Setup::new(&reference, &reference, 0.5, 0.0).unwrap();
        let out = setup.batch_loss(&[[0, 1], [2, 0]]).unwrap();
        assert!((out.loss - 2f64.ln()).abs() < 1e-15);
        // d loss / d theta = -(beta/2) (e_w - e_l) per pair, averaged over the 2 pairs.
        assert!((out.gradient[0] - 0.0).abs() < 1e-15);
        assert!((out.gradient[1] - 0.125).abs() < 1e-15);
        assert!((out.gradient[2] + 0.125).abs() < 1e-15);
    }

    #[test]
    fn bad_inputs_name_their_field() {
        let r = [0.5, 0.5];
        assert_eq!(
            Setup::new(&[0.5, 0.6], &r, 0.1, 0.0).unwrap_err().field,
            "reference"
        );
        assert_eq!(
            Setup::new(&[1.0, 0.0], &r, 0.1, 0.0).unwrap_err().field,
            "reference[1]"
        );
        assert_eq!(
            Setup::new(&r, &[0.5], 0.1, 0.0).unwrap_err().field,
            "policy"
        );
        assert_eq!(Setup::new(&r, &r, 0.0, 0.0).unwrap_err().field, "beta");
        assert_eq!(
            Setup::new(&r, &r, 0.1, 0.5).unwrap_err().field,
            "label_smoothing"
        );
        let setup = Setup::new(&r, &r, 0.1, 0.0).unwrap();
        assert_eq!(
            setup.batch_loss(&[[0, 2]]).unwrap_err().field,
            "pairs[0][1]"
        );
        assert_eq!(setup.batch_loss(&[]).unwrap_err().field, "pairs");
    }

    #[test]
    fn the_expected_fit_reaches_the_kl_regularised_optimum() {
        let reference = [0.3, 0.25, 0.2, 0.12, 0.08, 0.05];
        let rewards = [0.1, 0.3, 0.2, 0.9, 0.5, 1.0];
        for beta in [0.05, 0.2, 1.0, 5.0] {
            let setup = Setup::new(&reference, &reference, beta, 0.0).unwrap();
            let fit = fit(&setup, &rewards, PairSource::Expected, 100).unwrap();
            assert!(fit.converged, "beta {beta}: {fit:?}");
            let optimum = Problem::new(&reference, &rewards)
                .unwrap()
                .optimum(beta, "beta")
                .unwrap();
            for (a, b) in fit.policy.iter().zip(&optimum.policy) {
                assert!(
                    (a - b).abs() < 1e-9,
                    "beta {beta}: {:?} vs {:?}",
                    fit.policy,
                    optimum.policy
                );
            }
        }
    }

    #[test]
    fn label_smoothing_stops_short_of_the_optimum_by_the_known_amount() {
        // Two responses: the minimiser has sigmoid(h) = (1 - eps) s + eps (1 - s),
        // s = sigmoid(r_0 - r_1).
        let (reference, rewards, beta, eps) = ([0.5, 0.5], [1.0, 0.0], 0.5, 0.1);
        let setup = Setup::new(&reference, &reference, beta, eps).unwrap();
        let fit = fit(&setup, &rewards, PairSource::Expected, 100).unwrap();
        let s = sigmoid(1.0);
        let target = (1.0 - eps) * s + eps * (1.0 - s);
        let h = fit.implicit_rewards[0] - fit.implicit_rewards[1];
        assert!((sigmoid(h) - target).abs() < 1e-10);
    }

    #[test]
    fn few_sampled_pairs_are_separable_and_many_approach_the_optimum() {
        let reference = [0.3, 0.25, 0.2, 0.12, 0.08, 0.05];
        let rewards = [0.1, 0.3, 0.2, 0.9, 0.5, 1.0];
        let beta = 0.2;
        let setup = Setup::new(&reference, &reference, beta, 0.0).unwrap();
        let optimum = Problem::new(&reference, &rewards)
            .unwrap()
            .optimum(beta, "beta")
            .unwrap();
        let distance = |policy: &[f64]| -> f64 {
            policy
                .iter()
                .zip(&optimum.policy)
                .map(|(a, b)| (a - b).abs())
                .sum()
        };
        let few = fit(
            &setup,
            &rewards,
            PairSource::Sampled { pairs: 3, seed: 1 },
            50,
        )
        .unwrap();
        assert!(few.pairs_used.unwrap() <= 3);
        let some = fit(
            &setup,
            &rewards,
            PairSource::Sampled {
                pairs: 2_000,
                seed: 1,
            },
            100,
        )
        .unwrap();
        let many = fit(
            &setup,
            &rewards,
            PairSource::Sampled {
                pairs: 200_000,
                seed: 1,
            },
            100,
        )
        .unwrap();
        assert!(many.converged, "{many:?}");
        // The L1 distance shrinks like 1 / sqrt(pairs): 0.026 at 200 000 pairs here.
        assert!(distance(&many.policy) < 0.05, "{}", distance(&many.policy));
        assert!(distance(&many.policy) < distance(&some.policy));
        assert!(distance(&some.policy) < distance(&few.policy));
    }

    proptest! {
        #[test]
        fn the_loss_is_trls_and_the_gradient_matches_finite_differences(
            wr in proptest::collection::vec(0.05f64..1.0, 4),
            wp in proptest::collection::vec(0.05f64..1.0, 4),
            pairs in proptest::collection::vec((0usize..4, 0usize..4), 1..6),
            beta in 0.01f64..2.0,
            eps in 0.0f64..0.4,
        ) {
            let (reference, policy) = (normalise(&wr), normalise(&wp));
            let pairs: Vec<[usize; 2]> = pairs.iter().map(|&(a, b)| [a, b]).collect();
            let setup = Setup::new(&reference, &policy, beta, eps).unwrap();
            let out = setup.batch_loss(&pairs).unwrap();
            let trl: f64 = pairs.iter().map(|&[w, l]| trl_sigmoid_loss(
                policy[w].ln(), policy[l].ln(), reference[w].ln(), reference[l].ln(), beta, eps,
            )).sum::<f64>() / pairs.len() as f64;
            prop_assert!((out.loss - trl).abs() < 1e-12);
            let logits: Vec<f64> = policy.iter().map(|p| p.ln()).collect();
            let loss_at = |z: &[f64]| {
                let probs: Vec<f64> = log_softmax(z).iter().map(|l| l.exp()).collect();
                Setup::new(&reference, &normalise(&probs), beta, eps).unwrap().batch_loss(&pairs).unwrap().loss
            };
            for k in 0..4 {
                let h = 1e-6;
                let (mut up, mut down) = (logits.clone(), logits.clone());
                up[k] += h;
                down[k] -= h;
                let fd = (loss_at(&up) - loss_at(&down)) / (2.0 * h);
                prop_assert!((out.gradient[k] - fd).abs() < 1e-6, "{k}: {} vs {fd}", out.gradient[k]);
            }
        }
    }
}

"""numpy reference for `cargo xtask bench core`.

Computes the same two workloads as `core/examples/bench_core.rs`, the way a careful
numpy user would write them (vectorised, no Python loops over tokens or samples):

1. policy-loss: everything arlbook's `policy-loss` entry returns — per-token ratio,
   clipped-surrogate loss term, k3 KL term and gradient, the token-mean loss, clip
   fractions, ratio mean and max — over ragged sequences read from the binary file the
   Rust side wrote (so both compute on the same numbers and must agree).
2. bandit: the leave-one-out sampled policy gradient of the two-action bandit,
   N samples in groups of G, one estimate.

Prints one JSON object per workload: name, size, best seconds per call, the value.
"""

import json
import struct
import sys
import time

import numpy as np


def best_time(fn, repeats):
    best = float("inf")
    value = None
    for _ in range(repeats):
        start = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - start)
    return best, value


def load_policy_data(path):
    with open(path, "rb") as f:
        header = f.read(8 * 6)
        n_seq, n_tok, eps_low, eps_high, beta, _ = struct.unpack("<qqdddd", header)
        lengths = np.frombuffer(f.read(8 * n_seq), dtype="<i8")
        advantages = np.frombuffer(f.read(8 * n_seq), dtype="<f8")
        logp = np.frombuffer(f.read(8 * n_tok), dtype="<f8")
        logp_old = np.frombuffer(f.read(8 * n_tok), dtype="<f8")
        logp_ref = np.frombuffer(f.read(8 * n_tok), dtype="<f8")
    return lengths, advantages, logp, logp_old, logp_ref, eps_low, eps_high, beta


def policy_loss(lengths, advantages, logp, logp_old, logp_ref, eps_low, eps_high, beta):
    """The same outputs as arlbook's `policy-loss` entry: per-token ratio, loss term, KL
    term and gradient d loss / d logp, the reduced loss, clip fractions, ratio stats."""
    n = logp.size
    adv_tok = np.repeat(advantages, lengths)
    ratio = np.exp(logp - logp_old)
    clipped_high = (adv_tok > 0) & (ratio > 1.0 + eps_high)
    clipped_low = (adv_tok < 0) & (ratio < 1.0 - eps_low)
    clipped = clipped_high | clipped_low
    surrogate = np.minimum(ratio * adv_tok,
                           np.clip(ratio, 1.0 - eps_low, 1.0 + eps_high) * adv_tok)
    pg_per_token = -surrogate
    log_ref_ratio = logp_ref - logp
    exp_ref_ratio = np.exp(log_ref_ratio)
    kl = exp_ref_ratio - log_ref_ratio - 1.0
    weight = 1.0 / n  # token-mean
    d_surrogate = np.where(clipped, 0.0, adv_tok) * ratio
    gradient = weight * (-d_surrogate + beta * (1.0 - exp_ref_ratio))
    token_weights = np.full(n, weight)
    loss = (token_weights * pg_per_token).sum() + beta * (token_weights * kl).sum()
    low = np.count_nonzero(clipped_low) / n
    high = np.count_nonzero(clipped_high) / n
    return loss, low, high, ratio.mean(), ratio.max(), gradient


def bandit(n, group, p, q_a, q_b, seed):
    rng = np.random.default_rng(seed)
    chose_a = rng.random(n) < p
    success = rng.random(n) < np.where(chose_a, q_a, q_b)
    rewards = success.astype(np.float64).reshape(-1, group)
    score = (chose_a.astype(np.float64) - p).reshape(-1, group)
    baseline = (rewards.sum(axis=1, keepdims=True) - rewards) / (group - 1)
    return float(((rewards - baseline) * score).mean())


def main():
    data_path, samples, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    data = load_policy_data(data_path)
    seconds, (loss, low, high, _, _, gradient) = best_time(lambda: policy_loss(*data), repeats)
    print(json.dumps({"name": "policy-loss", "size": int(data[2].size), "seconds": seconds,
                      "value": loss, "clip_low": low, "clip_high": high,
                      "gradient_sum": float(np.abs(gradient).sum())}))
    seconds, estimate = best_time(lambda: bandit(samples, 4, 0.5, 0.75, 0.35, 7), repeats)
    print(json.dumps({"name": "bandit", "size": samples, "seconds": seconds, "value": estimate}))


if __name__ == "__main__":
    main()

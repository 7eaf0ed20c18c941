"""numpy reference for `cargo xtask bench core`.

Computes the same two workloads as `core/examples/bench_core.rs`, the way a careful
numpy user would write them (vectorised, no Python loops over tokens or samples):

1. policy-loss: the clipped surrogate with decoupled clip widths, k3 KL to a reference
   policy, global token-mean reduction and low/high clip fractions, over ragged
   sequences read from the binary file the Rust side wrote (so both compute on the
   same numbers and their losses must agree).
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
    adv_tok = np.repeat(advantages, lengths)
    ratio = np.exp(logp - logp_old)
    unclipped = ratio * adv_tok
    clipped = np.clip(ratio, 1.0 - eps_low, 1.0 + eps_high) * adv_tok
    surrogate = np.minimum(unclipped, clipped)
    log_ref_ratio = logp_ref - logp
    kl = np.exp(log_ref_ratio) - log_ref_ratio - 1.0
    n = logp.size
    loss = (beta * kl - surrogate).sum() / n
    low = np.count_nonzero((ratio < 1.0 - eps_low) & (adv_tok < 0)) / n
    high = np.count_nonzero((ratio > 1.0 + eps_high) & (adv_tok > 0)) / n
    return loss, low, high


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
    seconds, (loss, low, high) = best_time(lambda: policy_loss(*data), repeats)
    print(json.dumps({"name": "policy-loss", "size": int(data[2].size), "seconds": seconds,
                      "value": loss, "clip_low": low, "clip_high": high}))
    seconds, estimate = best_time(lambda: bandit(samples, 4, 0.5, 0.75, 0.35, 7), repeats)
    print(json.dumps({"name": "bandit", "size": samples, "seconds": seconds, "value": estimate}))


if __name__ == "__main__":
    main()

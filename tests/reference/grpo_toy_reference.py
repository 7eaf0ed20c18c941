#!/usr/bin/env python3
"""Independent numpy restatement of one update of arlbook's GRPO toy (core::math::grpo_toy).

Given a logit table z[t, prev, v] (the sampling policy), a frozen reference table, a
batch of sampled responses and the task, it recomputes from the formulas alone:

  * the rewards   r = 1{target occurs in a row in the tokens before END} - lam * len / L
  * the group advantages (mean or leave-one-out baseline; group, batch or no std
    scaling, population std, eps = 1e-6 added to the std; an all-equal group gets 0),
    and DAPO-style dynamic sampling (all-equal groups dropped);
  * E epochs of: per-token log-probabilities under the current table, ratio
    q = exp(logp - logp_old), PPO's clipped surrogate -min(q A, clip(q, 1-el, 1+eh) A)
    with its slope, the KL estimator (k1, k2, k3 of x = logp - logp_ref) times beta,
    the reduction's token weights, the chain rule through the softmax
    d logp / d z[s, j] = 1{j = token} - pi(j | s), and an SGD or Adam step;
  * the clip fractions of each epoch and the first epoch's loss.

It shares no code with the Rust crate: padded [response, position] arrays with a mask
and junk in the padding, a dense softmax over the whole table, and the optimiser
written out. Each case goes to tests/fixtures/grpo_toy/<name>.json, replayed by
core/tests/grpo_toy_reference.rs to 1e-9.

Run: python3 tests/reference/grpo_toy_reference.py   (numpy only; deterministic seed)
"""

import json
import os

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "grpo_toy")
RNG = np.random.default_rng(20250417)
END = 0
JUNK = 77  # token id written into padding; any leak would index a wrong row
ADV_EPS = 1e-6
BETA1, BETA2, ADAM_EPS = 0.9, 0.999, 1e-8


def log_softmax(z):
    m = z.max(axis=-1, keepdims=True)
    return (z - m) - np.log(np.exp(z - m).sum(axis=-1, keepdims=True))


def sample_responses(table, n):
    L = table.shape[0]
    pi = np.exp(log_softmax(table))
    out = []
    for _ in range(n):
        prev, tokens = END, []
        for t in range(L):
            tok = int(RNG.choice(table.shape[2], p=pi[t, prev]))
            tokens.append(tok)
            if tok == END:
                break
            prev = tok
        out.append(tokens)
    return out


def reward(tokens, target, lam, L):
    content = tokens[: tokens.index(END)] if END in tokens else tokens
    k = len(target)
    hit = any(content[i : i + k] == target for i in range(len(content) - k + 1))
    return (1.0 if hit else 0.0) - lam * len(tokens) / L


def advantages(rewards, G, baseline, scale):
    r = np.array(rewards).reshape(-1, G)
    batch_std = 0.0 if np.all(r == r.flat[0]) else r.std()
    out = np.zeros_like(r)
    for g in range(r.shape[0]):
        row = r[g]
        if np.all(row == row[0]):
            continue
        if baseline == "mean":
            centred = row - row.mean()
        else:
            centred = row - (row.sum() - row) / (G - 1)
        if scale == "group":
            centred = centred / (row.std() + ADV_EPS)
        elif scale == "batch":
            centred = centred / (batch_std + ADV_EPS)
        out[g] = centred
    mixed = np.array([not np.all(row == row[0]) for row in r])
    return out.reshape(-1), mixed


def padded(responses, L):
    n = len(responses)
    tok = np.full((n, L), JUNK, dtype=np.int64)
    prev = np.full((n, L), JUNK, dtype=np.int64)
    mask = np.zeros((n, L))
    for i, resp in enumerate(responses):
        for k, v in enumerate(resp):
            tok[i, k] = v
            prev[i, k] = END if k == 0 else resp[k - 1]
            mask[i, k] = 1.0
    return tok, prev, mask


def gather_logp(table, tok, prev, mask):
    lp = log_softmax(table)
    L = table.shape[0]
    pos = np.broadcast_to(np.arange(L), tok.shape)
    safe_tok = np.where(mask > 0, tok, 0)
    safe_prev = np.where(mask > 0, prev, 0)
    return np.where(mask > 0, lp[pos, safe_prev, safe_tok], 0.0)


def token_weights(mask, reduction, C):
    n = mask.shape[0]
    lengths = mask.sum(axis=1)
    if reduction == "token-mean":
        w = np.ones_like(mask) / mask.sum()
    elif reduction == "seq-mean-token-mean":
        w = np.ones_like(mask) / (n * lengths[:, None])
    elif reduction == "seq-mean-token-sum":
        w = np.ones_like(mask) / n
    elif reduction == "seq-mean-token-sum-norm":
        w = np.ones_like(mask) / C
    elif reduction == "dr_grpo":
        w = np.ones_like(mask) / (n * C)
    else:
        raise ValueError(reduction)
    return w * mask


def kl_value_and_slope(x, estimator):
    if estimator == "k1":
        return x, np.ones_like(x)
    if estimator == "k2":
        return 0.5 * x * x, x
    if estimator == "k3":
        return np.exp(-x) + x - 1.0, 1.0 - np.exp(-x)
    raise ValueError(estimator)


def one_update(case):
    V, L = case["vocab"], case["max_length"]
    table = np.array(case["table"]).reshape(L, V, V)
    ref = np.array(case["reference"]).reshape(L, V, V)
    responses, u = case["responses"], case["update"]
    rewards = [reward(r, case["target"], case["length_penalty"], L) for r in responses]
    adv, mixed = advantages(rewards, case["group_size"], case["baseline"], case["scale"])
    G = case["group_size"]
    keep = [i for i in range(len(responses)) if mixed[i // G] or not case["dynamic_sampling"]]
    kept = [responses[i] for i in keep]
    A = adv[keep][:, None]
    tok, prev, mask = padded(kept, L)
    w = token_weights(mask, u["reduction"], float(L))
    old_lp = gather_logp(table, tok, prev, mask)
    ref_lp = gather_logp(ref, tok, prev, mask)
    el, eh, beta = u["eps_low"], u["eps_high"], u["beta"]
    z = table.copy()
    m1, m2 = np.zeros_like(z), np.zeros_like(z)
    clip_low, clip_high, first_loss, guard = [], [], None, []
    pos = np.broadcast_to(np.arange(L), tok.shape)
    for epoch in range(u["epochs"]):
        lp = gather_logp(z, tok, prev, mask)
        q = np.exp(lp - old_lp)
        clipped = np.clip(q, 1.0 - el, 1.0 + eh)
        surrogate = -np.minimum(q * A, clipped * A)
        high = (A > 0) & (q > 1.0 + eh) & (mask > 0)
        low = (A < 0) & (q < 1.0 - el) & (mask > 0)
        slope = np.where(high | low, 0.0, -A * q)
        kl, kl_slope = kl_value_and_slope(lp - ref_lp, u["kl_estimator"])
        if beta == 0.0:
            kl, kl_slope = np.zeros_like(kl), np.zeros_like(kl)
        loss = float((w * (surrogate + beta * kl)).sum())
        g_logp = w * (slope + beta * kl_slope) * mask
        pi = np.exp(log_softmax(z))
        grad = np.zeros_like(z)
        size = np.zeros_like(z)
        for i, k in zip(*np.nonzero(mask)):
            t, p, v = pos[i, k], prev[i, k], tok[i, k]
            onehot = np.zeros(V)
            onehot[v] = 1.0
            grad[t, p] += g_logp[i, k] * (onehot - pi[t, p])
            size[t, p] += abs(g_logp[i, k]) * np.abs(onehot - pi[t, p])
        # Entries that cancel to (nearly) zero: under Adam their sign would be rounding.
        guard.append(bool(np.any((size > 0) & (np.abs(grad) < 1e-9 * size))))
        tokens = mask.sum()
        clip_low.append(float(low.sum() / tokens))
        clip_high.append(float(high.sum() / tokens))
        if epoch == 0:
            first_loss = loss
        if case["optimizer"] == "sgd":
            z = z - case["learning_rate"] * grad
        else:
            n = epoch + 1
            m1 = BETA1 * m1 + (1 - BETA1) * grad
            m2 = BETA2 * m2 + (1 - BETA2) * grad * grad
            z = z - case["learning_rate"] * (m1 / (1 - BETA1**n)) / (
                np.sqrt(m2 / (1 - BETA2**n)) + ADAM_EPS
            )
    if case["optimizer"] == "adam" and any(guard):
        raise RuntimeError(f"{case['name']}: a gradient entry cancels to rounding under Adam")
    return {
        "rewards": rewards,
        "advantages": [float(a) for a in adv],
        "kept": keep,
        "table_after": [float(x) for x in z.reshape(-1)],
        "clip_low": float(np.mean(clip_low)),
        "clip_high": float(np.mean(clip_high)),
        "loss": first_loss,
    }


def make_case(name, V, L, target, groups, G, update, optimizer, lr, *, baseline="mean",
              scale="group", dynamic=False, lam=0.0, spread=1.0, equal_group=False):
    table = RNG.uniform(-spread, spread, size=(L, V, V))
    reference = table + RNG.normal(0.0, 0.3, size=table.shape)
    responses = sample_responses(table, groups * G)
    # Every group holds a pass (the target, then END) and a failure (END alone), so
    # each has a signal; the rest are the policy's own samples.
    for g in range(groups):
        responses[g * G] = list(target) + [END]
        responses[g * G + 1] = [END]
    if equal_group:
        # One group where nothing passes: all of its rewards are equal.
        miss = [1, 0] if target != [1] else [2, 0]
        responses[:G] = [list(miss) for _ in range(G)]
    case = {
        "name": name,
        "vocab": V,
        "max_length": L,
        "target": target,
        "length_penalty": lam,
        "group_size": G,
        "baseline": baseline,
        "scale": scale,
        "dynamic_sampling": dynamic,
        "update": update,
        "optimizer": optimizer,
        "learning_rate": lr,
        "table": [float(x) for x in table.reshape(-1)],
        "reference": [float(x) for x in reference.reshape(-1)],
        "responses": responses,
    }
    case["expected"] = one_update(case)
    return case


def update(reduction, epochs, eps_low=0.2, eps_high=0.2, beta=0.0, kl="k3"):
    return {"reduction": reduction, "epochs": epochs, "eps_low": eps_low,
            "eps_high": eps_high, "beta": beta, "kl_estimator": kl}


def main():
    os.makedirs(OUT, exist_ok=True)
    cases = [
        make_case("token_mean_sgd", 6, 8, [2, 3], 3, 6, update("token-mean", 3), "sgd", 40.0),
        make_case("seq_mean_token_mean_adam_k3", 5, 6, [2], 3, 5,
                  update("seq-mean-token-mean", 4, 0.2, 0.28, 0.1, "k3"), "adam", 0.3),
        make_case("dr_grpo_sgd_k2_dynamic", 6, 7, [1, 2], 3, 4,
                  update("dr_grpo", 3, 0.1, 0.3, 0.05, "k2"), "sgd", 60.0,
                  dynamic=True, equal_group=True),
        make_case("seq_sum_adam_k1_loo_unscaled", 4, 5, [3], 2, 6,
                  update("seq-mean-token-sum", 3, 0.2, 0.2, 0.02, "k1"), "adam", 0.2,
                  baseline="leave-one-out", scale="none"),
        make_case("seq_sum_norm_sgd_batch_penalty", 5, 6, [2, 1], 3, 4,
                  update("seq-mean-token-sum-norm", 2, 0.3, 0.3, 0.0), "sgd", 8.0,
                  scale="batch", lam=0.5),
        make_case("token_mean_sgd_dynamic_all_kept", 6, 8, [2], 2, 8,
                  update("token-mean", 5, 0.2, 0.5, 0.2, "k3"), "sgd", 12.0, dynamic=True,
                  spread=2.0),
    ]
    for case in cases:
        path = os.path.join(OUT, case["name"] + ".json")
        with open(path, "w") as f:
            json.dump(case, f, indent=1)
            f.write("\n")
        e = case["expected"]
        print(f"{case['name']}: kept {len(e['kept'])}/{len(case['responses'])}, "
              f"clip low {e['clip_low']:.3f} high {e['clip_high']:.3f}, loss {e['loss']:.6f}")


if __name__ == "__main__":
    main()

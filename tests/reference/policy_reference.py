#!/usr/bin/env python3
"""Independent reference for arlbook's policy-optimisation math.

Re-states, in numpy on padded [batch, time] arrays with a mask, the formulas of two
public trainers as read from their sources:

  * TRL   trl/trainer/grpo_trainer.py  (advantages in _generate_and_score_completions,
          the loss in GRPOTrainer._compute_loss with its entropy bonus and its
          gradient-accumulation / global-token-count normalizers, get_gamma_weights for
          vespo, luspo's mean over the padded batch), trl/trainer/utils.py nanstd;
  * verl  verl/trainer/ppo/core_algos.py (compute_grpo_outcome_advantage,
          compute_rloo_outcome_advantage, compute_gae_advantage_return, agg_loss,
          compute_policy_loss_vanilla / _gspo / _cispo / _sapo, kl_penalty), the KL
          term of verl/workers/actor/dp_actor.py, and verl/utils/torch_functional.py
          (masked_mean, masked_var, masked_whiten).

It shares no code with the Rust crate: it works on padded tensors with junk in the
padding (so masking mistakes would show), and derives token weights by feeding unit
per-token losses through each framework's aggregation. Each case is written to
tests/fixtures/policy/<name>.json as {entry, source, request, expected}; the Rust test
core/tests/policy_fixtures.rs replays every request through arlbook_core::api::compute
and compares to 1e-9.

Deliberate omissions (documented in core::math): verl's 1e-8 guard on row lengths
(relative effect < 1e-8 on non-empty rows), verl's [-20, 20] log-ratio clamp before exp
(inactive for the ratios generated here).

Run: python3 tests/reference/policy_reference.py   (numpy only; deterministic seed).
A file whose numbers are unchanged up to the last digits of a sum (numpy versions sum
in different orders) is left as it is, so regenerating only adds or changes cases that
changed.
"""

import json
import math
import os

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "policy")
RNG = np.random.default_rng(20250101)
JUNK = 123.0  # written into padding; any leak into a result is visible


# ----------------------------------------------------------------------------- helpers

def pad(rows, fill=JUNK):
    width = max([len(r) for r in rows] + [1])
    out = np.full((len(rows), width), fill, dtype=np.float64)
    mask = np.zeros((len(rows), width), dtype=np.float64)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
        mask[i, : len(r)] = 1.0
    return out, mask


def unpad(mat, lengths):
    return [[float(x) for x in mat[i, :l]] for i, l in enumerate(lengths)]


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def random_lengths(n, low=1, high=7):
    return [int(x) for x in RNG.integers(low, high, size=n)]


def random_logps(lengths, spread=0.35):
    logp = [list(-RNG.uniform(0.05, 3.0, size=l)) for l in lengths]
    old = [[min(0.0, x + RNG.normal(0.0, spread)) for x in row] for row in logp]
    ref = [[min(0.0, x + RNG.normal(0.0, 0.5)) for x in row] for row in logp]
    return logp, old, ref


def same_numbers(a, b, rel=1e-14):
    """Equal JSON documents, numbers to within rel (the last digits of a sum can move
    with numpy's summation order from one version to the next)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_numbers(a[k], b[k], rel) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_numbers(x, y, rel) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return abs(a - b) <= rel * max(abs(a), abs(b), 1e-300)
    return a == b


def write(name, entry, source, request, expected):
    os.makedirs(OUT, exist_ok=True)
    doc = {"entry": entry, "source": source, "request": request, "expected": expected}
    path = os.path.join(OUT, name + ".json")
    # Round-trip through JSON first, so the comparison sees what the file would hold.
    doc = json.loads(json.dumps(doc))
    if os.path.exists(path):
        with open(path) as f:
            if same_numbers(json.load(f), doc):
                return  # unchanged up to rounding: keep the committed file as it is
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")


def weights_from(aggregate, mask):
    """Token weights of a linear aggregation: its value on each unit loss matrix."""
    w = np.zeros_like(mask)
    for i in range(mask.shape[0]):
        for k in range(mask.shape[1]):
            if mask[i, k] > 0:
                unit = np.zeros_like(mask)
                unit[i, k] = 1.0
                w[i, k] = aggregate(unit, mask)
    return w


# ------------------------------------------------------------------ TRL (GRPOTrainer)

def trl_nanstd(x, axis=None):
    mean = np.mean(x, axis=axis, keepdims=True)
    var = np.mean((x - mean) ** 2, axis=axis, keepdims=True)
    n = x.shape[axis] if axis is not None else x.size
    var = var * n / (n - 1) if n > 1 else var * np.nan
    return np.sqrt(var)


def trl_nanstd_nan(x):
    """trl.trainer.utils.nanstd over one array: sample std of the non-NaN values."""
    x = np.asarray(x, dtype=np.float64)
    present = x[~np.isnan(x)]
    if present.size < 2:
        return np.nan
    mean = present.mean()
    var = ((present - mean) ** 2).mean() * present.size / (present.size - 1)
    return np.sqrt(var)


def trl_advantages(groups, scale):
    """Equal-size groups as in TRL (num_generations per prompt)."""
    r = np.array(groups, dtype=np.float64)
    g = r.shape[1]
    mean = r.mean(axis=1, keepdims=True) * np.ones_like(r)
    if scale in ("group", "none"):
        std = trl_nanstd(r, axis=1) * np.ones_like(r) if g > 1 else np.zeros_like(r)
    else:
        std = trl_nanstd(r.reshape(-1), axis=0) * np.ones_like(r) if r.size > 1 else np.zeros_like(r)
    adv = r - mean
    if scale != "none":
        adv = adv / (std + 1e-4)
    return np.nan_to_num(adv, nan=0.0)


def trl_k3(logp, ref):
    return np.exp(ref - logp) - (ref - logp) - 1.0


def trl_reduce(loss_type, per_token, mask, max_completion_length):
    if loss_type in ("grpo", "sapo"):
        return ((per_token * mask).sum(-1) / np.maximum(mask.sum(-1), 1.0)).mean()
    if loss_type in ("bnpo", "dapo", "cispo"):  # one process, one accumulation step
        return (per_token * mask).sum() / max(mask.sum(), 1.0)
    if loss_type == "dr_grpo":
        return (per_token * mask).sum() / (per_token.shape[0] * max_completion_length)
    raise ValueError(loss_type)


def trl_loss(logp, old, ref, adv, mask, loss_type, eps_low, eps_high, beta, level="token",
             delta=None, tau_pos=1.0, tau_neg=1.05, max_completion_length=None):
    """GRPOTrainer._compute_loss on padded arrays; adv has shape (B,)."""
    a = adv[:, None]
    log_ratio = logp - old
    if level == "token":
        log_w = log_ratio
    else:
        log_w = ((log_ratio * mask).sum(-1) / np.maximum(mask.sum(-1), 1.0))[:, None]
    coef_1 = np.exp(log_w)
    if loss_type == "cispo":
        per_token = -np.minimum(coef_1, eps_high) * a * logp  # eps_high is epsilon_max here
    elif loss_type == "sapo":
        tau = np.where(a > 0, tau_pos, tau_neg)
        per_token = -(sigmoid(tau * (coef_1 - 1.0)) * 4.0 / tau) * a
    else:
        coef_2 = np.clip(coef_1, 1 - eps_low, 1 + eps_high)
        if delta is not None:
            coef_1 = np.minimum(coef_1, delta)
        per_token = -np.minimum(coef_1 * a, coef_2 * a)
    per_token = per_token * np.ones_like(mask)
    kl = trl_k3(logp, ref) if ref is not None else np.zeros_like(mask)
    total = per_token + beta * kl
    loss = trl_reduce(loss_type, total, mask, max_completion_length)
    pg = trl_reduce(loss_type, per_token, mask, max_completion_length)
    klr = trl_reduce(loss_type, kl, mask, max_completion_length)
    weights = weights_from(lambda u, m: trl_reduce(loss_type, u, m, max_completion_length), mask)
    c1 = np.exp(log_w) * np.ones_like(mask)
    low = ((c1 < 1 - eps_low) & (a < 0)).astype(float)
    high = ((c1 > 1 + eps_high) & (a > 0)).astype(float)
    frac = lambda x: float((x * mask).sum() / mask.sum())
    return loss, pg, klr, weights, frac(low), frac(high)


# ---------------------------------------------------------------- verl (core_algos)

def verl_grpo_advantages(groups, norm=True, eps=1e-6):
    out = []
    for g in groups:
        s = np.array(g, dtype=np.float64)
        if len(s) == 1:
            mean, std = 0.0, 1.0
        else:
            mean, std = s.mean(), s.std(ddof=1)  # torch.std is unbiased
        out.append(list((s - mean) / (std + eps)) if norm else list(s - mean))
    return out


def verl_rloo_advantages(groups):
    out = []
    for g in groups:
        s = np.array(g, dtype=np.float64)
        n = len(s)
        out.append(list(s * n / (n - 1) - s.mean() * n / (n - 1)) if n > 1 else list(s))
    return out


def verl_gae(rewards, values, gamma, lam):
    next_value, last = 0.0, 0.0
    adv = []
    for t in reversed(range(len(rewards))):
        delta = rewards[t] + gamma * next_value - values[t]
        last = delta + gamma * lam * last
        next_value = values[t]
        adv.append(last)
    adv = adv[::-1]
    return adv, [a + v for a, v in zip(adv, values)]


def verl_kl(logp, ref, kind):
    if kind in ("kl", "k1"):
        return logp - ref
    if kind in ("mse", "k2"):
        return 0.5 * (logp - ref) ** 2
    if kind in ("low_var_kl", "k3"):
        x = np.clip(ref - logp, -20, 20)
        return np.clip(np.exp(x) - x - 1, -10, 10)
    if kind == "abs":
        return np.abs(logp - ref)
    raise ValueError(kind)


def verl_agg(mat, mask, mode, loss_scale_factor=None):
    if mode == "token-mean":
        return (mat * mask).sum() / mask.sum()
    if mode == "seq-mean-token-sum":
        seq = (mat * mask).sum(-1)
        keep = (mask.sum(-1) > 0).astype(float)
        return (seq * keep).sum() / keep.sum()
    if mode == "seq-mean-token-mean":
        count = mask.sum(-1)
        seq = (mat * mask).sum(-1) / np.where(count > 0, count, 1.0)  # verl: count + 1e-8
        keep = (count > 0).astype(float)
        return (seq * keep).sum() / keep.sum()
    if mode == "seq-mean-token-sum-norm":
        factor = mask.shape[-1] if loss_scale_factor is None else loss_scale_factor
        return (mat * mask).sum() / factor
    raise ValueError(mode)


def verl_pg_losses(logp, old, adv, mask, mode, eps_low, eps_high, c=3.0, tau_pos=1.0, tau_neg=1.05):
    """Per-token losses of the verl policy-loss functions, adv shaped (B, T)."""
    log_ratio = logp - old
    if mode == "vanilla":
        ratio = np.exp(log_ratio)
        l1 = -adv * ratio
        l2 = -adv * np.clip(ratio, 1 - eps_low, 1 + eps_high)
        clip1 = np.maximum(l1, l2)
        l3 = -adv * c
        clip2 = np.minimum(l3, clip1)
        dual = ((clip1 > l3) & (adv < 0)).astype(float)
        lower = float((dual * mask).sum() / mask.sum())
        return np.where(adv < 0, clip2, clip1), lower
    if mode == "gspo":
        lengths = np.maximum(mask.sum(-1), 1.0)
        seq = (log_ratio * mask).sum(-1) / lengths
        s = np.exp(np.minimum(seq[:, None] * np.ones_like(mask), 10.0))
        l1 = -adv * s
        l2 = -adv * np.clip(s, 1 - eps_low, 1 + eps_high)
        return np.maximum(l1, l2), 0.0
    if mode == "cispo":
        ratio = np.exp(log_ratio)
        return -np.clip(ratio, 1 - eps_low, 1 + eps_high) * adv * logp, 0.0
    if mode == "sapo":
        ratio = np.exp(log_ratio)
        tau = np.where(adv > 0, tau_pos, tau_neg)
        return -(sigmoid(tau * (ratio - 1.0)) * 4.0 / tau) * adv, 0.0
    raise ValueError(mode)


def verl_loss(logp, old, ref, adv_tok, mask, mode, agg, eps_low, eps_high, kl_coef, kl_type,
              c=3.0, loss_scale_factor=None):
    if mode in ("gspo", "sapo"):
        agg = "seq-mean-token-mean"  # verl forces this for both
    losses, lower = verl_pg_losses(logp, old, adv_tok, mask, mode, eps_low, eps_high, c)
    pg = verl_agg(losses, mask, agg, loss_scale_factor)
    kl = verl_agg(verl_kl(logp, ref, kl_type), mask, agg, loss_scale_factor) if ref is not None else 0.0
    weights = weights_from(lambda u, m: verl_agg(u, m, agg, loss_scale_factor), mask)
    return pg + kl_coef * kl, pg, kl, weights, lower


# ------------------------------------------------------------------------------ cases

def ragged_request(logp, old, ref=None):
    req = {"logp": logp, "old_logp": old}
    if ref is not None:
        req["ref_logp"] = ref
    return req


def advantage_cases():
    groups = [list(RNG.integers(0, 2, size=5).astype(float)) for _ in range(4)]
    groups[0] = [1.0, 1.0, 1.0, 1.0, 1.0]  # an all-equal group
    for scale in ("group", "batch", "none"):
        adv = trl_advantages(groups, scale)
        write(f"trl_advantages_{scale}", "group-advantages", "TRL GRPOTrainer scale_rewards=" + scale,
              {"rewards": groups, "scale": scale, "std": "sample", "eps": 1e-4},
              {"advantages": [list(map(float, r)) for r in adv]})
    singles = [[0.3], [0.9]]
    write("trl_advantages_singletons", "group-advantages", "TRL GRPOTrainer, num_generations=1",
          {"rewards": singles, "std": "sample", "eps": 1e-4},
          {"advantages": [list(map(float, r)) for r in trl_advantages(singles, "group")]})
    ragged = [list(RNG.uniform(0, 1, size=n)) for n in (3, 5, 2, 4)]
    write("verl_grpo_advantages", "group-advantages", "verl compute_grpo_outcome_advantage",
          {"rewards": ragged, "std": "sample", "eps": 1e-6},
          {"advantages": verl_grpo_advantages(ragged)})
    write("verl_grpo_advantages_unnormalised", "group-advantages",
          "verl compute_grpo_outcome_advantage norm_adv_by_std_in_grpo=False",
          {"rewards": ragged, "scale": "none"},
          {"advantages": verl_grpo_advantages(ragged, norm=False)})
    write("verl_rloo_advantages", "group-advantages", "verl compute_rloo_outcome_advantage",
          {"rewards": ragged, "baseline": "rloo", "scale": "none"},
          {"advantages": verl_rloo_advantages(ragged)})
    # The article's snippet: population std (correction=0), eps 1e-6, equal groups.
    r = RNG.uniform(0, 1, size=(3, 4))
    pop = (r - r.mean(1, keepdims=True)) / (r.std(1, ddof=0, keepdims=True) + 1e-6)
    write("article_population_advantages", "group-advantages", "article section 6 snippet",
          {"rewards": r.tolist(), "std": "population", "eps": 1e-6},
          {"advantages": pop.tolist()})


def kl_cases():
    logp = list(-RNG.uniform(0.01, 4.0, size=9))
    ref = list(-RNG.uniform(0.01, 4.0, size=9))
    ref[0], logp[1] = -30.0, -40.0  # exercise both verl clamps
    for kind, ours in (("kl", "k1"), ("mse", "k2"), ("low_var_kl", "k3"), ("abs", "abs")):
        vals = verl_kl(np.array(logp), np.array(ref), kind)
        write(f"verl_kl_{ours}", "kl", "verl kl_penalty " + kind,
              {"logp": logp, "ref_logp": ref, "estimator": kind, "clamp": True},
              {"values": list(map(float, vals)), "mean": float(vals.mean())})
    lp, rf = np.array(logp[2:]), np.array(ref[2:])
    vals = trl_k3(lp, rf)
    write("trl_kl_k3", "kl", "TRL GRPOTrainer per_token_kl",
          {"logp": list(lp), "ref_logp": list(rf), "estimator": "k3"},
          {"values": list(map(float, vals)), "mean": float(vals.mean())})


def clip_cases():
    ratio = list(RNG.uniform(0.0, 4.0, size=24))
    adv = list(RNG.normal(0, 1.5, size=24))
    r, a = np.array(ratio), np.array(adv)
    losses, _ = verl_pg_losses(np.log(r), np.zeros_like(r), a, np.ones_like(r), "vanilla", 0.2, 0.28, c=3.0)
    write("verl_vanilla_dual_clip_surrogate", "clip-surrogate", "verl compute_policy_loss_vanilla per element",
          {"ratio": ratio, "advantage": adv, "eps_low": 0.2, "eps_high": 0.28, "dual_clip": 3.0},
          {"objective": list(map(float, -losses))})
    coef_2 = np.clip(r, 0.8, 1.2)
    obj = np.minimum(np.minimum(r, 2.5) * a, coef_2 * a)
    write("trl_two_sided_delta_surrogate", "clip-surrogate", "TRL GRPOTrainer delta=2.5 (== dual clip)",
          {"ratio": ratio, "advantage": adv, "eps_low": 0.2, "dual_clip": 2.5},
          {"objective": list(map(float, obj))})


def gae_cases():
    rewards = list(RNG.normal(0, 1, size=8))
    values = list(RNG.normal(0, 1, size=8))
    adv, ret = verl_gae(rewards, values, 0.97, 0.9)
    write("verl_gae_terminated", "gae", "verl compute_gae_advantage_return (before whitening)",
          {"rewards": rewards, "values": values, "gamma": 0.97, "lambda": 0.9},
          {"advantages": adv, "returns": ret})
    # Truncated: the explicit (gamma lambda)^l sum of TD residuals with V_T = bootstrap.
    boot, g, l = 0.7, 0.99, 0.8
    v_next = values[1:] + [boot]
    delta = [r + g * vn - v for r, vn, v in zip(rewards, v_next, values)]
    adv = [sum((g * l) ** (k - t) * delta[k] for k in range(t, 8)) for t in range(8)]
    write("gae_truncated_explicit_sum", "gae", "GAE paper eq. 16, explicit sum",
          {"rewards": rewards, "values": values, "gamma": g, "lambda": l,
           "truncated": True, "bootstrap_value": boot},
          {"advantages": adv, "returns": [a + v for a, v in zip(adv, values)]})


def verl_masked_whiten(x, mask, shift_mean=True):
    """verl.utils.torch_functional.masked_whiten: masked_mean adds 1e-8 to the count."""
    def mmean(v):
        return (v * mask).sum() / (mask.sum() + 1e-8)
    mean = mmean(x)
    var = mmean((x - mean) ** 2) * (mask.sum() / (mask.sum() - 1))
    out = (x - mean) / np.sqrt(var + 1e-8)
    return (out if shift_mean else out + mean), mean, var


def trl_masked_whiten(x, mask, shift_mean=True):
    """trl masked_whiten: an exact masked count."""
    def mmean(v):
        return (v * mask).sum() / mask.sum()
    mean = mmean(x)
    var = mmean((x - mean) ** 2) * (mask.sum() / (mask.sum() - 1))
    out = (x - mean) / np.sqrt(var + 1e-8)
    return (out if shift_mean else out + mean), mean, var


def verl_batch_gae(rewards, values, mask, gamma, lam, shift_mean=True):
    """verl compute_gae_advantage_return, vectorised over the batch as the torch code is."""
    next_values = np.zeros(rewards.shape[0])
    last = np.zeros(rewards.shape[0])
    reversed_adv = []
    for t in reversed(range(rewards.shape[1])):
        delta = rewards[:, t] + gamma * next_values - values[:, t]
        last_ = delta + gamma * lam * last
        next_values = values[:, t] * mask[:, t] + (1 - mask[:, t]) * next_values
        last = last_ * mask[:, t] + (1 - mask[:, t]) * last
        reversed_adv.append(last)
    adv = np.stack(reversed_adv[::-1], axis=1)
    returns = adv + values
    adv, mean, var = verl_masked_whiten(adv, mask, shift_mean)
    return adv, returns, mean, var


def trl_batch_gae(rewards, values, padding, gamma, lam):
    """trl PPOTrainer's GAE loop, then masked_whiten(~padding) and zero at padding."""
    last = 0.0
    reversed_adv = []
    length = rewards.shape[1]
    for t in reversed(range(length)):
        next_values = values[:, t + 1] if t < length - 1 else 0.0
        delta = rewards[:, t] + gamma * next_values - values[:, t]
        last = delta + gamma * lam * last
        reversed_adv.append(last)
    adv = np.stack(reversed_adv[::-1], axis=1)
    returns = adv + values
    adv, mean, var = trl_masked_whiten(adv, (~padding).astype(np.float64))
    adv = np.where(padding, 0.0, adv)
    return adv, returns, mean, var


def batch_gae_cases():
    b, t = 4, 7
    for shift_mean in (True, False):
        rewards = RNG.normal(0, 1, size=(b, t))
        values = RNG.normal(0, 1, size=(b, t))
        lengths = [7, 5, 3, 6]
        mask = np.zeros((b, t))
        for i, n in enumerate(lengths):
            mask[i, :n] = 1.0
        # Observation tokens inside two multi-turn responses.
        mask[0, 2] = mask[0, 3] = 0.0
        mask[3, 1] = 0.0
        adv, ret, mean, var = verl_batch_gae(rewards, values, mask, 0.99, 0.95, shift_mean)
        name = "shift" if shift_mean else "keep_mean"
        write(f"conv_verl_gae_batch_{name}", "gae",
              "verl compute_gae_advantage_return + masked_whiten(shift_mean=%s)" % shift_mean,
              {"rewards": rewards.tolist(), "values": values.tolist(),
               "response_mask": mask.tolist(), "gamma": 0.99, "lam": 0.95,
               "shift_mean": shift_mean},
              {"advantages": adv.tolist(), "returns": ret.tolist(),
               "whitening": {"mean": float(mean), "var": float(var)}, "convention": "verl"})
    rewards = RNG.normal(0, 1, size=(b, t))
    values = RNG.normal(0, 1, size=(b, t))
    padding = np.zeros((b, t), dtype=bool)
    for i, n in enumerate([7, 2, 4, 5]):
        padding[i, n:] = True
    rewards = np.where(padding, 0.0, rewards)
    adv, ret, mean, var = trl_batch_gae(rewards, values, padding, 1.0, 0.95)
    write("conv_trl_gae_batch", "gae", "trl PPOTrainer GAE + masked_whiten + masked_fill",
          {"rewards": rewards.tolist(), "values": values.tolist(),
           "padding_mask": padding.tolist(), "gamma": 1.0, "lam": 0.95},
          {"advantages": adv.tolist(), "returns": ret.tolist(),
           "whitening": {"mean": float(mean), "var": float(var)}, "convention": "trl"})


def trl_rloo_loss(logp, old, adv, mask, epsilon=0.2, epsilon_high=None):
    """trl RLOOTrainer._compute_loss: whole-sequence log-probabilities, one loss each."""
    eps_high = epsilon if epsilon_high is None else epsilon_high
    logps = (logp * mask).sum(1)
    old_logps = (old * mask).sum(1)
    coef_1 = np.exp(logps - old_logps)
    coef_2 = np.clip(coef_1, 1 - epsilon, 1 + eps_high)
    per_sequence = -np.minimum(coef_1 * adv, coef_2 * adv)
    loss = per_sequence.mean()
    low = ((coef_1 < 1 - epsilon) & (adv < 0)).mean()
    high = ((coef_1 > 1 + eps_high) & (adv > 0)).mean()
    # d loss / d logp_ik: torch's min passes the slope of the unclipped branch where it
    # is selected, and the clamp none outside its bounds.
    unclipped = coef_1 * adv <= coef_2 * adv
    in_band = (coef_1 >= 1 - epsilon) & (coef_1 <= 1 + eps_high)
    slope = np.where(unclipped | in_band, -adv * coef_1, 0.0) / len(adv)
    grad = slope[:, None] * mask
    return float(loss), float(low), float(high), grad


def rloo_loss_cases():
    specs = [
        ("rloo_ragged", [4, 1, 6, 3, 2], 0.2, None, 0.15),
        ("rloo_empty_row", [3, 0, 5, 2], 0.2, 0.28, 0.2),
        ("rloo_extreme", [6, 6, 6, 6], 0.2, None, 0.6),
    ]
    for name, lengths, eps, eps_high, spread in specs:
        logp, old, _ = random_logps(lengths, spread)
        if name == "rloo_extreme":
            # Two rows whose new policy is the likelier one, so the upper clip bites too.
            logp[0], old[0] = old[0], logp[0]
            logp[1], old[1] = old[1], logp[1]
        adv = RNG.normal(0, 1, size=len(lengths))
        lp, mask = pad(logp)
        ol, _ = pad(old)
        if name == "rloo_extreme":
            # Advantages whose sign matches the ratio's side, so both clips bite.
            sums = ((lp - ol) * mask).sum(1)
            adv = np.abs(adv) * np.sign(sums)
        loss, low, high, grad = trl_rloo_loss(lp, ol, adv, mask, eps, eps_high)
        req = ragged_request(logp, old)
        req.update({"advantages": list(map(float, adv)), "loss_type": "rloo", "epsilon": eps})
        if eps_high is not None:
            req["epsilon_high"] = eps_high
        write(f"conv_trl_{name}", "policy-loss", "trl RLOOTrainer._compute_loss", req,
              {"loss": loss, "pg_loss": loss, "clip_fraction": {"low": low, "high": high},
               "gradient": unpad(grad, lengths), "convention": "trl"})


def vespo_loss(logp, old, ref, adv, mask, loss_agg_mode, k_pos=2.0, lambda_pos=3.0, k_neg=3.0,
               lambda_neg=2.0, rollout_is_weights=None, kl_loss_coef=0.0, kl_loss_type="low_var_kl"):
    """compute_policy_loss_vespo of the VESPO verl recipe, plus dp_actor's KL term."""
    log_ratio = np.clip(logp - old, -20.0, 20.0)
    seq_log_ratio = (log_ratio * mask).sum(-1)
    combined = seq_log_ratio
    if rollout_is_weights is not None:
        log_tis = np.clip(np.log(np.maximum(rollout_is_weights, 1e-8)), -20.0, 20.0)
        combined = seq_log_ratio + (log_tis * mask).sum(-1)
    w = np.exp(np.clip(combined, -20.0, 20.0))
    seq_adv = adv[:, 0]
    pos = (seq_adv >= 0).astype(float)
    k = pos * k_pos + (1 - pos) * k_neg
    lam = np.maximum(pos * lambda_pos + (1 - pos) * lambda_neg, 1e-4)
    phi = np.exp(lam + k * np.log(np.maximum(w, 1e-8)) - lam * w)
    phi = np.nan_to_num(phi, nan=0.0, posinf=0.0, neginf=0.0)
    loss_mat = -phi[:, None] * adv * logp
    pg = verl_agg_exact(loss_mat, mask, loss_agg_mode)
    kl = 0.0
    if kl_loss_coef != 0.0:
        kl = verl_agg_exact(verl_kl(logp, ref, kl_loss_type), mask, loss_agg_mode)
    approx_kl = (-seq_log_ratio / np.maximum(mask.sum(-1), 1)).mean()
    return float(pg + kl_loss_coef * kl), float(pg), float(approx_kl)


def vespo_cases():
    specs = [
        ("vespo_token_mean", "token-mean", {}, False, 0.0),
        ("vespo_seq_mean_kernel_is_kl", "seq-mean-token-mean",
         {"k_pos": 1.5, "lambda_pos": 2.0, "k_neg": 4.0, "lambda_neg": 2.5}, True, 0.02),
        ("vespo_far_off_policy", "seq-mean-token-sum", {}, False, 0.0),
    ]
    for name, agg, kernel, with_is, kl_coef in specs:
        lengths = random_lengths(5, 2, 8)
        spread = 0.9 if name == "vespo_far_off_policy" else 0.08
        logp, old, ref = random_logps(lengths, spread)
        adv = RNG.normal(0, 1, size=len(lengths))
        lp, mask = pad(logp)
        ol, _ = pad(old)
        rf, _ = pad(ref)
        adv_tok = np.repeat(adv[:, None], lp.shape[1], axis=1)
        req = ragged_request(logp, old, ref if kl_coef else None)
        req.update({"advantages": list(map(float, adv)), "loss_mode": "vespo",
                    "loss_agg_mode": agg})
        kwargs = dict(kernel)
        if kernel:
            req["vespo"] = kernel
        if with_is:
            w_rows = [list(RNG.uniform(0.7, 1.3, size=l)) for l in lengths]
            req["rollout_is_weights"] = w_rows
            kwargs["rollout_is_weights"], _ = pad(w_rows, fill=1.0)
        if kl_coef:
            req["kl_loss_coef"] = kl_coef
            kwargs["kl_loss_coef"] = kl_coef
        loss, pg, approx_kl = vespo_loss(lp, ol, rf, adv_tok, mask, agg, **kwargs)
        write(f"conv_verl_{name}", "policy-loss", "VESPO recipe compute_policy_loss_vespo (+ dp_actor KL)",
              req, {"loss": loss, "pg_loss": pg, "ppo_kl": approx_kl, "convention": "verl"})


def trl_policy_cases():
    specs = [
        ("grpo", "token", {}),
        ("bnpo", "token", {}),
        ("dapo", "token", {}),
        ("dr_grpo", "token", {"max_completion_length": 9}),
        ("grpo", "sequence", {}),
        ("grpo", "token", {"delta": 2.0}),
        ("cispo", "token", {}),
        ("sapo", "token", {}),
        ("sapo", "sequence", {}),
    ]
    for loss_type, level, extra in specs:
        lengths = random_lengths(5)
        logp, old, ref = random_logps(lengths, spread=0.45)
        adv = RNG.normal(0, 1, size=len(lengths))
        lp, mask = pad(logp)
        ol, _ = pad(old)
        rf, _ = pad(ref)
        eps_low, eps_high, beta = 0.2, 0.28, 0.04
        if loss_type == "cispo":
            eps_high = 1.6  # TRL's epsilon_max, an absolute cap on the ratio
        loss, pg, kl, w, low, high = trl_loss(lp, ol, rf, adv, mask, loss_type, eps_low, eps_high, beta,
                                             level=level, delta=extra.get("delta"),
                                             max_completion_length=extra.get("max_completion_length"))
        req = ragged_request(logp, old, ref)
        req.update({"advantages": list(adv), "beta": beta, "kl_estimator": "k3",
                    "eps_low": eps_low, "eps_high": eps_high, "ratio_level": level})
        if loss_type in ("grpo", "bnpo", "dapo", "dr_grpo"):
            req["reduction"] = loss_type
        if loss_type == "dr_grpo":
            req["constant"] = extra["max_completion_length"]
        if "delta" in extra:
            req["dual_clip"] = extra["delta"]
        if loss_type == "cispo":
            req.update({"objective": "cispo", "reduction": "dapo", "eps_low": 1.0, "eps_high": eps_high - 1.0})
        if loss_type == "sapo":
            req.update({"objective": "sapo", "reduction": "grpo"})
        expected = {"loss": float(loss), "pg_loss": float(pg), "kl": float(kl),
                    "token_weights": unpad(w, lengths)}
        if loss_type in ("grpo", "bnpo", "dapo", "dr_grpo") and level == "token":
            expected["clip_fraction"] = {"low": low, "high": high}
        write(f"trl_policy_{loss_type}_{level}" + ("_delta" if "delta" in extra else ""), "policy-loss",
              f"TRL GRPOTrainer._compute_loss loss_type={loss_type} importance_sampling_level={level}",
              req, expected)


def verl_policy_cases():
    specs = [
        ("vanilla", "token-mean", "low_var_kl", {}),
        ("vanilla", "seq-mean-token-mean", "kl", {}),
        ("vanilla", "seq-mean-token-sum", "mse", {}),
        ("vanilla", "seq-mean-token-sum-norm", "low_var_kl", {}),
        ("vanilla", "seq-mean-token-sum-norm", "low_var_kl", {"loss_scale_factor": 64}),
        ("vanilla", "seq-mean-token-mean", "low_var_kl", {"empty_row": True}),
        ("vanilla", "token-mean", "kl", {"per_token_adv": True}),
        ("gspo", "seq-mean-token-mean", "low_var_kl", {}),
        ("cispo", "token-mean", "low_var_kl", {}),
        ("sapo", "seq-mean-token-mean", "low_var_kl", {}),
    ]
    for n, (mode, agg, kl_type, extra) in enumerate(specs):
        lengths = random_lengths(6)
        if extra.get("empty_row"):
            lengths[2] = 0
        logp, old, ref = random_logps(lengths, spread=0.8 if mode == "vanilla" else 0.3)
        lp, mask = pad(logp)
        ol, _ = pad(old)
        rf, _ = pad(ref)
        if extra.get("per_token_adv"):
            adv_rows = [list(RNG.normal(0, 1, size=l)) for l in lengths]
            adv_tok, _ = pad(adv_rows, fill=0.0)
            adv_field = adv_rows
        else:
            adv = RNG.normal(0, 1.2, size=len(lengths))
            adv_tok = adv[:, None] * np.ones_like(mask)
            adv_field = list(adv)
        eps_low, eps_high, coef = 0.2, 0.3, 0.02
        loss, pg, kl, w, lower = verl_loss(lp, ol, rf, adv_tok, mask, mode, agg, eps_low, eps_high, coef,
                                           kl_type, c=3.0, loss_scale_factor=extra.get("loss_scale_factor"))
        req = ragged_request(logp, old, ref)
        req.update({"advantages": adv_field, "beta": coef, "kl_estimator": kl_type, "kl_clamp": True,
                    "eps_low": eps_low, "eps_high": eps_high,
                    "reduction": "seq-mean-token-mean" if mode in ("gspo", "sapo") else agg})
        if "loss_scale_factor" in extra:  # else verl's default, the padded width
            req["constant"] = extra["loss_scale_factor"]
        if mode == "vanilla":
            req["dual_clip"] = 3.0
        if mode == "gspo":
            req["ratio_level"] = "sequence"
        if mode in ("cispo", "sapo"):
            req["objective"] = mode
        expected = {"loss": float(loss), "pg_loss": float(pg), "kl": float(kl),
                    "token_weights": unpad(w, lengths)}
        if mode == "vanilla":
            expected["clip_fraction"] = {"dual": lower}
        write(f"verl_policy_{n:02d}_{mode}_{agg}", "policy-loss",
              f"verl compute_policy_loss_{mode} + agg_loss({agg}) + kl_penalty({kl_type})", req, expected)


# ------------------------------------------- library conventions (names, edge cases)
#
# Fuller restatements of the two code paths, for requests written with each library's
# own option names: empty completions, sequence-level metrics, verl's clamps, the
# forced reductions, clip-fraction counting, importance weights and masks.

def trl_compute_loss(logp, old, ref, adv, mask, loss_type, epsilon=0.2, epsilon_high=None,
                     beta=0.0, level="token", delta=None, max_completion_length=512,
                     tau_pos=1.0, tau_neg=1.05, is_ratio=None, off_policy_mask=None,
                     use_bias_correction_kl=False):
    """GRPOTrainer._compute_loss; adv (B,), is_ratio (B,T) or (B,1), off_policy_mask (B,1)."""
    eps_low = epsilon
    eps_high = epsilon if epsilon_high is None else epsilon_high
    a = adv[:, None]
    log_ratio = logp - old
    if level == "token":
        log_w = log_ratio
    else:
        log_w = ((log_ratio * mask).sum(-1) / np.maximum(mask.sum(-1), 1.0))[:, None]
    coef_1 = np.exp(log_w)
    kl = trl_k3(logp, ref) if beta != 0.0 else np.zeros_like(mask)
    if use_bias_correction_kl:
        kl = kl * coef_1
    if loss_type == "cispo":
        per_token = -np.minimum(coef_1, eps_high) * a * logp
    elif loss_type == "sapo":
        tau = np.where(a > 0, tau_pos, tau_neg)
        per_token = -(sigmoid(tau * (coef_1 - 1.0)) * 4.0 / tau) * a
    else:
        coef_2 = np.clip(coef_1, 1 - eps_low, 1 + eps_high)
        c1 = np.minimum(coef_1, delta) if delta is not None else coef_1
        per_token = -np.minimum(c1 * a, coef_2 * a)
    per_token = per_token * np.ones_like(mask)
    if off_policy_mask is not None:
        per_token = per_token * off_policy_mask
    if is_ratio is not None:
        per_token = per_token * is_ratio
    per_token = per_token + beta * kl if beta != 0.0 else per_token

    def reduce(x):
        if loss_type in ("grpo", "sapo"):
            return ((x * mask).sum(-1) / np.maximum(mask.sum(-1), 1.0)).mean()
        if loss_type == "bnpo":
            return (x * mask).sum() / max(mask.sum(), 1.0)
        if loss_type == "dr_grpo":
            return (x * mask).sum() / (x.shape[0] * max_completion_length)
        if loss_type in ("cispo", "dapo"):
            return (x * mask).sum() / max(mask.sum(), 1.0)
        if loss_type == "luspo":
            return (x * mask.sum(1, keepdims=True)).mean()
        raise ValueError(loss_type)

    if loss_type == "luspo":
        # per_token_loss is (B, 1) at sequence level: one value per row.
        row = per_token[:, :1]
        loss = (row * mask.sum(1, keepdims=True)).mean()
    else:
        loss = reduce(per_token)

    def global_masked_mean(x):
        if x.shape[1] == 1:
            return float(x.sum() / max(x.shape[0], 1))
        return float((x * mask).sum() / max(mask.sum(), 1.0))

    metrics = {}
    if loss_type in ("grpo", "bnpo", "dr_grpo", "dapo", "luspo"):
        low = ((coef_1 < 1 - eps_low) & (a < 0)).astype(float)
        high = ((coef_1 > 1 + eps_high) & (a > 0)).astype(float)
        metrics = {"low": global_masked_mean(low), "high": global_masked_mean(high),
                   "total": global_masked_mean(np.maximum(low, high))}
    elif loss_type == "cispo":
        metrics = {"high": global_masked_mean(((coef_1 > eps_high) & (a > 0)).astype(float))}
    else:
        metrics = {"low": 0.0, "high": 0.0, "total": 0.0}
    return float(loss), metrics


def trl_vllm_is_ratio(old, sampling, mask, mode, clip_min=None, clip_max=3.0):
    diff = (old - sampling) * mask
    if mode in ("sequence_mask", "sequence_truncate"):
        diff = diff.sum(-1, keepdims=True)
    ratio = np.exp(diff)
    if mode.endswith("truncate"):
        lo = -np.inf if clip_min is None else clip_min
        return np.clip(ratio, lo, clip_max)
    lo = -np.inf if clip_min is None else clip_min
    hi = np.inf if clip_max is None else clip_max
    return np.where((ratio < lo) | (ratio > hi), 0.0, ratio)


def trl_off_policy_mask(adv, logp, sampling, mask, threshold):
    kl_div = sampling - logp
    avg = (kl_div * mask).sum(1, keepdims=True) / np.maximum(mask.sum(1, keepdims=True), 1.0)
    return ((adv[:, None] >= 0) | (avg <= threshold)).astype(float)


def verl_masked_mean(x, mask):
    return float((x * mask).sum() / (mask.sum() + 1e-8))


def verl_agg_exact(mat, mask, mode, loss_scale_factor=None):
    """agg_loss as written, with its 1e-8 guard on row lengths."""
    if mode == "seq-mean-token-mean":
        count = mask.sum(-1)
        seq = (mat * mask).sum(-1) / (count + 1e-8)
        keep = (count > 0).astype(float)
        return (seq * keep).sum() / keep.sum()
    return verl_agg(mat, mask, mode, loss_scale_factor)


def verl_actor_loss(logp, old, ref, adv, mask, loss_mode, loss_agg_mode, clip_ratio_low=0.2,
                    clip_ratio_high=0.2, clip_ratio_c=3.0, kl_loss_coef=0.0, kl_loss_type="low_var_kl",
                    tau_pos=1.0, tau_neg=1.05, rollout_is_weights=None):
    """dp_actor's loss: policy_loss_fn(loss_mode) + kl_loss_coef * agg_loss(kl_penalty)."""
    neg_kl = logp - old
    metrics = {}
    pg_agg = loss_agg_mode
    if loss_mode == "vanilla":
        neg_kl = np.clip(neg_kl, -20.0, 20.0)
        ratio = np.exp(neg_kl)
        ppo_kl = verl_masked_mean(-neg_kl, mask)
        l1 = -adv * ratio
        l2 = -adv * np.clip(ratio, 1 - clip_ratio_low, 1 + clip_ratio_high)
        clip1 = np.maximum(l1, l2)
        clipfrac = verl_masked_mean((l2 > l1).astype(float), mask)
        l3 = -adv * clip_ratio_c
        clip2 = np.minimum(l3, clip1)
        lower = verl_masked_mean(((clip1 > l3) & (adv < 0)).astype(float), mask)
        losses = np.where(adv < 0, clip2, clip1)
    elif loss_mode == "gspo":
        lengths = np.maximum(mask.sum(-1), 1.0)
        seq = (neg_kl * mask).sum(-1) / lengths
        log_s = np.minimum(seq[:, None] * np.ones_like(mask), 10.0)
        s = np.exp(log_s)
        l1 = -adv * s
        l2 = -adv * np.clip(s, 1 - clip_ratio_low, 1 + clip_ratio_high)
        losses = np.maximum(l1, l2)
        pg_agg = "seq-mean-token-mean"
        clipfrac = verl_masked_mean((l2 > l1).astype(float), mask)
        lower = 0.0
        ppo_kl = verl_masked_mean(-(logp - old), mask)
    elif loss_mode == "sapo":
        neg_kl = np.clip(neg_kl, -20.0, 20.0)
        ratio = np.exp(neg_kl)
        tau = np.where(adv > 0, tau_pos, tau_neg)
        losses = -(sigmoid(tau * (ratio - 1.0)) * 4.0 / tau) * adv
        pg_agg = "seq-mean-token-mean"
        clipfrac, lower = 0.0, 0.0
        ppo_kl = verl_masked_mean(-neg_kl, mask)
    elif loss_mode == "cispo":
        neg_kl = np.clip(neg_kl, -20.0, 20.0)
        ratio = np.exp(neg_kl)
        ppo_kl = verl_masked_mean(-neg_kl, mask)
        clipped = np.clip(ratio, 1 - clip_ratio_low, 1 + clip_ratio_high)
        losses = -clipped * adv * logp
        clipfrac = verl_masked_mean((ratio != clipped).astype(float), mask)
        lower = 0.0
    else:
        raise ValueError(loss_mode)
    if rollout_is_weights is not None:
        losses = losses * rollout_is_weights
    pg = verl_agg_exact(losses, mask, pg_agg)
    kl = 0.0
    if kl_loss_coef != 0.0:
        kl = verl_agg_exact(verl_kl(logp, ref, kl_loss_type), mask, loss_agg_mode)
    metrics = {"pg_clipfrac": clipfrac, "pg_clipfrac_lower": lower, "ppo_kl": ppo_kl}
    return float(pg + kl_loss_coef * kl), float(pg), float(kl), metrics


def entropy_from_logits(logits):
    z = logits - logits.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return -(np.exp(logp) * logp).sum(-1)


def entropy_cases():
    """The entropy bonus: TRL (token mean over the batch) and verl (by loss_agg_mode)."""
    rng = np.random.default_rng(31)
    vocab = 5
    lengths = [3, 1, 4, 2]
    logp = [list(-rng.uniform(0.05, 3.0, size=l)) for l in lengths]
    old = [[min(0.0, x + rng.normal(0.0, 0.3)) for x in row] for row in logp]
    logits = [[list(rng.normal(0, 2, size=vocab)) for _ in range(l)] for l in lengths]
    adv = rng.normal(0, 1, size=len(lengths))
    lp, mask = pad(logp)
    ol, _ = pad(old)
    ent = np.zeros_like(mask)
    for i, row in enumerate(logits):
        for k, z in enumerate(row):
            ent[i, k] = entropy_from_logits(np.array(z))
    coef = 0.01
    loss, _ = trl_compute_loss(lp, ol, None, adv, mask, "grpo", epsilon=0.2)
    trl_entropy = float((ent * mask).sum() / mask.sum())
    req = ragged_request(logp, old)
    req.update({"advantages": list(adv), "loss_type": "grpo", "logits": logits, "entropy_coef": coef})
    write("conv_trl_entropy_grpo", "policy-loss", "TRL GRPOTrainer entropy_coef (token mean)", req,
          {"loss": loss - coef * trl_entropy, "entropy": trl_entropy, "convention": "trl"})
    adv_tok = adv[:, None] * np.ones_like(mask)
    loss, pg, _, _ = verl_actor_loss(lp, ol, None, adv_tok, mask, "gspo", "token-mean",
                                      clip_ratio_low=0.2, clip_ratio_high=0.2)
    verl_entropy = float(verl_agg_exact(ent, mask, "token-mean"))
    req = ragged_request(logp, old)
    req.update({"advantages": list(adv), "loss_mode": "gspo", "loss_agg_mode": "token-mean",
                "logits": logits, "entropy_coeff": coef})
    write("conv_verl_entropy_gspo", "policy-loss",
          "verl dp_actor entropy_coeff, entropy by loss_agg_mode (the pg term forced to seq-mean-token-mean)",
          req, {"loss": loss - coef * verl_entropy, "entropy": verl_entropy, "convention": "verl"})


def convention_cases():
    rng = np.random.default_rng(20261202)

    def batch(lengths, spread):
        logp = [list(-rng.uniform(0.05, 3.0, size=l)) for l in lengths]
        old = [[min(0.0, x + rng.normal(0.0, spread)) for x in row] for row in logp]
        ref = [[min(0.0, x + rng.normal(0.0, 0.5)) for x in row] for row in logp]
        return logp, old, ref

    trl_specs = [
        ("grpo", "token", {"empty": True}),
        ("grpo", "sequence", {"empty": True}),
        ("dr_grpo", "token", {}),
        ("bnpo", "token", {"delta": 1.8}),
        ("cispo", "token", {"epsilon_high": 1.5}),
        ("sapo", "token", {"empty": True}),
        ("luspo", "sequence", {"empty": True}),
        ("dapo", "token", {"vllm": "sequence_mask"}),
        ("dapo", "token", {"vllm": "token_truncate", "clip_min": 0.5}),
        ("grpo", "token", {"off_policy": 0.05}),
        ("grpo", "token", {"bias": True}),
        ("dapo", "sequence", {"bias": True, "empty": True}),
    ]
    for n, (loss_type, level, extra) in enumerate(trl_specs):
        lengths = [int(x) for x in rng.integers(1, 7, size=6)]
        if extra.get("empty"):
            lengths[1] = 0
        logp, old, ref = batch(lengths, 0.45)
        adv = rng.normal(0, 1, size=len(lengths))
        lp, mask = pad(logp)
        ol, _ = pad(old)
        rf, _ = pad(ref)
        # TRL's luspo with beta > 0 averages the KL over padded positions too, which a
        # ragged batch does not have; arlbook refuses that combination.
        beta = 0.0 if loss_type == "luspo" else 0.04
        req = ragged_request(logp, old, ref)
        req.update({"advantages": list(adv), "loss_type": loss_type, "beta": beta,
                    "epsilon": 0.2, "importance_sampling_level": level})
        kwargs = {"epsilon": 0.2, "beta": beta, "level": level}
        if loss_type == "cispo":
            req["epsilon_high"] = kwargs["epsilon_high"] = extra["epsilon_high"]
        else:
            req["epsilon_high"] = kwargs["epsilon_high"] = 0.28
        if "delta" in extra:
            req["delta"] = kwargs["delta"] = extra["delta"]
        if "vllm" in extra:
            sampling = [[min(0.0, x + rng.normal(0.0, 0.6)) for x in row] for row in old]
            sp, _ = pad(sampling)
            req.update({"sampling_logp": sampling, "vllm_importance_sampling_mode": extra["vllm"]})
            if "clip_min" in extra:
                req["vllm_importance_sampling_clip_min"] = extra["clip_min"]
            kwargs["is_ratio"] = trl_vllm_is_ratio(ol, sp, mask, extra["vllm"], extra.get("clip_min"))
        if extra.get("bias"):
            req["use_bias_correction_kl"] = kwargs["use_bias_correction_kl"] = True
        if "off_policy" in extra:
            req["off_policy_mask_threshold"] = extra["off_policy"]
            kwargs["off_policy_mask"] = trl_off_policy_mask(adv, lp, ol, mask, extra["off_policy"])
        loss, metrics = trl_compute_loss(lp, ol, rf, adv, mask, loss_type, **kwargs)
        write(f"conv_trl_{n:02d}_{loss_type}_{level}", "policy-loss",
              f"TRL GRPOTrainer._compute_loss loss_type={loss_type} level={level} {sorted(extra)}",
              req, {"loss": loss, "clip_fraction": metrics, "convention": "trl"})

    verl_specs = [
        ("vanilla", "token-mean", {"extreme": True}),
        ("vanilla", "seq-mean-token-mean", {"empty": True}),
        ("gspo", "token-mean", {"extreme": True}),
        ("cispo", "token-mean", {}),
        ("sapo", "seq-mean-token-sum", {}),
        ("vanilla", "seq-mean-token-sum", {"weights": True, "clip_ratio_c": 2.5}),
    ]
    for n, (mode, agg, extra) in enumerate(verl_specs):
        lengths = [int(x) for x in rng.integers(1, 7, size=6)]
        if extra.get("empty"):
            lengths[3] = 0
        logp, old, ref = batch(lengths, 0.8)
        if extra.get("extreme"):
            # log-ratios past verl's clamps: +-25 per token, a row whose mean passes 10.
            old[0][0] = logp[0][0] - 25.0
            old[2] = [x - 12.0 for x in logp[2]]
            old[4][-1] = min(0.0, logp[4][-1] + 25.0)
            logp[4][-1] = old[4][-1] - 25.0
        lp, mask = pad(logp)
        ol, _ = pad(old)
        rf, _ = pad(ref)
        adv = rng.normal(0, 1.2, size=len(lengths))
        adv_tok = adv[:, None] * np.ones_like(mask)
        coef = 0.02
        req = ragged_request(logp, old, ref)
        req.update({"advantages": list(adv), "loss_mode": mode, "loss_agg_mode": agg,
                    "clip_ratio_low": 0.2, "clip_ratio_high": 0.3, "kl_loss_coef": coef,
                    "kl_loss_type": "low_var_kl"})
        kwargs = {"clip_ratio_low": 0.2, "clip_ratio_high": 0.3, "kl_loss_coef": coef}
        if "clip_ratio_c" in extra:
            req["clip_ratio_c"] = kwargs["clip_ratio_c"] = extra["clip_ratio_c"]
        if extra.get("weights"):
            w_rows = [list(rng.uniform(0.0, 2.0, size=l)) for l in lengths]
            req["rollout_is_weights"] = w_rows
            kwargs["rollout_is_weights"], _ = pad(w_rows, fill=0.0)
        loss, pg, kl, m = verl_actor_loss(lp, ol, rf, adv_tok, mask, mode, agg, **kwargs)
        expected = {"loss": loss, "pg_loss": pg, "kl": kl, "ppo_kl": m["ppo_kl"], "convention": "verl"}
        if mode == "vanilla":
            expected["clip_fraction"] = {"dual": m["pg_clipfrac_lower"]}
            expected["clip_fraction_pg"] = m["pg_clipfrac"]
        elif mode in ("cispo", "gspo", "sapo"):
            expected["clip_fraction_pg"] = m["pg_clipfrac"]
        write(f"conv_verl_{n:02d}_{mode}_{agg}", "policy-loss",
              f"verl dp_actor: compute_policy_loss_{mode} + kl_loss_coef * agg_loss({agg})",
              req, expected)

    groups = [list(rng.uniform(0, 1, size=n)) for n in (3, 1, 4, 1, 2)]
    write("conv_verl_adv_grpo_singletons", "group-advantages",
          "verl compute_grpo_outcome_advantage with groups of one",
          {"rewards": groups, "adv_estimator": "grpo"},
          {"advantages": verl_grpo_advantages(groups), "convention": "verl"})
    write("conv_verl_adv_grpo_unnormalised_singletons", "group-advantages",
          "verl compute_grpo_outcome_advantage norm_adv_by_std_in_grpo=False, groups of one",
          {"rewards": groups, "norm_adv_by_std_in_grpo": False},
          {"advantages": verl_grpo_advantages(groups, norm=False), "convention": "verl"})
    write("conv_verl_adv_rloo_singletons", "group-advantages",
          "verl compute_rloo_outcome_advantage with groups of one",
          {"rewards": groups, "adv_estimator": "rloo"},
          {"advantages": verl_rloo_advantages(groups), "convention": "verl"})
    # Several reward functions, some not scoring some completions (None -> NaN).
    G, F = 4, 3
    rpf = rng.uniform(0, 1, size=(5, G, F))
    rpf[0, 1, :] = np.nan            # a completion no function scored
    rpf[1, 2, 0] = np.nan            # one function silent on one completion
    rpf[2, :, 1] = np.nan            # one function silent on a whole group
    weights = np.array([1.0, 0.5, 2.0])
    as_json = [[[None if np.isnan(x) else float(x) for x in c] for c in g] for g in rpf]
    flat = rpf.reshape(-1, F)
    unscorable = np.isnan(flat).all(axis=1)
    for scale in ("group", "batch", "none"):
        r = np.nansum(flat * weights[None, :], axis=1)
        r[unscorable] = np.nan
        grouped = r.reshape(-1, G)
        mean = np.repeat(np.nanmean(grouped, axis=1), G)
        if scale in ("group", "none"):
            std = np.repeat(np.array([trl_nanstd_nan(g) for g in grouped]), G)
        else:
            std = np.full_like(r, trl_nanstd_nan(r))
        adv = r - mean
        if scale != "none":
            adv = adv / (std + 1e-4)
        adv = np.nan_to_num(adv, nan=0.0).reshape(-1, G)
        write(f"conv_trl_adv_multi_sum_then_normalize_{scale}", "group-advantages",
              "TRL GRPOTrainer multi_objective_aggregation=sum_then_normalize scale_rewards=" + scale,
              {"rewards_per_func": as_json, "reward_weights": list(weights), "scale_rewards": scale},
              {"advantages": adv.tolist(), "convention": "trl"})
    grouped = rpf
    mean_k = np.nanmean(grouped, axis=1, keepdims=True)
    std_k = np.stack([[trl_nanstd_nan(grouped[g, :, k]) for k in range(F)] for g in range(5)])[:, None, :]
    z = ((grouped - mean_k) / (std_k + 1e-4)).reshape(-1, F)
    r = np.nansum(z * weights[None, :], axis=1)
    r[unscorable] = np.nan
    adv = np.nan_to_num((r - np.nanmean(r)) / (trl_nanstd_nan(r) + 1e-4), nan=0.0).reshape(-1, G)
    write("conv_trl_adv_multi_normalize_then_sum", "group-advantages",
          "TRL GRPOTrainer multi_objective_aggregation=normalize_then_sum",
          {"rewards_per_func": as_json, "reward_weights": list(weights),
           "multi_objective_aggregation": "normalize_then_sum"},
          {"advantages": adv.tolist(), "convention": "trl"})
    # RLOOTrainer: weighted sum, reward clipping, KL penalty, leave-one-out, whitening.
    kl = rng.normal(0.0, 2.0, size=(5, G))
    for normalize in (False, True):
        r = np.nansum(flat * weights[None, :], axis=1)
        r[unscorable] = np.nan
        r = np.clip(r, 0.2, 2.5)
        r = r - 0.05 * kl.reshape(-1)
        grouped = r.reshape(-1, G)
        scorable = (~np.isnan(grouped)).sum(axis=1, keepdims=True)
        gsum = np.nansum(grouped, axis=1, keepdims=True)
        adv = (r - ((gsum - grouped) / (scorable - 1)).reshape(-1))
        if normalize:
            adv = (adv - np.nanmean(adv)) / (trl_nanstd_nan(adv) + 1e-4)
        adv = np.nan_to_num(adv, nan=0.0).reshape(-1, G)
        write(f"conv_trl_adv_rloo_{'normalized' if normalize else 'raw'}", "group-advantages",
              "TRL RLOOTrainer reward_clip_range=(0.2, 2.5) beta=0.05 normalize_advantages=" + str(normalize),
              {"rewards_per_func": as_json, "reward_weights": list(weights), "baseline": "rloo",
               "reward_clip_range": [0.2, 2.5], "beta": 0.05, "sequence_kl": kl.tolist(),
               "normalize_advantages": normalize},
              {"advantages": adv.tolist(), "convention": "trl"})
    entropy_cases()
    equal = [list(rng.integers(0, 2, size=4).astype(float)) for _ in range(5)]
    for scale in ("group", "batch", "none"):
        write(f"conv_trl_adv_{scale}", "group-advantages", "TRL GRPOTrainer scale_rewards=" + scale,
              {"rewards": equal, "scale_rewards": scale},
              {"advantages": [list(map(float, r)) for r in trl_advantages(equal, scale)],
               "convention": "trl"})


# --------------------------------- TRL's padded batch, issue 40 (a separate RNG stream)
#
# GRPOTrainer._compute_loss restated once more, whole, on (B, T) arrays: every loss
# type including luspo's mean over all B*T positions and vespo's get_gamma_weights, the
# entropy bonus from given per-token entropies, and the gradient-accumulation and
# global-token-count normalizers. Requests give TRL's padded rows with completion_mask;
# padding holds junk wherever TRL masks it, and real log-probabilities where TRL reads
# it (luspo's KL). Gradients are central differences of the loss (fourth order, checked
# at two step sizes), with vespo's phi held fixed as TRL's no_grad holds it.

LN_1E8 = math.log(1e-8)


def trl_gamma_weights(a, log_ratio, mask, is_ratio, k_pos, lambda_pos, k_neg, lambda_neg):
    """GRPOTrainer.get_gamma_weights: phi of the clamped sequence log-ratio, (B,1) or (B,T)."""
    seq = (np.clip(log_ratio, -20.0, 20.0) * mask).sum(-1, keepdims=True)
    if is_ratio is not None:
        with np.errstate(divide="ignore"):
            seq = seq + np.clip(np.log(is_ratio), LN_1E8, 20.0).sum(-1, keepdims=True)
    log_w = np.clip(seq, LN_1E8, 20.0)
    w = np.exp(log_w)
    nonneg = a >= 0
    k = np.where(nonneg, k_pos, k_neg)
    lam = np.maximum(np.where(nonneg, lambda_pos, lambda_neg), 1e-4)
    with np.errstate(over="ignore"):
        phi = np.exp(lam + k * log_w - lam * w)
    return np.nan_to_num(phi, nan=0.0, posinf=0.0, neginf=0.0)


def trl_loss_full(logp, old, ref, adv, mask, loss_type, epsilon=0.2, epsilon_high=None, beta=0.0,
                  level="token", delta=None, max_completion_length=512, tau_pos=1.0, tau_neg=1.05,
                  is_ratio=None, off_policy_mask=None, use_bias_correction_kl=False,
                  vespo=(2.0, 3.0, 3.0, 2.0), phi=None, entropies=None, entropy_coef=0.0,
                  gradient_accumulation_steps=1, num_items_in_batch=None, num_processes=1):
    """GRPOTrainer._compute_loss in train mode: returns (loss, entropy_loss, phi).

    adv (B,) or (B,T); is_ratio (B,T), (B,1) or None; off_policy_mask (B,1) or None;
    phi, when given, replaces vespo's gamma weights (held fixed for a gradient)."""
    eps_low = epsilon
    eps_high = epsilon if epsilon_high is None else epsilon_high
    a = adv[:, None] if adv.ndim == 1 else adv
    log_ratio = logp - old
    if level == "token":
        log_w = log_ratio
    else:
        log_w = ((log_ratio * mask).sum(-1) / np.maximum(mask.sum(-1), 1.0))[:, None]
    coef_1 = np.exp(log_w)
    if beta != 0.0:
        kl = np.exp(ref - logp) - (ref - logp) - 1.0
        if use_bias_correction_kl:
            kl = kl * coef_1
    if loss_type == "cispo":
        per_token = -np.minimum(coef_1, eps_high) * a * logp
    elif loss_type in ("grpo", "bnpo", "dr_grpo", "dapo", "luspo"):
        coef_2 = np.clip(coef_1, 1 - eps_low, 1 + eps_high)
        if delta is not None:
            coef_1 = np.minimum(coef_1, delta)
        per_token = -np.minimum(coef_1 * a, coef_2 * a)
    elif loss_type == "sapo":
        tau = np.where(a > 0, tau_pos, tau_neg)
        per_token = -(sigmoid(tau * (coef_1 - 1.0)) * 4.0 / tau) * a
    elif loss_type == "vespo":
        if phi is None:
            phi = trl_gamma_weights(a, log_ratio, mask, is_ratio, *vespo)
        per_token = -phi * a * logp
    else:
        raise ValueError(loss_type)
    if off_policy_mask is not None:
        per_token = per_token * off_policy_mask
    if is_ratio is not None and loss_type != "vespo":
        per_token = per_token * is_ratio
    if beta != 0.0:
        per_token = per_token + beta * kl
    ga = gradient_accumulation_steps
    if loss_type in ("grpo", "sapo"):
        loss = ((per_token * mask).sum(-1) / np.maximum(mask.sum(-1), 1.0)).mean()
        normalizer = ga
        loss = loss / normalizer
    elif loss_type == "bnpo":
        loss = (per_token * mask).sum() / max(mask.sum(), 1.0)
        normalizer = ga
        loss = loss / normalizer
    elif loss_type == "dr_grpo":
        loss = (per_token * mask).sum() / (per_token.shape[0] * max_completion_length)
        normalizer = ga
        loss = loss / normalizer
    elif loss_type in ("cispo", "dapo", "vespo"):
        items = mask.sum() if num_items_in_batch is None else num_items_in_batch
        normalizer = max(items, 1.0) / num_processes
        loss = (per_token * mask).sum() / normalizer
    elif loss_type == "luspo":
        loss = (per_token * mask.sum(1, keepdims=True)).mean()
        normalizer = ga
        loss = loss / normalizer
    entropy_loss = None
    if entropies is not None:
        if loss_type in ("cispo", "dapo", "vespo"):
            entropy_loss = (entropies * mask).sum() / normalizer
        else:
            entropy_loss = (entropies * mask).sum() / max(mask.sum(), 1.0) / normalizer
        loss = loss - entropy_coef * entropy_loss
    return float(loss), (None if entropy_loss is None else float(entropy_loss)), phi


def numeric_gradient(f, x):
    """d f / d x at every entry: fourth-order central differences at two step sizes,
    which must agree (no kink within reach)."""
    def at(h):
        g = np.zeros_like(x)
        for idx in np.ndindex(*x.shape):
            def moved(d):
                y = x.copy()
                y[idx] += d
                return f(y)
            g[idx] = (8 * (moved(h) - moved(-h)) - (moved(2 * h) - moved(-2 * h))) / (12 * h)
        return g
    coarse, fine = at(1e-4), at(5e-5)
    assert np.allclose(coarse, fine, rtol=1e-9, atol=1e-10), np.abs(coarse - fine).max()
    return fine


def padded_batch(rng, lengths, width, spread=0.4, fill=JUNK, interior_gap=None):
    """Log-probabilities (B, T): real in the completion, `fill` in the padding (None:
    real there too); the mask with an optional interior 0 (a tool's tokens)."""
    b = len(lengths)
    logp = -rng.uniform(0.05, 3.0, size=(b, width))
    old = np.minimum(0.0, logp + rng.normal(0.0, spread, size=(b, width)))
    ref = np.minimum(0.0, logp + rng.normal(0.0, 0.5, size=(b, width)))
    mask = np.zeros((b, width))
    for i, n in enumerate(lengths):
        mask[i, :n] = 1.0
    if interior_gap is not None:
        i, t = interior_gap
        mask[i, t] = 0.0
    if fill is not None:
        for x in (logp, old, ref):
            x[mask == 0] = fill
    return logp, old, ref, mask


def masked_whiten_cases(rng):
    for shift_mean in (True, False):
        values = rng.normal(0.3, 1.7, size=(4, 6))
        mask = np.zeros((4, 6))
        for i, n in enumerate([6, 3, 5, 2]):
            mask[i, :n] = 1.0
        mask[0, 2] = 0.0  # an observation token inside a response
        values[mask == 0] = JUNK + rng.normal(0.0, 5.0, size=int((mask == 0).sum()))
        out, mean, var = verl_masked_whiten(values, mask, shift_mean)
        name = "shift" if shift_mean else "keep_mean"
        write(f"conv_verl_masked_whiten_{name}", "masked-whiten",
              "verl torch_functional.masked_whiten(shift_mean=%s): masked_mean + unbiased masked_var, "
              "every position moved" % shift_mean,
              {"values": values.tolist(), "mask": mask.tolist(), "shift_mean": shift_mean},
              {"whitened": out.tolist(), "mean": float(mean), "var": float(var),
               "count": float(mask.sum())})


def importance_draws_cases(rng):
    mu = np.array([0.1, 0.25, 0.4, 0.25])
    pi = np.array([0.3, 0.1, 0.2, 0.4])
    values = np.array([1.0, -0.5, 0.25, 2.0])
    draws = [list(map(int, rng.choice(4, size=9, p=mu))) for _ in range(5)]
    w = pi / mu
    for self_normalized in (False, True):
        estimates, ess = [], []
        for d in draws:
            wi, fi = w[d], values[d]
            ordinary = (wi * fi).sum() / len(d)
            snis = (wi * fi).sum() / wi.sum()
            estimates.append(snis if self_normalized else ordinary)
            ess.append(wi.sum() ** 2 / (wi ** 2).sum())
        est = np.array(estimates)
        second = (mu * (w * values) ** 2).sum()
        first = (mu * w * values).sum()
        write("importance_given_draws" + ("_self_normalized" if self_normalized else ""),
              "importance-sampling-draws", "ordinary / self-normalised IS over given draws (Owen ch. 9)",
              {"mu": list(mu), "pi": list(pi), "values": list(values), "draws": draws,
               "self_normalized": self_normalized},
              {"estimates": list(map(float, est)), "mean": float(est.mean()),
               "variance": float(est.var(ddof=1)), "ess": float(np.mean(ess)),
               "exact": float((pi * values).sum()),
               "variance_ordinary_theory": float((second - first ** 2) / 9)})
    write("importance_given_draws_one_list", "importance-sampling-draws",
          "ordinary IS over one given list of draws",
          {"mu": list(mu), "pi": list(pi), "values": list(values), "draws": draws[0]},
          {"estimates": [float((w[draws[0]] * values[draws[0]]).mean())], "variance": 0.0})


def padded_request(logp, old, mask, adv, ref=None, **fields):
    req = {"logp": logp.tolist(), "old_logp": old.tolist(), "completion_mask": mask.tolist(),
           "advantages": adv.tolist()}
    if ref is not None:
        req["ref_logp"] = ref.tolist()
    req.update(fields)
    return req


def trl_padded_cases():
    rng = np.random.default_rng(20260724)
    masked_whiten_cases(rng)
    importance_draws_cases(rng)
    source = "TRL GRPOTrainer._compute_loss on the padded batch"

    # Item 2 and 4: entropies given, gradient accumulation, global token counts.
    lengths, width = [5, 2, 6, 3], 7
    logp, old, ref, mask = padded_batch(rng, lengths, width, interior_gap=(2, 3))
    adv = rng.normal(0, 1, size=4)
    ent = rng.uniform(0.1, 2.5, size=(4, width))
    ent[mask == 0] = 9.0
    for loss_type, extra in [("grpo", {"gradient_accumulation_steps": 4}),
                             ("bnpo", {"gradient_accumulation_steps": 3}),
                             ("dr_grpo", {"gradient_accumulation_steps": 2, "max_completion_length": 16}),
                             ("dapo", {"num_items_in_batch": 57, "num_processes": 2}),
                             ("cispo", {"num_items_in_batch": 40, "epsilon_high": 1.4})]:
        kw = dict(extra)
        f = lambda lp: trl_loss_full(lp, old, ref, adv, mask, loss_type, beta=0.03, entropies=ent,
                                     entropy_coef=0.02, epsilon_high=kw.get("epsilon_high", 0.28),
                                     **{k: v for k, v in kw.items() if k != "epsilon_high"})
        loss, entropy, _ = f(logp)
        req = padded_request(logp, old, mask, adv, ref, loss_type=loss_type, beta=0.03,
                             epsilon_high=kw.get("epsilon_high", 0.28), entropies=ent.tolist(),
                             entropy_coef=0.02, **{k: v for k, v in kw.items() if k != "epsilon_high"})
        expected = {"loss": loss, "entropy": entropy, "convention": "trl"}
        if loss_type != "cispo":  # cispo's clamped ratio is detached: no plain derivative
            expected["gradient"] = numeric_gradient(f_only(f), logp).tolist()
        write(f"trl_entropies_{loss_type}_padded", "policy-loss", source + f" loss_type={loss_type} {sorted(extra)}",
              req, expected)
    # The ragged form: given entropies, sapo, gradient accumulation.
    rows = [3, 1, 4]
    lp_r = [list(-rng.uniform(0.05, 3.0, size=n)) for n in rows]
    old_r = [[min(0.0, x + rng.normal(0.0, 0.3)) for x in r] for r in lp_r]
    ent_r = [list(rng.uniform(0.0, 2.0, size=n)) for n in rows]
    adv_r = rng.normal(0, 1, size=3)
    lp_p, m_p = pad(lp_r)
    ol_p, _ = pad(old_r)
    en_p, _ = pad(ent_r)
    loss, entropy, _ = trl_loss_full(lp_p, ol_p, None, adv_r, m_p, "sapo", entropies=en_p,
                                     entropy_coef=0.05, gradient_accumulation_steps=2)
    req = ragged_request(lp_r, old_r)
    req.update({"advantages": list(adv_r), "loss_type": "sapo", "entropies": ent_r,
                "entropy_coef": 0.05, "gradient_accumulation_steps": 2})
    write("trl_entropies_sapo_ragged", "policy-loss", source + " (ragged) loss_type=sapo",
          req, {"loss": loss, "entropy": entropy, "convention": "trl"})

    # Item 5: luspo with beta > 0 over every position, padding included.
    lengths, width = [4, 2, 5, 1], 5
    logp, old, ref, mask = padded_batch(rng, lengths, width, fill=None)
    old[mask == 0] = JUNK  # never read: the sequence log-ratio is masked
    adv = rng.normal(0, 1, size=4)
    for name, kw in [("beta", {"beta": 0.05}),
                     ("beta_bias_kl", {"beta": 0.05, "use_bias_correction_kl": True, "delta": 1.6})]:
        f = lambda lp: trl_loss_full(lp, old, ref, adv, mask, "luspo", level="sequence",
                                     epsilon_high=0.28, gradient_accumulation_steps=2, **kw)[0]
        loss = f(logp)
        req = padded_request(logp, old, mask, adv, ref, loss_type="luspo", epsilon_high=0.28,
                             importance_sampling_level="sequence", gradient_accumulation_steps=2, **kw)
        weights = mask.sum(1, keepdims=True) / (mask.size * 2) * np.ones_like(mask)
        write(f"trl_luspo_padded_{name}", "policy-loss", source + f" loss_type=luspo {sorted(kw)}",
              req, {"loss": loss, "gradient": numeric_gradient(f, logp).tolist(),
                    "token_weights": weights.tolist(), "convention": "trl"})
    # A per-token importance ratio whose padded values are not 1: (B,T) through it alone.
    is_ratio = rng.uniform(0.5, 1.5, size=mask.shape)
    f = lambda lp: trl_loss_full(lp, old, ref, adv, mask, "luspo", level="sequence",
                                 is_ratio=is_ratio)[0]
    req = padded_request(logp, old, mask, adv, loss_type="luspo",
                         importance_sampling_level="sequence", importance_sampling_ratio=is_ratio.tolist())
    write("trl_luspo_padded_is_ratio", "policy-loss", source + " loss_type=luspo importance_sampling_ratio (B,T)",
          req, {"loss": f(logp), "gradient": numeric_gradient(f, logp).tolist(), "convention": "trl"})
    # Equal rows and no mask: the ragged batch is its own padded batch.
    logp_e, old_e, ref_e, mask_e = padded_batch(rng, [4, 4, 4], 4, fill=None)
    adv_e = rng.normal(0, 1, size=3)
    loss = trl_loss_full(logp_e, old_e, ref_e, adv_e, mask_e, "luspo", level="sequence", beta=0.1)[0]
    req = ragged_request(logp_e.tolist(), old_e.tolist(), ref_e.tolist())
    req.update({"advantages": list(adv_e), "loss_type": "luspo", "beta": 0.1,
                "importance_sampling_level": "sequence"})
    write("trl_luspo_equal_rows_beta", "policy-loss", source + " loss_type=luspo beta=0.1, rows of equal length",
          req, {"loss": loss, "convention": "trl"})

    # Item 6: vespo, the importance ratio summed over every position.
    lengths, width = [6, 3, 5, 2, 4], 6
    logp, old, ref, mask = padded_batch(rng, lengths, width, spread=0.12)
    adv = rng.normal(0, 1, size=5)
    is_ratio = rng.uniform(0.8, 1.25, size=mask.shape)
    is_ratio[mask == 0] = rng.uniform(0.3, 3.0, size=int((mask == 0).sum()))
    kernel = (1.5, 2.5, 3.5, 2.0)
    f = lambda lp, phi=None: trl_loss_full(lp, old, ref, adv, mask, "vespo", beta=0.02, is_ratio=is_ratio,
                                           vespo=kernel, phi=phi, num_items_in_batch=30)
    loss, _, phi = f(logp)
    req = padded_request(logp, old, mask, adv, ref, loss_type="vespo", beta=0.02,
                         importance_sampling_ratio=is_ratio.tolist(), vespo_k_pos=kernel[0],
                         vespo_lambda_pos=kernel[1], vespo_k_neg=kernel[2], vespo_lambda_neg=kernel[3],
                         num_items_in_batch=30)
    grad = numeric_gradient(lambda lp: f(lp, phi)[0], logp)
    write("trl_vespo_padded_is_ratio", "policy-loss",
          source + " loss_type=vespo: get_gamma_weights sums log importance_sampling_ratio over padding too",
          req, {"loss": loss, "gradient": grad.tolist(), "convention": "trl"})
    # vLLM's token_truncate ratio from sampling_logp: 1 at the padding, truncated to 0.9.
    sampling = np.minimum(0.0, old + rng.normal(0.0, 0.15, size=old.shape))
    sampling[mask == 0] = JUNK
    ratio = np.minimum(np.exp((np.where(mask > 0, old, 0.0) - np.where(mask > 0, sampling, 0.0)) * mask), 0.9)
    loss, _, _ = trl_loss_full(logp, old, ref, adv, mask, "vespo", is_ratio=ratio)
    req = padded_request(logp, old, mask, adv, loss_type="vespo", sampling_logp=sampling.tolist(),
                         vllm_importance_sampling_mode="token_truncate",
                         vllm_importance_sampling_clip_max=0.9)
    write("trl_vespo_padded_token_truncate", "policy-loss",
          source + " loss_type=vespo with vLLM token_truncate (ratio 1 at padding, clip_max 0.9)",
          req, {"loss": loss, "convention": "trl"})
    # Ragged, per-token advantages of both signs, the off-policy mask and the bias-corrected KL.
    rows = [4, 2, 5]
    lp_r = [list(-rng.uniform(0.05, 3.0, size=n)) for n in rows]
    old_r = [[min(0.0, x + rng.normal(0.0, 0.1)) for x in r] for r in lp_r]
    ref_r = [[min(0.0, x + rng.normal(0.0, 0.4)) for x in r] for r in lp_r]
    adv_r = [list(rng.normal(0, 1, size=n)) for n in rows]
    lp_p, m_p = pad(lp_r)
    ol_p, _ = pad(old_r)
    rf_p, _ = pad(ref_r)
    ad_p, _ = pad(adv_r, fill=0.0)
    # get_off_policy_mask with (B,T) advantages: is_pos_adv is per token.
    kl_div = ol_p - lp_p
    avg = (kl_div * m_p).sum(1, keepdims=True) / np.maximum(m_p.sum(1, keepdims=True), 1.0)
    opm = ((ad_p >= 0) | (avg <= 0.02)).astype(float)
    loss, _, _ = trl_loss_full(lp_p, ol_p, rf_p, ad_p, m_p, "vespo", beta=0.04, off_policy_mask=opm,
                               use_bias_correction_kl=True)
    req = ragged_request(lp_r, old_r, ref_r)
    req.update({"advantages": adv_r, "loss_type": "vespo", "beta": 0.04,
                "off_policy_mask_threshold": 0.02, "use_bias_correction_kl": True})
    write("trl_vespo_ragged_per_token_advantages", "policy-loss",
          source + " (ragged) loss_type=vespo, per-token advantages, off-policy mask, bias-corrected KL",
          req, {"loss": loss, "convention": "trl"})


def f_only(f):
    return lambda x: f(x)[0]


def main():
    advantage_cases()
    kl_cases()
    clip_cases()
    gae_cases()
    trl_policy_cases()
    verl_policy_cases()
    convention_cases()
    batch_gae_cases()
    rloo_loss_cases()
    vespo_cases()
    trl_padded_cases()
    print("wrote", len(os.listdir(OUT)), "fixtures to", os.path.normpath(OUT))


if __name__ == "__main__":
    main()

"""The GRPO workload of `server/src/train/bench.rs` in PyTorch, for a side-by-side run.

Same model (GPT-2 layout: token + learned position embeddings, pre-norm blocks with a
fused qkv projection, 4x GELU MLP, final LayerNorm, linear head), same shapes, same
phases: a prefill and greedy decode with a key/value cache (rollout), then forward,
the clipped token-mean surrogate, backward over microbatches and one AdamW step
(update; the head and the log-softmax only at the generated tokens' positions, which
the loss reads, as TRL's `logits_to_keep` and arlbook's update do). Prints one JSON
object with the same fields as the Rust side.

The multi-turn workload plays episodes of `--turns` turns of `--turn-tokens` greedy
tokens with a tool result of `--observation-tokens` tokens between turns. Each turn
re-prefills the whole context so far and decodes with a fresh cache, as a plain
`generate` loop called once per turn does (arlbook keeps each episode's cache across
turns). The peak resident memory is the process's `ru_maxrss`.
`--device cuda` runs it on a GPU (every tensor is created there; the clock is read
after the device has finished).

    python bench/torch_policy.py --layers 2 --width 96 --heads 4 --context 640 \
        --vocab 473 --rows 64 --prompt 200 --new-tokens 32 --microbatch-rows 16
"""

import argparse
import json
import math
import resource
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.norm_attention = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)
        self.norm_mlp = nn.LayerNorm(width)
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)

    def project(self, x):
        n, t, d = x.shape
        q, k, v = self.qkv(self.norm_attention(x)).split(d, dim=2)
        shape = (n, t, self.heads, d // self.heads)
        return (q.view(shape).transpose(1, 2), k.view(shape).transpose(1, 2), v.view(shape).transpose(1, 2))

    def attend(self, q, k, v, mask):
        n, h, t, dh = q.shape
        scores = q @ k.transpose(2, 3) / math.sqrt(dh)
        scores = scores.masked_fill(mask, -1e9)
        context = torch.softmax(scores, dim=3) @ v
        return self.out(context.transpose(1, 2).reshape(n, t, h * dh))

    def mlp(self, x):
        return self.down(F.gelu(self.up(self.norm_mlp(x))))

    def forward(self, x, mask):
        q, k, v = self.project(x)
        x = x + self.attend(q, k, v, mask)
        return x + self.mlp(x), (k, v)

    def step(self, x, cache, mask):
        q, k, v = self.project(x)
        keys = torch.cat([cache[0], k], dim=2)
        values = torch.cat([cache[1], v], dim=2)
        x = x + self.attend(q, keys, values, mask)
        return x + self.mlp(x), (keys, values)


class Policy(nn.Module):
    def __init__(self, vocab, width, heads, layers, context):
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(context, width)
        self.blocks = nn.ModuleList([Block(width, heads) for _ in range(layers)])
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)

    def forward(self, ids, logits_to_keep=0):
        """Logits at the last `logits_to_keep` positions (all when 0), as TRL's
        `logits_to_keep` computes the head only where the completion's tokens are."""
        n, s = ids.shape
        positions = torch.arange(s).unsqueeze(0).expand(n, s)
        causal = torch.ones(s, s, dtype=torch.bool).triu(1).view(1, 1, s, s)
        x = self.tokens(ids) + self.positions(positions)
        for block in self.blocks:
            x, _ = block(x, causal)
        return self.head(self.norm(x[:, -logits_to_keep:, :]))

    @torch.no_grad()
    def prefill(self, ids):
        n, s = ids.shape
        positions = torch.arange(s).unsqueeze(0).expand(n, s)
        causal = torch.ones(s, s, dtype=torch.bool).triu(1).view(1, 1, s, s)
        x = self.tokens(ids) + self.positions(positions)
        caches = []
        for block in self.blocks:
            x, cache = block(x, causal)
            caches.append(cache)
        return caches, self.head(self.norm(x[:, -1:, :]))[:, 0, :]

    @torch.no_grad()
    def decode_step(self, caches, tokens, position):
        n = tokens.shape[0]
        x = self.tokens(tokens.view(n, 1)) + self.positions(torch.full((n, 1), position))
        keys = caches[0][0].shape[2] + 1
        mask = torch.zeros(1, 1, 1, keys, dtype=torch.bool)
        new = []
        for block, cache in zip(self.blocks, caches):
            x, cache = block.step(x, cache, mask)
            new.append(cache)
        return new, self.head(self.norm(x))[:, 0, :]


def surrogate(logp, logp_old, advantages, weights, eps_low=0.2, eps_high=0.28):
    ratio = torch.exp(logp - logp_old)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1 - eps_low, 1 + eps_high) * advantages
    return (-torch.minimum(unclipped, clipped) * weights).sum()


@torch.no_grad()
def multi_turn(model, prompts, observations, turn_tokens):
    """Greedy episodes, re-prefilling the whole context at every turn."""
    sequence = prompts
    turns = observations.shape[1] + 1
    for turn in range(turns):
        caches, logits = model.prefill(sequence)
        generated = []
        for i in range(turn_tokens):
            next_tokens = logits.argmax(dim=1)
            generated.append(next_tokens.view(-1, 1))
            if i + 1 < turn_tokens:
                caches, logits = model.decode_step(caches, next_tokens, sequence.shape[1] + i)
        sequence = torch.cat([sequence] + generated, dim=1)
        if turn + 1 < turns:
            sequence = torch.cat([sequence, observations[:, turn]], dim=1)
    return sequence


def peak_resident_mib():
    """`ru_maxrss` in MiB (kB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024.0 * 1024.0) if sys.platform == "darwin" else peak / 1024.0


def main():
    parser = argparse.ArgumentParser()
    for name, default in [("layers", 2), ("width", 96), ("heads", 4), ("context", 640), ("vocab", 473),
                          ("rows", 64), ("prompt", 200), ("new-tokens", 32), ("microbatch-rows", 16),
                          ("repeats", 3), ("threads", 2), ("turns", 5), ("turn-tokens", 16),
                          ("observation-tokens", 24)]:
        parser.add_argument(f"--{name}", type=int, default=default)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_default_device(args.device)

    def clock():
        if args.device != "cpu":
            torch.cuda.synchronize()
        return time.perf_counter()

    torch.manual_seed(1)
    model = Policy(args.vocab, args.width, args.heads, args.layers, args.context)
    optim = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.01)
    contexts = torch.randint(6, args.vocab, (args.rows, args.prompt))
    seq = args.prompt + args.new_tokens
    best_rollout = best_update = float("inf")
    for repeat in range(args.repeats + 1):
        t0 = clock()
        model.eval()
        caches, logits = model.prefill(contexts)
        sequences = [contexts]
        for step in range(args.new_tokens):
            next_tokens = logits.argmax(dim=1)
            sequences.append(next_tokens.view(-1, 1))
            caches, logits = model.decode_step(caches, next_tokens, args.prompt + step)
        rollout_s = clock() - t0
        sequences = torch.cat(sequences, dim=1)
        t1 = clock()
        model.train()
        optim.zero_grad()
        t = seq - 1
        weight = 1.0 / (args.rows * args.new_tokens)
        for start in range(0, args.rows, args.microbatch_rows):
            chunk = sequences[start:start + args.microbatch_rows]
            n = chunk.shape[0]
            # The loss reads the generated tokens' positions only (target j + 1 >= prompt):
            # the head runs there, as arlbook's update and TRL's logits_to_keep do.
            keep = seq - args.prompt
            mask = torch.ones(n, keep)
            logits = model(chunk[:, :t], logits_to_keep=keep)
            logp = torch.log_softmax(logits, dim=2).gather(2, chunk[:, t - keep + 1:].unsqueeze(2)).squeeze(2)
            loss = surrogate(logp, logp.detach() * mask, torch.full((n, 1), 0.5), mask * weight)
            loss.backward()
        optim.step()
        update_s = clock() - t1
        if repeat > 0:
            best_rollout = min(best_rollout, rollout_s)
            best_update = min(best_update, update_s)
    prompts = torch.randint(6, args.vocab, (args.rows, args.prompt))
    observations = torch.randint(6, args.vocab, (args.rows, max(args.turns - 1, 0), args.observation_tokens))
    model.eval()
    best_multi_turn = float("inf")
    for repeat in range(args.repeats + 1):
        t0 = clock()
        multi_turn(model, prompts, observations, args.turn_tokens)
        if repeat > 0:
            best_multi_turn = min(best_multi_turn, clock() - t0)
    print(json.dumps({
        "implementation": f"pytorch {torch.__version__} ({args.device})",
        "parameters": sum(p.numel() for p in model.parameters()),
        "rollout_s": best_rollout,
        "rollout_tokens_per_s": args.rows * args.new_tokens / best_rollout,
        "update_s": best_update,
        "update_tokens_per_s": args.rows * (seq - 1) / best_update,
        "grpo_step_s": best_rollout + best_update,
        "multi_turn_s": best_multi_turn,
        "multi_turn_tokens_per_s": args.rows * args.turns * args.turn_tokens / best_multi_turn,
        "peak_resident_mib": peak_resident_mib(),
    }))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Paired arm differences of a test report, clustered without the project's keys.

`arlbook eval` (and `cargo xtask experiment`) resample problem keys, the environment's
own name for "the same program up to its constants". This script checks that the
intervals do not depend on that choice: it prints every task's buggy listing with
`arlbook env sample --json`, canonicalises the listing itself, and clusters tasks whose
canonical listings are equal. Two canonical forms, one finer and one coarser:

- `alpha`: identifiers renamed in order of first appearance (`v0`, `v1`, ...); keywords,
  operators, layout and integer constants kept;
- `shape`: `alpha` with every integer constant replaced by `N` as well.

For each pair of arms in the report, over all tasks and per tier, it prints the mean of
the per-task differences `a_i - b_i` (success rates over the samples) and the 95%
percentile interval of the cluster bootstrap (clusters drawn with replacement, the
mean taken over the drawn tasks; 10,000 resamples, seed 0).

Usage: independent_clusters.py ARLBOOK_BINARY REPORT.json [REPORT.json ...]
"""

import json
import random
import re
import subprocess
import sys

KEYWORDS = {
    "def", "for", "in", "range", "len", "if", "else", "elif", "while", "end",
    "return", "and", "or", "not", "True", "False",
}
TOKEN = re.compile(r"[A-Za-z_][A-Za-z_0-9]*|-?\d+|\S")
RESAMPLES = 10_000


def canonical(lines, constants):
    """One canonical string for a listing (see the module docs)."""
    names = {}
    out = []
    for line in lines:
        indent = len(line) - len(line.lstrip(" "))
        tokens = []
        for token in TOKEN.findall(line):
            if token[0].isalpha() or token[0] == "_":
                if token not in KEYWORDS:
                    token = names.setdefault(token, f"v{len(names)}")
            elif token.lstrip("-").isdigit() and not constants:
                token = "N"
            tokens.append(token)
        out.append(f"{indent}:{' '.join(tokens)}")
    return "\n".join(out)


def listing(binary, split, seed):
    text = subprocess.run(
        [binary, "env", "sample", "--split", split, "--seed", str(seed), "--json"],
        check=True, capture_output=True, text=True,
    ).stdout
    return json.loads(text)["buggy_code"]


def bootstrap(values, clusters, rng):
    """Mean of `values` and the 95% percentile interval resampling `clusters`."""
    mean = sum(values) / len(values)
    sums = [(sum(values[i] for i in c), len(c)) for c in clusters]
    means = []
    for _ in range(RESAMPLES):
        drawn = rng.choices(sums, k=len(sums))
        means.append(sum(s for s, _ in drawn) / sum(n for _, n in drawn))
    means.sort()
    return mean, means[int(0.025 * RESAMPLES)], means[int(0.975 * RESAMPLES) - 1]


def clusters_of(forms, subset):
    groups = {}
    for i in subset:
        groups.setdefault(forms[i], []).append(i)
    return list(groups.values())


def report(binary, path):
    data = json.load(open(path))
    samples = data["samples"]
    tasks = data["task_list"]
    listings = [listing(binary, data["split"], t["seed"]) for t in tasks]
    rates = {arm["name"]: [s / samples for s in arm["successes"]] for arm in data["arms"]}
    subsets = {"all": list(range(len(tasks)))}
    for tier in sorted({t["tier"] for t in tasks}):
        subsets[tier] = [i for i, t in enumerate(tasks) if t["tier"] == tier]
    print(f"## {path}: {len(tasks)} tasks x {samples} samples, split {data['split']}")
    print()
    print("| form | subset | tasks | clusters | keys | pair | difference | 95% interval |")
    print("|---|---|---:|---:|---:|---|---:|---|")
    for form, constants in (("alpha", True), ("shape", False)):
        forms = [canonical(lines, constants) for lines in listings]
        for name, subset in subsets.items():
            clusters = clusters_of(forms, subset)
            keys = len({tasks[i]["key"] for i in subset})
            for pair in data["pairs"]:
                a, b = rates[pair["a"]], rates[pair["b"]]
                diff = [a[i] - b[i] for i in range(len(tasks))]
                # Indices into `diff` restricted to the subset, clusters as positions.
                local = {i: k for k, i in enumerate(subset)}
                values = [diff[i] for i in subset]
                local_clusters = [[local[i] for i in c] for c in clusters]
                mean, low, high = bootstrap(values, local_clusters, random.Random(0))
                print(
                    f"| {form} | {name} | {len(subset)} | {len(clusters)} | {keys} "
                    f"| {pair['a']} - {pair['b']} | {100 * mean:+.1f} "
                    f"| [{100 * low:.1f}, {100 * high:.1f}] |"
                )
    print()


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    for path in sys.argv[2:]:
        report(sys.argv[1], path)


if __name__ == "__main__":
    main()

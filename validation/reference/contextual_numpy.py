#!/usr/bin/env python3
"""The contextual allocators' policies, recomputed in NumPy from the papers, on the log
`aviary evaluate --decisions` wrote.

Every candidate in FOLDER/decisions.csv replayed the logged stream of segments, variants and
rewards, publishing its policy before each batch of BATCH decisions; its columns
<candidate>|pi_<v> hold the policy in force at each decision. This program replays the same
stream with its own ridge regressions per variant (A = λI + Σ x xᵀ over the variant's views,
b = Σ r x, θ̂ = A⁻¹b, x the segment's treatment-coded features) and recomputes, batch by batch:

- LinUCB (Li et al. 2010, algorithm 1): the variants with the highest θ̂·x + α√(xᵀA⁻¹x) share
  the segment;
- ε-greedy over the ridge estimates: ε/K, plus 1 − ε shared by the highest θ̂·x;
- the inverse-gap rule (Foster & Rakhlin's SquareCB, Eppo's): 1 / (K + γ (s* − sₐ)) for each
  trailing variant, the rest to the leaders;
- linear Thompson sampling (Agrawal & Goyal 2013), two variants: θ̃ₐ ~ N(θ̂ₐ, v²Aₐ⁻¹), so
  P(variant 1 best at x) = Φ((θ̂₁ − θ̂₀)·x / (v √(xᵀA₀⁻¹x + xᵀA₁⁻¹x))) exactly; Aviary's is a Monte
  Carlo estimate from `draws` joint draws, compared within five of its standard errors.

Prints, per candidate, the largest difference and the tolerance, one line each:
"<candidate> <largest> <tolerance> <decisions>". Usage:
contextual_numpy.py FOLDER --value-counts 2 [2 ...] [--batch 1000]
"""
import argparse
import csv
import math
import os
import re

import numpy as np


def features(context, value_counts):
    digits, rest = [], context
    for count in reversed(value_counts):
        digits.append(rest % count)
        rest //= count
    digits.reverse()
    x = [1.0]
    for value, count in zip(digits, value_counts):
        x += [1.0 if value == v else 0.0 for v in range(1, count)]
    return np.array(x)


def parameters(label):
    name, _, rest = label.partition("(")
    values = dict(re.findall(r"([a-z-]+)=([0-9.e+-]+)", rest))
    return name, {k: float(v) for k, v in values.items()}


def leaders(values):
    top = max(values)
    tolerance = 1e-12 * max(1.0, abs(top))
    best = [v >= top - tolerance for v in values]
    return np.array(best, dtype=float) / sum(best)


def policy(name, p, thetas, inverses, x, k):
    means = [float(t @ x) for t in thetas]
    if name == "linucb":
        alpha = p.get("alpha", 1.0)
        return leaders([m + alpha * math.sqrt(float(x @ a @ x)) for m, a in zip(means, inverses)])
    if name == "epsilon-greedy-ridge":
        eps = p["epsilon"]
        return eps / k + (1 - eps) * leaders(means)
    if name == "inverse-gap":
        gamma, floor = p.get("gamma", 100.0), p.get("floor", 0.0)
        lead, top = leaders(means), max(means)
        shares = np.array([0.0 if lead[a] > 0 else max(floor, 1 / (k + gamma * (top - means[a]))) for a in range(k)])
        return shares + (1 - shares.sum()) * lead
    if name == "linear-thompson":
        assert k == 2, "the exact P(best) is for two variants"
        v, floor = p.get("v", 0.25), p.get("floor", 0.0)
        sd = v * math.sqrt(float(x @ inverses[0] @ x) + float(x @ inverses[1] @ x))
        one = 0.5 * math.erfc(-(means[1] - means[0]) / sd / math.sqrt(2))
        free = 1 - 2 * floor
        return np.array([floor + free * (1 - one), floor + free * one])
    return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("folder")
    parser.add_argument("--value-counts", type=int, nargs="+", required=True)
    parser.add_argument("--batch", type=int, default=1000)
    arguments = parser.parse_args()
    with open(os.path.join(arguments.folder, "decisions.csv"), newline="") as f:
        reader = csv.DictReader(f)
        columns = reader.fieldnames
        rows = list(reader)
    k = len([c for c in columns if c.startswith("q_hat_")])
    candidates = []
    for c in columns:
        label = c.rsplit("|pi_", 1)[0] if "|pi_" in c else None
        if label and label not in candidates:
            candidates.append(label)
    streams = {}
    for row in rows:
        # Each log (every draw, what the server received) is a stream replayed on its own.
        streams.setdefault((row["replicate"], row["experiment"], row.get("log", "")), []).append(row)
    for label in candidates:
        name, p = parameters(label)
        largest, checked, tolerance = 0.0, 0, 1e-9
        if name == "linear-thompson":
            draws = p.get("draws", 1000.0)
            tolerance = 5 * math.sqrt(0.25 / draws)
        for stream in streams.values():
            d = len(features(0, arguments.value_counts))
            ridge = p.get("ridge", 1.0)
            gram = [ridge * np.eye(d) for _ in range(k)]
            moments = [np.zeros(d) for _ in range(k)]
            for start in range(0, len(stream), arguments.batch):
                inverses = [np.linalg.inv(a) for a in gram]
                thetas = [inv @ b for inv, b in zip(inverses, moments)]
                batch = stream[start:start + arguments.batch]
                for row in batch:
                    x = features(int(row["context"]), arguments.value_counts)
                    expected = policy(name, p, thetas, inverses, x, k)
                    if expected is None:
                        break
                    logged = np.array([float(row[f"{label}|pi_{v}"]) for v in range(k)])
                    largest = max(largest, float(np.max(np.abs(expected - logged))))
                    checked += 1
                for row in batch:
                    x = features(int(row["context"]), arguments.value_counts)
                    a = int(row["variant"])
                    gram[a] += np.outer(x, x)
                    moments[a] += float(row["reward"]) * x
        if checked:
            print(f"{label} {largest!r} {tolerance!r} {checked}")


if __name__ == "__main__":
    main()

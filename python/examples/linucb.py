"""Disjoint LinUCB (Li et al. 2010, algorithm 1) as a contextual Aviary policy, in plain Python.

Each variant keeps a ridge regression of reward on the device's context features,
A = ridge I + sum of x x^T over its views and b = sum of r x over its rewards, and a device in
context x is shown the variant with the highest upper confidence bound
theta . x + alpha sqrt(x^T A^-1 x).  A snapshot gives, per context, the leading variants equal
shares (within a relative 1e-12); a block of decisions breaks ties with the conversation's seed.
The arithmetic follows Aviary's built-in ``linucb`` step for step (a Cholesky factor of A), so
under a Myna-style scenario the two publish the same snapshots.

    aviary run Scenarios/contextual-bandits.yaml --allocator linucb \\
        --allocator 'external(command="python3 python/examples/linucb.py", context=segment, alpha=1)'
"""

import math
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import aviary_policy  # noqa: E402


class RidgeModel:
    def __init__(self, dimension, ridge):
        self.d = dimension
        self.gram = [[ridge if i == j else 0.0 for j in range(dimension)] for i in range(dimension)]
        self.moments = [0.0] * dimension
        self.factor = None
        self.estimate = None

    def add(self, x, views, reward):
        if views:
            for i in range(self.d):
                if x[i] != 0:
                    xi = x[i] * views
                    for j in range(self.d):
                        if x[j] != 0:
                            self.gram[i][j] += xi * x[j]
        if reward:
            for i in range(self.d):
                if x[i] != 0:
                    self.moments[i] += reward * x[i]
        self.factor = None

    def _refresh(self):
        if self.factor is not None:
            return
        d, L = self.d, [[0.0] * self.d for _ in range(self.d)]
        for i in range(d):
            for j in range(i + 1):
                total = self.gram[i][j]
                for k in range(j):
                    total -= L[i][k] * L[j][k]
                L[i][j] = math.sqrt(total) if i == j else total / L[j][j]
        y = list(self.moments)
        for i in range(d):
            for j in range(i):
                y[i] -= L[i][j] * y[j]
            y[i] /= L[i][i]
        for i in range(d - 1, -1, -1):
            for j in range(i + 1, d):
                y[i] -= L[j][i] * y[j]
            y[i] /= L[i][i]
        self.factor, self.estimate = L, y

    def upper_bound(self, x, alpha):
        self._refresh()
        mean = 0.0
        for i in range(self.d):
            mean += self.estimate[i] * x[i]
        spread, y = 0.0, [0.0] * self.d
        for i in range(self.d):
            value = x[i]
            for j in range(i):
                value -= self.factor[i][j] * y[j]
            y[i] = value / self.factor[i][i]
            spread += y[i] * y[i]
        return mean + alpha * math.sqrt(spread)


class LinUCB:
    def __init__(self, variants, seed, parameters, features):
        self.random = random.Random(seed)
        self.features = features
        self.alpha = float(parameters.get("alpha", 1))
        ridge = float(parameters.get("ridge", 1))
        self.models = [RidgeModel(len(features[0]), ridge) for _ in range(variants)]

    def update(self, feedback):
        for f in feedback:
            self.models[f.variant].add(self.features[f.context], f.views, f.reward)

    def shares(self, context):
        bounds = [model.upper_bound(self.features[context], self.alpha) for model in self.models]
        top = max(bounds)
        best = [b >= top - 1e-12 * max(1.0, abs(top)) for b in bounds]
        return [1.0 / sum(best) if leads else 0.0 for leads in best]

    def choose(self, n, context):
        leaders = [v for v, share in enumerate(self.shares(context)) if share > 0]
        return [leaders[self.random.randrange(len(leaders))] for _ in range(n)]

    def weights(self):
        return [self.shares(context) for context in range(len(self.features))]


if __name__ == "__main__":
    aviary_policy.main(LinUCB)

"""Epsilon-greedy as an Aviary policy: explore a random variant with probability epsilon,
otherwise show the variant with the best conversion rate so far (ties broken at random).

    aviary run --allocator 'external(command="python3 python/examples/epsilon_greedy.py", epsilon=0.1)'
"""

import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import aviary_policy  # noqa: E402


class EpsilonGreedy:
    def __init__(self, variants, seed, parameters):
        self.random = random.Random(seed)
        self.epsilon = float(parameters.get("epsilon", 0.1))
        if not 0 <= self.epsilon <= 1:
            raise ValueError("epsilon is %r; expected a rate in [0, 1]" % self.epsilon)
        self.views = [0] * variants
        self.conversions = [0] * variants

    def update(self, feedback):
        for f in feedback:
            self.views[f.variant] += f.views
            self.conversions[f.variant] += f.conversions

    def leaders(self):
        rates = [c / v if v else 0.0 for c, v in zip(self.conversions, self.views)]
        best = max(rates)
        return [i for i, r in enumerate(rates) if r == best]

    def choose(self, n):
        leaders, variants = self.leaders(), len(self.views)
        return [self.random.randrange(variants) if self.random.random() < self.epsilon else self.random.choice(leaders)
                for _ in range(n)]

    def weights(self):
        leaders, variants = self.leaders(), len(self.views)
        return [self.epsilon / variants + ((1 - self.epsilon) / len(leaders) if i in leaders else 0.0) for i in range(variants)]


if __name__ == "__main__":
    aviary_policy.main(EpsilonGreedy)

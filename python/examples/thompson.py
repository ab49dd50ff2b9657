"""Beta-Bernoulli Thompson sampling as an Aviary policy, in plain Python.

Every decision draws a conversion rate from each variant's posterior Beta(1 + s, 1 + n - s)
and shows the variant with the highest draw; the snapshot's weights are P(best): for two
variants the closed form for Beta variables with integer parameters (a normal approximation
once a variant has more than 1,000 conversions), Monte Carlo otherwise.

    aviary run --allocator thompson --allocator 'external(command="python3 python/examples/thompson.py")'
"""

import math
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import aviary_policy  # noqa: E402


class ThompsonSampling:
    def __init__(self, variants, seed, parameters):
        self.random = random.Random(seed)
        self.alpha = [1.0] * variants
        self.beta = [1.0] * variants
        self.views = [0] * variants
        self.conversions = [0] * variants

    def update(self, feedback):
        for f in feedback:
            self.views[f.variant] += f.views
            self.conversions[f.variant] += f.conversions
            self.alpha[f.variant] = 1.0 + self.conversions[f.variant]
            # Conversions can arrive before their views; the posterior stays proper.
            self.beta[f.variant] = 1.0 + max(0, self.views[f.variant] - self.conversions[f.variant])

    def choose(self, n):
        betavariate, arms = self.random.betavariate, range(len(self.alpha))
        alpha, beta = self.alpha, self.beta
        return [max(arms, key=lambda i: betavariate(alpha[i], beta[i])) for _ in range(n)]

    def weights(self):
        if len(self.alpha) == 2:
            b = probability_greater(self.alpha[1], self.beta[1], self.alpha[0], self.beta[0])
            return [1.0 - b, b]
        counts = [0] * len(self.alpha)
        for variant in self.choose(2000):
            counts[variant] += 1
        return [c / 2000 for c in counts]


def probability_greater(a_x, b_x, a_y, b_y):
    """P(X > Y) for X ~ Beta(a_x, b_x), Y ~ Beta(a_y, b_y).

    Exact (Evan Miller's closed form, a_x a whole number) while it costs at most 1,000 terms;
    beyond that both posteriors are close to normal (hundreds of conversions each) and the
    normal approximation of X - Y is used, which keeps a snapshot under a millisecond.
    """
    if a_x > 1000:
        def moments(a, b):
            return a / (a + b), a * b / ((a + b) ** 2 * (a + b + 1))
        (mean_x, var_x), (mean_y, var_y) = moments(a_x, b_x), moments(a_y, b_y)
        return 0.5 * (1 + math.erf((mean_x - mean_y) / math.sqrt(2 * (var_x + var_y))))

    def log_beta(a, b):
        return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
    total = 0.0
    for i in range(int(a_x)):
        total += math.exp(log_beta(a_y + i, b_x + b_y) - math.log(b_x + i) - log_beta(1 + i, b_x) - log_beta(a_y, b_y))
    return min(1.0, max(0.0, total))


if __name__ == "__main__":
    aviary_policy.main(ThompsonSampling)

"""Aviary's inference.csv against scipy, statsmodels, spotify-confidence and ssrm-test.

Welch t-test (where a metric is a plain mean per unit; naive estimator, non-control rows):
  * conversions_per_device rows, and conversions_per_view rows where every unit has exactly one
    view (units == views == views_sum_squares and views_conversions_sum == conversions, as in
    `aviary bandit`), where the delta-method ratio reduces exactly to a mean of conversions per
    unit (the views' variance and covariance are 0) — for both the control and the variant;
  * scipy.stats.ttest_ind_from_stats(equal_var=False): p-value -> p_value;
  * statsmodels: CompareMeans(...).ttest_ind(usevar="unequal") and .tconfint_diff(usevar="unequal")
    -> p_value, lift_ci95_low/high. CompareMeans wants data, not sums, so each arm is given as a
    frequency-weighted two-point sample (mean ± sqrt(M2/n), weight n/2 each, M2 the centred sum of
    squares): it has the arm's n, mean and variance exactly, and the Welch test depends on nothing
    else; so statsmodels computes the standard error, the Satterthwaite degrees of freedom, the
    p-value and the interval itself (unlike _tstat_generic, which would take our own dof).
  * spotify-confidence ZTest and StudentsTTest, one call per test over all the pairs (DataFrame of
    numerator = conversions, numerator_sum_squares = conversions_sum_squares, denominator = units,
    grouped by pair), difference(control, variant, absolute=True): 'p-value', 'ci_lower',
    'ci_upper' (not the Bonferroni-adjusted columns) -> p_value, lift_ci95_low/high. Two known,
    legitimate gaps, which is why the caller sets these tolerances:
      - ZTest is a z-test; Aviary's p_value is Welch t. The t distribution approaches the normal
        as O(1/dof), so they differ by O(1/n): about 1e-4 in p at n ~ 10^4 — never ~1e-12;
      - spotify takes the variance of binary data (sum_squares == sum on every row of its
        DataFrame) as p(1 − p), over n rather than n − 1: a relative O(1/n) gap in the standard
        error. Pairs are therefore sent in two batches, binary and non-binary, and the checks are
        named by batch; on the non-binary batch StudentsTTest (Welch with Satterthwaite dof) must
        agree with Aviary to rounding.
Sample ratio mismatch, for the allocators named by --fixed-split-allocators (default uniform):
  * scipy.stats.chisquare(units, expected counts) -> srm_p, every row of the look;
  * ssrm_test.sequential_p_values(per-look increments of units per variant, expected split,
    dirichlet_concentration=10000): the value after look k -> srm_p_sequential at look k.
The units per variant come from the look's naive conversions_per_view rows.

The control of an experiment is its first variant, i.e. the first variant name that appears in
the file for that scenario/allocator/replicate/experiment (Aviary writes variants in index order).
A value is compared only where Aviary's cell is filled (who refuses what is inference_gbstats.py's
business).

Usage: python inference_others.py INFERENCE_CSV [--weights W ...] [--fixed-split-allocators uniform ...]
       (--tuning is accepted and ignored, so that both reference scripts take the same arguments)
Prints one JSON object: {"reference": ..., "checks": [{"name", "rows", "max_abs_diff"}, ...]}.
max_abs_diff is null where nothing could be measured: no rows, or a comparison with a NaN or an
infinity in it (a caller should treat null as a failure unless rows is 0 by design).
Runs in a virtual environment with spotify-confidence, statsmodels, scipy and ssrm-test.
"""
import importlib.metadata
import json
import math
import warnings

import numpy as np
import pandas as pd
import scipy.stats
import spotify_confidence
from ssrm_test.ssrm_test import sequential_p_values
from statsmodels.stats.weightstats import CompareMeans, DescrStatsW

from inference_csv import (  # this folder: the CSV-reading helpers shared with inference_gbstats.py
    ALPHA, Checks, count, expected_weights, fixed_split_experiments, naive_comparisons, number,
    parse_arguments, read_rows, variant_order,
)

DIRICHLET_CONCENTRATION = 10000


# MARK: - Welch t-test: scipy and statsmodels

def one_view_per_unit(row):
    units = float(row["units"])
    return (units == float(row["views"]) == float(row["views_sum_squares"])
            and float(row["views_conversions_sum"]) == float(row["conversions"]))


def is_mean_per_unit(control, variant):
    """Whether the rows' metric is a plain mean of conversions per unit, for a Welch t-test."""
    if variant["metric"] == "conversions_per_device":
        return True
    return variant["metric"] == "conversions_per_view" and one_view_per_unit(control) and one_view_per_unit(variant)


class Arm:
    """n, mean and sample variance (n − 1) of conversions per unit, from one row's sums."""

    def __init__(self, row):
        self.n = count(row["units"])
        self.sum = float(row["conversions"])
        self.sum_squares = float(row["conversions_sum_squares"])
        self.mean = self.sum / self.n
        # Centred sum of squares; clamped because rounding can leave −1e-13 for constant data.
        self.m2 = max(self.sum_squares - self.sum * self.sum / self.n, 0.0)
        self.variance = self.m2 / (self.n - 1)

    def two_point_sample(self):
        """A weighted sample with this arm's n, mean and variance (see the module's docstring)."""
        spread = math.sqrt(self.m2 / self.n)
        return DescrStatsW(np.array([self.mean - spread, self.mean + spread]),
                           weights=np.array([self.n / 2, self.n / 2]))


def welch_pairs(rows, order):
    """(control, variant) pairs whose metric is a mean per unit and whose p_value Aviary filled.
    Arms of fewer than 2 units have no variance (and spotify rejects a whole call for one of 0
    units): a p_value there is inference_gbstats.py's refusal check's to catch, not ours to crash on."""
    return [(control, variant) for control, variant in naive_comparisons(rows, order)
            if is_mean_per_unit(control, variant) and number(variant["p_value"]) is not None
            and min(count(control["units"]), count(variant["units"])) >= 2]


def check_welch(pairs, checks):
    for control_row, variant_row in pairs:
        control, variant = Arm(control_row), Arm(variant_row)
        scipy_p = scipy.stats.ttest_ind_from_stats(
            variant.mean, math.sqrt(variant.variance), variant.n,
            control.mean, math.sqrt(control.variance), control.n, equal_var=False).pvalue
        checks["scipy ttest_ind_from_stats(equal_var=False) vs p_value"].compare(
            float(scipy_p), number(variant_row["p_value"]))

        compare = CompareMeans(variant.two_point_sample(), control.two_point_sample())
        _, statsmodels_p, _ = compare.ttest_ind(usevar="unequal")
        low, high = compare.tconfint_diff(alpha=ALPHA, usevar="unequal")
        for name, value, column in (("ttest_ind", statsmodels_p, "p_value"),
                                    ("tconfint_diff", low, "lift_ci95_low"),
                                    ("tconfint_diff", high, "lift_ci95_high")):
            aviary = number(variant_row[column])
            if aviary is not None:
                checks[f"statsmodels CompareMeans.{name}(usevar=unequal) vs {column}"].compare(float(value), aviary)


# MARK: - spotify-confidence

def spotify_differences(test, pairs):
    """spotify's absolute difference for each (control, variant) pair, in one call: a DataFrame
    row per arm, grouped by pair."""
    frame = pd.DataFrame([
        {"pair": f"pair{i}", "arm": arm, "numerator": float(row["conversions"]),
         "numerator_sum_squares": float(row["conversions_sum_squares"]), "denominator": count(row["units"])}
        for i, (control, variant) in enumerate(pairs)
        for arm, row in (("control", control), ("variant", variant))
    ])
    experiment = test(frame, numerator_column="numerator", numerator_sum_squares_column="numerator_sum_squares",
                      denominator_column="denominator", categorical_group_columns=["arm", "pair"],
                      interval_size=1 - ALPHA)
    with warnings.catch_warnings():
        # spotify-confidence 4.1 trips pandas' deprecation warnings; they say nothing about the numbers.
        warnings.simplefilter("ignore", FutureWarning)
        difference = experiment.difference(level_1="control", level_2="variant", absolute=True, groupby="pair")
    return difference.set_index("pair")


def check_spotify(pairs, checks, min_units):
    pairs = [(c, v) for c, v in pairs if min(count(c["units"]), count(v["units"])) >= min_units]

    def is_binary(row):
        return float(row["conversions_sum_squares"]) == float(row["conversions"])

    batches = {"binary: variance over n": [], "non-binary": []}
    for control, variant in pairs:
        batches["binary: variance over n" if is_binary(control) and is_binary(variant) else "non-binary"].append(
            (control, variant))
    tests = (("ZTest [z, not Welch t]", spotify_confidence.ZTest),
             ("StudentsTTest [Welch]", spotify_confidence.StudentsTTest))
    for batch, batch_pairs in batches.items():
        if not batch_pairs:
            continue
        for name, test in tests:
            difference = spotify_differences(test, batch_pairs)
            for i, (_, variant) in enumerate(batch_pairs):
                result = difference.loc[f"pair{i}"]
                for field, column in (("p-value", "p_value"), ("ci_lower", "lift_ci95_low"),
                                      ("ci_upper", "lift_ci95_high")):
                    aviary = number(variant[column])
                    if aviary is not None:
                        checks[f"spotify {name} {field} ({batch}) vs {column}"].compare(float(result[field]), aviary)


# MARK: - Sample ratio mismatch: scipy and ssrm-test

def check_srm(rows, order, weights, allocators, checks):
    for experiment, looks in fixed_split_experiments(rows, order, allocators).items():
        expected = np.array(expected_weights(weights, len(order[experiment])))
        null = expected / expected.sum()
        # ssrm-test accumulates per-look counts: what each variant gained since the previous look.
        increments, previous = [], [0] * len(null)
        for look, units, _ in looks:
            step = [now - before for now, before in zip(units, previous)]
            if min(step) < 0:
                raise SystemExit(f"units fell at look {look} of {experiment}")
            increments.append(step)
            previous = units
        sequential = sequential_p_values(increments, null, dirichlet_concentration=DIRICHLET_CONCENTRATION)

        for (_, units, look_rows), p_sequential in zip(looks, sequential):
            total = sum(units)
            # chisquare has no answer for an empty look (0/0); gbstats' check_srm says 1 there.
            p = scipy.stats.chisquare(units, f_exp=null * total).pvalue if total > 0 else None
            for row in look_rows:
                aviary = number(row["srm_p"])
                if aviary is not None and p is not None:
                    checks["scipy chisquare vs srm_p"].compare(float(p), aviary)
                aviary = number(row["srm_p_sequential"])
                checks["ssrm_test: aviary srm_p_sequential empty"].count(aviary is None)
                if aviary is not None:
                    checks["ssrm_test sequential_p_values vs srm_p_sequential"].compare(float(p_sequential), aviary)


def main():
    args = parse_arguments(__doc__.splitlines()[0])
    rows = read_rows(args.inference_csv)
    order = variant_order(rows)
    checks = Checks()
    pairs = welch_pairs(rows, order)
    check_welch(pairs, checks)
    check_spotify(pairs, checks, args.spotify_min_units)
    check_srm(rows, order, args.weights, set(args.fixed_split_allocators), checks)
    versions = ", ".join(f"{p} {importlib.metadata.version(p)}"
                         for p in ("scipy", "statsmodels", "spotify-confidence", "ssrm-test"))
    print(json.dumps({"reference": versions, "checks": [check.report() for check in checks.values()]}, indent=2))


if __name__ == "__main__":
    main()

"""Writes a small synthetic inference.csv to self-test inference_gbstats.py and inference_others.py.

The sufficient statistics are random but valid; the "Aviary" columns are filled by closed forms
written here from the papers and the column spec, not by any of the libraries the reference scripts
call (scipy.stats supplies only the t, normal and χ² distributions). So both scripts must report
max_abs_diff at rounding level (~1e-12) on this file, except the checks that compare different
tests by design (spotify's z-test, and spotify's variance over n of binary data, against Welch).
That shows the scripts read the columns and call the libraries the way the spec means.

Contents:
  * scenario `bandit` (as `aviary bandit`: every view its own unit, binary conversions, so units =
    views = views_sum_squares and conversions = conversions_sum_squares = views_conversions_sum),
    allocators `uniform` (the expected split) and `thompson` (a drifting split, as an adaptive
    allocator's), 3 variants, looks at 60, 6,000 and 20,000 views; the 60-view look leaves some arms
    with no conversion, where the tests cannot be computed and their cells stay empty;
  * scenario `fleet`, allocator `uniform`, 2 variants: devices with several views and conversions,
    so conversions_per_view is a true ratio (delta method) and conversions_per_device a
    non-binary mean;
  * every scenario has the metrics conversions_per_view and conversions_per_device, and the
    estimators naive, stratified and aipw; the non-naive rows carry decoy values (naive's + 0.5),
    which would show at once if a reference script read them.

Usage: python make_inference_fixture.py OUT_CSV [--seed 7] [--replicates 3] [--tuning 5000]
                                        [--weights W ...]
--weights sets the uniform allocator's expected split (and so the number of variants of both
scenarios); pass the same --weights (and --tuning) to the reference scripts.
Runs in either reference venv (numpy and scipy).
"""
import argparse
import csv
import math

import numpy as np
from scipy.stats import chi2, norm, t

ALPHA = 0.05
DIRICHLET_CONCENTRATION = 10000
SRM_THRESHOLD = 0.001
METRICS = ("conversions_per_view", "conversions_per_device")
ESTIMATORS = ("naive", "stratified", "aipw")
COLUMNS = [
    "scenario", "allocator", "replicate", "experiment", "look", "look_hours", "look_views", "variant",
    "metric", "estimator", "units", "views", "conversions", "conversions_sum_squares", "views_sum_squares",
    "views_conversions_sum", "estimate", "estimate_ci95_low", "estimate_ci95_high", "truth", "estimate_covered",
    "lift", "lift_ci95_low", "lift_ci95_high", "lift_truth", "covered", "relative_lift",
    "relative_lift_ci95_low", "relative_lift_ci95_high", "p_value", "p_value_sequential",
    "lift_ci95_low_sequential", "lift_ci95_high_sequential", "chance_to_beat_control", "srm_p",
    "srm_p_sequential", "srm_p_oracle", "srm_alarm", "decision", "decision_correct",
]
LIFT_COLUMNS = ["lift", "lift_ci95_low", "lift_ci95_high", "relative_lift", "relative_lift_ci95_low",
                "relative_lift_ci95_high", "p_value", "p_value_sequential", "lift_ci95_low_sequential",
                "lift_ci95_high_sequential", "chance_to_beat_control"]
# Columns a non-naive estimator fills with decoys.
DECOYED = ["estimate"] + LIFT_COLUMNS


# MARK: - Closed forms

class Sums:
    """Σ over units of 1, views, conversions, conversions², views², views·conversions."""

    def __init__(self):
        self.units = self.views = self.conversions = 0
        self.conversions_sum_squares = self.views_sum_squares = self.views_conversions_sum = 0

    def add_units(self, views, conversions):
        """Adds units given their views and conversions (arrays, one entry per unit)."""
        views, conversions = np.asarray(views, dtype=np.int64), np.asarray(conversions, dtype=np.int64)
        self.units += len(views)
        self.views += int(views.sum())
        self.conversions += int(conversions.sum())
        self.conversions_sum_squares += int((conversions * conversions).sum())
        self.views_sum_squares += int((views * views).sum())
        self.views_conversions_sum += int((views * conversions).sum())

    def copy(self):
        other = Sums()
        other.__dict__.update(self.__dict__)
        return other


def sample_moments(n, total, total_squares):
    """Mean and unbiased variance from a sum and a sum of squares."""
    mean = total / n if n > 0 else 0.0
    variance = (total_squares - total * total / n) / (n - 1) if n > 1 else 0.0
    return mean, variance


def metric_moments(sums, metric):
    """The metric's value and the per-unit variance of its estimator (n · Var(estimate))."""
    n = sums.units
    mean_c, var_c = sample_moments(n, sums.conversions, sums.conversions_sum_squares)
    if metric == "conversions_per_device":
        return mean_c, var_c
    # Ratio of means Σc / Σv, first-order delta method:
    # Var ≈ (σ_c² − 2 r σ_cv + r² σ_v²) / μ_v², with r = μ_c / μ_v.
    mean_v, var_v = sample_moments(n, sums.views, sums.views_sum_squares)
    if mean_v == 0:
        return 0.0, 0.0
    covariance = (sums.views_conversions_sum - sums.conversions * sums.views / n) / (n - 1) if n > 1 else 0.0
    ratio = mean_c / mean_v
    return ratio, (var_c - 2 * ratio * covariance + ratio * ratio * var_v) / (mean_v * mean_v)


def comparison(control, variant, tuning):
    """Aviary's lift columns for one variant against the control; None where undefined.
    control, variant: (n, mean, per-unit variance)."""
    (n_a, mean_a, var_a), (n_b, mean_b, var_b) = control, variant
    cells = dict.fromkeys(LIFT_COLUMNS)
    if n_a == 0 or n_b == 0:
        return cells
    difference = mean_b - mean_a
    cells["lift"] = difference
    if mean_a != 0:
        cells["relative_lift"] = difference / mean_a
    if var_a <= 0 or var_b <= 0:
        return cells  # no test without a variance on both sides

    # Welch: separate variances, Welch–Satterthwaite degrees of freedom.
    part_a, part_b = var_a / n_a, var_b / n_b
    variance = part_a + part_b
    dof = variance * variance / (part_a * part_a / (n_a - 1) + part_b * part_b / (n_b - 1))
    se = math.sqrt(variance)
    z = difference / se
    cells["chance_to_beat_control"] = float(norm.cdf(z))  # flat prior: the posterior is N(lift, se²)
    if mean_a == 0:
        return cells
    quantile = float(t.ppf(1 - ALPHA / 2, dof))
    cells["p_value"] = float(2 * t.sf(abs(z), dof))
    cells["lift_ci95_low"], cells["lift_ci95_high"] = difference - quantile * se, difference + quantile * se
    # Relative lift: delta method for (μ_b − μ_a)/μ_a, with the absolute test's degrees of freedom.
    relative_se = math.sqrt(var_b / (mean_a ** 2 * n_b) + var_a * mean_b ** 2 / (mean_a ** 4 * n_a))
    relative = cells["relative_lift"]
    cells["relative_lift_ci95_low"] = relative - quantile * relative_se
    cells["relative_lift_ci95_high"] = relative + quantile * relative_se

    # Asymptotic confidence sequence of Waudby-Smith et al. (2023, arXiv:2103.06476v7): rho from
    # eq. 161 for the tuning sample size; interval eq. 9; p-value the inverse of the e-value, eq. 155.
    total = n_a + n_b
    rho2 = (-2 * math.log(ALPHA) + math.log(-2 * math.log(ALPHA) + 1)) / tuning
    spread = total * rho2 + 1  # N ρ² + 1
    unit_variance = variance * total
    half_width = math.sqrt(unit_variance * 2 * spread * math.log(math.sqrt(spread) / ALPHA) / (total * total * rho2))
    cells["lift_ci95_low_sequential"] = difference - half_width
    cells["lift_ci95_high_sequential"] = difference + half_width
    log_e_value = rho2 * total * z * z / (2 * spread) - 0.5 * math.log(spread)
    cells["p_value_sequential"] = min(1.0, math.exp(-log_e_value))
    return cells


def pearson_srm(units, weights):
    """Pearson χ² goodness of fit of the units against the split `weights`."""
    total = sum(units)
    if total == 0:
        return 1.0
    shares = np.asarray(weights, dtype=float) / sum(weights)
    statistic = sum((o - total * s) ** 2 / (total * s) for o, s in zip(units, shares))
    return float(chi2.sf(statistic, len(units) - 1))


def sequential_srm(increments, weights):
    """Lindon & Malek (2020), "Anytime-valid inference for multinomial count data": the Bayes factor
    of a Dirichlet(concentration · null) alternative against the multinomial null, accumulated over
    batches; the p-value after batch k is min over batches ≤ k of 1 / Bayes factor (and ≤ 1).
    The multinomial coefficients of the two likelihoods cancel."""
    null = [w / sum(weights) for w in weights]
    alpha = [DIRICHLET_CONCENTRATION * p for p in null]
    log_bayes_factor, p_value, p_values = 0.0, 1.0, []
    for counts in increments:
        log_alternative = (math.lgamma(sum(alpha)) - sum(math.lgamma(a) for a in alpha)
                           + sum(math.lgamma(a + x) for a, x in zip(alpha, counts))
                           - math.lgamma(sum(alpha) + sum(counts)))
        log_null = sum(x * math.log(p) for x, p in zip(counts, null) if x > 0)
        log_bayes_factor += log_alternative - log_null
        alpha = [a + x for a, x in zip(alpha, counts)]
        p_value = min(p_value, math.exp(-log_bayes_factor))
        p_values.append(p_value)
    return p_values


# MARK: - Synthetic experiments

def bandit_looks(rng, variants, weights, allocator):
    """Per look: (look_views, look_hours, sums per variant, truth per metric per variant, split)."""
    rates = np.linspace(0.04, 0.06, variants)
    sums = [Sums() for _ in range(variants)]
    looks, previous = [], 0
    for look, look_views in enumerate((60, 6000, 20000)):
        if allocator == "uniform":
            split = np.asarray(weights, dtype=float) / sum(weights)
        else:  # drifts toward the best variant, as an adaptive allocator's would
            split = np.exp(look * 0.8 * np.arange(variants))
            split /= split.sum()
        counts = rng.multinomial(look_views - previous, split)
        for i, n in enumerate(counts):
            conversions = rng.binomial(1, rates[i], size=n)
            sums[i].add_units(np.ones(n, dtype=np.int64), conversions)
        previous = look_views
        truth = {metric: list(rates) for metric in METRICS}  # one view per device: both are the rate
        looks.append((look_views, None, [s.copy() for s in sums], truth, split))
    return looks


def fleet_looks(rng, variants, weights):
    rates = np.linspace(0.05, 0.055, variants)
    mean_views = 2.5  # 1 + Poisson(1.5)
    split = np.asarray(weights, dtype=float) / sum(weights)
    sums = [Sums() for _ in range(variants)]
    looks = []
    for hours, devices in ((24, 400), (48, 800), (72, 800)):
        for i, n in enumerate(rng.multinomial(devices, split)):
            views = 1 + rng.poisson(mean_views - 1, size=n)
            sums[i].add_units(views, rng.binomial(views, rates[i]))
        truth = {"conversions_per_view": list(rates), "conversions_per_device": list(rates * mean_views)}
        looks.append((sum(s.views for s in sums), hours, [s.copy() for s in sums], truth, split))
    return looks


def experiment_rows(scenario, allocator, replicate, names, looks, weights, tuning, fixed_split):
    rows, increments, previous = [], [], [0] * len(names)
    for look, (look_views, look_hours, sums, truth, split) in enumerate(looks, start=1):
        units = [s.units for s in sums]
        increments.append([now - before for now, before in zip(units, previous)])
        previous = units
        srm = {"srm_p": pearson_srm(units, weights), "srm_p_oracle": pearson_srm(units, split),
               "srm_p_sequential": sequential_srm(increments, weights)[-1] if fixed_split else None}
        srm["srm_alarm"] = int(srm["srm_p"] < SRM_THRESHOLD)
        for i, name in enumerate(names):
            for estimator in ESTIMATORS:
                for metric in METRICS:
                    s = sums[i]
                    mean, variance = metric_moments(s, metric)
                    control_mean, control_variance = metric_moments(sums[0], metric)
                    half = 1.96 * math.sqrt(variance / s.units) if s.units else None
                    row = {
                        "scenario": scenario, "allocator": allocator, "replicate": replicate,
                        "experiment": "bandit" if scenario == "bandit" else "paywall", "look": look,
                        "look_hours": look_hours, "look_views": look_views, "variant": name, "metric": metric,
                        "estimator": estimator, "units": s.units, "views": s.views, "conversions": s.conversions,
                        "conversions_sum_squares": s.conversions_sum_squares,
                        "views_sum_squares": s.views_sum_squares, "views_conversions_sum": s.views_conversions_sum,
                        "estimate": mean if s.units else None,
                        "estimate_ci95_low": mean - half if half is not None else None,
                        "estimate_ci95_high": mean + half if half is not None else None,
                        "truth": truth[metric][i], **srm, "decision": "none",
                        "decision_correct": int(truth[metric][0] == max(truth[metric])),
                    }
                    if half is not None:
                        row["estimate_covered"] = int(row["estimate_ci95_low"] <= row["truth"] <= row["estimate_ci95_high"])
                    if i > 0:
                        row.update(comparison((sums[0].units, control_mean, control_variance),
                                              (s.units, mean, variance), tuning))
                        row["lift_truth"] = truth[metric][i] - truth[metric][0]
                        if row["lift_ci95_low"] is not None:
                            row["covered"] = int(row["lift_ci95_low"] <= row["lift_truth"] <= row["lift_ci95_high"])
                    if estimator != "naive":
                        for column in DECOYED:
                            if row.get(column) is not None:
                                row[column] += 0.5
                    rows.append(row)
    return rows


def cell(value):
    if value is None:
        return ""
    if isinstance(value, (float, np.floating)):
        return repr(float(value))  # round-trips exactly
    return str(value)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_csv")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--replicates", type=int, default=3)
    parser.add_argument("--tuning", type=float, default=5000)
    parser.add_argument("--weights", type=float, nargs="+")
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    bandit_variants = len(args.weights) if args.weights else 3
    fleet_variants = len(args.weights) if args.weights else 2
    rows = []
    for allocator in ("uniform", "thompson"):
        weights = args.weights or [1.0] * bandit_variants
        names = [chr(ord("A") + i) for i in range(bandit_variants)]
        for replicate in range(args.replicates):
            looks = bandit_looks(rng, bandit_variants, weights, allocator)
            rows += experiment_rows("bandit", allocator, replicate, names, looks, weights, args.tuning,
                                    fixed_split=allocator == "uniform")
    weights = args.weights or [1.0] * fleet_variants
    names = ["control"] + [f"treatment{i}" for i in range(1, fleet_variants)]
    for replicate in range(args.replicates):
        looks = fleet_looks(rng, fleet_variants, weights)
        rows += experiment_rows("fleet", "uniform", replicate, names, looks, weights, args.tuning, fixed_split=True)

    with open(args.out_csv, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        for row in rows:
            writer.writerow(cell(row.get(column)) for column in COLUMNS)
    # Control rows have no lift, so this counts the variants whose tests could not be computed.
    untestable = sum(1 for r in rows if r["estimator"] == "naive" and r.get("lift") is not None
                     and r.get("p_value") is None)
    print(f"wrote {len(rows)} rows to {args.out_csv}; {untestable} naive rows with a lift but no test")


if __name__ == "__main__":
    main()

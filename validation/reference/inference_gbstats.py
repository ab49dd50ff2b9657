"""Aviary's inference.csv against GrowthBook's gbstats (0.8.0): the tests Aviary says it mirrors.

For every naive-estimator row that is not the control's, the control's and the variant's gbstats
statistics are rebuilt from the sufficient-statistic columns (RatioStatistic for
conversions_per_view, SampleMeanStatistic for conversions_per_device, as the column spec says)
and handed to gbstats' own test classes:

    TwoSidedTTest, absolute      expected, ci, p_value -> lift, lift_ci95_low/high, p_value
    TwoSidedTTest, relative      expected, ci          -> relative_lift, relative_lift_ci95_low/high
    SequentialTwoSidedTTest      p_value, ci           -> p_value_sequential,
      (absolute, tuning --tuning)                         lift_ci95_low/high_sequential
    EffectBayesianABTest         chance_to_win         -> chance_to_beat_control
      (absolute, default prior)

A value is compared only where gbstats computes one and Aviary's cell is filled. Where gbstats
gives up (its default output, error_message set: the control's mean is 0, or a variance is 0),
Aviary must leave the test's inferential cells (p-values, intervals, chance to win) empty; each
test has a check "...: gbstats refuses <=> aviary empty" whose max_abs_diff is the number of rows
that break that rule. The point estimates (lift, relative_lift) are not in that rule: a lift is
still defined when a variance is 0, so Aviary may well write it.

srm_p is checked with gbstats' check_srm for the allocators named by --fixed-split-allocators
(a fixed split has one expected split; an adaptive allocator has none), against every row of the
look. The units per variant come from the look's naive conversions_per_view rows.

The control of an experiment is its first variant, i.e. the first variant name that appears in
the file for that scenario/allocator/replicate/experiment (Aviary writes variants in index order).

Usage: python inference_gbstats.py INFERENCE_CSV [--tuning 5000] [--weights W ...]
                                   [--fixed-split-allocators uniform ...]
Prints one JSON object: {"reference": ..., "checks": [{"name", "rows", "max_abs_diff"}, ...]}.
max_abs_diff is null where nothing could be measured: no rows, or a comparison with a NaN or an
infinity in it (a caller should treat null as a failure unless rows is 0 by design).
Runs in a virtual environment with gbstats==0.8.0 (which pins its own numpy and pandas).
"""
import importlib.metadata
import json

from gbstats.bayesian.tests import EffectBayesianABTest, EffectBayesianConfig
from gbstats.frequentist.tests import (
    FrequentistConfig,
    SequentialConfig,
    SequentialTwoSidedTTest,
    TwoSidedTTest,
)
from gbstats.gbstats import check_srm
from gbstats.models.statistics import RatioStatistic, SampleMeanStatistic

from inference_csv import (  # this folder: the CSV-reading helpers shared with inference_others.py
    ALPHA, EXPERIMENT, Checks, count, expected_weights, fixed_split_experiments, key, naive_comparisons,
    number, parse_arguments, read_rows, variant_order,
)


# MARK: - gbstats

def statistic(row):
    """The gbstats statistic of one row, exactly as the column spec prescribes."""
    n = count(row["units"])
    conversions = SampleMeanStatistic(n=n, sum=float(row["conversions"]),
                                      sum_squares=float(row["conversions_sum_squares"]))
    if row["metric"] == "conversions_per_device":
        return conversions
    if row["metric"] == "conversions_per_view":
        views = SampleMeanStatistic(n=n, sum=float(row["views"]), sum_squares=float(row["views_sum_squares"]))
        return RatioStatistic(n=n, m_statistic=conversions, d_statistic=views,
                              m_d_sum_of_products=float(row["views_conversions_sum"]))
    raise SystemExit(f"unknown metric {row['metric']!r}")


def tests(tuning):
    """(test name, constructor, point columns, inferential columns); each column maps to a function
    of gbstats' result. Configs are built once: gbstats' pydantic dataclasses validate on creation."""
    absolute = FrequentistConfig(difference_type="absolute", alpha=ALPHA)
    relative = FrequentistConfig(difference_type="relative", alpha=ALPHA)
    sequential = SequentialConfig(difference_type="absolute", alpha=ALPHA, sequential_tuning_parameter=tuning)
    bayesian = EffectBayesianConfig(difference_type="absolute")  # default prior: improper, so flat
    return [
        ("TwoSidedTTest(absolute)", lambda a, b: TwoSidedTTest(a, b, absolute),
         {"lift": lambda r: r.expected},
         {"p_value": lambda r: r.p_value, "lift_ci95_low": lambda r: r.ci[0],
          "lift_ci95_high": lambda r: r.ci[1]}),
        ("TwoSidedTTest(relative)", lambda a, b: TwoSidedTTest(a, b, relative),
         {"relative_lift": lambda r: r.expected},
         {"relative_lift_ci95_low": lambda r: r.ci[0], "relative_lift_ci95_high": lambda r: r.ci[1]}),
        (f"SequentialTwoSidedTTest(absolute, tuning {tuning:g})", lambda a, b: SequentialTwoSidedTTest(a, b, sequential),
         {},
         {"p_value_sequential": lambda r: r.p_value, "lift_ci95_low_sequential": lambda r: r.ci[0],
          "lift_ci95_high_sequential": lambda r: r.ci[1]}),
        ("EffectBayesianABTest(absolute)", lambda a, b: EffectBayesianABTest(a, b, bayesian),
         {},
         {"chance_to_beat_control": lambda r: r.chance_to_win}),
    ]


def check_tests(rows, order, tuning, checks):
    all_tests = tests(tuning)
    for control, variant in naive_comparisons(rows, order):
        for name, make, point_columns, inferential_columns in all_tests:
            # Fresh statistics per test: EffectBayesianABTest and TTest keep references to them.
            result = make(statistic(control), statistic(variant)).compute_result()
            refused = result.error_message is not None
            filled = [number(variant[column]) is not None for column in inferential_columns]
            checks[f"{name}: gbstats refuses <=> aviary empty"].count(any(filled) if refused else not all(filled))
            if refused:
                continue
            for column, value in {**point_columns, **inferential_columns}.items():
                aviary = number(variant[column])
                if aviary is not None:
                    checks[f"{name} vs {column}"].compare(float(value(result)), aviary)


def check_srm_p(rows, order, weights, allocators, checks):
    for experiment, looks in fixed_split_experiments(rows, order, allocators).items():
        expected = expected_weights(weights, len(order[experiment]))
        for _, units, look_rows in looks:
            p = float(check_srm(units, expected))
            for row in look_rows:
                aviary = number(row["srm_p"])
                checks["check_srm: aviary srm_p empty"].count(aviary is None)
                if aviary is not None:
                    checks["check_srm vs srm_p"].compare(p, aviary)


def check_control_rows(rows, order, checks):
    # Guards the control's identification (first variant in the file): its lift cells must be empty.
    for row in rows:
        if row["estimator"] == "naive" and row["variant"] == order[key(row, EXPERIMENT)][0]:
            filled = any(number(row[c]) is not None for c in ("lift", "p_value", "chance_to_beat_control"))
            checks["control rows: lift cells empty"].count(filled)


def main():
    args = parse_arguments(__doc__.splitlines()[0])
    rows = read_rows(args.inference_csv)
    order = variant_order(rows)
    checks = Checks()
    check_control_rows(rows, order, checks)
    check_tests(rows, order, args.tuning, checks)
    check_srm_p(rows, order, args.weights, set(args.fixed_split_allocators), checks)
    print(json.dumps({
        "reference": f"gbstats {importlib.metadata.version('gbstats')}",
        "checks": [check.report() for check in checks.values()],
    }, indent=2))


if __name__ == "__main__":
    main()

"""Reading Aviary's inference.csv: the helpers inference_gbstats.py and inference_others.py share.

Standard library only: the two checkers run in different virtual environments (gbstats pins its
own numpy and pandas), and both import this module from their own folder, which Python puts on
sys.path when a script is run.

The control of an experiment is its first variant, i.e. the first variant name that appears in
the file for that scenario/allocator/replicate/experiment (Aviary writes variants in index order).
"""
import argparse
import csv
import math
from collections import defaultdict

# "segment" where devices have attributes: each segment's rows are an analysis of their own (an
# empty cell, or no column, is the whole fleet).
EXPERIMENT = ("scenario", "allocator", "replicate", "experiment", "segment")
LOOK = EXPERIMENT + ("look",)
COMPARISON = LOOK + ("estimator", "metric")
SRM_METRIC = "conversions_per_view"  # every metric has the same units; one metric's rows suffice
ALPHA = 0.05


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def number(cell):
    """An empty cell means "not defined" (the spec); anything else is a plain decimal."""
    return None if cell is None or cell.strip() == "" else float(cell)


def count(cell):
    value = float(cell)
    if not value.is_integer():
        raise SystemExit(f"expected a whole number, got {cell!r}")
    return int(value)


def key(row, columns):
    return tuple(row.get(c, "") for c in columns)


def variant_order(rows):
    """Variant names per experiment in the order of first appearance; the first is the control."""
    order = defaultdict(list)
    for row in rows:
        names = order[key(row, EXPERIMENT)]
        if row["variant"] not in names:
            names.append(row["variant"])
    return order


def naive_comparisons(rows, order):
    """(control row, variant row) for every non-control variant of every naive look × metric.
    Only the naive estimator's rows: the other estimators' lift columns are not the tests the
    references compute."""
    groups = defaultdict(dict)
    for row in rows:
        if row["estimator"] != "naive":
            continue
        by_variant = groups[key(row, COMPARISON)]
        if row["variant"] in by_variant:
            raise SystemExit(f"two naive rows for variant {row['variant']} at {key(row, COMPARISON)}")
        by_variant[row["variant"]] = row
    for group, by_variant in groups.items():
        names = order[group[: len(EXPERIMENT)]]
        control = by_variant.get(names[0])
        if control is None:
            raise SystemExit(f"no row for the control {names[0]!r} at {group}")
        for name in names[1:]:
            if name in by_variant:
                yield control, by_variant[name]


def fixed_split_experiments(rows, order, allocators):
    """Per experiment of a fixed-split allocator, its looks in order as (look, units per variant
    in variant order, all the look's rows)."""
    looks = defaultdict(list)
    for row in rows:
        if row["allocator"] in allocators:
            looks[key(row, LOOK)].append(row)
    experiments = defaultdict(list)
    for look, look_rows in looks.items():
        experiment = look[: len(EXPERIMENT)]
        names = order[experiment]
        units = {r["variant"]: count(r["units"]) for r in look_rows
                 if r["estimator"] == "naive" and r["metric"] == SRM_METRIC}
        if set(units) != set(names):
            raise SystemExit(f"look {look} lacks naive {SRM_METRIC} rows for some variants")
        experiments[experiment].append((count(look[-1]), [units[n] for n in names], look_rows))
    for looks_of_experiment in experiments.values():
        looks_of_experiment.sort(key=lambda entry: entry[0])
    return experiments


def expected_weights(weights, variants):
    if weights is None:
        return [1.0] * variants
    if len(weights) != variants:
        raise SystemExit(f"--weights has {len(weights)} values but an experiment has {variants} variants")
    return list(weights)


class Check:
    """The largest |reference − Aviary| over the rows compared (or, via `count`, the number of
    rows that break a rule)."""

    def __init__(self, name):
        self.name = name
        self.rows = 0
        self.max_abs_diff = 0.0
        self.unmeasurable = False

    def compare(self, reference, aviary):
        self.rows += 1
        diff = abs(reference - aviary)
        if not math.isfinite(diff):
            self.unmeasurable = True
        else:
            self.max_abs_diff = max(self.max_abs_diff, diff)

    def count(self, broken):
        self.rows += 1
        self.max_abs_diff += 1 if broken else 0

    def report(self):
        measured = self.rows > 0 and not self.unmeasurable
        return {"name": self.name, "rows": self.rows, "max_abs_diff": self.max_abs_diff if measured else None}


class Checks(dict):
    def __missing__(self, name):
        self[name] = Check(name)
        return self[name]


def parse_arguments(description):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("inference_csv")
    parser.add_argument("--tuning", type=float, default=5000,
                        help="gbstats' sequential_tuning_parameter (default 5000; only inference_gbstats.py uses it)")
    parser.add_argument("--weights", type=float, nargs="+",
                        help="expected split of the fixed-split allocators, in variant order (default equal)")
    parser.add_argument("--fixed-split-allocators", nargs="+", default=["uniform"],
                        help="allocators whose srm_p is checked (default: uniform)")
    parser.add_argument("--spotify-min-units", type=int, default=0,
                        help="compare spotify-confidence only where both arms have this many units: on 0/1 data it "
                             "takes the variance p(1 - p) over n where gbstats takes n - 1, a gap of order 1/n "
                             "(only inference_others.py uses it)")
    return parser.parse_args()

"""Coverage of aviary fit's intervals over seeds and formats, and the fitted fleets' runs
against the truth's (scripts/fit-round-trip).

A figure passes when its 95 % interval holds the truth in at least 90 % of the seeds, or when
it falls short of that by no more than chance: fewer hits than 90 % are still consistent with
a true coverage of 95 % while the binomial probability of so few is at least 1 % (with 20 seeds,
17 of 20 is; 15 of 20 is not). A figure covered in 90 % or more of the seeds always passes."""
import argparse
import csv
import math
import os
import statistics
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def truth():
    """Every figure the fit reports, as Scenarios/fit-round-trip.yaml states it."""
    with open(os.path.join(ROOT, "Scenarios", "fit-round-trip.yaml")) as f:
        s = yaml.safe_load(f)
    p = s["population"]
    t = {
        "population.devices": p["devices"],
        "population.sessions_per_day.mean": p["sessions_per_day"]["mean"],
        "population.sessions_per_day.shape": p["sessions_per_day"]["shape"],
        "population.session_length.median": 240.0,
        "population.session_length.sigma": p["session_length"]["sigma"],
        "population.app_events.per_session": p["app_events"]["per_session"],
        "population.app_events.shape": p["app_events"]["shape"],
        "client.batch_size": 20,
        "client.flush_interval": 30,
        "network.mean_offline": 7200.0,
        "network.offline_fraction": s["network"]["offline_fraction"],
        "network.latency.median": 0.2,
        "network.latency.sigma": 0.5,
        # aviary run --export's default: a tenth of the devices' clocks off.
        "devices.clock_skewed": 0.1,
    }
    daily, weekly = p["daily_profile"], p["weekly_profile"]
    for h, w in enumerate(daily):
        t[f"population.daily_profile[{h}]"] = w / (sum(daily) / 24)
    for d, w in enumerate(weekly):
        t[f"population.weekly_profile[{d}]"] = w / (sum(weekly) / 7)
    for e in s["experiments"]:
        for v in e["variants"]:
            t[f"experiments[{e['id']}].{v['id']}.rate"] = v["rate"]
            t[f"experiments[{e['id']}].{v['id']}.share"] = 1 / len(e["variants"])
    return t


def coverage(work, seeds, formats):
    """Per format and figure, how often the 95 % interval held the truth. A figure is LOW when
    so few seeds covered it that chance explains it less than once in a hundred runs of the
    whole table (Bonferroni over every figure of every format: a table of 400 figures would
    otherwise flag a few by chance at every run); a format is LOW when its intervals, pooled
    over its figures and seeds, cover less often than chance allows at the same level."""
    t = truth()
    rows = []
    failed = []
    tables = {}
    for f in formats:
        hits, seen, estimates = {}, {}, {}
        for seed in range(1, seeds + 1):
            path = os.path.join(work, str(seed), f"fit-{f}", "fit.csv")
            with open(path) as handle:
                for r in csv.DictReader(handle):
                    name = r["parameter"]
                    if name not in t or r["ci95_low"] == "" or r["ci95_high"] == "":
                        continue
                    low, high = float(r["ci95_low"]), float(r["ci95_high"])
                    seen[name] = seen.get(name, 0) + 1
                    hits[name] = hits.get(name, 0) + (low <= t[name] <= high)
                    estimates.setdefault(name, []).append(float(r["estimate"]))
        tables[f] = (hits, seen, estimates)
    checks = sum(len(seen) for _, seen, _ in tables.values()) or 1
    for f in formats:
        hits, seen, estimates = tables[f]
        for name in sorted(t):
            if name not in seen:
                rows.append([f, name, t[name], "", "", 0, "not fitted"])
                continue
            share = hits[name] / seen[name]
            mean = statistics.fmean(estimates[name])
            chance = binomial_cdf(hits[name], seen[name], 0.95)
            ok = share >= 0.9 or chance >= 0.01 / checks
            rows.append([f, name, t[name], f"{mean:.6g}", f"{share:.3f}", seen[name], "ok" if ok else "LOW"])
            if not ok:
                failed.append(f"{f} {name}: {hits[name]}/{seen[name]} (mean estimate {mean:.4g}, truth {t[name]:.4g})")
        pooled_hits, pooled_seen = sum(hits.values()), sum(seen.values())
        if pooled_seen and binomial_tail(pooled_hits, pooled_seen, 0.95) < 0.01 / len(formats):
            failed.append(f"{f}: its intervals held the truth {pooled_hits} times in {pooled_seen}, fewer than 95 % allows")
    return rows, failed


def binomial_cdf(k, n, p):
    """P(X <= k) for X ~ Binomial(n, p)."""
    return sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(k + 1))


def binomial_tail(k, n, p):
    """P(X <= k) for X ~ Binomial(n, p), summed in logs so that n in the thousands stays finite."""
    logs = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * math.log(p) + (n - i) * math.log1p(-p) for i in range(k + 1)]
    top = max(logs)
    return math.exp(top) * sum(math.exp(x - top) for x in logs)


def summary(folder):
    """Per allocator: expected regret and queue p95 over replicates."""
    out = {}
    with open(os.path.join(folder, "summary.csv")) as handle:
        for r in csv.DictReader(handle):
            out.setdefault(r["allocator"], {"regret": [], "p95": []})
            out[r["allocator"]]["regret"].append(float(r["expected_regret"]))
            out[r["allocator"]]["p95"].append(float(r["queue_latency_p95_s"]))
    return out


def interval(values):
    m = statistics.fmean(values)
    half = 2.262 * statistics.stdev(values) / math.sqrt(len(values))  # t(0.975, 9)
    return m, m - half, m + half


T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 19: 2.093}


def mean_interval(values):
    """The mean and the half-width of its 95 % interval (Student's t)."""
    m = statistics.fmean(values)
    k = len(values) - 1
    return m, T975.get(k, 1.96) * statistics.stdev(values) / math.sqrt(len(values))


def runs(work, formats, fits):
    """The truth's regret and queue p95 against those of the fleets fitted from `fits` seeds'
    exports of each format (each run with the truth's experiment, so that the fleet and its
    delivery are what is compared). Each fitted fleet's figure is the mean of its replicates;
    the spread over the fitted fleets carries the fit's own error. The two agree when the
    difference of means is within the two intervals combined (a 95 % two-sample comparison)."""
    rows = []
    failed = []
    base = summary(os.path.join(work, "run-truth"))
    for f in formats:
        fitted = [summary(os.path.join(work, f"run-{f}-{seed}")) for seed in range(1, fits + 1)]
        for allocator in sorted(base):
            for figure in ("regret", "p95"):
                m, h = mean_interval(base[allocator][figure])
                means = [statistics.fmean(run[allocator][figure]) for run in fitted]
                fm, fh = mean_interval(means)
                ok = abs(fm - m) <= math.hypot(h, fh)
                rows.append([f, allocator, figure, f"{m:.6g}", f"{m - h:.6g}", f"{m + h:.6g}", f"{fm:.6g}", f"{fm - fh:.6g}", f"{fm + fh:.6g}", "ok" if ok else "APART"])
                if not ok:
                    failed.append(f"{f} {allocator} {figure}: fitted fleets {fm:.4g} ± {fh:.3g} vs truth {m:.4g} ± {h:.3g}")
    return rows, failed


def swap_experiment(path):
    """The fitted scenario at `path` with the truth's experiments and no analysis, on stdout."""
    # By text, so that the fitted file's own values (its start instant, its comments) stay as
    # aviary wrote them.
    with open(path) as f:
        fitted = f.read().split("\n")
    with open(os.path.join(ROOT, "Scenarios", "fit-round-trip.yaml")) as f:
        truth = f.read().split("\n")
    begin = truth.index("experiments:")
    end = next(i for i in range(begin + 1, len(truth)) if truth[i] and not truth[i].startswith(" "))
    out, skipping = [], False
    for line in fitted:
        if line == "experiments:":
            out += truth[begin:end]
            skipping = True
            continue
        if skipping and line and not line.startswith(" "):
            skipping = False
        if skipping or line.startswith("analysis:"):
            continue
        out.append(line)
    print("\n".join(out))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--swap-experiment":
        swap_experiment(sys.argv[2])
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--work", required=True)
    parser.add_argument("--seeds", type=int, required=True)
    parser.add_argument("--formats", required=True)
    parser.add_argument("--runs", type=int, default=1, help="fitted fleets run per format (0: none)")
    args = parser.parse_args()
    formats = args.formats.split(",")
    rows, failed = coverage(args.work, args.seeds, formats)
    with open(os.path.join(ROOT, "validation", "fit-round-trip.csv"), "w", newline="") as handle:
        w = csv.writer(handle)
        w.writerow(["format", "parameter", "truth", "mean_estimate", "coverage", "seeds", "verdict"])
        w.writerows(rows)
    print(f"{'format':13} {'parameter':40} {'truth':>9} {'mean est.':>10} {'coverage':>8}")
    for r in rows:
        print(f"{r[0]:13} {r[1]:40} {r[2]:9.4g} {r[3]:>10} {r[4]:>8} {r[6]}")
    if args.runs:
        run_rows, run_failed = runs(args.work, formats, args.runs)
        failed += run_failed
        with open(os.path.join(ROOT, "validation", "fit-round-trip-runs.csv"), "w", newline="") as handle:
            w = csv.writer(handle)
            w.writerow(["format", "allocator", "figure", "truth_mean", "truth_low", "truth_high", "fitted_mean", "fitted_low", "fitted_high", "verdict"])
            w.writerows(run_rows)
        print()
        for r in run_rows:
            print(f"{r[0]:13} {r[1]:10} {r[2]:7} truth {r[3]:>9} [{r[4]}, {r[5]}]  fitted fleets {r[6]:>9} [{r[7]}, {r[8]}]  {r[9]}")
    if failed:
        print("\nBelow 90 % or apart:\n  " + "\n  ".join(failed))
        sys.exit(1)


if __name__ == "__main__":
    main()

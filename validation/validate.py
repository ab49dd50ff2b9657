#!/usr/bin/env python3
"""Aviary's validation suite: its figures against closed forms and independent references.

Each check runs `aviary` on a scenario in this folder (or on a bare bandit) and compares one
figure with a closed form or with a reference program in validation/reference/ that shares no
code with Aviary (a C program with its own random numbers, a Python model of the fleet). Every
tolerance is stated with the check and justified in validation/README.md.

Writes validation/results.csv (check, expected, measured, tolerance, pass) and exits 1 if any
check fails. Usage: validate.py --aviary PATH --gbstats-python PATH --stats-python PATH --obp-python PATH [--jobs N] [--readme]
  --gbstats-python, --stats-python, --obp-python  the venvs scripts/setup-stats makes
  --readme  also rewrites the results table in validation/README.md
"""
import argparse
import csv
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


class Suite:
    def __init__(self, aviary, jobs, scratch):
        self.aviary = aviary
        self.jobs = jobs
        self.scratch = scratch
        self.rows = []

    def check(self, name, expected, measured, tolerance):
        passed = abs(measured - expected) <= tolerance
        self.rows.append((name, expected, measured, tolerance, passed))
        mark = "pass" if passed else "FAIL"
        print(f"{mark}  {name}: expected {readable(expected)}, measured {readable(measured)}, tolerance {readable(tolerance)}", flush=True)

    def check_at_most(self, name, bound, measured, tolerance):
        """A check that a figure stays at or below a bound (within sampling error)."""
        passed = measured <= bound + tolerance
        self.rows.append((name, bound, measured, tolerance, passed))
        mark = "pass" if passed else "FAIL"
        print(f"{mark}  {name}: at most {readable(bound)}, measured {readable(measured)}, tolerance {readable(tolerance)}", flush=True)

    def run_aviary(self, *args):
        subprocess.run([self.aviary, *map(str, args), "--jobs", str(self.jobs)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def folder(self, name):
        path = os.path.join(self.scratch, name)
        os.makedirs(path, exist_ok=True)
        return path


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def mean_and_error(values):
    return statistics.mean(values), statistics.stdev(values) / math.sqrt(len(values))


def start_reference(*args):
    """Starts a reference program; its output is read later, so it runs beside aviary."""
    return subprocess.Popen([*map(str, args)], stdout=subprocess.PIPE, text=True)


def finish(process):
    out, _ = process.communicate()
    if process.returncode != 0:
        raise SystemExit(f"reference program {process.args} failed")
    return out


# MARK: - Bandits

def uniform_regret(suite):
    # A uniform split shows each of K variants with probability 1/K, so its expected regret
    # after T views is T · ΣΔᵢ / K. Per replicate the regret Σ Δ over T independent views has
    # variance T · (mean Δ² − (mean Δ)²); the tolerance is 4 standard errors of the mean over
    # the replicates (a false alarm 6 times in 100,000).
    rates, views, replicates = [0.04, 0.05, 0.06], 100_000, 20
    out = suite.folder("uniform")
    suite.run_aviary("bandit", "--rates", *rates, "--views", views, "--replicates", replicates,
                     "--allocator", "uniform", "--seed", 11, "-o", out)
    regrets = [float(r["expected_regret"]) for r in read_csv(os.path.join(out, "bandit.csv"))]
    gaps = [max(rates) - r for r in rates]
    expected = views * sum(gaps) / len(rates)
    variance = views * (statistics.mean(g * g for g in gaps) - statistics.mean(gaps) ** 2)
    suite.check("uniform split regret, bandit: T·ΣΔ/K", expected, statistics.mean(regrets),
                4 * math.sqrt(variance / replicates))


def thompson_slope(suite, reference):
    # Lai and Robbins (1985): a consistent policy's regret grows at least as
    # Σ Δᵢ / KL(pᵢ, p*) · ln T, and Thompson sampling attains that constant (Kaufmann, Korda and
    # Munos 2012; Agrawal and Goyal 2013). Growth per decade of T, between 10⁴ and 10⁵ views of
    # 10 % against 30 %, measured on the same runs (a run of 10⁴ views is a prefix of the run of
    # 10⁵ with the same seed).
    rates, replicates = [0.1, 0.3], 300
    slopes_by_run = {}
    for views in (10_000, 100_000):
        out = suite.folder(f"slope-{views}")
        suite.run_aviary("bandit", "--rates", *rates, "--views", views, "--replicates", replicates,
                         "--allocator", "thompson", "--seed", 9, "-o", out)
        slopes_by_run[views] = [float(r["expected_regret"]) for r in read_csv(os.path.join(out, "bandit.csv"))]
    slope, error = mean_and_error([b - a for a, b in zip(slopes_by_run[10_000], slopes_by_run[100_000])])
    p, q = rates
    kl = p * math.log(p / q) + (1 - p) * math.log((1 - p) / (1 - q))
    lai_robbins = (q - p) / kl * math.log(10)
    # The constant is a limit: at 10⁴–10⁵ views the slope is still below it (the independent
    # reference below shows by how much), so the tolerance is 20 % of it.
    suite.check("thompson regret per decade of T vs Lai-Robbins constant (10% vs 30%)", lai_robbins, slope, 0.2 * lai_robbins)
    ref_slope, ref_error = map(float, finish(reference).split())
    # Two independent estimates of the same finite-T slope: 4 standard errors of their difference.
    suite.check("thompson regret per decade of T vs independent reference (C)", ref_slope, slope,
                4 * math.hypot(error, ref_error))


DELAY_RATES = [0.1] * 9 + [0.2]
DELAY_VIEWS = 20_000
DELAY_BATCHES = (1, 1_000)


def delayed_feedback(suite, references):
    # Chapelle and Li (2011): with feedback every B views, Thompson sampling, which randomises,
    # loses little; UCB1, deterministic, sends whole batches to one arm and loses much more.
    # Ten arms, one at 20 % and nine at 10 %, 20,000 views. Each figure is compared with the
    # independent C reference at 4 standard errors of the difference of the two means.
    measured = {}
    for batch in DELAY_BATCHES:
        out = suite.folder(f"delay-{batch}")
        suite.run_aviary("bandit", "--rates", *DELAY_RATES, "--views", DELAY_VIEWS, "--replicates", 200,
                         "--allocator", "thompson", "--allocator", "ucb1", "--update-every", batch, "--seed", 13, "-o", out)
        rows = read_csv(os.path.join(out, "bandit.csv"))
        for policy in ("thompson", "ucb1"):
            measured[policy, batch] = mean_and_error([float(r["expected_regret"]) for r in rows if r["allocator"] == policy])
    expected = {key: tuple(map(float, finish(process).split())) for key, process in references.items()}
    for (policy, batch), (mean, error) in sorted(measured.items()):
        ref_mean, ref_error = expected[policy, batch]
        suite.check(f"{policy} regret, update every {batch} view(s) vs independent reference (C)", ref_mean, mean,
                    4 * math.hypot(error, ref_error))
    # What the delay costs each policy, and how much more it costs UCB1.
    def added(source, policy):
        return source[policy, DELAY_BATCHES[-1]][0] - source[policy, DELAY_BATCHES[0]][0]
    def added_error(source, policy):
        return math.hypot(source[policy, DELAY_BATCHES[-1]][1], source[policy, DELAY_BATCHES[0]][1])
    gap = added(measured, "ucb1") - added(measured, "thompson")
    ref_gap = added(expected, "ucb1") - added(expected, "thompson")
    gap_error = math.hypot(*(added_error(s, p) for s in (measured, expected) for p in ("thompson", "ucb1")))
    suite.check(f"regret the delay adds to UCB1 minus what it adds to thompson (B={DELAY_BATCHES[-1]})", ref_gap, gap, 4 * gap_error)


# MARK: - Fleet queues

QUEUE = dict(devices=10_000, horizon=7 * 86_400, per_day=3, mean_online=8 * 3_600, mean_offline=2 * 3_600,
             flush=30, rate=0.055, replicates=2)


def queue_quantile(q, p_tail, tau, horizon, censored):
    """The q-quantile of delivered events' latency under an exponential tail with censoring.

    A fraction p_tail of events wait an exponential time of mean tau. An event with latency L
    created at a uniform time in [0, H] is delivered only if created before H − L, which keeps
    a fraction 1 − (x + tau) / H of the events with L > x (L − x being exponential again); the
    delivered events are a fraction 1 − censored of all. Solved by bisection.
    """
    def tail(x):
        return p_tail * math.exp(-x / tau) * (1 - (x + tau) / horizon) / (1 - censored)
    low, high = 0.0, horizon / 2
    for _ in range(200):
        middle = (low + high) / 2
        if tail(middle) > 1 - q:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def fleet_queue(suite, reference):
    # The scenario's devices are offline 20 % of the time in exponential spells of mean 2 h
    # (τ). An event created offline waits out the rest of its spell, exponential with mean τ
    # whatever has passed; one created online leaves with its batch after the 30 s flush. So
    # the latency's tail is P(L > x) ≈ p·e^(−x/τ) and the q-quantile is τ·ln(p / (1 − q)).
    # With p = 0.2 that is 2.77 h at q = 0.95 and 5.99 h at q = 0.99, but two things make the
    # fleet's own p smaller and its tail shorter, and both are computed here from its report:
    # - a device that has never fetched experiment data shows the in-app default and logs
    #   nothing (Myna's offline mode): those are D of the V views, nearly all offline, so the
    #   events' offline share is p = (0.2·V − D) / (V − D), plus the online events whose device
    #   goes offline before the flush (a share flush / mean online of them);
    # - events still queued at the horizon are not in the percentiles (censoring).
    config = QUEUE
    out = suite.folder("queue")
    suite.run_aviary("run", os.path.join(HERE, "offline-queue.yaml"), "-o", out, "--quiet")
    summary = read_csv(os.path.join(out, "summary.csv"))
    timeseries = read_csv(os.path.join(out, "timeseries.csv"))
    model = json.loads(finish(reference))
    tau, horizon, flush = config["mean_offline"], config["horizon"], config["flush"]
    offline = config["mean_offline"] / (config["mean_online"] + config["mean_offline"])
    views = statistics.mean(float(r["views"]) for r in summary)
    defaults = statistics.mean(float(r["default_views"]) for r in summary)
    created = statistics.mean(float(r["events_created"]) for r in summary)
    pending = statistics.mean(float(r["events_pending"]) for r in summary)
    p_offline = (offline * views - defaults) / (views - defaults)
    p_tail = p_offline + (1 - p_offline) * flush / config["mean_online"]
    censored = p_tail * tau / horizon
    # Sampling error of a quantile estimate from n events: √(q(1 − q)/n) / density, about 0.5 %
    # of p95 and p99 for one replicate of 218,000 events; replicates share no stream. The
    # closed form's approximations (a flat creation rate; every default view offline) move it
    # by well under 1 %. Tolerance 3 %, about 6 standard errors.
    for q, column in ((0.95, "queue_latency_p95_s"), (0.99, "queue_latency_p99_s")):
        measured = statistics.mean(float(r[column]) for r in summary)
        expected = queue_quantile(q, p_tail, tau, horizon, censored)
        suite.check(f"queue latency p{round(q * 100)} (s) vs closed form with first-launch defaults and censoring", expected, measured, 0.03 * expected)
        key = f"latency_p{round(q * 100)}_s"
        suite.check(f"queue latency p{round(q * 100)} (s) vs independent fleet model (Python)", model[key], measured, 0.03 * model[key])
    # The fraction online: each sample averages 10,000 devices (sd 0.004) and 336 samples over
    # two replicates with spells of hours leave a standard error near 0.0005; tolerance 0.005.
    online = {}
    for r in timeseries:
        online[r["replicate"], r["time_hours"]] = float(r["online_fraction"])
    suite.check("online fraction vs 1 − offline fraction", 1 - offline, statistics.mean(online.values()), 0.005)
    # Little's law over the run: the events waiting on devices average λ·W, with λ the events
    # created per second and W their mean time in a queue before the horizon: p_tail·τ, plus
    # the flush for online events, less τ for each event still waiting at the horizon (its wait
    # is cut short there, by τ on average since its spell is memoryless).
    depth = {}
    for r in timeseries:
        depth[r["replicate"], r["time_hours"]] = float(r["queue_depth"])
    waiting = statistics.mean(depth.values())
    rate = created / horizon
    mean_wait = p_tail * tau + (1 - p_offline) * flush - pending / created * tau
    # Hourly samples of a queue of ~500 events (sd ~22) that turns over in about τ: 336
    # samples give a standard error near 0.5 %; tolerance 3 %.
    suite.check("Little's law: mean events waiting = λ·W", rate * mean_wait, waiting, 0.03 * rate * mean_wait)
    suite.check("mean events waiting vs independent fleet model (Python)", model["mean_waiting"], waiting, 0.03 * model["mean_waiting"])
    # Events still queued at the horizon: about 550, from devices offline near the end, and
    # spells end together for a device's events, so the count varies by about ±10 % between
    # replicates; tolerance 25 %.
    suite.check("events pending at the horizon vs independent fleet model (Python)", model["events_censored"], pending,
                0.25 * model["events_censored"])
    # The fleet's regret under a uniform split: non-default views show each variant with
    # probability ½ (regret Δ/2 on average, sd Δ/2 each); default views show variant 0 (regret Δ).
    gap = 0.01
    regret = statistics.mean(float(r["expected_regret"]) for r in summary)
    expected = gap * ((views - defaults) / 2 + defaults)
    suite.check("uniform split regret, fleet: Δ·((V − D)/2 + D)", expected, regret,
                4 * gap / 2 * math.sqrt((views - defaults) / len(summary)))


def drain_time(suite):
    # A fluid queue: events arrive at λ; the server, down for D, then serves μ. The backlog λ·D
    # drains at μ − λ, in λ·D / (μ − λ). λ is the events created per second (the accepted rate
    # equals it: every event is delivered). The drain is read off a 1-minute grid (up to 60 s
    # late), and the estimate ignores the 30 s flush and the seconds between a refused request
    # and its retry: tolerance 5 % plus one step.
    out = suite.folder("drain")
    suite.run_aviary("loadtest", os.path.join(HERE, "loadtest-drain.yaml"), "-o", out, "--quiet")
    rows = read_csv(os.path.join(out, "loadtest.csv"))
    horizon, outage, capacity, step = 8 * 3_600, 2 * 3_600, 40.0, 60
    for policy in sorted({r["policy"] for r in rows}):
        chosen = [r for r in rows if r["policy"] == policy]
        rate = statistics.mean(float(r["events_created"]) for r in chosen) / horizon
        expected = rate * outage / (capacity - rate)
        measured = statistics.mean(float(r["time_to_drain_s"]) for r in chosen)
        suite.check(f"load test drain time (s), {policy}, vs fluid λD/(μ − λ)", expected, measured, 0.05 * expected + step)


# MARK: - What the experiment concludes

AA = dict(rates=[0.1, 0.1], views=20_000, replicates=2_000, batch=500)


def rate_tolerance(p, n):
    """4 standard errors of a proportion p estimated from n replicates."""
    return 4 * math.sqrt(p * (1 - p) / n)


def inference_rows(folder, allocator, look=None, estimator="naive", variant="B"):
    rows = read_csv(os.path.join(folder, "inference.csv"))
    return [r for r in rows if r["allocator"] == allocator and r["estimator"] == estimator and r["variant"] == variant
            and (look is None or int(r["look"]) == look)]


def rejected_at_some_look(rows, column="p_value", alpha=0.05):
    by_replicate = {}
    for r in rows:
        hit = r[column] != "" and float(r[column]) < alpha
        by_replicate[r["replicate"]] = by_replicate.get(r["replicate"], False) or hit
    return statistics.mean(by_replicate.values())


def share(rows, column):
    values = [float(r[column]) for r in rows if r[column] != ""]
    return statistics.mean(values), len(values)


def inference(suite, rates_reference, engines):
    # A/A tests: every rejection is a false positive and every interval should hold 0. Each
    # rate is over R = 2,000 replicates; the tolerance is 4 of its standard errors,
    # 4·√(p(1 − p)/R), and 4 of the difference's where a reference has its own error.
    replicates, views = AA["replicates"], AA["views"]
    common = ["bandit", "--rates", *AA["rates"], "--views", views, "--replicates", replicates,
              "--update-every", AA["batch"], "--seed", 31]
    five = suite.folder("inference-5")
    suite.run_aviary(*common, "--allocator", "uniform", "--allocator", "thompson", "--looks", 5, "-o", five)
    thirty = suite.folder("inference-30")
    suite.run_aviary(*common, "--allocator", "uniform", "--looks", 30, "-o", thirty)
    reference = json.loads(finish(rates_reference))

    last = inference_rows(five, "uniform", look=5)
    rejection = statistics.mean(float(r["p_value"]) < 0.05 for r in last)
    suite.check("uniform A/A, fixed-horizon test at its one look: false-positive rate", 0.05, rejection, rate_tolerance(0.05, len(last)))
    coverage, n = share(last, "covered")
    suite.check("uniform A/A: coverage of the 95 % lift interval", 0.95, coverage, rate_tolerance(0.95, n))
    for looks, folder in ((5, five), (30, thirty)):
        rows = inference_rows(folder, "uniform")
        measured = rejected_at_some_look(rows)
        expected = reference["peeking"][str(looks)]
        suite.check(f"uniform A/A, fixed test read at {looks} looks: false-positive rate vs Gaussian random walks (Python)",
                    expected["rate"], measured, 4 * math.hypot(math.sqrt(expected["rate"] * (1 - expected["rate"]) / replicates), expected["se"]))
        sequential = rejected_at_some_look(rows, "p_value_sequential")
        suite.check_at_most(f"uniform A/A, sequential test read at {looks} looks: false-positive rate ≤ 0.05",
                            0.05, sequential, rate_tolerance(0.05, replicates))

    # Thompson sampling, posteriors updated every 500 views: the pooled analysis is biased and
    # its interval too narrow; the independent reference (numpy) runs the same bandit.
    naive = inference_rows(five, "thompson", look=5)
    rejection = statistics.mean(float(r["p_value"]) < 0.05 for r in naive if r["p_value"] != "")
    expected = reference["thompson_aa"]
    suite.check("thompson A/A (batches of 500), naive test: false-positive rate vs independent reference (Python)",
                expected["rejection_rate"], rejection,
                4 * math.hypot(math.sqrt(rejection * (1 - rejection) / len(naive)), expected["rejection_se"]))
    for estimator in ("aipw", "stratified"):
        coverage, n = share(inference_rows(five, "thompson", look=5, estimator=estimator), "covered")
        suite.check(f"thompson A/A, {estimator} estimator: coverage of the 95 % lift interval", 0.95, coverage, rate_tolerance(0.95, n))
    alarms, n = share(naive, "srm_alarm")
    suite.check("thompson A/A: χ² SRM alarms (p < 0.001) against the published weights, one look", 0.001, alarms,
                rate_tolerance(0.001, n))

    # The same figures from gbstats, statsmodels, scipy, spotify-confidence and ssrm-test on
    # the CSV's sufficient statistics alone: every p-value and interval within 1e-4.
    exact = suite.folder("inference-exact")
    suite.run_aviary("bandit", "--rates", 0.1, 0.11, "--views", views, "--replicates", 150, "--update-every", AA["batch"],
                     "--seed", 37, "--allocator", "uniform", "--allocator", "thompson", "--looks", 4, "-o", exact)
    csv_path = os.path.join(exact, "inference.csv")
    # Each reported figure is the largest difference over one library's checks of one test (a
    # check is one column against one library result, named by the checker scripts).
    def refusal(name):
        return "refuses" in name or "empty" in name
    groups = {
        "gbstats 0.8.0": [
            ("gbstats TwoSidedTTest (absolute and relative)", lambda n: n.startswith("TwoSidedTTest(") and not refusal(n)),
            ("gbstats SequentialTwoSidedTTest", lambda n: n.startswith("SequentialTwoSidedTTest(") and not refusal(n)),
            ("gbstats EffectBayesianABTest", lambda n: n.startswith("EffectBayesianABTest(") and not refusal(n)),
            ("gbstats check_srm", lambda n: n.startswith("check_srm vs")),
            ("gbstats refuses ⇔ Aviary's cell is empty (disagreeing rows)", refusal)],
        "others": [
            ("statsmodels and scipy Welch t-test", lambda n: "ttest_ind" in n),
            ("statsmodels Welch interval", lambda n: "tconfint_diff" in n),
            ("spotify-confidence ZTest, ≥ 5,000 units an arm", lambda n: n.startswith("spotify ZTest")),
            ("spotify-confidence StudentsTTest, ≥ 5,000 units an arm", lambda n: n.startswith("spotify StudentsTTest")),
            ("scipy χ² SRM", lambda n: n.startswith("scipy chisquare vs")),
            ("ssrm-test sequential SRM", lambda n: n.startswith("ssrm_test sequential")),
            ("SRM cells present where ssrm-test has a value (disagreeing rows)", refusal)],
    }
    for engine, python, script in (("gbstats 0.8.0", engines[0], "inference_gbstats.py"), ("others", engines[1], "inference_others.py")):
        output = subprocess.run([python, os.path.join(HERE, "reference", script), csv_path, "--spotify-min-units", "5000"],
                                check=True, capture_output=True, text=True).stdout
        checks = json.loads(output)["checks"]
        for label, marker in groups[engine]:
            chosen = [c for c in checks if marker(c["name"]) and c["rows"] > 0]
            if not chosen or any(c["max_abs_diff"] is None for c in chosen):
                raise SystemExit(f"{script}: no comparable rows for {label}")
            worst = max(c["max_abs_diff"] for c in chosen)
            rows = min(c["rows"] for c in chosen)
            suite.check(f"{label} on inference.csv's sufficient statistics: largest difference ({rows} rows)", 0.0, worst, 1e-4)

    # The fleet's analysis of what its server ingested (Scenarios/aa-test.yaml: device units,
    # daily looks, the queue's late and lost events): the same code, checked the same way.
    fleet = suite.folder("inference-fleet")
    suite.run_aviary("run", os.path.join(ROOT, "Scenarios", "aa-test.yaml"), "--replicates", 20, "--allocator", "uniform", "-o", fleet)
    fleet_csv = os.path.join(fleet, "inference.csv")
    fleet_groups = [
        ("gbstats 0.8.0", engines[0], "inference_gbstats.py", "gbstats TwoSidedTTest", lambda n: n.startswith("TwoSidedTTest(") and not refusal(n)),
        ("gbstats 0.8.0", engines[0], "inference_gbstats.py", "gbstats check_srm", lambda n: n.startswith("check_srm vs")),
        ("others", engines[1], "inference_others.py", "ssrm-test sequential SRM", lambda n: n.startswith("ssrm_test sequential")),
    ]
    for _, python, script, label, marker in fleet_groups:
        output = subprocess.run([python, os.path.join(HERE, "reference", script), fleet_csv, "--spotify-min-units", "5000"],
                                check=True, capture_output=True, text=True).stdout
        chosen = [c for c in json.loads(output)["checks"] if marker(c["name"]) and c["rows"] > 0]
        if not chosen or any(c["max_abs_diff"] is None for c in chosen):
            raise SystemExit(f"{script}: no comparable rows for {label} (fleet)")
        worst = max(c["max_abs_diff"] for c in chosen)
        rows = min(c["rows"] for c in chosen)
        suite.check(f"{label} on the fleet's inference.csv (aa-test, daily looks): largest difference ({rows} rows)", 0.0, worst, 1e-4)


# MARK: - Output

# MARK: - Off-policy evaluation

OPE = dict(replicates=1000, candidates=["uniform", "linucb", "epsilon-greedy-ridge(epsilon=0.1)"])


def off_policy(suite, obp_python):
    """aviary evaluate's IPS, SNIPS and DR against Open Bandit Pipeline's on the same log, and the
    coverage of their 95 % intervals (with the devices' propensities) over 1,000 replicates."""
    scenario = os.path.join(HERE, "ope.yaml")
    flags = [x for c in OPE["candidates"] for x in ("--allocator", c)]
    folder = suite.folder("ope-obp")
    suite.run_aviary("evaluate", scenario, *flags, "--decisions", "-o", folder)
    largest, compared = finish(start_reference(obp_python, os.path.join(HERE, "reference", "ope_obp.py"), folder)).split()
    suite.check(f"OPE: IPS, SNIPS and DR against Open Bandit Pipeline 0.5.7, largest absolute difference over {compared} estimates",
                0, float(largest), 1e-9)
    folder = suite.folder("ope-coverage")
    suite.run_aviary("evaluate", scenario, *flags, "--replicates", OPE["replicates"], "-o", folder)
    rows = read_csv(os.path.join(folder, "ope.csv"))
    for estimator in ("ips", "snips", "dr"):
        chosen = [r for r in rows if r["log"] == "drawn" and r["propensities"] == "device" and r["estimator"] == estimator]
        coverage = sum(r["covered"] == "true" for r in chosen) / len(chosen)
        # The normal interval of a mean of importance-weighted rewards, whose weights reach 10
        # (a floor of 0.1 in the logging policy): 95 % asymptotically; the tolerance is three
        # binomial standard errors of the count plus 1.5 points for the skew of ~3,000 decisions.
        tolerance = 3 * math.sqrt(0.95 * 0.05 / len(chosen)) + 0.015
        suite.check(f"OPE: coverage of the 95 % interval, {estimator} with the devices' propensities ({len(chosen)} intervals)",
                    0.95, coverage, tolerance)


def contextual_policies(suite, numpy_python):
    """Each contextual allocator's policy, batch by batch on a logged stream, against a NumPy
    reimplementation from the papers (reference/contextual_numpy.py)."""
    checks = [
        ("ope.yaml", os.path.join(HERE, "ope.yaml"), [], ["linucb(alpha=0.5)", "epsilon-greedy-ridge(epsilon=0.1)", "inverse-gap",
                                                          "linear-thompson(draws=100000)"], ["2"], 1000),
        ("contextual-bandits.yaml", os.path.join(ROOT, "Scenarios", "contextual-bandits.yaml"),
         ["--replicates", 1, "--devices", 2000, "--logging", "thompson(floor=0.05)"],
         ["linucb", "epsilon-greedy-ridge(epsilon=0.1)", "inverse-gap(gamma=50, floor=0.02)"], ["2", "2"], 100),
    ]
    for name, scenario, extra, candidates, counts, batch in checks:
        folder = suite.folder("contextual-" + name)
        flags = [x for c in candidates for x in ("--allocator", c)]
        suite.run_aviary("evaluate", scenario, *extra, *flags, "--decisions", "--batch", batch, "-o", folder)
        out = finish(start_reference(numpy_python, os.path.join(HERE, "reference", "contextual_numpy.py"), folder,
                                     "--value-counts", *counts, "--batch", batch))
        for line in out.strip().splitlines():
            label, largest, tolerance, decisions = line.rsplit(" ", 3)
            suite.check(f"{label}: policy in force vs NumPy from the paper, largest absolute difference over {decisions} decisions ({name})",
                        0, float(largest), float(tolerance))


def write_csv(rows, path):
    with open(path, "w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["check", "expected", "measured", "tolerance", "pass"])
        for name, expected, measured, tolerance, passed in rows:
            writer.writerow([name, *map(plain, (expected, measured, tolerance)), "yes" if passed else "no"])


def plain(x):
    """Four places, or four significant digits below 0.001 (a difference of 5e-11 is not 0)."""
    return f"{x:.4f}" if x == 0 or abs(x) >= 0.001 else f"{x:.3e}"


def readable(x):
    """Four significant digits or so; an exponent only below 0.001, where places would show 0."""
    magnitude = abs(x)
    if 0 < magnitude < 0.001:
        return f"{x:.1e}"
    places = 0 if magnitude >= 1_000 else 1 if magnitude >= 100 else 2 if magnitude >= 10 else 3
    return f"{x:.{places}f}"


def markdown(rows):
    lines = ["| check | expected | measured | tolerance | pass |", "|---|---:|---:|---:|---|"]
    for name, expected, measured, tolerance, passed in rows:
        lines.append(f"| {name} | {readable(expected)} | {readable(measured)} | ± {readable(tolerance)} | {'yes' if passed else '**no**'} |")
    return "\n".join(lines)


def update_readme(rows):
    path = os.path.join(HERE, "README.md")
    begin, end = "<!-- validation table: begin -->", "<!-- validation table: end -->"
    text = open(path).read()
    if begin not in text or end not in text:
        raise SystemExit("validation/README.md has no validation table markers")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    with open(path, "w") as f:
        f.write(head + begin + "\n" + markdown(rows) + "\n" + end + tail)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--aviary", required=True)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--readme", action="store_true")
    parser.add_argument("--gbstats-python", required=True, help="a python with gbstats 0.8.0 (scripts/setup-stats)")
    parser.add_argument("--stats-python", required=True, help="a python with spotify-confidence, statsmodels, scipy, ssrm-test")
    parser.add_argument("--obp-python", required=True, help="a python with obp 0.5.7 (scripts/setup-stats)")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="aviary-validate-") as scratch:
        suite = Suite(os.path.abspath(arguments.aviary), arguments.jobs, scratch)
        bandit = os.path.join(scratch, "delayed_bandit")
        subprocess.run(["cc", "-O2", "-o", bandit, os.path.join(HERE, "reference", "delayed_bandit.c"), "-lm"], check=True)
        # The reference programs run beside aviary; each check collects its own.
        model_args = [QUEUE[k] for k in ("devices", "horizon", "per_day", "mean_online", "mean_offline", "flush", "rate", "replicates")]
        fleet_model = start_reference(sys.executable, os.path.join(HERE, "reference", "fleet_queue.py"), *model_args, 41)
        slope = start_reference(bandit, "thompson", "10000:100000", 1, 300, 7, 0.1, 0.3)
        delays = {(policy, batch): start_reference(bandit, policy, DELAY_VIEWS, batch, 100, 17, *DELAY_RATES)
                  for policy in ("thompson", "ucb1") for batch in DELAY_BATCHES}
        rates_reference = start_reference(arguments.stats_python, os.path.join(HERE, "reference", "inference_rates.py"),
                                          "--replicates", AA["replicates"])
        uniform_regret(suite)
        fleet_queue(suite, fleet_model)
        drain_time(suite)
        thompson_slope(suite, slope)
        delayed_feedback(suite, delays)
        inference(suite, rates_reference, (arguments.gbstats_python, arguments.stats_python))
        off_policy(suite, arguments.obp_python)
        contextual_policies(suite, arguments.stats_python)
    write_csv(suite.rows, os.path.join(HERE, "results.csv"))
    if arguments.readme:
        update_readme(suite.rows)
    failed = [row[0] for row in suite.rows if not row[4]]
    print(f"{len(suite.rows) - len(failed)} of {len(suite.rows)} checks passed; wrote validation/results.csv")
    if failed:
        print("failed: " + "; ".join(failed), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()

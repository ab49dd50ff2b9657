#!/usr/bin/env python3
"""Opens Aviary's report.html in headless Chromium and checks it as a reader would see it.

Usage: check_report.py DIR [DIR ...]

For each output folder: the page loads from disk with no console error and no request for
anything outside the file; every chart the CSVs call for is on the page with the expected number
of series (counted from the CSVs here, independently of the Swift code that drew them), each
drawn with that many series elements; a full-page screenshot is saved as DIR/report.png and
must not be blank. Exits non-zero with one line per problem.
"""
import base64
import csv
import os
import sys
from collections import Counter, OrderedDict

from PIL import Image
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service


def read_csv(folder, name):
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        return None
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def distinct(rows, column):
    return list(OrderedDict.fromkeys(row[column] for row in rows))


def expected_charts(folder):
    """(kind, series) of every chart the CSVs in `folder` call for, as a Counter."""
    expected = Counter()
    summary = read_csv(folder, "summary.csv")
    if summary is not None:
        timeseries = read_csv(folder, "timeseries.csv")
        comparison = read_csv(folder, "comparison.csv")
        latency = read_csv(folder, "latency.csv") or []
        scenarios = distinct(summary, "scenario")
        for scenario in scenarios:
            allocators = distinct([r for r in summary if r["scenario"] == scenario], "allocator")
            rows = [r for r in timeseries if r["scenario"] == scenario]
            expected[("regret", len(allocators))] += 1
            for experiment in distinct(rows, "experiment"):
                variants = distinct([r for r in rows if r["experiment"] == experiment], "variant")
                expected[("share", len(variants))] += len(allocators)
            expected[("queue", len(allocators))] += 1
            expected[("online", 1)] += 1
            with_events = [a for a in allocators if any(int(r["events"]) > 0 for r in latency if r["scenario"] == scenario and r["allocator"] == a)]
            if with_events:
                expected[("latency", len(with_events))] += 1
            if len(allocators) > 1:
                differing = [r for r in comparison if r["scenario"] == scenario and r["allocator"] != allocators[0]
                             and any(r[c] not in ("0", "") for c in ("difference_from_baseline", "difference_ci95_low", "difference_ci95_high"))]
                if differing:
                    expected[("forest", len(distinct(differing, "allocator")))] += 1
        if len(scenarios) > 1 and all(s.endswith("]") and "[" in s for s in scenarios):
            expected[("sweep", len(distinct(comparison, "allocator")))] += 4
    loadtest = read_csv(folder, "loadtest.csv")
    if loadtest is not None:
        faults = read_csv(folder, "faults.csv") or []
        for scenario in distinct(loadtest, "scenario"):
            rows = [r for r in loadtest if r["scenario"] == scenario]
            policies = len(distinct(rows, "policy"))
            for kind in ("offered", "accepted", "backlog", "devices"):
                expected[(kind, policies)] += 1
            latency = read_csv(folder, "loadtest-latency.csv") or []
            with_events = distinct([r for r in latency if r["scenario"] == scenario and int(r["events"]) > 0], "policy")
            if with_events:
                expected[("latency", len(with_events))] += 1
            if any(f["scenario"] == scenario for f in faults) or any(r["time_to_drain_s"] for r in rows):
                expected[("drain", policies)] += 1
    bandit = read_csv(folder, "bandit-comparison.csv")
    if bandit is not None:
        allocators = distinct(bandit, "allocator")
        expected[("bandit-regret", len(allocators))] += 1
        if len(allocators) > 1:
            expected[("forest", len(allocators) - 1)] += 1
    inference = read_csv(folder, "inference-comparison.csv")
    if inference is not None:
        allocators = len(distinct(inference, "allocator"))
        expected[("inference-bias", allocators)] += 1
        expected[("inference-coverage", allocators)] += 1
        for experiment in distinct(inference, "experiment"):
            expected[("inference-srm", allocators + 1)] += 1
            expected[("inference-rejections", allocators)] += 1
    return expected


def start_browser():
    options = Options()
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1000"):
        options.add_argument(argument)
    if os.path.exists("/usr/bin/chromium"):
        options.binary_location = "/usr/bin/chromium"
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service("/usr/bin/chromedriver") if os.path.exists("/usr/bin/chromedriver") else Service()
    return webdriver.Chrome(service=service, options=options)


def check(driver, folder):
    problems = []
    page = os.path.abspath(os.path.join(folder, "report.html"))
    if not os.path.exists(page):
        return [f"{page}: missing"]
    driver.get("file://" + page)  # returns once the page has loaded

    for entry in driver.get_log("browser"):
        if entry.get("level") in ("SEVERE", "ERROR"):
            problems.append(f"{page}: console error: {entry.get('message')}")

    # Self-contained: nothing on the page fetches anything, from the network or from disk.
    resources = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    problems += [f"{page}: the page loads {name}; it must be self-contained" for name in resources]
    external = driver.execute_script(
        "return Array.from(document.querySelectorAll('script, link, img, iframe, object, embed')).map(e => e.outerHTML.slice(0, 80))")
    problems += [f"{page}: external element {html}" for html in external]

    charts = driver.execute_script("""
        return Array.from(document.querySelectorAll('svg[data-chart]')).map(svg => {
            const box = svg.getBoundingClientRect();
            return {
                kind: svg.dataset.chart, series: parseInt(svg.dataset.series, 10),
                drawn: svg.querySelectorAll('g.series').length,
                title: (svg.querySelector('title') || {}).textContent || '',
                texts: svg.querySelectorAll('text').length,
                width: box.width, height: box.height,
                id: svg.parentElement.id,
            };
        });""")
    found = Counter((c["kind"], c["series"]) for c in charts)
    expected = expected_charts(folder)
    if found != expected:
        missing = expected - found
        extra = found - expected
        problems.append(f"{page}: charts differ from what the CSVs call for; missing (kind, series): {dict(missing)}, unexpected: {dict(extra)}")
    for c in charts:
        where = f"{page}#{c['id']}"
        if c["drawn"] != c["series"]:
            problems.append(f"{where}: data-series says {c['series']} but {c['drawn']} series are drawn")
        if c["series"] < 1:
            problems.append(f"{where}: no series")
        if not c["title"].strip():
            problems.append(f"{where}: no title")
        if c["texts"] < 4:
            problems.append(f"{where}: only {c['texts']} text elements (title, axis labels, legend expected)")
        if c["width"] < 300 or c["height"] < 150:
            problems.append(f"{where}: drawn {c['width']:.0f}×{c['height']:.0f} px; too small to read")

    # A full-page screenshot, checked not to be blank.
    shot = os.path.join(folder, "report.png")
    size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    capture = driver.execute_cdp_cmd("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True,
        "clip": {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 16000), "scale": 1},
    })
    with open(shot, "wb") as f:
        f.write(base64.b64decode(capture["data"]))
    with Image.open(shot) as image:
        pixels = image.convert("RGB").resize((160, max(1, image.height * 160 // image.width)))
        colors = pixels.getcolors(maxcolors=1 << 16) or []
        non_white = sum(count for count, rgb in colors if sum(rgb) < 720)
        total = pixels.width * pixels.height
        if len(colors) < 10 or non_white < total * 0.02:
            problems.append(f"{shot}: looks blank ({len(colors)} colours, {100 * non_white / total:.1f} % non-white pixels)")
    print(f"{page}: {len(charts)} charts, {sum(c['series'] for c in charts)} series, screenshot {shot}")
    return problems


def main(folders):
    if not folders:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    driver = start_browser()
    try:
        problems = []
        for folder in folders:
            problems += check(driver, folder)
    finally:
        driver.quit()
    for problem in problems:
        print("FAIL " + problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

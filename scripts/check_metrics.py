"""scripts/check-metrics: a real Prometheus scrapes `aviary serve` under live load (see that
script's header)."""

import argparse
import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from live_server import Server, ServerExited, live_binary, start_live  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCENARIO = "Scenarios/loadtest-live-10k.yaml"

# Prometheus series and the /v1/stats counter each must equal.
AGREEMENT = [
    ("aviary_events_accepted_total", "events_accepted"),
    ("aviary_events_duplicate_total", "duplicates_ignored"),
    ("aviary_event_batches_total", "batches"),
    ("aviary_log_bytes", "log_bytes"),
    ("aviary_log_compactions_total", "compactions"),
    ("aviary_body_timeouts_total", "body_timeouts"),
    ("aviary_body_rate_timeouts_total", "body_rate_timeouts"),
    ("aviary_request_timeouts_total", "request_timeouts"),
]


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def get(port, path, headers=None):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def query(port, expression):
    """One instant query of Prometheus' HTTP API: {labels-as-tuple: (timestamp, value)}."""
    status, body = get(port, "/api/v1/query?" + urllib.parse.urlencode({"query": expression}))
    answer = json.loads(body)
    if status != 200 or answer.get("status") != "success":
        raise RuntimeError(f"Prometheus query {expression!r} answered {status}: {body[:300]!r}")
    return {tuple(sorted(item["metric"].items())): (float(item["value"][0]), float(item["value"][1])) for item in answer["data"]["result"]}


def one(port, expression):
    """The value of an expression that must have exactly one series, or None."""
    result = query(port, expression)
    return next(iter(result.values()))[1] if len(result) == 1 else None


def wait_until(condition, seconds, what):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise RuntimeError(f"gave up after {seconds} s waiting for {what}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--aviary", default=os.environ.get("AVIARY", os.path.join(ROOT, ".build/debug/aviary")))
    parser.add_argument("--devices", type=int, default=400, help="devices of the live run (default 400)")
    parser.add_argument("--horizon", default="10m", help="scenario time of the live run (default 10m)")
    parser.add_argument("--speedup", type=float, default=60, help="scenario seconds per wall-clock second (default 60)")
    options = parser.parse_args()

    aviary = live_binary(options.aviary, ROOT)
    work = tempfile.mkdtemp(prefix="aviary-metrics-")
    client_key, admin_key = secrets.token_hex(16), secrets.token_hex(16)
    # The server serves the scenario's experiments with a policy update every second and
    # compacts every 100 kB, so that the compaction counter moves during the run.
    served = os.path.join(work, "served.yaml")
    with open(os.path.join(ROOT, SCENARIO)) as source, open(served, "w") as target:
        target.write(source.read().replace("update: {every: 10m}", "update: {every: 1s}"))
    server = Server(aviary, os.path.join(work, "data"), ["--compact-every", "100000"], scenario=served, keys=[client_key], admin_key=admin_key,
                    log_path=os.path.join(work, "serve.log"))
    os.makedirs(server.data_dir)
    prometheus = None
    failures = []

    # A SIGTERM or SIGINT (CI cancelling the job) ends the run through the `finally` below.
    def stop(signum, frame):
        raise SystemExit(f"check-metrics: stopped by signal {signum}")
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    try:
        port = start_live(server, ROOT)
        credentials = os.path.join(work, "admin-key")
        with open(os.open(credentials, os.O_WRONLY | os.O_CREAT, 0o600), "w") as handle:
            handle.write(admin_key)
        generator_port = free_port()
        config = os.path.join(work, "prometheus.yml")
        with open(config, "w") as handle:
            handle.write(f"""global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: aviary
    metrics_path: /metrics
    authorization:
      type: Bearer
      credentials_file: {credentials}
    static_configs:
      - targets: ["127.0.0.1:{port}"]
  - job_name: generator
    metrics_path: /metrics
    static_configs:
      - targets: ["127.0.0.1:{generator_port}"]
""")
        web = free_port()
        prometheus_log = open(os.path.join(work, "prometheus.log"), "wb")
        prometheus = subprocess.Popen(
            ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={os.path.join(work, 'tsdb')}", f"--web.listen-address=127.0.0.1:{web}"],
            stdout=prometheus_log, stderr=prometheus_log, stdin=subprocess.DEVNULL)

        def ready():
            if prometheus.poll() is not None:
                raise RuntimeError(f"prometheus exited with status {prometheus.returncode}; its log is in {work}/prometheus.log")
            try:
                return get(web, "/-/ready")[0] == 200
            except OSError:
                return False
        wait_until(ready, 60, "Prometheus to be ready")
        wait_until(lambda: one(web, 'up{job="aviary"}') == 1, 30, "Prometheus' first successful scrape of /metrics with the admin key")

        out = os.path.join(work, "loadtest")
        command = [aviary, "loadtest", SCENARIO, "--live", "--url", server.url, "--devices", str(options.devices),
                   "--horizon", options.horizon, "--speedup", str(options.speedup), "--metrics-port", str(generator_port), "--quiet", "-o", out]
        environment = dict(os.environ, AVIARY_API_KEY=client_key)
        started = time.time()
        run = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=150)
        ended = time.time()
        if run.returncode != 0:
            raise RuntimeError(f"aviary loadtest failed with status {run.returncode}:\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}")

        # A scrape that began a second after the load ended, so it saw everything the server
        # acknowledged and the compaction the last request may have started.
        wait_until(lambda: (one(web, 'timestamp(aviary_events_accepted_total{job="aviary"})') or 0) > ended + 1, 30,
                   "a scrape after the load ended")
        status, body = get(port, "/v1/stats", {"Authorization": f"Bearer {admin_key}"})
        if status != 200:
            raise RuntimeError(f"GET /v1/stats answered {status}: {body[:200]!r}")
        stats = json.loads(body)
        rows = []
        for series, counter in AGREEMENT:
            stored = one(web, f'{series}{{job="aviary"}}')
            rows.append((series, stored, stats[counter]))
            if stored is None or stored != stats[counter]:
                failures.append(f"{series} in Prometheus is {stored}, /v1/stats {counter} is {stats[counter]}")
        if stats["events_accepted"] == 0:
            failures.append("the live run delivered no events")
        if stats["compactions"] == 0:
            failures.append("the server compacted its log no time during the run")
        observations = one(web, 'aviary_ingest_duration_seconds_count{job="aviary"}')
        posts = one(web, 'sum(aviary_http_requests_total{job="aviary",route="/v1/events",status="200"})')
        rows.append(("aviary_ingest_duration_seconds_count", observations, posts))
        if observations is None or observations != posts or observations < 1:
            failures.append(f"ingest latency observations ({observations}) differ from POST /v1/events answered 200 ({posts})")
        # The series grew while the run went on: scrapes during the load saw part of it.
        during = query(web, f'aviary_events_accepted_total{{job="aviary"}} @ {(started + ended) / 2:.3f}')
        middle = next(iter(during.values()))[1] if len(during) == 1 else None
        if middle is None or not 0 < middle < stats["events_accepted"]:
            failures.append(f"halfway through the run Prometheus held {middle} accepted events; expected some but not all of {stats['events_accepted']}")
        # The generator's own side (--metrics-port), scraped while it ran: its acknowledged
        # events rose, and never past what the server ingested.
        generated = one(web, 'max_over_time(aviary_generator_events_acknowledged_total{job="generator"}[10m])')
        generated_middle = query(web, f'aviary_generator_events_acknowledged_total{{job="generator"}} @ {(started + ended) / 2:.3f}')
        generated_middle = next(iter(generated_middle.values()))[1] if len(generated_middle) == 1 else None
        rows.append(("aviary_generator_events_acknowledged_total", generated, stats["events_accepted"]))
        if generated is None or not 0 < generated <= stats["events_accepted"]:
            failures.append(f"the generator's acknowledged events in Prometheus peaked at {generated}; expected some, at most the server's {stats['events_accepted']}")
        elif generated_middle is None or not 0 < generated_middle < generated:
            failures.append(f"halfway through the run the generator's series held {generated_middle}; expected some but not all of {generated}")
        unauthorized = one(web, 'sum(aviary_http_requests_total{job="aviary",route="/metrics",status!="200"}) or vector(0)')
        if unauthorized != 0:
            failures.append(f"{unauthorized} scrapes of /metrics were refused")

        print(f"check-metrics: {options.devices} devices, {options.horizon} at {options.speedup:g}x in {ended - started:.1f} s; Prometheus (1 s scrapes) against /v1/stats:")
        print(f"  {'series':<40} {'Prometheus':>12} {'server':>12}")
        for series, stored, expected in rows:
            print(f"  {series:<40} {stored if stored is not None else '-':>12} {expected:>12}")
        print(f"  aviary_events_accepted_total halfway through the run: {middle}")
    except (RuntimeError, ServerExited, subprocess.TimeoutExpired) as failure:
        failures.append(str(failure))
    finally:
        server.stop()
        if prometheus is not None and prometheus.poll() is None:
            prometheus.terminate()
            try:
                prometheus.wait(timeout=20)
            except subprocess.TimeoutExpired:
                prometheus.kill()
                prometheus.wait()

    if failures:
        print(f"check-metrics: {len(failures)} FAILURES (server and Prometheus logs kept in {work}):")
        for text in failures:
            print("  " + text)
        sys.exit(1)
    shutil.rmtree(work, ignore_errors=True)
    print("check-metrics: what Prometheus scraped equals what /v1/stats reports")


if __name__ == "__main__":
    main()

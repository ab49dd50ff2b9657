"""scripts/check-vendors: the analytics vendors' official Python clients against a real `aviary serve`
(see that script's header).

What each client sends, read from its source in site-packages (the versions pinned in
scripts/check-vendors) and configured here only by its documented host setting:

| client (version)                  | host setting               | path                                 | auth (as sent)                     | gzip        | retries                                                                         |
|-----------------------------------|----------------------------|--------------------------------------|------------------------------------|-------------|---------------------------------------------------------------------------------|
| segment-analytics-python 2.4.0    | Client(host=)              | POST /v1/batch                       | Basic base64("KEY:"), writeKey too | off         | 10, on network errors, 408/410/429/460 and 5xx but 501/505; 0, 0.5, 1, 2 … 60 s |
| rudder-sdk-python 2.1.9           | rudder_analytics.dataPlaneUrl | POST /v1/batch                    | Basic base64("KEY:")               | on          | 10 (backoff.expo, full jitter), on network errors, 429 and 5xx                  |
| snowplow-tracker 1.1.0            | Emitter(endpoint=)         | POST /com.snowplowanalytics.snowplow/tp2 (GET /i only with method="get") | none (a session's Authorization here) | off | unbounded, on anything but 2xx and 400/401/403/410/422; 2×+jitter, at most 60 s |
| amplitude-analytics 1.3.0         | Config(server_url=)        | POST /2/httpapi                      | body api_key                       | off         | 12 per event, on network errors, 408, 413 (halving), 429 and 5xx; 0.1 … 3.2 s  |
| posthog 7.91.1                    | Posthog(host=)             | POST /batch/ (capture mode v0)       | body api_key                       | off         | 3, on network errors, 408, 429 and 5xx; 1, 2, 4 s                               |

De-duplication keys: Segment's and RudderStack's messageId and PostHog's uuid are uuid4s the
clients make; Snowplow's eid is the tracker's uuid4; Amplitude's client sets no insert_id, so
this check sets one (Amplitude's advice). Every client resends the same body on a retry.
Error bodies: Segment's and RudderStack's clients read `code` and `message` (RudderStack's retries
a 4xx whose body lacks them), PostHog's `detail`, Amplitude's `code`, `error`,
`missing_field` and `events_with_invalid_fields`.
"""

import argparse
import base64
import http.client
import json
import logging
import os
import random
import secrets
import shutil
import signal
import sys
import tempfile
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from live_server import Server, ServerExited, live_binary, start_live  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCENARIO = "Scenarios/loadtest-live-10k.yaml"
KINDS = ["view", "conversion", "goal", "participation"]
NAMES = {"view": "Experiment Viewed", "conversion": "Experiment Converted", "goal": "Experiment Goal Reached", "participation": "Experiment Participated"}
SCHEMAS = {
    "view": "iglu:dev.aviary/experiment_viewed/jsonschema/1-0-0",
    "conversion": "iglu:dev.aviary/experiment_converted/jsonschema/1-0-0",
    "goal": "iglu:dev.aviary/experiment_goal_reached/jsonschema/1-0-0",
    "participation": "iglu:dev.aviary/experiment_participated/jsonschema/1-0-0",
}
COUNTERS = {"view": "views", "conversion": "conversions", "goal": "goals", "participation": "participations"}


class Failed(Exception):
    pass


def request(port, method, path, key=None):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(method, path, headers={"Authorization": f"Bearer {key}"} if key else {})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


class Ledger:
    """What has been sent: per (experiment, variant), each kind's count and the values' sum."""

    def __init__(self):
        self.totals = {}
        self.events = 0

    def add(self, experiment, variant, kind, value):
        entry = self.totals.setdefault((experiment, variant), {"views": 0, "conversions": 0, "goals": 0, "participations": 0, "value": 0.0})
        entry[COUNTERS[kind]] += 1
        entry["value"] += value or 0
        self.events += 1

    def differences(self, results):
        """How /v1/results differs from the ledger, one line per field; empty when equal."""
        found = {}
        for experiment in results["experiments"]:
            for variant in experiment["variants"]:
                found[(experiment["id"], variant["id"])] = variant
        lines = []
        for key in sorted(set(found) | set(self.totals)):
            want = self.totals.get(key, {"views": 0, "conversions": 0, "goals": 0, "participations": 0, "value": 0.0})
            have = found.get(key, {})
            for field in ("views", "conversions", "goals", "participations"):
                if have.get(field) != want[field]:
                    lines.append(f"{key[0]}/{key[1]} {field}: server {have.get(field)}, sent {want[field]}")
            if abs(have.get("value", 0) - want["value"]) > 1e-6 * max(1, abs(want["value"])):
                lines.append(f"{key[0]}/{key[1]} value: server {have.get('value')}, sent {want['value']:.6f}")
        return lines


class Check:
    """One server, restarted on its port and data directory, and the clients sent at it."""

    def __init__(self, options):
        self.aviary = live_binary(options.aviary, ROOT)
        self.work = tempfile.mkdtemp(prefix="aviary-vendors-")
        self.client_key, self.admin_key = secrets.token_hex(16), secrets.token_hex(16)
        self.server = Server(self.aviary, os.path.join(self.work, "data"), scenario=os.path.join(ROOT, SCENARIO), keys=[self.client_key],
                             admin_key=self.admin_key, log_path=os.path.join(self.work, "serve.log"))
        os.makedirs(self.server.data_dir)
        self.ledger = Ledger()
        self.random = random.Random(options.seed)
        self.events = options.events
        self.others = options.others
        self.rows = []
        self.errors = []

    def start(self):
        self.port = start_live(self.server, ROOT)
        self.url = self.server.url
        status, body = request(self.port, "GET", "/v1/experiments", self.client_key)
        if status != 200:
            raise Failed(f"GET /v1/experiments answered {status}")
        self.experiments = [(item["id"], [variant["id"] for variant in item["variants"]]) for item in json.loads(body)["experiments"]]

    def restart(self):
        self.server.start(port=self.port)

    def stats(self):
        status, body = request(self.port, "GET", "/v1/stats", self.admin_key)
        if status != 200:
            raise Failed(f"GET /v1/stats answered {status}: {body[:200]!r}")
        return json.loads(body)

    def results(self):
        status, body = request(self.port, "GET", "/v1/results", self.admin_key)
        if status != 200:
            raise Failed(f"GET /v1/results answered {status}: {body[:200]!r}")
        return json.loads(body)

    def plan(self):
        """This phase's events: experiment events of every kind, known experiments and variants,
        values on conversions and goals, and non-experiment events among them."""
        events = []
        for index in range(self.events):
            experiment, variants = self.random.choice(self.experiments)
            kind = KINDS[index % len(KINDS)]
            value = round(self.random.uniform(0.5, 50), 2) if kind in ("conversion", "goal") else None
            events.append(("experiment", experiment, self.random.choice(variants), kind, value, f"aviary-{self.random.randrange(1, 1000)}"))
        for index in range(self.others):
            events.insert(self.random.randrange(len(events) + 1), ("other", None, None, None, None, f"aviary-{index + 1}"))
        return events

    def wait_for(self, expected_accepted, seconds):
        """Until the server has accepted `expected_accepted` events and its results equal the
        ledger; the differences that remain when the time is up."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                stats, results = self.stats(), self.results()
                differences = self.ledger.differences(results)
                if stats["events_accepted"] != expected_accepted:
                    differences.insert(0, f"events_accepted is {stats['events_accepted']}, sent {expected_accepted}")
                if not differences:
                    return stats, []
            except OSError as failure:
                stats, differences = None, [f"the server does not answer: {failure}"]
            if time.monotonic() > deadline:
                return stats, differences
            time.sleep(0.25)

    def phase(self, name, client, kill):
        """Sends a phase's events through `client`, SIGKILLing and restarting the server
        mid-stream when `kill`, and checks that each experiment event arrived once."""
        events = self.plan()
        before = self.stats()
        expected = self.ledger.events + sum(1 for event in events if event[0] == "experiment")
        killed = {}

        def killer():
            # Once the server holds a third of the phase's experiment events, the rest are
            # queued in the client or in flight.
            target = before["events_accepted"] + (expected - before["events_accepted"]) // 3
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    accepted = self.stats()["events_accepted"]
                except (OSError, Failed):
                    accepted = -1
                if accepted >= target:
                    break
                time.sleep(0.02)
            killed["accepted"] = self.stats()["events_accepted"]
            killed["handed"] = handed[0]
            self.server.kill()
            time.sleep(1)
            self.restart()

        handed = [0]
        thread = threading.Thread(target=killer, daemon=True) if kill else None
        if thread:
            thread.start()
        started = time.monotonic()
        for event in events:
            if event[0] == "experiment":
                self.ledger.add(event[1], event[2], event[3], event[4])
            client.send(event)
            handed[0] += 1
            # Paced, so that the kill lands while the client still sends.
            time.sleep(0.004)
        if thread:
            thread.join(timeout=90)
        client.flush()
        stats, differences = self.wait_for(expected, 120)
        seconds = time.monotonic() - started
        experiment_events = expected - before["events_accepted"]
        note = ""
        if kill:
            if "accepted" not in killed:
                differences.append("the server was not killed")
            else:
                if killed["accepted"] >= expected:
                    differences.append(f"the kill came after the server had every event ({killed['accepted']}); it tested no retry")
                note = f"killed with {killed['accepted'] - before['events_accepted']} of {experiment_events} in, {killed['handed']} of {len(events)} handed to the client"
        elif stats is not None:
            ignored = stats["vendor_events_ignored"] - before["vendor_events_ignored"]
            if ignored != self.others:
                differences.append(f"vendor_events_ignored rose by {ignored}, {self.others} non-experiment events sent")
        client_errors = client.errors()
        if client_errors and not kill:
            differences.append(f"the client reported errors: {client_errors[:3]}")
        self.rows.append((name, "kill + restart" if kill else "steady", experiment_events, len(events) - experiment_events,
                          (stats or {}).get("duplicates_ignored", 0) - (before.get("duplicates_ignored", 0) if not kill else 0), f"{seconds:.1f}", note))
        for line in differences:
            self.errors.append(f"{name} ({'kill' if kill else 'steady'}): {line}")


# -- The clients, each configured by its documented host setting only ------------------------

def properties(experiment, variant, value):
    """An experiment event's properties: value only on conversions and goals."""
    return {"experiment": experiment, "variant": variant} | ({} if value is None else {"value": value})


class SegmentClient:
    def __init__(self, check):
        from segment.analytics import Client
        self.failures = []
        self.client = Client(write_key=check.client_key, host=check.url, on_error=lambda error, batch: self.failures.append(str(error)))

    def send(self, event):
        kind, experiment, variant, name, value, device = event
        if kind == "other":
            self.client.identify(user_id=device, traits={"plan": "pro"})
            return
        self.client.track(anonymous_id=device, event=NAMES[name], properties=properties(experiment, variant, value))

    def flush(self):
        self.client.flush()

    def errors(self):
        return self.failures

    def close(self):
        self.client.shutdown()


class RudderClient(SegmentClient):
    """RudderStack's client is Segment's, forked: the same calls on its module."""

    def __init__(self, check):
        import rudderstack.analytics as rudder_analytics
        self.failures = []
        rudder_analytics.write_key = check.client_key
        rudder_analytics.dataPlaneUrl = check.url
        rudder_analytics.on_error = lambda error, batch: self.failures.append(str(error))
        self.client = rudder_analytics


class SnowplowClient:
    def __init__(self, check):
        import requests
        from snowplow_tracker import Emitter, Tracker
        # A collector asks for no key; this server, started with keys, asks for a bearer one.
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {check.client_key}"
        self.failures = []
        self.emitter = Emitter(endpoint=check.url, session=session, on_failure=lambda sent, unsent: self.failures.append(f"{len(unsent)} unsent"))
        self.tracker = Tracker(namespace="aviary-check", emitters=self.emitter, app_id="aviary")

    def send(self, event):
        from snowplow_tracker import PageView, SelfDescribing, SelfDescribingJson
        kind, experiment, variant, name, value, device = event
        if kind == "other":
            self.tracker.track(PageView(page_url="https://example.com/"))
            return
        self.tracker.track(SelfDescribing(event_json=SelfDescribingJson(SCHEMAS[name], properties(experiment, variant, value))))

    def flush(self):
        # A flush is skipped while a retry is scheduled; the retry timer sends the rest.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            self.tracker.flush()
            if self.emitter.event_store.size() == 0 and not self.emitter.retry_timer.is_active():
                return
            time.sleep(0.2)

    def errors(self):
        return self.failures

    def close(self):
        self.flush()


class AmplitudeClient:
    def __init__(self, check):
        from amplitude import Amplitude, Config
        self.failures = []

        def callback(event, code, message=None):
            if code != 200:
                self.failures.append(f"{code} {message}")
        self.client = Amplitude(check.client_key, Config(server_url=check.url + "/2/httpapi", callback=callback))

    def send(self, event):
        from amplitude import BaseEvent
        kind, experiment, variant, name, value, device = event
        if kind == "other":
            self.client.track(BaseEvent(event_type="Song Played", device_id=device, event_properties={"genre": "jazz"}))
            return
        # The client sets no insert_id; Amplitude's advice is to set one, as here.
        self.client.track(BaseEvent(event_type=NAMES[name], device_id=device, insert_id=str(uuid.uuid4()), event_properties=properties(experiment, variant, value)))

    def flush(self):
        future = self.client.flush()
        for item in future if isinstance(future, list) else [future]:
            if item is not None:
                item.result(timeout=120)

    def errors(self):
        return self.failures

    def close(self):
        self.client.shutdown()


class PostHogClient:
    def __init__(self, check):
        from posthog import Posthog
        self.failures = []
        self.client = Posthog(project_api_key=check.client_key, host=check.url, on_error=lambda error, batch: self.failures.append(str(error)))

    def send(self, event):
        kind, experiment, variant, name, value, device = event
        if kind == "other":
            self.client.capture("$pageview", distinct_id=device, properties={"$current_url": "https://example.com/"})
            return
        self.client.capture(NAMES[name], distinct_id=device, properties=properties(experiment, variant, value))

    def flush(self):
        self.client.flush()

    def errors(self):
        return self.failures

    def close(self):
        self.client.shutdown()


CLIENTS = [
    ("segment-analytics-python", SegmentClient),
    ("rudder-sdk-python", RudderClient),
    ("snowplow-tracker", SnowplowClient),
    ("amplitude-analytics", AmplitudeClient),
    ("posthog", PostHogClient),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--aviary", default=os.environ.get("AVIARY", os.path.join(ROOT, ".build/debug/aviary")))
    parser.add_argument("--events", type=int, default=300, help="experiment events per client and phase (default 300)")
    parser.add_argument("--others", type=int, default=30, help="non-experiment events among them (default 30)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", help="comma-separated clients to run (default all)")
    options = parser.parse_args()
    # The clients' own logs would bury the summary (some set their loggers' levels when
    # imported); their errors are collected instead.
    logging.disable(logging.CRITICAL)
    os.environ.pop("POSTHOG_CAPTURE_MODE", None)

    def stop(signum, frame):
        raise SystemExit(f"check-vendors: stopped by signal {signum}")
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    names = [name for name, _ in CLIENTS]
    wanted = [name.strip() for name in options.only.split(",") if name.strip()] if options.only else names
    unknown = [name for name in wanted if name not in names]
    if unknown or not wanted:
        named = f"{', '.join(unknown)}: not a client" if unknown else "names no client"
        parser.error(f"--only {options.only!r}: {named}; expected some of {', '.join(names)}")
    chosen = [item for item in CLIENTS if item[0] in wanted]
    check = Check(options)
    try:
        check.start()
        for name, make in chosen:
            client = make(check)
            try:
                check.phase(name, client, kill=False)
                check.phase(name, client, kill=True)
            finally:
                try:
                    client.close()
                except Exception as failure:  # a client's shutdown is no part of the check
                    print(f"check-vendors: {name} did not shut down cleanly: {failure}", file=sys.stderr)
    except (Failed, ServerExited, OSError) as failure:
        check.errors.append(str(failure))
    finally:
        check.server.stop()

    versions = {}
    for name, _ in chosen:
        try:
            from importlib.metadata import version
            versions[name] = version(name)
        except Exception:
            versions[name] = "?"
    print(f"check-vendors: each client's experiment events against /v1/results and /v1/stats ({SCENARIO}, keys on)")
    print(f"  {'client':<34} {'phase':<15} {'experiment':>10} {'other':>6} {'dup':>5} {'s':>6}  note")
    for name, phase, experiment, other, duplicates, seconds, note in check.rows:
        print(f"  {name + ' ' + versions.get(name, ''):<34} {phase:<15} {experiment:>10} {other:>6} {duplicates:>5} {seconds:>6}  {note}")
    if check.errors:
        print(f"check-vendors: {len(check.errors)} FAILURES (server log in {check.work}/serve.log):")
        for line in check.errors:
            print("  " + line)
        sys.exit(1)
    shutil.rmtree(check.work, ignore_errors=True)
    print("check-vendors: every experiment event arrived exactly once with its properties, through a SIGKILL and restart for each client")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Connection floods against a real `aviary serve`: it must outlive them and keep serving.

Two floods beyond the connection cap, one after the other, each of --held connections held
open by a separate process: slowloris (a POST's head with Content-Length: 100000 and one byte
of body) and plain (connect, send nothing). Throughout, in this process:

  * GET /health is asked every 100 ms on a fresh connection and must answer 200 within 1 s;
  * a real client posts keyed event batches of fresh ids (retrying on 503 or a closed
    connection, as a client honouring Retry-After does) and each must be acknowledged;
  * the server's resident memory is sampled: its peak must stay bounded, and the bytes per
    held connection are reported.

Every held connection must be closed by the server (a timeout, or shed at the cap) within the
timeouts and a generous slack; /v1/stats must count the closings; every acknowledged event must
be in events_accepted; a kept-alive connection left idle must be closed by --idle-timeout. Then
the same floods against a server whose open-file limit is 256 (the limit a flood used to exhaust,
ending in a crash): it must stay up and keep answering /health.

Last, a trickle flood against a server with the default slow-client limits and a cap above the
flood: --trickle connections (3,000) each send a POST's head announcing a body of 1,000,000
bytes (under --max-body) and then one byte of it every --trickle-interval seconds (10). A byte
every 10 s never pauses for the 30 s body timeout: every one must be closed by the least body
rate (240 bytes/s once its 5 s grace has passed), counted in body_rate_timeouts, within the grace
and a slack of 15 s, with /health answering throughout.

    scripts/check-flood                                  # the release build
    scripts/check_flood.py --aviary .build/release/aviary --held 3000
    scripts/check_flood.py --aviary OLD --measure-only   # figures only, no new flags, no checks

Only 127.0.0.1 is used. Exits 1 on any violation. Python 3 standard library only.
"""

import argparse
import http.client
import json
import multiprocessing
import os
import resource
import shlex
import shutil
import socket
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from live_server import Server  # noqa: E402

KEY = "flood-client-key-0123456789"
ADMIN = "flood-admin-key-0123456789"
SLOWLORIS = b"POST /v1/events HTTP/1.1\r\nHost: flood\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"
# A body under the default --max-body (1 MiB), so that it is not refused on its head.
TRICKLE = b"POST /v1/events HTTP/1.1\r\nHost: flood\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n"


def raise_file_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def flood(port, count, slowloris, patience, results):
    """Opens and holds `count` connections; reports how many opened and when each was closed."""
    import selectors

    raise_file_limit()
    selector = selectors.DefaultSelector()
    opened, failed, started = 0, 0, time.monotonic()
    for _ in range(count):
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=2)
            if slowloris:
                sock.sendall(SLOWLORIS)
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ)
            opened += 1
        except OSError:
            failed += 1
    results.put(("opened", opened, failed, time.monotonic() - started))
    closed, last = 0, 0.0
    deadline = time.monotonic() + patience
    while closed < opened and time.monotonic() < deadline:
        for key, _ in selector.select(timeout=0.2):
            try:
                data = key.fileobj.recv(4096)
            except OSError:
                data = b""
            if not data:
                selector.unregister(key.fileobj)
                key.fileobj.close()
                closed += 1
                last = time.monotonic() - started
    results.put(("closed", closed, last))
    for key in list(selector.get_map().values()):
        key.fileobj.close()


def trickle(port, count, interval, patience, results):
    """Opens `count` connections, each sending TRICKLE and then a byte of body every `interval`
    seconds; reports how many opened and how long each lasted from its head."""
    import selectors

    raise_file_limit()
    selector = selectors.DefaultSelector()
    opened, failed, started = 0, 0, time.monotonic()
    for _ in range(count):
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=2)
            sock.sendall(TRICKLE + b"[")
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ, time.monotonic())
            opened += 1
        except OSError:
            failed += 1
    results.put(("opened", opened, failed, time.monotonic() - started))
    lasted = []
    deadline = time.monotonic() + patience
    next_byte = time.monotonic() + interval
    while len(lasted) < opened and time.monotonic() < deadline:
        if time.monotonic() >= next_byte:
            next_byte += interval
            for key in list(selector.get_map().values()):
                try:
                    key.fileobj.send(b" ")
                except OSError:
                    pass
        for key, _ in selector.select(timeout=min(0.2, max(0.0, next_byte - time.monotonic()))):
            try:
                data = key.fileobj.recv(4096)
            except OSError:
                data = b""
            if not data:
                lasted.append(time.monotonic() - key.data)
                selector.unregister(key.fileobj)
                key.fileobj.close()
    results.put(("closed", len(lasted), round(min(lasted), 2) if lasted else None, round(max(lasted), 2) if lasted else None,
                 round(time.monotonic() - started, 2)))
    for key in list(selector.get_map().values()):
        key.fileobj.close()


class Watch:
    """The prober, the real client and the memory sampler, run until stopped."""

    def __init__(self, port, pid, keyed):
        self.port, self.pid, self.keyed = port, pid, keyed
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.health = []  # (seconds, status or error)
        self.acknowledged_ids, self.batches, self.retries, self.failed_batches = set(), 0, 0, []
        self.rss_peak = 0
        self.threads = [threading.Thread(target=target, daemon=True) for target in (self.probe, self.post, self.sample)]

    def __enter__(self):
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *_):
        self.stop.set()
        for thread in self.threads:
            thread.join()

    def probe(self):
        while not self.stop.is_set():
            started = time.monotonic()
            try:
                status, _ = request(self.port, "GET", "/health", timeout=1)
            except (OSError, http.client.HTTPException) as error:
                status = type(error).__name__
            with self.lock:
                self.health.append((time.monotonic() - started, status))
            self.stop.wait(0.1)

    def post(self):
        number = 0
        while not self.stop.is_set():
            ids = [f"{number}#{index}" for index in range(5)]
            number += 1
            events = [{"id": id, "kind": "view", "experiment": "checkout-button", "variant": "control", "created_at": 990} for id in ids]
            body = json.dumps({"events": events})
            for _ in range(50):
                try:
                    status, answer = request(self.port, "POST", "/v1/events", body, key=KEY if self.keyed else None, timeout=10)
                except (OSError, http.client.HTTPException):
                    status, answer = None, b""
                if status == 200:
                    with self.lock:
                        self.acknowledged_ids.update(ids)
                        self.batches += 1
                    break
                with self.lock:
                    self.retries += 1
                time.sleep(0.2)
            else:
                with self.lock:
                    self.failed_batches.append(f"batch {number}: last answer {status} {answer[:200]!r}")
            self.stop.wait(0.2)

    def sample(self):
        while not self.stop.is_set():
            self.rss_peak = max(self.rss_peak, rss(self.pid))
            self.stop.wait(0.05)


def request(port, method, path, body=None, key=None, timeout=10):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        headers = {"Connection": "close"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        if key:
            headers["Authorization"] = f"Bearer {key}"
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def rss(pid):
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def descriptors(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def stats(port, keyed):
    status, body = request(port, "GET", "/v1/stats", key=ADMIN if keyed else None)
    return json.loads(body) if status == 200 else {}


class Check:
    def __init__(self, measure_only):
        self.measure_only = measure_only
        self.violations = []

    def expect(self, condition, text):
        if not condition and not self.measure_only:
            self.violations.append(text)
            print("VIOLATION: " + text, file=sys.stderr)


def run_floods(name, server, options, check, keyed):
    """Both floods against `server`, watched; returns the figures."""
    port, pid = server.port, server.process.pid
    for _ in range(20):
        request(port, "GET", "/health")
    baseline_rss, baseline_fds = rss(pid), descriptors(pid)
    figures = {"baseline_rss": baseline_rss, "floods": []}
    patience = options.patience
    with Watch(port, pid, keyed) as watch:
        for kind in ("slowloris", "plain"):
            results = multiprocessing.Queue()
            worker = multiprocessing.Process(target=flood, args=(port, options.held, kind == "slowloris", patience, results))
            worker.start()
            _, opened, failed, open_seconds = results.get()
            time.sleep(0.5)
            held_fds = descriptors(pid) - baseline_fds
            held_rss = rss(pid)
            _, closed, last = results.get(timeout=patience + 30)
            worker.join()
            per_connection = (held_rss - baseline_rss) / held_fds if held_fds > 0 else 0
            flood_figures = {
                "kind": kind, "opened": opened, "failed": failed, "open_seconds": round(open_seconds, 2), "held_by_server": held_fds,
                "rss_held": held_rss, "bytes_per_held": round(per_connection), "closed_by_server": closed, "last_closed_after": round(last, 2),
            }
            figures["floods"].append(flood_figures)
            print(f"check-flood: {name}: {kind}: {json.dumps(flood_figures)}")
            check.expect(closed == opened, f"{name}: {kind}: the server closed {closed} of {opened} held connections within {patience} s")
            check.expect(server.process.poll() is None, f"{name}: {kind}: the server exited with {server.process.poll()}")
    figures["rss_peak"] = watch.rss_peak
    latencies = sorted(seconds for seconds, _ in watch.health)
    bad = [(round(seconds, 3), status) for seconds, status in watch.health if status != 200 or seconds > 1]
    figures["health"] = {"probes": len(latencies), "bad": len(bad), "median": round(latencies[len(latencies) // 2], 4) if latencies else None,
                         "max": round(latencies[-1], 3) if latencies else None}
    figures["client"] = {"batches": watch.batches, "retries": watch.retries, "failed": len(watch.failed_batches)}
    print(f"check-flood: {name}: /health {json.dumps(figures['health'])}; client {json.dumps(figures['client'])}; "
          f"RSS baseline {baseline_rss / 2**20:.1f} MiB, peak {watch.rss_peak / 2**20:.1f} MiB")
    check.expect(not bad, f"{name}: {len(bad)} of {len(latencies)} /health probes failed or took over 1 s: {bad[:10]}")
    check.expect(not watch.failed_batches, f"{name}: event batches never acknowledged: {watch.failed_batches[:5]}")
    check.expect(watch.batches >= 5, f"{name}: only {watch.batches} event batches got in during the floods")
    if not check.measure_only:
        counted = stats(port, keyed)
        print(f"check-flood: {name}: /v1/stats {json.dumps({k: v for k, v in counted.items() if 'connection' in k or 'timeout' in k or k == 'events_accepted'})}")
        check.expect(counted.get("events_accepted") == len(watch.acknowledged_ids),
                     f"{name}: events_accepted is {counted.get('events_accepted')}, {len(watch.acknowledged_ids)} acknowledged")
        check.expect(counted.get("header_timeouts", 0) > 0 and counted.get("body_timeouts", 0) > 0,
                     f"{name}: the timeouts closed nothing: {counted}")
        bound = baseline_rss + options.cap_bytes
        check.expect(watch.rss_peak <= bound, f"{name}: peak RSS {watch.rss_peak} over the bound {bound}")
    return figures


def run_trickle(server, options, check):
    """The trickle flood against `server`, watched; returns the figures."""
    port, pid = server.port, server.process.pid
    for _ in range(20):
        request(port, "GET", "/health")
    baseline_rss, baseline_fds = rss(pid), descriptors(pid)
    patience = 25 if options.measure_only else 5 + 15
    with Watch(port, pid, keyed=False) as watch:
        results = multiprocessing.Queue()
        worker = multiprocessing.Process(target=trickle, args=(port, options.trickle, options.trickle_interval, patience, results))
        worker.start()
        _, opened, failed, open_seconds = results.get()
        time.sleep(0.5)
        held_fds = descriptors(pid) - baseline_fds
        held_rss = rss(pid)
        _, closed, first, last, seconds = results.get(timeout=patience + 60)
        worker.join()
    figures = {
        "kind": "trickle", "opened": opened, "failed": failed, "open_seconds": round(open_seconds, 2), "held_by_server": held_fds,
        "baseline_rss": baseline_rss, "rss_held": held_rss, "rss_peak": watch.rss_peak,
        "bytes_per_held": round((held_rss - baseline_rss) / held_fds) if held_fds > 0 else 0,
        "closed_by_server": closed, "first_closed_after": first, "last_closed_after": last, "seconds": seconds,
    }
    latencies = sorted(seconds for seconds, _ in watch.health)
    bad = [(round(seconds, 3), status) for seconds, status in watch.health if status != 200 or seconds > 1]
    figures["health"] = {"probes": len(latencies), "bad": len(bad), "max": round(latencies[-1], 3) if latencies else None}
    figures["client"] = {"batches": watch.batches, "retries": watch.retries, "failed": len(watch.failed_batches)}
    print(f"check-flood: trickle: {json.dumps(figures)}")
    check.expect(closed == opened, f"trickle: the server closed {closed} of {opened} trickling connections within {patience} s")
    check.expect(not bad, f"trickle: {len(bad)} of {len(latencies)} /health probes failed or took over 1 s: {bad[:10]}")
    check.expect(not watch.failed_batches, f"trickle: event batches never acknowledged: {watch.failed_batches[:5]}")
    check.expect(server.process.poll() is None, f"trickle: the server exited with {server.process.poll()}")
    if not options.measure_only:
        counted = stats(port, False)
        print(f"check-flood: trickle: /v1/stats {json.dumps({k: v for k, v in counted.items() if 'connection' in k or 'timeout' in k})}")
        check.expect(counted.get("body_rate_timeouts") == opened and counted.get("body_timeouts") == 0 and counted.get("connections_shed") == 0,
                     f"trickle: the least body rate did not close every trickle: {counted}")
        bound = baseline_rss + options.cap_bytes
        check.expect(watch.rss_peak <= bound, f"trickle: peak RSS {watch.rss_peak} over the bound {bound}")
    return figures


def idle_closed(port, seconds):
    """Whether a kept-alive connection that made one request is closed within `seconds`."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=seconds)
    try:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: flood\r\n\r\n")
        sock.recv(4096)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if not sock.recv(4096):
                return True
        return False
    except (socket.timeout, ConnectionResetError):
        return False
    finally:
        sock.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--aviary", required=True)
    parser.add_argument("--held", type=int, default=3000, help="connections each flood holds")
    parser.add_argument("--max-connections", type=int, default=1000)
    parser.add_argument("--timeout", type=float, default=2, help="--header-timeout and --body-timeout of the server")
    parser.add_argument("--trickle", type=int, default=3000, help="connections of the trickle flood; 0 skips it")
    parser.add_argument("--trickle-interval", type=float, default=10, help="seconds between a trickling connection's bytes")
    parser.add_argument("--measure-only", action="store_true", help="the floods and figures only: no new flags, no checks")
    parser.add_argument("--json", help="write the figures here")
    options = parser.parse_args()
    options.patience = 25 if options.measure_only else options.timeout + 15
    # Generous: far above the 20 to 30 KB a held connection costs.
    options.cap_bytes = 64 * 2**20 + options.max_connections * 128 * 1024
    raise_file_limit()
    check = Check(options.measure_only)
    limits = [] if options.measure_only else [
        "--header-timeout", str(options.timeout), "--body-timeout", str(options.timeout), "--idle-timeout", str(options.timeout + 1)]
    figures = {}
    directory = tempfile.mkdtemp(prefix="aviary-flood-")
    started = time.monotonic()
    try:
        extra = limits + ([] if options.measure_only else ["--max-connections", str(options.max_connections)])
        server = Server(options.aviary, os.path.join(directory, "data"), extra, log_path=os.path.join(directory, "serve.log"), keys=[KEY], admin_key=ADMIN)
        server.start()
        try:
            figures["capped"] = run_floods("capped", server, options, check, keyed=True)
            if not options.measure_only:
                check.expect(idle_closed(server.port, options.timeout + 10), "a kept-alive connection was not closed by --idle-timeout")
                check.expect(stats(server.port, True).get("idle_timeouts", 0) >= 1, "idle_timeouts did not count the idle connection")
            check.expect(server.process.poll() is None, "the server is not running after the floods")
        finally:
            server.stop()

        # The open-file limit the floods used to exhaust: 256 (soft and hard, so that the server
        # cannot raise it), and the default cap under it.
        wrapper = os.path.join(directory, "aviary-256")
        with open(wrapper, "w") as handle:
            handle.write(f"#!/bin/sh\nulimit -n 256\nexec {shlex.quote(os.path.abspath(options.aviary))} \"$@\"\n")
        os.chmod(wrapper, 0o755)
        low = Server(wrapper, os.path.join(directory, "low"), limits, log_path=os.path.join(directory, "serve-256.log"))
        low.start()
        try:
            figures["ulimit_256"] = run_floods("ulimit-256", low, options, check, keyed=False)
            check.expect(low.process.poll() is None, f"ulimit-256: the server exited with {low.process.poll()}: {low.output()[-2000:]}")
        finally:
            low.stop()

        # The trickle flood: the default slow-client limits, and a cap above the flood, so that
        # only the least body rate can close a trickle.
        if options.trickle > 0:
            hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
            options.trickle = min(options.trickle, hard - 1000)
            cap = [] if options.measure_only else ["--max-connections", str(options.trickle + 500)]
            trickled = Server(options.aviary, os.path.join(directory, "trickle"), cap, log_path=os.path.join(directory, "serve-trickle.log"))
            trickled.start()
            try:
                figures["trickle"] = run_trickle(trickled, options, check)
            finally:
                trickled.stop()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    figures["seconds"] = round(time.monotonic() - started, 1)
    if options.json:
        with open(options.json, "w") as handle:
            json.dump(figures, handle, indent=2)
    if check.violations:
        print(f"check-flood: {len(check.violations)} violation(s)", file=sys.stderr)
        return 1
    print(f"check-flood: passed in {figures['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""scripts/check-api: schemathesis against a running `aviary serve` (see that script's header)."""

import http.client
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from live_server import Server, live_binary, start_live  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Every response must be in the document (status, content type, headers, body) and none a 5xx;
# a route that declares a key must refuse a request without it or with another (ignored_auth).
CHECKS = ",".join([
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
    "negative_data_rejection",
    "ignored_auth",
])


# Requests that must be refused without the key (and with a wrong one): a route of each kind.
GUARDED = [
    ("GET", "/v1/experiments", None, "Authorization"),
    ("POST", "/v1/events", '{"events":[]}', "Authorization"),
    ("POST", "/v1/decisions", '{"experiment":"x"}', "Authorization"),
    ("GET", "/v1/stats", None, "Authorization"),
    ("GET", "/metrics", None, "Authorization"),
    ("GET", "/acme/home/decision/a,b", None, "x-mpath-apikey"),
    ("POST", "/acme/home/goal?session=s", None, "x-mpath-apikey"),
]


def check_refusals(port, key):
    """Every guarded route answers 401 in the API's error shape, with a challenge, to a request
    without a key or with a wrong one; /health and /openapi.yaml stay open; and the requests
    schemathesis made with the key got in. Returns the failures and the server's counters."""
    failures = []

    def request(method, path, body, headers):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        headers = dict(headers)
        if body is not None:
            headers["Content-Type"] = "application/json"
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        answer = (response.status, response.getheader("WWW-Authenticate"), response.read())
        connection.close()
        return answer

    for method, path, body, header in GUARDED:
        wrong = "Bearer " + key + "x" if header == "Authorization" else key + "x"
        for headers in ({}, {header: wrong}):
            status, challenge, text = request(method, path, body, headers)
            try:
                shaped = isinstance(json.loads(text).get("error"), str)
            except ValueError:
                shaped = False
            if status != 401 or not (challenge or "").startswith("Bearer") or not shaped:
                failures.append(f"{method} {path} {'with a wrong key' if headers else 'without a key'}: {status}, WWW-Authenticate {challenge!r}, {text[:200]!r}")
    for path in ("/health", "/openapi.yaml"):
        status, _, _ = request("GET", path, None, {})
        if status != 200:
            failures.append(f"GET {path} without a key: {status}, expected 200")
    # Were schemathesis's requests let in? Had it sent no key, every answer would have been a
    # documented 401 and the run would prove nothing.
    status, _, text = request("GET", "/v1/stats", None, {"Authorization": f"Bearer {key}"})
    stats = json.loads(text) if status == 200 else {}
    if not (stats.get("batches", 0) > 0 and stats.get("decisions", 0) > 0):
        failures.append(f"with the key, GET /v1/stats: {status} {text[:200]!r}; expected schemathesis's batches and decisions to have been accepted")
    return failures, stats


def main():
    aviary = live_binary(os.environ.get("AVIARY", os.path.join(ROOT, ".build/debug/aviary")), ROOT)
    examples = os.environ.get("CHECK_API_EXAMPLES", "60")
    seed = os.environ.get("CHECK_API_SEED", "1")
    data_dir = tempfile.mkdtemp(prefix="aviary-check-api-")
    # A fresh key each run; schemathesis presents it in the form each route documents.
    key = secrets.token_urlsafe(24)
    server = Server(aviary, data_dir, log_path=os.path.join(data_dir, "serve.log"), keys=[key])
    try:
        port = start_live(server, ROOT)
        print(f"check-api: aviary serve on {server.url} with a client key (data {data_dir}); schemathesis with {examples} examples per operation, seed {seed}", file=sys.stderr)
        command = [
            sys.executable, "-c",
            "import sys; from schemathesis.cli import schemathesis; sys.argv[0] = 'schemathesis'; sys.exit(schemathesis())",
            "run", f"http://127.0.0.1:{port}/openapi.yaml",
            "--checks", CHECKS,
            "--max-examples", examples,
            "--seed", seed,
            "--phases", "examples,coverage,fuzzing,stateful",
            # One worker: with two, hypothesis parses source (to describe filter lambdas) on
            # both threads, and Python before 3.11.8 races there (CPython gh-106905): runs
            # failed now and then with "SystemError: AST constructor recursion depth
            # mismatch" inside the tool, the server never at fault.
            "--workers", "1",
            "--request-timeout", "30",
            "--suppress-health-check", "too_slow",
            "--generation-database", "none",
            "--no-color",
            "-H", f"Authorization: Bearer {key}",
            "-H", f"x-mpath-apikey: {key}",
        ] + sys.argv[1:]
        result = subprocess.run(command, cwd=data_dir)
        refusals, stats = check_refusals(port, key) if server.process.poll() is None else ([], {})
        alive = server.process.poll() is None
    finally:
        server.stop()
    if not alive:
        print("check-api: the server died during the run:\n" + server.output(), file=sys.stderr)
        sys.exit(1)
    if refusals:
        print("check-api: the key was not checked as documented:\n  " + "\n  ".join(refusals), file=sys.stderr)
        sys.exit(1)
    if result.returncode != 0:
        print(f"check-api: schemathesis found failures (server log: {server.log_path})", file=sys.stderr)
        sys.exit(result.returncode)
    shutil.rmtree(data_dir, ignore_errors=True)
    print(f"check-api: every response conforms to /openapi.yaml, no 5xx; with the key {stats['batches']} batches and {stats['decisions']} decisions got in, without it 401", file=sys.stderr)


if __name__ == "__main__":
    main()

"""scripts/check-api: schemathesis against a running `aviary serve` (see that script's header)."""

import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from live_server import Server, live_binary, start_live  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Every response must be in the document (status, content type, headers, body) and none a 5xx.
CHECKS = ",".join([
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
    "negative_data_rejection",
])


def main():
    aviary = live_binary(os.environ.get("AVIARY", os.path.join(ROOT, ".build/debug/aviary")), ROOT)
    examples = os.environ.get("CHECK_API_EXAMPLES", "60")
    seed = os.environ.get("CHECK_API_SEED", "1")
    data_dir = tempfile.mkdtemp(prefix="aviary-check-api-")
    server = Server(aviary, data_dir, log_path=os.path.join(data_dir, "serve.log"))
    try:
        port = start_live(server, ROOT)
        print(f"check-api: aviary serve on {server.url} (data {data_dir}); schemathesis with {examples} examples per operation, seed {seed}", file=sys.stderr)
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
        ] + sys.argv[1:]
        result = subprocess.run(command, cwd=data_dir)
        alive = server.process.poll() is None
    finally:
        server.stop()
    if not alive:
        print("check-api: the server died during the run:\n" + server.output(), file=sys.stderr)
        sys.exit(1)
    if result.returncode != 0:
        print(f"check-api: schemathesis found failures (server log: {server.log_path})", file=sys.stderr)
        sys.exit(result.returncode)
    shutil.rmtree(data_dir, ignore_errors=True)
    print("check-api: every response conforms to /openapi.yaml, no 5xx", file=sys.stderr)


if __name__ == "__main__":
    main()

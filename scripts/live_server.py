"""Starts and stops `aviary serve` for the live checks (check-api, check-durability, bench-live).

The server listens on 127.0.0.1 on a port it picks itself (--port 0) and writes to a port file;
`start` waits for that file, or for the process to end, whichever comes first.
"""

import os
import signal
import subprocess
import sys
import tempfile
import time

LIVE_MISSING = "built without live mode"


class ServerExited(Exception):
    """The server ended before it listened; `output` holds what it printed."""

    def __init__(self, code, output):
        super().__init__(f"aviary serve exited with status {code} before listening:\n{output}")
        self.code = code
        self.output = output


class Server:
    """One `aviary serve` process. Its stderr goes to `log_path`."""

    def __init__(self, aviary, data_dir, extra=(), log_path=None, scenario=None, keys=None, admin_key=None):
        self.aviary = aviary
        # Client keys and the admin key, passed in the environment (AVIARY_API_KEYS,
        # AVIARY_ADMIN_KEY) so that they are not on the command line; none: the server asks
        # for none.
        self.keys = list(keys or [])
        self.admin_key = admin_key
        self.data_dir = data_dir
        self.extra = list(extra)
        self.scenario = scenario
        self.log_path = log_path or os.path.join(tempfile.gettempdir(), f"aviary-serve-{os.getpid()}.log")
        self.process = None
        self.port = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self, patience=300, port=0):
        """Starts the server and returns its port once it listens.

        `patience` bounds the wait for a server that hangs without listening; a healthy one
        answers in well under a second, so this is no performance assertion. `port` 0 lets
        the server pick one; a restart passes the port it had, so that clients keep their URL.
        """
        port_file = os.path.join(self.data_dir or tempfile.gettempdir(), f"aviary-port-{os.getpid()}-{id(self)}")
        if os.path.exists(port_file):
            os.remove(port_file)
        command = [self.aviary, "serve"]
        if self.scenario:
            command.append(self.scenario)
        command += ["--host", "127.0.0.1", "--port", str(port), "--port-file", port_file]
        if self.data_dir:
            command += ["--data-dir", self.data_dir]
        command += self.extra
        log = open(self.log_path, "ab")
        # Only the keys given here: an operator's AVIARY_API_KEYS would turn every request
        # of these checks into a 401.
        env = {name: value for name, value in os.environ.items() if name not in ("AVIARY_API_KEYS", "AVIARY_ADMIN_KEY")}
        if self.keys:
            env["AVIARY_API_KEYS"] = ",".join(self.keys)
        if self.admin_key:
            env["AVIARY_ADMIN_KEY"] = self.admin_key
        self.process = subprocess.Popen(command, stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=env)
        log.close()
        deadline = time.monotonic() + patience
        while True:
            code = self.process.poll()
            if code is not None:
                raise ServerExited(code, self.output())
            try:
                with open(port_file) as handle:
                    text = handle.read().strip()
                if text:
                    self.port = int(text)
                    return self.port
            except (FileNotFoundError, ValueError):
                pass
            if time.monotonic() > deadline:
                self.process.kill()
                self.process.wait()
                raise ServerExited("(killed: no port file)", self.output())
            time.sleep(0.05)

    def kill(self):
        """SIGKILL: the process gets no chance to flush or close anything."""
        if self.process and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        if self.process:
            self.process.wait()

    def stop(self):
        """SIGTERM, the graceful stop; SIGKILL if it does not end."""
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()

    def output(self):
        try:
            with open(self.log_path, errors="replace") as handle:
                return handle.read()
        except FileNotFoundError:
            return ""


def live_binary(aviary, root):
    """Builds `aviary` (`swift build --traits Live --product aviary`, debug) when it is missing.
    Whether an existing one has live mode shows only when it serves: see `start_live`."""
    if not os.path.exists(aviary):
        print(f"{aviary} is missing; building it (swift build --traits Live --product aviary)", file=sys.stderr)
        subprocess.run(["swift", "build", "--traits", "Live", "--product", "aviary"], cwd=root, check=True)
    return aviary


def start_live(server, root):
    """Starts `server`; if its binary lacks live mode, builds one with it and starts again."""
    try:
        return server.start()
    except ServerExited as failure:
        if LIVE_MISSING not in failure.output:
            raise
    print(f"{server.aviary} was built without live mode; rebuilding it with --traits Live", file=sys.stderr)
    subprocess.run(["swift", "build", "--traits", "Live", "--product", "aviary"], cwd=root, check=True)
    return server.start()

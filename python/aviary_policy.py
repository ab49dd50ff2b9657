"""Serve an allocation policy to Aviary over its line-delimited JSON protocol.

Aviary's ``external`` allocator starts a policy process once per (replicate, allocator,
experiment) and exchanges one JSON object per line with it over stdin and stdout; the same
messages can travel as HTTP POSTs.  The protocol is documented in docs/allocator-protocol.md.
This module, standard library only, implements it around a class of yours::

    class MyPolicy:
        def __init__(self, variants, seed, parameters): ...
        def update(self, feedback): ...   # feedback: list of Feedback, one per variant
        def choose(self, n): ...          # n variant indices, to be shown in order
        def weights(self): ...            # optional: the share each variant should get

    if __name__ == "__main__":
        aviary_policy.main(MyPolicy)

A contextual policy (``external(command=..., context=segment)``) takes the contexts' feature
rows too, ``__init__(self, variants, seed, parameters, features)``; its feedback names each
entry's context, ``choose(self, n, context)`` decides for one context, and ``weights(self)``
returns one row of weights per context.  ``examples/linucb.py`` is one.

``main`` serves the protocol on stdin/stdout, or over HTTP with ``--http PORT``.  Without a
``weights`` method, a snapshot's weights are the frequencies of ``snapshot-draws`` choices
(default 2000), which for a Thompson sampler is the Monte Carlo estimate of P(best).

Draw every random number from a ``random.Random(seed)`` made in ``__init__``: the same seed
must give the same choices, so that Aviary's results do not depend on its thread count.
"""

import json
import sys
import threading
from collections import namedtuple
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PROTOCOL = 1

Feedback = namedtuple("Feedback", "variant views conversions reward context", defaults=(0,))
"""Feedback for one variant (in one context) since the previous update: views, conversions, reward."""


class ProtocolError(Exception):
    """A message that does not follow the protocol."""


class Session:
    """One conversation: a ``hello``, then ``record``, ``snapshot`` and ``choose`` messages."""

    def __init__(self, make_policy):
        self.make_policy = make_policy
        self.policy = None
        self.variants = 0
        self.contexts = None
        self.snapshot_draws = 2000

    def handle(self, message):
        """The reply (a dict) to one message (a dict); errors become ``{"error": ...}``."""
        try:
            return self._handle(message)
        except Exception as error:  # the policy's own errors reach Aviary as a message
            return {"error": "%s: %s" % (type(error).__name__, error)}

    def _handle(self, message):
        kind = message.get("type")
        if kind == "hello":
            if message.get("protocol") != PROTOCOL:
                raise ProtocolError("this module speaks protocol %d, not %r" % (PROTOCOL, message.get("protocol")))
            self.variants = int(message["variants"])
            parameters = message.get("parameters", {})
            self.snapshot_draws = int(parameters.get("snapshot-draws", 2000))
            if "contexts" in message:
                self.contexts = int(message["contexts"])
                self.policy = self.make_policy(self.variants, int(message["seed"]), parameters, features=message["features"])
                return {"protocol": PROTOCOL, "contexts": self.contexts}
            self.policy = self.make_policy(self.variants, int(message["seed"]), parameters)
            return {"protocol": PROTOCOL}
        if self.policy is None:
            raise ProtocolError("'%s' before 'hello'" % kind)
        if kind == "record":
            self.policy.update([Feedback(f["variant"], f["views"], f["conversions"], f["reward"], f.get("context", 0))
                                for f in message["feedback"]])
            return {}
        if kind == "snapshot":
            if hasattr(self.policy, "weights"):
                weights = self.policy.weights()
                if self.contexts is None:
                    return {"weights": [float(w) for w in weights]}
                return {"weights": [[float(w) for w in row] for row in weights]}
            if self.contexts is None:
                return {"weights": self._frequencies(self.policy.choose(self.snapshot_draws))}
            return {"weights": [self._frequencies(self.policy.choose(self.snapshot_draws, context)) for context in range(self.contexts)]}
        if kind == "choose":
            if self.contexts is None:
                return {"variants": [int(v) for v in self.policy.choose(int(message["n"]))]}
            return {"variants": [int(v) for v in self.policy.choose(int(message["n"]), int(message["context"]))]}
        raise ProtocolError("unknown message type %r" % kind)

    def _frequencies(self, choices):
        counts = [0] * self.variants
        for variant in choices:
            counts[variant] += 1
        return [c / self.snapshot_draws for c in counts]


def serve_pipe(make_policy, input=None, output=None):
    """Answers messages line by line until end of input (Aviary closes stdin when done)."""
    input = input or sys.stdin
    output = output or sys.stdout
    session = Session(make_policy)
    for line in input:
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except ValueError as error:
            reply = {"error": "malformed message: %s" % error}
        else:
            reply = session.handle(message)
        output.write(json.dumps(reply, separators=(",", ":")) + "\n")
        output.flush()


def serve_http(make_policy, port, host="127.0.0.1", ready=None):
    """Answers each POST's JSON body with the reply in the response body.

    A conversation is named by the ``Aviary-Session`` header its requests carry; ``hello``
    starts it.  Prints ``listening on PORT`` to stdout once the socket is bound (port 0 picks a
    free one), then serves until interrupted.
    """
    sessions = {}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            length = int(self.headers.get("Content-Length", 0))
            body = self.rfile.read(length)
            name = self.headers.get("Aviary-Session", "")
            try:
                message = json.loads(body)
            except ValueError as error:
                reply = {"error": "malformed message: %s" % error}
            else:
                with lock:
                    if message.get("type") == "hello":
                        sessions[name] = Session(make_policy)
                    session = sessions.get(name)
                reply = session.handle(message) if session else {"error": "no session %r: send 'hello' first" % name}
            data = json.dumps(reply, separators=(",", ":")).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format, *args):
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    print("listening on %d" % server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def main(make_policy, argv=None):
    """Serves ``make_policy`` on stdin/stdout, or over HTTP with ``--http PORT``."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--http"] and len(argv) == 2:
        serve_http(make_policy, int(argv[1]))
    elif not argv:
        serve_pipe(make_policy)
    else:
        sys.exit("usage: %s [--http PORT]" % sys.argv[0])

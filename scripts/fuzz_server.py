"""The server-payload mode of scripts/fuzz (`scripts/fuzz --server`): mutated requests to a
running `aviary serve`.

Starts the server (debug build with live mode, a fresh --data-dir, 127.0.0.1 only), then sends
it mutated copies of valid requests of every route: JSON bodies with values replaced by hostile
ones (numbers beyond every range and type, long and odd strings, wrong types, missing and unknown
members, batches at and past their size limit), bytes cut or spliced, Conductrics paths and query
parameters with hostile segments and lengths around their bounds. Every answer must be clean:

  * no 5xx, and the server still running;
  * every 4xx is JSON with the API's error shape: an "error" string, and "field" and "expected"
    strings when present;
  * a 2xx never accepts a value outside the range /openapi.yaml states (checked for the event
    batches, goals, rewards and names the fuzzer sent intact).

A failing case is written to the failures folder (case.json: the request and the answer). The
seed is fixed, so a run is reproducible.
"""

import copy
import http.client
import json
import os
import random
import shutil
import sys
import tempfile
import time
import urllib.parse

from live_server import Server, live_binary, start_live

# The bounds of Sources/LiveServer/Bounds.swift, as /openapi.yaml states them.
VALUE = 1e9
CREATED = (0, 4102444800)
NAME = 256
CODE = 64
CHOICES = 64
DECISIONS = 16
EVENTS = 10000

# JSON number tokens, written raw so that Python's own float formatting does not tame them.
HOSTILE_NUMBERS = [
    "0", "-0", "1", "-1", "0.5", "3.99", "1e9", "-1e9", "1000000000", "1000000000.0000001", "1000000001",
    "-1000000001", "4102444800", "4102444800.5", "4102444801", "1e308", "-1e308", "1e309", "-1e309",
    "1e-320", "5e-324", "2147483648", "9223372036854775807", "9223372036854775808",
    "18446744073709551616", "123456789012345678901234567890", "1.7976931348623157e308", "0.1e1",
]
HOSTILE_TEXT = [
    "", " ", "a", "0#0", "1#1", "01#1", "+1#1", "1#01", "18446744073709551615#4294967295",
    "18446744073709551616#1", "1#4294967296", "1##1", "#", "view", "conversion", "goal", "participation",
    "click", "null", "é", "\u202e", "\u0000", "\n", "a,b", "a:b", "../", "%2F", "x" * 255, "x" * 256, "x" * 257,
    "é" * 256, "é" * 257, "x" * 5000, "😀" * 100,
]
HOSTILE_VALUES = [None, True, False, [], {}, [1], {"a": 1}]
HOSTILE_QUERY = HOSTILE_NUMBERS + ["nan", "NaN", "inf", "-inf", "infinity", "0x10", "1_0", "", "abc", "1e", "--1"]


class Raw:
    """A JSON token written as it is."""

    def __init__(self, text):
        self.text = text


def encode(value):
    """JSON text of `value`, with Raw tokens as they are."""
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, dict):
        return "{" + ",".join(json.dumps(k) + ":" + encode(v) for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(encode(v) for v in value) + "]"
    return json.dumps(value)


def number(token):
    """The value of a number token as Python reads it (inf beyond the doubles), or None."""
    try:
        return float(token)
    except ValueError:
        return None


def hostile(rng):
    roll = rng.random()
    if roll < 0.45:
        return Raw(rng.choice(HOSTILE_NUMBERS))
    if roll < 0.85:
        return rng.choice(HOSTILE_TEXT)
    # A copy: the tree it lands in may be mutated further.
    return copy.deepcopy(rng.choice(HOSTILE_VALUES))


def slots(value):
    """Every place in a JSON tree: (container, key) pairs."""
    found = []
    if isinstance(value, dict):
        for key in value:
            found.append((value, key))
            found += slots(value[key])
    elif isinstance(value, list):
        for index in range(len(value)):
            found.append((value, index))
            found += slots(value[index])
    return found


def mutate_json(body, rng):
    """A structural mutation of a JSON tree, in place."""
    events = body.get("events") if isinstance(body, dict) else None
    if isinstance(events, list) and events and rng.random() < 0.4:
        # The numbers the bounds are for, most often.
        event = rng.choice(events)
        event[rng.choice(["value", "created_at"])] = Raw(rng.choice(HOSTILE_NUMBERS))
        if rng.random() < 0.5:
            return
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        places = slots(body)
        if not places:
            return
        container, key = rng.choice(places)
        roll = rng.random()
        if roll < 0.6:
            container[key] = hostile(rng)
        elif roll < 0.75:
            del container[key]
        elif roll < 0.85 and isinstance(container, list):
            container.insert(key, copy.deepcopy(container[key]))
        elif isinstance(container, dict):
            container[rng.choice(["extra", "id", "value", "created_at", "session", "experiment"])] = hostile(rng)
        else:
            container[key] = [container[key]]


def mutate_bytes(text, rng):
    data = text.encode("utf-8", "surrogatepass")
    roll = rng.random()
    if roll < 0.3 or not data:
        return data[: rng.randint(0, len(data))]
    at = rng.randrange(len(data))
    if roll < 0.6:
        return data[:at] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 4))) + data[at:]
    if roll < 0.8:
        return data[:at] + data[at + rng.randint(1, 8):]
    end = min(len(data), at + rng.randint(1, 40))
    return data[:end] + data[at:end] + data[end:]


def views(count, start=0):
    return [{"id": f"7#{start + i}", "kind": "view", "experiment": "__E__", "variant": "__V__"} for i in range(count)]


def seeds(experiment, variant):
    """Valid requests of every route: (method, path, JSON body or None)."""
    event = {"id": "42#1", "kind": "conversion", "experiment": experiment, "variant": variant, "value": Raw("3.99"), "created_at": Raw("1760000000")}
    view = {"id": "42#2", "kind": "view", "experiment": experiment, "variant": variant, "created_at": Raw("1760000000")}
    return [
        ("POST", "/v1/events", {"events": [event, view]}),
        ("POST", "/v1/events", {"events": [view]}),
        ("POST", "/v1/decisions", {"experiment": experiment, "session": "s1"}),
        ("POST", "/v1/goals", {"experiment": experiment, "session": "s1", "value": Raw("3.99")}),
        ("GET", "/acme/home/decision/a,b?session=s1", None),
        ("GET", f"/acme/{experiment}/decision/{variant}?session=s2", None),
        ("GET", "/acme/page/decisions/color:red,blue/size:sm,lg?session=s1", None),
        ("POST", "/acme/home/goal?session=s1&reward=3.99", None),
        ("POST", "/acme/home/goal/purchase?session=s1&reward=3.99", None),
        ("POST", "/acme/home/expire?session=s1", None),
        ("GET", "/v1/experiments", None),
    ]


def quote(text):
    return urllib.parse.quote(text, safe="")


def mutate_path(path, rng):
    """A Conductrics path or query with a hostile segment, or lengths and counts around their
    bounds; returns the path and extra headers."""
    parsed = urllib.parse.urlsplit(path)
    segments = parsed.path.split("/")[1:]
    query = urllib.parse.parse_qsl(parsed.query, keep_blank_values=True)
    headers = {}
    roll = rng.random()
    if roll < 0.3 and segments:
        index = rng.randrange(len(segments))
        value = hostile(rng)
        segments[index] = quote(value.text if isinstance(value, Raw) else value if isinstance(value, str) else json.dumps(value))
    elif roll < 0.5 and segments:
        # Lengths and counts at and one past their bounds.
        length = rng.choice([NAME, NAME + 1, CODE, CODE + 1])
        code = "c" * length
        shape = rng.choice(["owner", "agent", "choice", "choices", "decisions", "name"])
        if shape == "owner":
            segments[0] = code
        elif shape == "agent" and len(segments) > 1:
            segments[1] = code
        elif shape == "choice":
            segments[-1] = f"{code},b"
        elif shape == "choices":
            segments[-1] = ",".join(f"c{i}" for i in range(rng.choice([CHOICES, CHOICES + 1])))
        elif shape == "decisions" and len(segments) > 3:
            segments = segments[:3] + [f"d{i}:a,b" for i in range(rng.choice([DECISIONS, DECISIONS + 1]))]
        else:
            segments[-1] = f"{code}:a,b"
    elif roll < 0.8:
        key = rng.choice(["session", "reward", "session", "other"])
        value = rng.choice(HOSTILE_QUERY + HOSTILE_TEXT + ["s" * NAME, "s" * (NAME + 1)])
        query = [(k, v) for k, v in query if k != key] + [(key, value)]
    elif roll < 0.9:
        query = [(k, v) for k, v in query if k != "session"]
        headers["x-mpath-session"] = rng.choice(["s" * NAME, "s" * (NAME + 1), "", "h1"])
    else:
        query = []
    text = "/" + "/".join(segments)
    if query:
        text += "?" + "&".join(f"{quote(k)}={quote(v)}" for k, v in query)
    return text, headers


def in_range(value, low, high):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and low <= value <= high


def accepted_out_of_range(method, path, body, headers):
    """Why a 2xx to this intact request broke a stated bound, or None."""
    parsed = urllib.parse.urlsplit(path)
    query = dict(urllib.parse.parse_qsl(parsed.query, keep_blank_values=True))
    segments = [urllib.parse.unquote(s) for s in parsed.path.split("/")[1:]]
    if not path.startswith("/v1/"):
        if len(query.get("session", "")) > NAME or len(headers.get("x-mpath-session", "")) > NAME:
            return f"a session over {NAME} characters"
        if len(segments) > 2 and segments[2] == "goal" and "reward" in query and not in_range(number(query["reward"]), -VALUE, VALUE):
            return f"reward {query['reward']!r} outside ±{VALUE:g}"
        if segments and len(segments[0]) > NAME:
            return "an owner over its length"
        if len(segments) > 1 and len(segments[1]) > NAME:
            return "an agent over its length"
        if len(segments) > 2 and segments[2] == "decision" and len(segments) > 3:
            choices = segments[3].split(",")
            if len(choices) > CHOICES or any(len(c) > CODE for c in choices):
                return "choices over their count or length"
        if len(segments) > 2 and segments[2] == "decisions":
            specs = segments[3:]
            if len(specs) > DECISIONS or any(len(part) > CODE for spec in specs for part in spec.replace(":", ",").split(",")):
                return "decisions over their count or length"
        if len(segments) > 3 and segments[2] == "goal" and len(segments[3]) > NAME:
            return "a goal name over its length"
        return None
    if not isinstance(body, dict):
        return None
    for name in ("experiment", "session"):
        if isinstance(body.get(name), str) and len(body[name]) > NAME:
            return f"{name} over {NAME} characters"
    if path == "/v1/goals" and body.get("value") is not None and not in_range(body["value"], -VALUE, VALUE):
        return f"goal value {body['value']!r} outside ±{VALUE:g}"
    events = body.get("events")
    if path == "/v1/events" and isinstance(events, list):
        if len(events) > EVENTS:
            return f"{len(events)} events in one batch"
        for index, event in enumerate(events):
            if not isinstance(event, dict):
                continue
            if event.get("value") is not None and not in_range(event["value"], -VALUE, VALUE):
                return f"events[{index}].value {event['value']!r} outside ±{VALUE:g}"
            if event.get("created_at") is not None and not in_range(event["created_at"], *CREATED):
                return f"events[{index}].created_at {event['created_at']!r} outside {CREATED}"
    return None


def judge(status, content_type, data):
    """None when the answer is clean, else why not."""
    if status >= 500:
        return f"status {status}"
    if status == 304:
        return None
    if not (content_type or "").startswith("application/json"):
        return f"status {status} with content type {content_type!r}"
    try:
        answer = json.loads(data)
    except ValueError:
        return f"status {status} with a body that is not JSON"
    if status >= 400:
        if not isinstance(answer, dict) or not isinstance(answer.get("error"), str):
            return f"status {status} without the error shape"
        for name in ("field", "expected"):
            if name in answer and not isinstance(answer[name], str):
                return f"status {status} with a non-string {name}"
    return None


class Connection:
    def __init__(self, port):
        self.port = port
        self.connection = None

    def send(self, method, path, body, headers):
        for attempt in range(2):
            if self.connection is None:
                self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            try:
                self.connection.request(method, path, body=body, headers=headers)
                response = self.connection.getresponse()
                data = response.read()
                if response.getheader("Connection", "").lower() == "close":
                    self.close()
                return response.status, response.getheader("Content-Type"), data
            except (http.client.HTTPException, OSError):
                self.close()
                if attempt == 1:
                    raise

    def close(self):
        if self.connection is not None:
            self.connection.close()
            self.connection = None


def run(options, root):
    aviary = live_binary(options.binary or os.path.join(root, ".build/debug/aviary"), root)
    data_dir = tempfile.mkdtemp(prefix="aviary-fuzz-server-")
    server = Server(aviary, data_dir, log_path=os.path.join(data_dir, "serve.log"))
    port = start_live(server, root)
    connection = Connection(port)
    failures = []
    statuses = {}
    started = time.monotonic()
    try:
        _, _, data = connection.send("GET", "/v1/experiments", None, {})
        experiment = json.loads(data)["experiments"][0]
        cases = seeds(experiment["id"], experiment["variants"][0]["id"])
        os.makedirs(options.failures, exist_ok=True)
        for index in range(options.cases):
            rng = random.Random(f"{options.seed}:server:{index}")
            method, path, template = rng.choice(cases)
            headers = {}
            body = None
            intact = True
            if template is not None:
                tree = json.loads(encode(template))
                # Raw tokens survive the copy as the numbers Python reads; hostile ones are new Raws.
                if path == "/v1/events" and rng.random() < 0.03:
                    batch = views(rng.choice([EVENTS, EVENTS + 1]), start=index * (EVENTS + 1))
                    tree = {"events": [dict(e, experiment=experiment["id"], variant=experiment["variants"][0]["id"]) for e in batch]}
                else:
                    mutate_json(tree, rng)
                text = encode(tree)
                # Fresh ids, so that batches are not all duplicates of the first.
                text = text.replace('"42#', f'"{index + 100}#')
                body = text.encode("utf-8", "surrogatepass")
                if rng.random() < 0.2:
                    body = mutate_bytes(text, rng)
                    intact = False
                headers["Content-Type"] = rng.choice(["application/json"] * 18 + ["text/plain", "application/json; charset=utf-8"])
                try:
                    sent = json.loads(body)
                except ValueError:
                    sent = None
                    intact = False
            else:
                path, headers = mutate_path(path, rng)
                sent = None
            try:
                status, content_type, data = connection.send(method, path, body, headers)
            except (http.client.HTTPException, OSError) as error:
                status, content_type, data = None, None, str(error).encode()
            statuses[status] = statuses.get(status, 0) + 1
            if status is None:
                problem = "no answer" + ("" if server.process.poll() is None else f": the server died ({server.process.returncode})")
            else:
                problem = judge(status, content_type, data)
                if problem is None and 200 <= status < 300 and intact:
                    why = accepted_out_of_range(method, path, sent, headers)
                    problem = f"accepted {why}" if why else None
            if problem:
                case_dir = os.path.join(options.failures, f"server-{options.seed}-{index}")
                os.makedirs(case_dir, exist_ok=True)
                with open(os.path.join(case_dir, "case.json"), "w", encoding="utf-8") as handle:
                    json.dump({"seed": options.seed, "case": index, "problem": problem, "method": method, "path": path, "headers": headers,
                               "body": body.decode("utf-8", "replace") if body else None, "status": status,
                               "answer": data.decode("utf-8", "replace")[:4000]}, handle, indent=2, ensure_ascii=False)
                failures.append(index)
                print(f"FAIL server case {index}: {problem}: {method} {path[:200]}", file=sys.stderr)
                print(f"  written to {case_dir}", file=sys.stderr)
                if server.process.poll() is not None:
                    break
            if options.verbose:
                print(f"server case {index}: {method} {path[:120]} -> {status}{' FAIL: ' + problem if problem else ''}")
        alive = server.process.poll() is None
        if alive:
            status, _, _ = connection.send("GET", "/health", None, {})
            alive = status == 200
    finally:
        connection.close()
        server.stop()
    elapsed = time.monotonic() - started
    counts = ", ".join(f"{count} × {status}" for status, count in sorted(statuses.items(), key=lambda item: (item[0] is None, item[0] or 0)))
    print(f"fuzz --server: seed {options.seed}, {options.cases} requests in {elapsed:.0f} s: {counts}")
    if not alive:
        print(f"fuzz --server: the server is not healthy at the end; its log:\n{server.output()[-4000:]}", file=sys.stderr)
        sys.exit(1)
    if failures:
        print(f"fuzz --server: {len(failures)} failing request(s) written to {options.failures}; server log {server.log_path}")
        sys.exit(1)
    shutil.rmtree(data_dir, ignore_errors=True)
    print("fuzz --server: no 5xx, every refusal in the JSON error shape, nothing out of range accepted")

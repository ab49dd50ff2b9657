"""Locust users for scripts/bench-live: the request mix of Aviary's live devices.

Each user is a device that posts batches of BATCH (default 20) events with unique ids
(DEVICE#SEQUENCE) to POST /v1/events and, once every FETCH_EVERY (default 10) batches, fetches
GET /v1/experiments with If-None-Match set to the ETag it holds (a 304 once it has the data).
Users wait for nothing between requests: the point is the most events a client core can push.

    locust -f Benchmarks/Live/locustfile.py --headless -u 64 -r 64 -t 30s --host http://127.0.0.1:PORT
"""

import itertools
import json
import os
import random

from locust import FastHttpUser, constant, task

BATCH = int(os.environ.get("BATCH", "20"))
FETCH_EVERY = int(os.environ.get("FETCH_EVERY", "10"))
DEVICE_BASE = int(os.environ.get("LOCUST_DEVICE_BASE", "2000000"))
KINDS = ["view", "view", "view", "participation", "conversion", "goal"]
VARIANTS = ["control", "green"]
devices = itertools.count(DEVICE_BASE)


class Device(FastHttpUser):
    wait_time = constant(0)

    def on_start(self):
        self.device = next(devices)
        self.sequence = 0
        self.etag = None
        self.random = random.Random(self.device)

    @task(FETCH_EVERY)
    def post_events(self):
        events = []
        for _ in range(BATCH):
            self.sequence += 1
            kind = KINDS[self.sequence % len(KINDS)]
            event = {"id": f"{self.device}#{self.sequence}", "kind": kind, "experiment": "checkout-button",
                     "variant": VARIANTS[self.sequence % 2], "created_at": 1.7e9 + self.sequence}
            if kind in ("conversion", "goal"):
                event["value"] = 4.99
            events.append(event)
        with self.client.post("/v1/events", data=json.dumps({"events": events}), headers={"Content-Type": "application/json"}, name="POST /v1/events", catch_response=True) as response:
            if response.status_code == 200:
                response.success()
            else:
                response.failure(f"status {response.status_code}")

    @task(1)
    def fetch_experiments(self):
        headers = {"If-None-Match": self.etag} if self.etag else {}
        with self.client.get("/v1/experiments", headers=headers, name="GET /v1/experiments", catch_response=True) as response:
            if response.status_code == 200:
                self.etag = response.headers.get("ETag")
                response.success()
            elif response.status_code == 304:
                response.success()
            else:
                response.failure(f"status {response.status_code}")

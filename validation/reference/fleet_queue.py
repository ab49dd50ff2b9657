"""An independent model of a fleet's event queues: devices that go offline in exponential spells.

Written from the scenario's description, not from Aviary's code, with Python's own random
numbers. Each device alternates online and offline spells (exponential, started in the
stationary distribution) and has Poisson sessions. A session shows a view, which is an event
(`sticky: false`), and with probability `rate` a conversion, a second event at the same time.
Myna-style devices that have never fetched experiment data show the in-app default and log
nothing: a device gets its data at its first session while online (and shows that session's view
`first_view_wait` later, once the data is in). An event created online is sent when its batch's
flush interval has passed, or when the device is next online after that; one created offline
is sent when the spell ends. An event not sent by the horizon is censored (still waiting).

Usage: python3 fleet_queue.py DEVICES HORIZON_S SESSIONS_PER_DAY MEAN_ONLINE_S MEAN_OFFLINE_S
       FLUSH_S RATE REPLICATES SEED [WARMUP_S]
Prints one JSON object; the mean number of events waiting is a time average over
[WARMUP_S, HORIZON_S] (default 0), so it can skip the hours in which the queues fill.
"""
import bisect
import json
import math
import random
import sys


def device_events(rng, horizon, session_mean, mean_online, mean_offline, flush, rate, first_view_wait):
    """Latencies (s) of the device's events, and (created, sent) spans for time in the queue."""
    # Connectivity: toggle times, and whether the device is online at time 0.
    online_fraction = mean_online / (mean_online + mean_offline)
    online0 = rng.random() < online_fraction
    toggles = []
    t, state = 0.0, online0
    while t <= horizon:
        t += rng.expovariate(1 / (mean_online if state else mean_offline))
        toggles.append(t)
        state = not state

    def online_at(x):
        # Toggles before x: an even count leaves the initial state.
        return online0 if bisect.bisect_right(toggles, x) % 2 == 0 else not online0

    def next_online(x):
        """The first time at or after x when the device is online."""
        if online_at(x):
            return x
        return toggles[bisect.bisect_right(toggles, x)]

    spans = []
    has_data = False
    t = rng.expovariate(1 / session_mean)
    while t <= horizon:
        if not has_data:
            if online_at(t):
                has_data = True
                created = t + first_view_wait
            else:
                created = None  # the default is shown; nothing is logged
        else:
            created = t
        if created is not None and created <= horizon:
            if online_at(created):
                sent = next_online(created + flush)
            else:
                sent = next_online(created)
            count = 2 if rng.random() < rate else 1
            for _ in range(count):
                spans.append((created, sent))
        t += rng.expovariate(1 / session_mean)
    return spans


def quantile(sorted_values, q):
    """The smallest value with at least a fraction q of the values at or below it."""
    index = max(0, math.ceil(q * len(sorted_values)) - 1)
    return sorted_values[index]


def main():
    devices, horizon, per_day, mean_online, mean_offline, flush, rate, replicates, seed = sys.argv[1:10]
    warmup = float(sys.argv[10]) if len(sys.argv) > 10 else 0.0
    devices, replicates, seed = int(devices), int(replicates), int(seed)
    horizon, per_day, mean_online, mean_offline, flush, rate = map(float, (horizon, per_day, mean_online, mean_offline, flush, rate))
    session_mean = 86_400 / per_day
    latencies, waiting_area, created, censored = [], 0.0, 0, 0
    for replicate in range(replicates):
        rng = random.Random(seed * 1_000_003 + replicate)
        for _ in range(devices):
            for start, sent in device_events(rng, horizon, session_mean, mean_online, mean_offline, flush, rate, 2.0):
                created += 1
                waiting_area += max(0.0, min(sent, horizon) - max(start, warmup))
                if sent <= horizon:
                    latencies.append(sent - start)
                else:
                    censored += 1
    latencies.sort()
    result = {
        "events_created": created / replicates,
        "events_acked": len(latencies) / replicates,
        "events_censored": censored / replicates,
        "latency_mean_s": sum(latencies) / len(latencies),
        "latency_p50_s": quantile(latencies, 0.50),
        "latency_p95_s": quantile(latencies, 0.95),
        "latency_p99_s": quantile(latencies, 0.99),
        # Little's law's two sides, from the same sample paths.
        "mean_waiting": waiting_area / (horizon - warmup) / replicates,
        "ingestion_rate_per_s": len(latencies) / horizon / replicates,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()

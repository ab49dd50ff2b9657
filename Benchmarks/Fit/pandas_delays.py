"""What aviary fit's delay figures are, computed the way an analyst would with pandas: a Segment
NDJSON export read whole, its three times parsed, and the quantiles of the device's wait
(sentAt - originalTimestamp) and of the network's time (receivedAt - sentAt) taken.
Prints the seconds it took and the figures, for scripts/bench-fit to set beside aviary's."""
import sys
import time

import pandas as pd

start = time.perf_counter()
frame = pd.read_json(sys.argv[1], lines=True)
created = pd.to_datetime(frame["originalTimestamp"], utc=True, format="ISO8601")
sent = pd.to_datetime(frame["sentAt"], utc=True, format="ISO8601")
received = pd.to_datetime(frame["receivedAt"], utc=True, format="ISO8601")
wait = (sent - created).dt.total_seconds()
network = (received - sent).dt.total_seconds()
figures = {f"wait_p{int(q * 100)}": wait.quantile(q) for q in (0.5, 0.95, 0.99)}
figures.update({f"network_p{int(q * 100)}": network.quantile(q) for q in (0.5, 0.95, 0.99)})
seconds = time.perf_counter() - start
print(f"{seconds:.3f} {len(frame)}")
for name, value in figures.items():
    print(f"{name} {value:.3f}")

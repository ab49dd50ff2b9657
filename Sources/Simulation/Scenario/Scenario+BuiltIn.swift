extension Scenario {
    /// The text of the built-in default scenario, identical to `Scenarios/default.yaml`.
    public static let builtInDefaultText = """
# The built-in default: `aviary run` with no scenario runs exactly this.
# Small enough to finish in seconds; copy it and edit to ask your own question.
name: default
description: 5,000 devices for 14 days, 5 % vs 6 %, offline 20 % of the time; uniform vs Thompson vs epsilon-greedy
seed: 2026
replicates: 5
horizon: 14d
timestep: 6h
population:
  devices: 5000
  sessions_per_day: 3
  session_length: 5m
  conversion_delay: {distribution: exponential, mean: 10m}
experiments:
  - id: checkout-button
    variants:
      - {id: control, rate: 0.05}
      - {id: green, rate: 0.06}
allocators:
  - uniform
  - thompson
  - epsilon-greedy(epsilon=0.1)
client:
  style: myna
  batch_size: 20
  flush_interval: 30s
  backoff: {policy: exponential, base: 1s, multiplier: 2, cap: 10m, jitter: full}
  queue_capacity: 1000
  data_ttl: 1h
network:
  offline_fraction: 0.2
  mean_offline: 2h
  latency: {distribution: lognormal, median: 200ms, sigma: 0.5}
  loss: 0.01
server:
  update: {every: 1h}
analysis:
  looks: 1d                   # the analyst reads the experiment daily (inference.csv)

"""

    /// The built-in default scenario: what `aviary run` runs with no scenario file.
    public static var builtInDefault: Scenario {
        // The text is part of the program and covered by a test.
        try! Scenario(yaml: builtInDefaultText, file: "built-in default")
    }

    /// The text of the built-in load test, identical to `Scenarios/loadtest-thundering-herd.yaml`.
    public static let builtInLoadTestText = """
# The built-in load test (`aviary loadtest` with no file): the server is down for two hours
# (requests hang until the client's 20 s timeout), then 3,000 devices with full queues come
# back at once. Six client policies side by side on
# the same fleet and the same outage: who hammers the server, who drains fastest, who drops.
name: loadtest-thundering-herd
description: A 2-hour outage, then 3,000 devices reconnect at once; six retry/batching policies compared
seed: 21
replicates: 3
horizon: 8h
timestep: 5m
population:
  devices: 3000
  sessions_per_day: 96
  session_length: 2m
# Not sticky: every view is an event, so the queue carries a steady load (about 11 events/s).
experiments:
  - {id: home-feed, sticky: false, variants: [{id: a, rate: 0.2}, {id: b, rate: 0.2}]}
  - {id: search-box, sticky: false, variants: [{id: a, rate: 0.1}, {id: b, rate: 0.1}]}
  - {id: player, sticky: false, variants: [{id: a, rate: 0.05}, {id: b, rate: 0.05}]}
client:
  batch_size: 20
  flush_interval: 30s
  queue_capacity: 500
  request_timeout: 20s
network:
  latency: {distribution: lognormal, median: 250ms, sigma: 0.3}
  outages:
    - {start: 2h, end: 4h, mode: timeout}
server:
  update: {every: 1h}
  capacity: {events_per_second: 40, max_concurrent: 50, max_backlog: 5s, reject_status: 429, retry_after: true}
policies:
  - {label: no-backoff, backoff: {policy: none}, honour_retry_after: false}
  - {label: fixed-5s, backoff: {policy: fixed, base: 5s}, honour_retry_after: false}
  - {label: exponential, backoff: {policy: exponential, base: 1s, multiplier: 2, cap: 10m, jitter: none}, honour_retry_after: false}
  - {label: exponential-full-jitter, backoff: {policy: exponential, base: 1s, multiplier: 2, cap: 10m, jitter: full}, honour_retry_after: false}
  - {label: full-jitter+retry-after, backoff: {policy: exponential, base: 1s, multiplier: 2, cap: 10m, jitter: full}, honour_retry_after: true}
  - {label: full-jitter+batch-100, batch_size: 100, flush_interval: 2m, backoff: {policy: exponential, base: 1s, multiplier: 2, cap: 10m, jitter: full}, honour_retry_after: true}

"""

    /// The built-in load test: what `aviary loadtest` runs with no scenario file.
    public static var builtInLoadTest: Scenario {
        // The text is part of the program and covered by a test.
        try! Scenario(yaml: builtInLoadTestText, file: "built-in load test")
    }
}

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
"""

    /// The built-in default scenario: what `aviary run` runs with no scenario file.
    public static var builtInDefault: Scenario {
        // The text is part of the program and covered by a test.
        try! Scenario(yaml: builtInDefaultText, file: "built-in default")
    }
}

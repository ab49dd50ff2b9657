// The seed SDKs' features beyond the Myna-style core in ClientEngine, each a sans-I/O value or
// state machine:
// - ActiveConfig: MSActiveConfig's config sections, listeners, store and exchange format;
// - RemoteValues: the Experiments framework's typed remote values with defaults and baselines;
// - Campaigns: VWO's campaigns, segments, once-per-campaign and once-per-goal events;
// - Decisions: the Conductrics wrapper's server-side decisions, goals and sticky sessions;
// - Bucketing: GrowthBook-compatible deterministic assignment by hashing a stable user id.

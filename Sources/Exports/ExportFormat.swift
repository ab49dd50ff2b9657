/// An analytics vendor's raw event export: what `aviary fit` reads and `aviary run --export`
/// writes.
///
/// Each format names every time by whose clock it is on: the device's when it created the
/// event, the device's when it sent it, the collector's when it received it (see
/// ``ExportRecord``).
///
/// `Sendable`: a plain value.
public enum ExportFormat: String, CaseIterable, Sendable {
    /// Segment's raw NDJSON (S3 logs), or its warehouse column names.
    case segment
    /// RudderStack's raw NDJSON (object storage), Segment's shape with `context.sessionId`.
    case rudderstack
    /// Amplitude's Export API: a zip of gzipped NDJSON files, one an hour.
    case amplitude
    /// PostHog's batch export: JSON lines, no device-side sent time.
    case posthog
    /// Snowplow's enriched events, tab-separated, in the enriched event's field order.
    case snowplow
    /// Snowplow's `atomic.events` table as CSV with a header row of its column names.
    case snowplowCSV = "snowplow-csv"
    /// Mixpanel's raw export NDJSON: device time only, no sent or session fields.
    case mixpanel
    /// `aviary serve`'s event log (`events*.log`): JSON lines of the batches it took in.
    case aviary
}

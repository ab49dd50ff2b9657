import Foundation

/// The range of every number and the length of every string and list the API accepts: the
/// OpenAPI document states them (`BoundsTests` holds it to these) and every request is checked
/// against them, so that no payload poisons an allocator's sums (a conversion worth −1e308
/// would outweigh everything after it) or fills the server's memory with one name. A value out
/// of its range gets 422 naming the field.
///
/// Lengths are in Unicode code points, as JSON Schema's `maxLength` counts them.
enum Bounds {
    /// A conversion's, goal's or reward's value: beyond any price or score, well inside the
    /// doubles' exact integers, so that sums of many stay meaningful.
    static let value: ClosedRange<Double> = -1e9...1e9
    /// An event's `created_at`, seconds since 1970: from 1970 to the start of 2100.
    static let createdAt: ClosedRange<Double> = 0...4_102_444_800
    /// A name the server keeps or echoes: an experiment, an agent, a session, an owner, a goal.
    static let nameLength = 256
    /// A Conductrics choice code or decision name.
    static let codeLength = 64
    /// A VWO pixel's extra data (`ed`), a JSON object in a query parameter: room for what the
    /// seed recommends sending and an event id many times over.
    static let extraDataLength = 4096
    /// Choices in one Conductrics decision (as many as a served experiment may have variants).
    static let choices = 64
    /// Decisions in one `…/decisions/` request.
    static let decisions = 16
    /// Attributes a decision request names: a scenario has at most this many.
    static let attributes = 64
    /// Events in one batch: far above any client's batch (the scenarios send 20 to 200), and
    /// the same whatever `--max-body` allows.
    static let events = 10_000

    /// `value`, or 422 naming `field` when it is not a number in `range`.
    static func check(_ value: Double, in range: ClosedRange<Double>, field: String, what: String) throws(APIError) {
        guard range.contains(value) else {
            throw .badField(field, expected: "\(what) from \(describe(range.lowerBound)) to \(describe(range.upperBound))")
        }
    }

    /// 422 naming `field` when `text` is longer than `length` code points.
    static func check(_ text: some StringProtocol, length: Int, field: String) throws(APIError) {
        guard text.unicodeScalars.count <= length else {
            throw .badField(field, expected: "at most \(length) characters")
        }
    }

    /// 422 naming `field` when a list has more than `limit` items.
    static func check(count: Int, limit: Int, field: String, what: String) throws(APIError) {
        guard count <= limit else {
            throw .badField(field, expected: "at most \(limit) \(what)")
        }
    }

    /// A bound as the OpenAPI document and the error messages write it: a whole number in
    /// decimal (the bounds here are whole numbers).
    static func describe(_ bound: Double) -> String {
        String(format: "%.0f", bound)
    }
}

/// Identifies a listener registered with ``ActiveConfig/registerListener(forSectionName:)``.
///
/// `ListenerID` is `Sendable`: it is a plain value.
public struct ListenerID: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The sequence number of the registration.
    public let rawValue: Int

    /// Orders listeners by registration.
    public static func < (lhs: ListenerID, rhs: ListenerID) -> Bool { lhs.rawValue < rhs.rawValue }

    /// `listener-` followed by the sequence number.
    public var description: String { "listener-\(rawValue)" }
}

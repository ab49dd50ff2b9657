/// A slice `[start, end)` of a namespace: experiments sharing a namespace with disjoint slices
/// are mutually exclusive.
///
/// `BucketNamespace` is `Sendable`: it is a plain value.
public struct BucketNamespace: Hashable, Sendable {
    /// The namespace's name, hashed into each user's position.
    public var id: String
    /// The first position in the slice.
    public var start: Double
    /// The first position past the slice.
    public var end: Double

    /// Creates a namespace slice.
    public init(id: String, start: Double, end: Double) {
        self.id = id
        self.start = start
        self.end = end
    }
}

/// How the propensities devices logged with their views compare with the weights the server
/// published for the data version each view names.
///
/// A device draws from the data it has cached: a copy hours old, or one drawn offline, may
/// give a variant another probability than the server believes. Only a unit's first view is
/// compared (the draw that placed the unit), and only where its publication is known.
///
/// `Sendable`: a value, kept in the server's snapshots.
public struct LoggedPropensities: Hashable, Sendable, Codable {
    /// Two probabilities closer than this are the same weight written two ways.
    public static let tolerance = 1e-9

    /// Units whose first view carried a propensity.
    public private(set) var logged = 0
    /// Of those, the units whose view named a publication the ledger knows: compared.
    public private(set) var compared = 0
    /// Of those compared, the units whose propensity differs from the published weight by more
    /// than ``tolerance``.
    public private(set) var differing = 0
    /// Σ |logged − published| over the compared units.
    public private(set) var absoluteDifference = 0.0
    /// The largest |logged − published|.
    public private(set) var largestDifference = 0.0

    /// Nothing logged yet.
    public init() {}

    /// The mean |logged − published| over the compared units; `nil` before any.
    public var meanAbsoluteDifference: Double? {
        compared > 0 ? absoluteDifference / Double(compared) : nil
    }

    /// A first view logged `propensity`, its publication's weight for its variant `published`
    /// (`nil` when its publication is not known). Returns whether the two differ.
    @discardableResult
    public mutating func record(_ propensity: Double, published: Double?) -> Bool {
        logged += 1
        guard let published else { return false }
        compared += 1
        let difference = abs(propensity - published)
        absoluteDifference += difference
        largestDifference = max(largestDifference, difference)
        guard difference > Self.tolerance else { return false }
        differing += 1
        return true
    }

    private enum CodingKeys: String, CodingKey {
        case logged, compared, differing
        case absoluteDifference = "absolute_difference", largestDifference = "largest_difference"
    }
}

/// The experiments a device knows about: downloaded from a server, or the defaults an app ships.
///
/// One instance is shared by reference by every device holding it, so a million devices cost
/// one copy. It is immutable after creation.
///
/// ## Payload format
/// ``init(payload:)`` reads this JSON (members not listed are ignored):
/// ```json
/// {
///   "version": 7,
///   "experiments": [
///     {
///       "id": "checkout-button",
///       "sticky": true,
///       "metadata": { "screen": "checkout" },
///       "variants": [
///         { "id": "green", "weight": 0.7, "metadata": { "color": "#0a0" } },
///         { "id": "blue",  "weight": 0.3, "metadata": { "color": "#00a" } }
///       ]
///     }
///   ]
/// }
/// ```
/// - `version`: a non-negative whole number.
/// - `experiments`: an array (possibly empty) of experiments with distinct non-empty `id`s.
/// - `sticky`: optional Boolean, default `true` (a device keeps its first variant).
/// - `metadata`: optional, any JSON, default `null`; for experiments and for variants.
/// - `variants`: a non-empty array of variants with distinct non-empty `id`s.
/// - `weight`: optional non-negative number: the probability of assignment, normalised. Either
///   every variant of an experiment has one or none has, in which case they are equal. They
///   must not all be zero.
/// - `segment_weights`: optional, a contextual policy: an array with one row per segment of the
///   device's attributes, each a weight per variant (not all zero); a device draws from its own
///   segment's row, and the variants' weights are then the rows' mean.
///
/// `ExperimentData` is `Sendable`: it is an immutable final class whose stored properties are
/// `let` and `Sendable`.
public final class ExperimentData: Sendable {
    /// The server's version of this data; larger is newer.
    public let version: Int
    /// The experiments, in the order their indices refer to.
    public let experiments: [ExperimentDefinition]
    private let indexByID: [String: Int]
    /// Shared by data known to have the same experiments and variants at the same indices.
    private let layout: Layout

    private final class Layout: Sendable {}

    /// Creates data from definitions.
    ///
    /// - Parameters:
    ///   - version: The server's version of this data; larger is newer.
    ///   - experiments: The experiments, in the order their indices refer to.
    ///   - previous: Earlier data this replaces (a republication with new weights, say): if it
    ///     has the same layout, devices switching from it know so without comparing ids.
    /// - Precondition: experiment ids are distinct (a programmer error otherwise; payloads are
    ///   checked with a thrown error instead).
    /// - Complexity: O(*n*) for *n* experiments and their variants.
    public init(version: Int, experiments: [ExperimentDefinition], replacing previous: ExperimentData? = nil) {
        var index: [String: Int] = [:]
        index.reserveCapacity(experiments.count)
        for (position, experiment) in experiments.enumerated() {
            let previous = index.updateValue(position, forKey: experiment.id)
            precondition(previous == nil, "duplicate experiment id \"\(experiment.id)\"")
        }
        self.version = version
        self.experiments = experiments
        self.indexByID = index
        if let previous, Self.sameLayout(experiments, previous.experiments) {
            self.layout = previous.layout
        } else {
            self.layout = Layout()
        }
    }

    /// Parses a server payload in the format described above.
    ///
    /// - Throws: ``PayloadError`` naming the first offending JSON path and what was expected.
    /// - Complexity: O(size of the payload).
    public convenience init(payload: JSONValue) throws(PayloadError) {
        guard case .object(let root) = payload else {
            throw PayloadError(path: "", expected: "an object with \"version\" and \"experiments\"")
        }
        guard let versionValue = root["version"], let version = versionValue.intValue, version >= 0 else {
            throw PayloadError(path: "version", expected: "a non-negative whole number")
        }
        guard case .array(let list)? = root["experiments"] else {
            throw PayloadError(path: "experiments", expected: "an array")
        }
        var definitions: [ExperimentDefinition] = []
        definitions.reserveCapacity(list.count)
        var seen: Set<String> = []
        for (position, element) in list.enumerated() {
            let path = "experiments[\(position)]"
            let definition = try ExperimentDefinition(payload: element, path: path)
            guard seen.insert(definition.id).inserted else {
                throw PayloadError(path: "\(path).id", expected: "an id not used by an earlier experiment (\"\(definition.id)\" is repeated)")
            }
            definitions.append(definition)
        }
        self.init(version: version, experiments: definitions)
    }

    /// The number of experiments.
    public var count: Int { experiments.count }

    /// The index of the experiment with this id, or `nil`.
    @inline(__always)
    public func index(of experimentID: String) -> Int? {
        indexByID[experimentID]
    }

    /// The experiment with this id, or `nil`.
    public func experiment(_ experimentID: String) -> ExperimentDefinition? {
        indexByID[experimentID].map { experiments[$0] }
    }

    /// Whether `other` has the same experiments and variants at the same indices, so that
    /// indices into one mean the same in the other. O(1) for data created as replacing the other
    /// (or one of its predecessors in the same layout).
    package func hasSameLayout(as other: ExperimentData) -> Bool {
        layout === other.layout || Self.sameLayout(experiments, other.experiments)
    }

    /// The same data in storage of its own: its own object, arrays, snapshots and texts.
    ///
    /// A fleet whose devices run on several threads serves each thread's devices a copy of
    /// its own. Every device holding one object and its arrays would have all threads update
    /// the same reference counts, passing those cache lines from core to core on every fetch
    /// and view; copies keep them apart. A copy reads exactly as the original.
    ///
    /// - Parameter previous: The copy this one replaces, as for ``init(version:experiments:replacing:)``.
    package func unshared(replacing previous: ExperimentData? = nil) -> ExperimentData {
        let copies = experiments.map { experiment in
            ExperimentDefinition(
                id: experiment.id.unshared(),
                variants: experiment.variants.map { VariantDefinition(id: $0.id.unshared(), metadata: $0.metadata.unshared()) },
                metadata: experiment.metadata.unshared(),
                snapshot: experiment.snapshot.unshared(),
                sticky: experiment.sticky
            )
        }
        return ExperimentData(version: version, experiments: copies, replacing: previous)
    }

    private static func sameLayout(_ a: [ExperimentDefinition], _ b: [ExperimentDefinition]) -> Bool {
        guard a.count == b.count else { return false }
        for e in a.indices {
            guard a[e].id == b[e].id, a[e].variants.count == b[e].variants.count else { return false }
            for v in a[e].variants.indices where a[e].variants[v].id != b[e].variants[v].id { return false }
        }
        return true
    }
}

/// One experiment: its variants, metadata and the weights devices draw from.
///
/// `ExperimentDefinition` is `Sendable`: it is an immutable value.
public struct ExperimentDefinition: Sendable, Hashable {
    /// The experiment's id, unique within its ``ExperimentData``.
    public let id: String
    /// The variants, in index order.
    public let variants: [VariantDefinition]
    /// Free-form metadata configured on the dashboard.
    public let metadata: JSONValue
    /// The weights devices sample a variant from.
    public let snapshot: PolicySnapshot
    /// Whether a device keeps its first variant (and reports a view only once).
    public let sticky: Bool

    /// Creates an experiment.
    ///
    /// - Precondition: `variants` is non-empty with distinct ids, and `snapshot` has one weight
    ///   per variant.
    public init(id: String, variants: [VariantDefinition], metadata: JSONValue = .null, snapshot: PolicySnapshot, sticky: Bool = true) {
        precondition(!variants.isEmpty, "experiment \"\(id)\" has no variants")
        precondition(snapshot.variantCount == variants.count, "experiment \"\(id)\": snapshot has \(snapshot.variantCount) weights for \(variants.count) variants")
        precondition(Set(variants.map(\.id)).count == variants.count, "experiment \"\(id)\" repeats a variant id")
        self.id = id
        self.variants = variants
        self.metadata = metadata
        self.snapshot = snapshot
        self.sticky = sticky
    }

    /// Creates an experiment whose variants are assigned with equal probability.
    ///
    /// - Precondition: as for ``init(id:variants:metadata:snapshot:sticky:)``.
    public init(id: String, variants: [VariantDefinition], metadata: JSONValue = .null, sticky: Bool = true) {
        precondition(!variants.isEmpty, "experiment \"\(id)\" has no variants")
        // Cannot throw: equal positive weights.
        let snapshot = try! PolicySnapshot(weights: [Double](repeating: 1, count: variants.count))
        self.init(id: id, variants: variants, metadata: metadata, snapshot: snapshot, sticky: sticky)
    }

    /// The index of the variant with this id, or `nil`.
    ///
    /// - Complexity: O(*k*) for *k* variants.
    public func variantIndex(of variantID: String) -> Int? {
        variants.firstIndex { $0.id == variantID }
    }

    init(payload: JSONValue, path: String) throws(PayloadError) {
        guard case .object(let members) = payload else {
            throw PayloadError(path: path, expected: "an object")
        }
        guard case .string(let id)? = members["id"], !id.isEmpty else {
            throw PayloadError(path: "\(path).id", expected: "a non-empty string")
        }
        var sticky = true
        if let value = members["sticky"] {
            guard case .bool(let flag) = value else {
                throw PayloadError(path: "\(path).sticky", expected: "a Boolean")
            }
            sticky = flag
        }
        guard case .array(let list)? = members["variants"], !list.isEmpty else {
            throw PayloadError(path: "\(path).variants", expected: "a non-empty array")
        }
        var variants: [VariantDefinition] = []
        var weights: [Double] = []
        var seen: Set<String> = []
        for (position, element) in list.enumerated() {
            let variantPath = "\(path).variants[\(position)]"
            guard case .object(let fields) = element else {
                throw PayloadError(path: variantPath, expected: "an object")
            }
            guard case .string(let variantID)? = fields["id"], !variantID.isEmpty else {
                throw PayloadError(path: "\(variantPath).id", expected: "a non-empty string")
            }
            guard seen.insert(variantID).inserted else {
                throw PayloadError(path: "\(variantPath).id", expected: "an id not used by an earlier variant (\"\(variantID)\" is repeated)")
            }
            switch fields["weight"] {
            case nil:
                guard weights.isEmpty else {
                    throw PayloadError(path: "\(variantPath).weight", expected: "a number, since earlier variants have weights")
                }
            case .number(let weight)?:
                guard weight >= 0, weight.isFinite else {
                    throw PayloadError(path: "\(variantPath).weight", expected: "a finite non-negative number")
                }
                guard weights.count == position else {
                    throw PayloadError(path: "\(variantPath).weight", expected: "no weight, since earlier variants have none")
                }
                weights.append(weight)
            default:
                throw PayloadError(path: "\(variantPath).weight", expected: "a finite non-negative number")
            }
            variants.append(VariantDefinition(id: variantID, metadata: fields["metadata"] ?? .null))
        }
        if weights.isEmpty { weights = [Double](repeating: 1, count: variants.count) }
        let snapshot: PolicySnapshot
        if let rows = members["segment_weights"] {
            snapshot = try Self.contextual(rows, variants: variants.count, path: "\(path).segment_weights")
        } else {
            do {
                snapshot = try PolicySnapshot(weights: weights)
            } catch {
                throw PayloadError(path: "\(path).variants", expected: "weights that are not all zero")
            }
        }
        self.init(id: id, variants: variants, metadata: members["metadata"] ?? .null, snapshot: snapshot, sticky: sticky)
    }

    /// A contextual policy's `segment_weights`: one row per segment, each a weight per variant.
    private static func contextual(_ value: JSONValue, variants: Int, path: String) throws(PayloadError) -> PolicySnapshot {
        guard case .array(let list) = value, !list.isEmpty, list.count <= 4_096 else {
            throw PayloadError(path: path, expected: "a non-empty array of at most 4096 segments' weights")
        }
        var rows: [[Double]] = []
        rows.reserveCapacity(list.count)
        for (segment, element) in list.enumerated() {
            guard case .array(let cells) = element, cells.count == variants else {
                throw PayloadError(path: "\(path)[\(segment)]", expected: "an array of \(variants) weights, one per variant")
            }
            var row: [Double] = []
            for cell in cells {
                guard case .number(let weight) = cell, weight >= 0, weight.isFinite else {
                    throw PayloadError(path: "\(path)[\(segment)]", expected: "finite non-negative weights")
                }
                row.append(weight)
            }
            rows.append(row)
        }
        do {
            return try PolicySnapshot(contextWeights: rows)
        } catch {
            throw PayloadError(path: path, expected: "each segment's weights not all zero")
        }
    }
}

/// One variant of an experiment.
///
/// `VariantDefinition` is `Sendable`: it is an immutable value.
public struct VariantDefinition: Sendable, Hashable {
    /// The variant's id, unique within its experiment.
    public let id: String
    /// Free-form metadata configured on the dashboard.
    public let metadata: JSONValue

    /// Creates a variant.
    public init(id: String, metadata: JSONValue = .null) {
        self.id = id
        self.metadata = metadata
    }
}

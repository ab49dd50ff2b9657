import ClientEngine
import ClientFeatures
import ExperimentModel

/// The Experiments framework's keeper over MSActiveConfig: remote values are read from one
/// section of the configuration that ``ActiveConfig`` holds, and a fetch applies what the
/// network brought.
///
/// The download itself crosses the simulated network outside the keeper (``ActiveConfig`` never
/// downloads on its own); its result waits in ``arrived`` until ``fetch(at:)`` takes it, as a
/// Firebase keeper's fetch completes by activating what it fetched. A payload ``ActiveConfig``
/// rejects fails the fetch and the last good configuration stays in use.
struct ActiveConfigKeeper: RemoteConfigKeeper {
    /// What a download brought.
    enum Download {
        case payload(JSONValue)
        /// A payload already read (see ``RemoteConfigStyle/ParsedConfigurations``).
        case configuration(ConfigurationState)
        case failure(String)
    }

    /// The configuration, persisted in its store across app launches. Changed only by
    /// ``fetch(at:)``, which keeps ``configCreatedAt`` in step.
    private(set) var config: ActiveConfig<InMemoryConfigStore>
    /// The time the configuration in use was created on the server (its `meta.creation_time`,
    /// `-infinity` without one), or `nil` when the device has none. Kept apart from the
    /// configuration, which every session asks it of: reading it there would copy the
    /// configuration.
    private(set) var configCreatedAt: Double?
    /// The section holding one setting per experiment.
    let section: String
    /// The result of the download that completed, taken by the next ``fetch(at:)``.
    var arrived: Download?
    /// The fetches that changed the configuration's sections, where the values are: a
    /// download of the settings already held changes no value.
    private var sectionChanges = 0
    var revision: Int? { sectionChanges }

    init(section: String) {
        self.config = ActiveConfig(initialSharedConfiguration: nil)
        self.section = section
    }

    /// Applies the downloaded payload with ``ActiveConfig``.
    mutating func fetch(at now: Double) -> RemoteFetchStatus {
        // The download is moved out, not copied: a copy retained the configuration's parts
        // only to release them when `arrived` was cleared.
        switch arrived.take() {
        case nil: return .failure(reason: "nothing was downloaded")
        case .failure(let reason): return .failure(reason: reason)
        case .payload(let payload):
            let status = applied(config.apply(payload: payload, forUser: nil, at: now), at: now)
            configCreatedAt = config.current.map { $0.meta.creationTime ?? -.infinity }
            return status
        case .configuration(let configuration):
            // Read before the configuration is handed over: afterwards only a copy of the
            // current one could be asked. A configuration already read is applied whole (it
            // is for this device's user, nil, and never rejected).
            let created = configuration.meta.creationTime ?? -.infinity
            let status = applied(config.apply(consume configuration, forUser: nil, at: now), at: now)
            configCreatedAt = created
            return status
        }
    }

    private mutating func applied(_ outcome: consuming ApplyOutcome, at now: Double) -> RemoteFetchStatus {
        switch consume outcome {
        case .rejected(let error): return .failure(reason: error.description)
        case .applied(let update): if !update.changes.isEmpty { sectionChanges += 1 }
        case .storedForOtherUser: break
        }
        return .success(fetchedAt: now)
    }

    /// The setting's value as the text a remote-config SDK hands out: a string as it is, any
    /// other type written out, so that a value of the wrong type is an incorrect value, not a
    /// missing one.
    func rawValue(forKey key: String) -> String? {
        switch config[section][key] {
        case nil: nil
        case .string(let text): text
        case .number(let x): x == x.rounded() && abs(x) < 1e15 ? String(Int(x)) : String(x)
        case .bool(let flag): flag ? "true" : "false"
        case let other?: String(describing: other)
        }
    }
}

/// An experiment's setting: the key is the experiment's id.
struct ExperimentKey: RemoteKey {
    let name: String
    var valueType: any RemoteValue.Type { VariantValue.self }
}

/// An experiment's variant as a baseline string remote value: `v1` for the second variant,
/// `v0_baseline` for the control group. The in-app default is the control group (`v0_baseline`).
///
/// Variants are named by index because the remote value's type is fixed when the app is built,
/// while a scenario names its variants freely; a scenario has at most 64.
struct VariantValue: BaselineStringRemoteValue {
    struct Variant: StringInitializableRemoteValue {
        let index: Int

        static let allCases = (0..<Scenario.Limits.variants.upperBound).map(Variant.init(index:))

        init(index: Int) {
            self.index = index
        }

        /// `v` and a variant number without a sign or leading zero.
        init?(name: String) {
            // Read byte by byte: every session of every device reads each experiment's value,
            // and the generic `Int(Substring)` and `String == Substring` it replaced
            // instantiated type metadata at each call.
            var bytes = name.utf8.makeIterator()
            guard bytes.next() == UInt8(ascii: "v") else { return nil }
            var index = 0, digits = 0
            while let byte = bytes.next() {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte), digits == 0 || index > 0 else { return nil }
                index = index * 10 + Int(byte - UInt8(ascii: "0"))
                digits += 1
                guard index < Scenario.Limits.variants.upperBound else { return nil }
            }
            guard digits > 0 else { return nil }
            self.index = index
        }

        var name: String { "v\(index)" }
    }

    let baseline: Bool
    let variant: Variant

    init(baseline: Bool, variant: Variant) {
        self.baseline = baseline
        self.variant = variant
    }

    /// What the server sends for `variant`: the control group is the baseline.
    init(serving variant: Int) {
        self.init(baseline: variant == 0, variant: Variant(index: variant))
    }
}

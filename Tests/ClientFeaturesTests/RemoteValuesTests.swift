import ClientFeatures
import Testing

private enum PaywallType: String, CaseIterable, StringInitializableRemoteValue {
    case a, b, c
    static let `default`: Self = .b
}

private enum OnboardingType: String, CaseIterable, StringInitializableRemoteValue, ExperimentalGroupTrackable {
    case x, y, z
}

private enum NewOnboarding: CaseIterable, BoolEnumRemoteValue {
    case enabled, disabled
}

private enum DarkMode: CaseIterable, BoolEnumRemoteValue {
    case enabled, disabled
    static let `default`: Self = .enabled
}

private struct PaywallTest: BaselineStringRemoteValue, ExperimentalGroupTrackable, Equatable {
    enum Variant: String, CaseIterable, StringInitializableRemoteValue {
        case a, b, c
        static let `default`: Self = .b
    }

    let baseline: Bool
    let variant: Variant

    init(baseline: Bool, variant: Variant) {
        self.baseline = baseline
        self.variant = variant
    }
}

private struct FastCheckout: BaselineBoolRemoteValue, ExperimentalGroupTrackable, Equatable {
    let baseline: Bool
    let isEnabled: Bool

    init(baseline: Bool, isEnabled: Bool) {
        self.baseline = baseline
        self.isEnabled = isEnabled
    }
}

private enum Key: String, CaseIterable, RemoteKey {
    case paywallType = "paywall_type"
    case onboardingType = "onboarding_type"
    case newOnboarding = "new_onboarding"
    case darkMode = "dark_mode"
    case paywallTest = "paywall_test"
    case fastCheckout = "fast_checkout"

    var name: String { rawValue }

    var valueType: any RemoteValue.Type {
        switch self {
        case .paywallType: PaywallType.self
        case .onboardingType: OnboardingType.self
        case .newOnboarding: NewOnboarding.self
        case .darkMode: DarkMode.self
        case .paywallTest: PaywallTest.self
        case .fastCheckout: FastCheckout.self
        }
    }
}

struct RemoteValueParsingTests {
    @Test func stringValuesParseTheirNamesAndDefaultToTheDeclaredOrFirstCase() {
        #expect(PaywallType(remoteString: "c") == .c)
        #expect(PaywallType(remoteString: "d") == nil)
        #expect(PaywallType.default == .b)
        #expect(OnboardingType.default == .x)
        #expect(PaywallType.c.remoteString == "c")
    }

    @Test func boolValuesParseOnlyTrueAndFalse() {
        #expect(NewOnboarding(remoteString: "true") == .enabled)
        #expect(NewOnboarding(remoteString: "false") == .disabled)
        #expect(NewOnboarding(remoteString: "1") == nil)
        #expect(NewOnboarding(remoteString: "TRUE") == nil)
        #expect(NewOnboarding.default == .disabled)
        #expect(DarkMode.default == .enabled)
        #expect(NewOnboarding.enabled.isEnabled)
        #expect(NewOnboarding.enabled.remoteString == "true")
    }

    @Test(arguments: [
        ("a", false, "a"), ("a_baseline", true, "a"), ("c_baseline", true, "c"), ("b", false, "b"),
    ])
    func baselineStringSuffixSetsTheBaselineFlag(raw: String, baseline: Bool, variant: String) throws {
        let value = try #require(PaywallTest(remoteString: raw))
        #expect(value.baseline == baseline)
        #expect(value.variant.rawValue == variant)
        #expect(value.name == variant)
        #expect(value.remoteString == raw)
    }

    @Test(arguments: ["d", "d_baseline", "_baseline", "a_base", "baseline_a"])
    func baselineStringRejectsUnknownVariants(raw: String) {
        #expect(PaywallTest(remoteString: raw) == nil)
    }

    @Test func baselineStringDefaultIsTheBaselineGroupWithTheVariantsDefault() {
        #expect(PaywallTest.default == PaywallTest(baseline: true, variant: .b))
        #expect(PaywallTest.allCases.count == 6)
        #expect(Set(PaywallTest.allCases.map(\.remoteString)).count == 6)
    }

    @Test(arguments: [
        ("true", false, true), ("false", false, false), ("true_baseline", true, true), ("false_baseline", true, false),
    ])
    func baselineBoolSuffixSetsTheBaselineFlag(raw: String, baseline: Bool, enabled: Bool) throws {
        let value = try #require(FastCheckout(remoteString: raw))
        #expect(value.baseline == baseline)
        #expect(value.isEnabled == enabled)
        #expect(value.name == (enabled ? "Enabled" : "Disabled"))
        #expect(value.remoteString == raw)
    }

    @Test(arguments: ["yes", "true_", "_baseline", "True_baseline"])
    func baselineBoolRejectsOtherStrings(raw: String) {
        #expect(FastCheckout(remoteString: raw) == nil)
    }

    @Test func baselineBoolHasFourDistinctCasesAndADisabledBaselineDefault() {
        #expect(FastCheckout.default == FastCheckout(baseline: true, isEnabled: false))
        #expect(Set(FastCheckout.allCases.map(\.remoteString)) == ["true", "false", "true_baseline", "false_baseline"])
    }
}

struct RemoteValuesServiceTests {
    private func service(_ published: [String: String]) -> RemoteValuesService<InMemoryRemoteConfigKeeper> {
        var service = RemoteValuesService(keeper: InMemoryRemoteConfigKeeper(published: published))
        _ = service.fetch(at: 0)
        return service
    }

    @Test func nothingIsReadBeforeTheExplicitFetch() {
        var service = RemoteValuesService(keeper: InMemoryRemoteConfigKeeper(published: ["paywall_type": "a"]))
        #expect(service.remoteValue(for: Key.paywallType, as: PaywallType.self) == .b)
        #expect(service.fetch(at: 5) == .success(fetchedAt: 5))
        #expect(service.lastFetch == .success(fetchedAt: 5))
        #expect(service.remoteValue(for: Key.paywallType, as: PaywallType.self) == .a)
    }

    @Test func failedFetchKeepsThePreviouslyActiveValues() {
        var keeper = InMemoryRemoteConfigKeeper(published: ["paywall_type": "a"], active: ["paywall_type": "c"])
        keeper.failureReason = "offline"
        var service = RemoteValuesService(keeper: keeper)
        #expect(service.fetch(at: 1) == .failure(reason: "offline"))
        #expect(service.remoteValue(for: Key.paywallType, as: PaywallType.self) == .c)
    }

    @Test func validValuesResolveWithoutMissingOrIncorrectTracking() {
        var service = service([
            "paywall_type": "c", "onboarding_type": "y", "new_onboarding": "true", "dark_mode": "false",
            "paywall_test": "a_baseline", "fast_checkout": "true",
        ])
        let resolution = service.values(for: Key.allCases)
        #expect(resolution.value(for: Key.paywallType, as: PaywallType.self) == .c)
        #expect(resolution.value(for: Key.newOnboarding, as: NewOnboarding.self) == .enabled)
        #expect(resolution.value(for: Key.darkMode, as: DarkMode.self) == .disabled)
        #expect(resolution.value(for: Key.paywallTest, as: PaywallTest.self) == PaywallTest(baseline: true, variant: .a))
        #expect(resolution.entries.map(\.source) == Array(repeating: .remote, count: Key.allCases.count))
        #expect(resolution.events == [
            .experimentalGroup(key: "onboarding_type", group: "y"),
            .experimentalGroup(key: "paywall_test", group: "a_baseline"),
            .experimentalGroup(key: "fast_checkout", group: "true"),
        ])
    }

    @Test func missingKeysFallBackToDefaultsAndAreTrackedPerKeyThenOnce() {
        var service = service(["paywall_type": "a"])
        let resolution = service.values(for: [Key.paywallType, Key.newOnboarding, Key.darkMode, Key.paywallTest])
        #expect(resolution.events == [
            .keyNotFound(key: "new_onboarding"),
            .keyNotFound(key: "dark_mode"),
            .keyNotFound(key: "paywall_test"),
            .keysNotFound(["new_onboarding", "dark_mode", "paywall_test"]),
        ])
        #expect(resolution.value(for: Key.newOnboarding, as: NewOnboarding.self) == .disabled)
        #expect(resolution.value(for: Key.darkMode, as: DarkMode.self) == .enabled)
        #expect(resolution.value(for: Key.paywallTest, as: PaywallTest.self) == .default)
        #expect(resolution.source(for: Key.darkMode) == .defaultForMissingKey)
        #expect(service.remoteValue(for: Key.darkMode, as: DarkMode.self) == .enabled)
    }

    @Test func incorrectValuesFallBackToDefaultsAndAreTrackedPerKeyThenOnce() {
        var service = service([
            "paywall_type": "z", "new_onboarding": "yes", "paywall_test": "b_baseline", "fast_checkout": "maybe",
        ])
        let resolution = service.values(for: [Key.paywallType, Key.newOnboarding, Key.paywallTest, Key.fastCheckout])
        #expect(resolution.events == [
            .incorrectValue(key: "paywall_type", rawValue: "z"),
            .incorrectValue(key: "new_onboarding", rawValue: "yes"),
            .experimentalGroup(key: "paywall_test", group: "b_baseline"),
            .incorrectValue(key: "fast_checkout", rawValue: "maybe"),
            .incorrectValues(["paywall_type", "new_onboarding", "fast_checkout"]),
        ])
        #expect(service.remoteValue(for: Key.paywallType, as: PaywallType.self) == .b)
        #expect(service.remoteValue(for: Key.newOnboarding, as: NewOnboarding.self) == .disabled)
        #expect(service.remoteValue(for: Key.fastCheckout, as: FastCheckout.self) == .default)
        #expect(resolution.source(for: Key.paywallType) == .defaultForIncorrectValue)
    }

    @Test func missingAndIncorrectSummariesComeAfterAllPerKeyEvents() {
        var service = service(["new_onboarding": "nope"])
        let resolution = service.values(for: [Key.paywallType, Key.newOnboarding, Key.darkMode])
        #expect(resolution.events == [
            .keyNotFound(key: "paywall_type"),
            .incorrectValue(key: "new_onboarding", rawValue: "nope"),
            .keyNotFound(key: "dark_mode"),
            .keysNotFound(["paywall_type", "dark_mode"]),
            .incorrectValues(["new_onboarding"]),
        ])
    }

    @Test func defaultsAreNotTrackedAsExperimentalGroups() {
        var service = service([:])
        let resolution = service.values(for: [Key.onboardingType])
        #expect(!resolution.events.contains(.experimentalGroup(key: "onboarding_type", group: "x")))
    }

    @Test func debugValueWinsOverTheRemoteValueAndSkipsItsTracking() {
        var service = service(["paywall_type": "a", "new_onboarding": "garbage"])
        service.setDebugValue(PaywallType.c, for: Key.paywallType)
        service.setDebugValue(NewOnboarding.enabled, for: Key.newOnboarding)
        #expect(service.debugValue(for: Key.paywallType) as? PaywallType == .c)
        let resolution = service.values(for: [Key.paywallType, Key.newOnboarding])
        #expect(resolution.events.isEmpty)
        #expect(resolution.source(for: Key.paywallType) == .debug)
        #expect(service.remoteValue(for: Key.paywallType, as: PaywallType.self) == .c)
        #expect(service.remoteValue(for: Key.newOnboarding, as: NewOnboarding.self) == .enabled)

        service.setDebugValue(nil, for: Key.paywallType)
        #expect(service.debugValue(for: Key.paywallType) == nil)
        #expect(service.remoteValue(for: Key.paywallType, as: PaywallType.self) == .c,
                "the session keeps the value fixed by the last resolution")
        _ = service.values(for: [Key.paywallType])
        #expect(service.remoteValue(for: Key.paywallType, as: PaywallType.self) == .a)
    }

    @Test func debugValueSetAfterResolutionStillWins() {
        var service = service(["paywall_type": "a"])
        _ = service.values(for: [Key.paywallType])
        service.setDebugValue(PaywallType.b, for: Key.paywallType)
        #expect(service.remoteValue(for: Key.paywallType, as: PaywallType.self) == .b)
    }

    @Test func resolvedValuesStayFixedUntilTheNextResolution() {
        var service = service(["paywall_type": "a"])
        _ = service.values(for: [Key.paywallType])
        service.keeper.published = ["paywall_type": "c"]
        _ = service.values(for: [Key.paywallType])
        #expect(service.remoteValue(for: Key.paywallType, as: PaywallType.self) == .a, "published but not fetched")
        _ = service.fetch(at: 10)
        #expect(service.remoteValue(for: Key.paywallType, as: PaywallType.self) == .a, "fixed for the session")
        _ = service.values(for: [Key.paywallType])
        #expect(service.remoteValue(for: Key.paywallType, as: PaywallType.self) == .c)
    }

    @Test func aResolutionOfOtherKeysKeepsTheValuesFixedBefore() {
        var service = service(["paywall_type": "a", "dark_mode": "true"])
        _ = service.values(for: [Key.paywallType, Key.darkMode])
        service.keeper.published = ["paywall_type": "c", "dark_mode": "false", "onboarding_type": "z"]
        _ = service.fetch(at: 10)
        let later = service.values(for: [Key.darkMode, Key.onboardingType, Key.darkMode])
        #expect(later.entries.map(\.name) == ["dark_mode", "onboarding_type", "dark_mode"])
        #expect(later.source(for: Key.paywallType) == nil)
        #expect(service.remoteValue(for: Key.paywallType, as: PaywallType.self) == .a, "not resolved again: still fixed")
        #expect(service.remoteValue(for: Key.darkMode, as: DarkMode.self) == .disabled)
        #expect(service.remoteValue(for: Key.onboardingType, as: OnboardingType.self) == .z)
        // The same keys again, as every session of an app asks: each reads its new value.
        service.keeper.published = ["paywall_type": "b", "dark_mode": "true", "onboarding_type": "x"]
        _ = service.fetch(at: 20)
        _ = service.values(for: [Key.paywallType, Key.darkMode, Key.onboardingType])
        _ = service.values(for: [Key.paywallType, Key.darkMode, Key.onboardingType])
        #expect(service.remoteValue(for: Key.paywallType, as: PaywallType.self) == .b)
        #expect(service.remoteValue(for: Key.darkMode, as: DarkMode.self) == .enabled)
        #expect(service.remoteValue(for: Key.onboardingType, as: OnboardingType.self) == .x)
    }

    @Test func unresolvedKeyIsReadFromTheKeeperWithoutTracking() {
        let service = service(["paywall_test": "c"])
        #expect(service.remoteValue(for: Key.paywallTest, as: PaywallTest.self) == PaywallTest(baseline: false, variant: .c))
    }

    @Test func theInMemoryKeeperAdvancesItsRevisionWithEverySuccessfulFetch() {
        var keeper = InMemoryRemoteConfigKeeper(published: ["paywall_type": "a"])
        #expect(keeper.revision == 0)
        _ = keeper.fetch(at: 1)
        #expect(keeper.revision == 1)
        keeper.failureReason = "offline"
        _ = keeper.fetch(at: 2)
        #expect(keeper.revision == 1, "a failed fetch changes nothing")
    }
}

/// A keeper whose revision the test sets, counting the strings read from it.
private struct CountingKeeper: RemoteConfigKeeper {
    final class Reads {
        var count = 0
    }

    var values: [String: String]
    var revision: Int?
    let reads = Reads()

    mutating func fetch(at now: Double) -> RemoteFetchStatus { .success(fetchedAt: now) }

    func rawValue(forKey key: String) -> String? {
        reads.count += 1
        return values[key]
    }
}

/// A keeper with a revision is read again only when the revision, the keys or the overrides
/// changed; every resolution reports the same values and events as a full one.
struct RemoteValuesRevisionTests {
    private let keys: [any RemoteKey] = [Key.paywallType, Key.newOnboarding, Key.paywallTest, Key.darkMode]
    private let values = ["paywall_type": "z", "new_onboarding": "true", "paywall_test": "c_baseline"]

    /// The events and each entry's name, source and remote string, comparable.
    private func summary(_ resolution: RemoteValuesResolution) -> [String] {
        resolution.entries.map { "\($0.name) \($0.source) \($0.value.remoteString)" } + resolution.events.map { "\($0)" }
    }

    @Test func theSameKeysAtTheSameRevisionAreNotReadAgain() {
        var service = RemoteValuesService(keeper: CountingKeeper(values: values, revision: 7))
        let first = service.values(for: keys)
        let reads = service.keeper.reads.count
        #expect(reads >= keys.count)
        let second = service.values(for: keys)
        #expect(service.keeper.reads.count == reads)
        #expect(summary(second) == summary(first))
        #expect(second.events == [
            .incorrectValue(key: "paywall_type", rawValue: "z"),
            .experimentalGroup(key: "paywall_test", group: "c_baseline"),
            .keyNotFound(key: "dark_mode"),
            .keysNotFound(["dark_mode"]),
            .incorrectValues(["paywall_type"]),
        ])
    }

    @Test func aNewRevisionIsReadAgain() {
        var service = RemoteValuesService(keeper: CountingKeeper(values: values, revision: 7))
        _ = service.values(for: keys)
        service.keeper.values["paywall_type"] = "a"
        service.keeper.revision = 8
        let later = service.values(for: keys)
        #expect(later.value(for: Key.paywallType, as: PaywallType.self) == .a)
        #expect(later.source(for: Key.paywallType) == .remote)
        #expect(!later.events.contains { if case .incorrectValues = $0 { true } else { false } })
        #expect(service.remoteValue(for: Key.paywallType, as: PaywallType.self) == .a)
    }

    @Test func aKeeperWithoutRevisionIsReadEveryTime() {
        var service = RemoteValuesService(keeper: CountingKeeper(values: values, revision: nil))
        _ = service.values(for: keys)
        let reads = service.keeper.reads.count
        service.keeper.values["paywall_type"] = "c"
        let later = service.values(for: keys)
        #expect(service.keeper.reads.count > reads)
        #expect(later.value(for: Key.paywallType, as: PaywallType.self) == .c)
    }

    @Test func needsResolutionSaysWhetherTheKeysWouldBeReadAgain() {
        var service = RemoteValuesService(keeper: CountingKeeper(values: values, revision: 7))
        #expect(service.needsResolution(of: keys), "nothing resolved yet")
        _ = service.values(for: keys)
        #expect(!service.needsResolution(of: keys))
        // The same keys in an array of their own are known by their names and types.
        let copied: [any RemoteKey] = keys.map { Key(rawValue: $0.name)! }
        #expect(!service.needsResolution(of: copied))
        #expect(service.needsResolution(of: Array(keys.dropLast())))
        #expect(service.needsResolution(of: [Key.paywallType, Key.newOnboarding, Key.paywallTest, Key.fastCheckout]))
        service.setDebugValue(PaywallType.c, for: Key.paywallType)
        #expect(service.needsResolution(of: keys))
        _ = service.values(for: keys)
        #expect(!service.needsResolution(of: keys))
        service.keeper.revision = 8
        #expect(service.needsResolution(of: keys))

        var withoutRevision = RemoteValuesService(keeper: CountingKeeper(values: values, revision: nil))
        _ = withoutRevision.values(for: keys)
        #expect(withoutRevision.needsResolution(of: keys))
    }

    @Test func anArrayChangedAfterItsResolutionNeedsResolution() {
        // The list last resolved is known by its storage; a change to the app's array must
        // not go unnoticed, whether it copies the storage or changes it in place.
        var service = RemoteValuesService(keeper: CountingKeeper(values: values, revision: 7))
        var asked = keys
        _ = service.values(for: asked)
        #expect(!service.needsResolution(of: asked))
        asked[0] = Key.fastCheckout
        #expect(service.needsResolution(of: asked), "changed while the service shares its storage")
        // Once the service has resolved another list, the app's array is its own again.
        var other: [any RemoteKey] = [Key.newOnboarding]
        _ = service.values(for: other)
        _ = service.values(for: keys)
        other[0] = Key.paywallType
        #expect(service.needsResolution(of: other), "changed in place")
        #expect(service.values(for: other).entries.map(\.name) == ["paywall_type"])
    }

    @Test func otherKeysOrAnOverrideAreResolvedAnew() {
        var service = RemoteValuesService(keeper: CountingKeeper(values: values, revision: 7))
        let full = service.values(for: keys)
        var reads = service.keeper.reads.count
        // A subset, and then the full list again: neither is the list last resolved.
        let subset = service.values(for: [Key.newOnboarding])
        #expect(subset.entries.map(\.name) == ["new_onboarding"])
        #expect(service.keeper.reads.count > reads)
        reads = service.keeper.reads.count
        #expect(summary(service.values(for: keys)) == summary(full))
        #expect(service.keeper.reads.count > reads)
        // The same keys in another order.
        let reversed = service.values(for: keys.reversed())
        #expect(reversed.entries.map(\.name) == keys.reversed().map(\.name))
        // An override set between two resolutions of the same keys.
        _ = service.values(for: keys)
        service.setDebugValue(PaywallType.c, for: Key.paywallType)
        let overridden = service.values(for: keys)
        #expect(overridden.source(for: Key.paywallType) == .debug)
        #expect(!overridden.events.contains(.incorrectValue(key: "paywall_type", rawValue: "z")))
        service.setDebugValue(nil, for: Key.paywallType)
        #expect(service.values(for: keys).source(for: Key.paywallType) == .defaultForIncorrectValue)
    }
}

/// One modelled release of an SDK profile, as `client.profile: NAME@VERSION` names it.
///
/// A version stands for the run of tagged releases whose delivery code was read and found the
/// same (``firstTag`` to ``lastTag``); the bare name means the profile's newest release. A
/// profile also accepts any tag inside one of its runs (`posthog-ios@3.65.1` is
/// `posthog-ios@3.69`, `posthog-ios@3.57.5` is `posthog-ios@3.59`), and refuses one outside
/// every run (`posthog-ios@2.5.0`). A release that runs in a mode the SDK's server settings
/// switch on is named with it after `+` (`segment-swift@1.10+httpconfig`, or
/// `segment-swift@1.10.0+httpconfig`); without it, a tag names the default mode.
///
/// `Sendable`: a plain value.
public struct SDKRelease: Sendable, Hashable {
    /// The SDK.
    public let profile: SDKProfile
    /// The version `client.profile` names after `@`; empty for Aviary's own client.
    public let version: String
    /// The oldest tag the version stands for.
    public let firstTag: String
    /// The newest tag the version stands for, the one its settings cite.
    public let lastTag: String
    /// The mode the version's name carries after `+`, such as `httpconfig`; empty for the
    /// SDK's default.
    public let mode: String

    init(_ profile: SDKProfile, _ version: String, tags firstTag: String, _ lastTag: String, mode: String = "") {
        self.profile = profile
        self.version = mode.isEmpty ? version : "\(version)+\(mode)"
        self.firstTag = firstTag
        self.lastTag = lastTag
        self.mode = mode
    }

    /// `NAME@VERSION`, or the bare name for Aviary's own client.
    public var name: String {
        version.isEmpty ? profile.rawValue : "\(profile.rawValue)@\(version)"
    }

    /// Whether `version` names this release: its own version, or a tag in its run.
    func matches(_ version: String) -> Bool {
        if version == self.version { return true }
        let parts = version.split(separator: "+", maxSplits: 1)
        guard parts.count == (mode.isEmpty ? 1 : 2), parts.count == 1 || parts[1] == mode else { return false }
        guard let tag = Self.numbers(String(parts[0])), let first = Self.numbers(firstTag), let last = Self.numbers(lastTag),
              tag.count == first.count else { return false }
        return !tag.lexicographicallyPrecedes(first) && !last.lexicographicallyPrecedes(tag)
    }

    /// `1.30.1` or `v1.30.1` as `[1, 30, 1]`; `nil` for anything else.
    fileprivate static func numbers(_ tag: String) -> [Int]? {
        let parts = (tag.first == "v" ? tag.dropFirst() : Substring(tag)).split(separator: ".", omittingEmptySubsequences: false)
        let numbers = parts.compactMap { Int($0) }
        return numbers.count == parts.count && !numbers.isEmpty ? numbers : nil
    }
}

extension SDKProfile {
    /// The releases the profile models, newest first; each row of `apply(to:)` cites its last tag.
    public var releases: [SDKRelease] {
        switch self {
        case .aviary: [SDKRelease(self, "", tags: "", "")]
        // `httpConfig` in the workspace's settings switches on the retry system of
        // Sources/Segment/Utilities/Retry/; 1.9.4 has it without the pipeline pause on a 5xx
        // carrying Retry-After, so only 1.10.0 is modelled in that mode.
        case .segmentSwift: [
            SDKRelease(self, "1.10", tags: "1.10.0", "1.10.0"), SDKRelease(self, "1.10", tags: "1.10.0", "1.10.0", mode: "httpconfig"),
        ]
        // core/.../retry/ first appears in 1.25.0.
        case .segmentKotlin: [
            SDKRelease(self, "1.25", tags: "1.25.0", "1.25.0"), SDKRelease(self, "1.25", tags: "1.25.0", "1.25.0", mode: "httpconfig"),
        ]
        case .amplitudeSwift: [SDKRelease(self, "1.18", tags: "v1.18.6", "v1.18.6")]
        // The retry handler's constants are the same in every tag from v1.20.5, where it first
        // appears; the schedule on main after v1.30.1 (c59259bc) is in no release.
        case .amplitudeKotlin: [SDKRelease(self, "1.30", tags: "v1.20.5", "v1.30.1")]
        case .snowplowIOS: [SDKRelease(self, "6.2", tags: "6.2.5", "6.2.5")]
        case .snowplowAndroid: [SDKRelease(self, "6.3", tags: "6.3.2", "6.3.2")]
        // The queue drop on the 4th retried failure arrives in 3.57.5 (9f4c1f6b5, #585); 408 is
        // retried from 3.59.2 (0cc8d80); the 1 s step and Retry-After from 3.62.4 (b9bf252).
        case .posthogIOS: [
            SDKRelease(self, "3.69", tags: "3.62.4", "3.69.3"), SDKRelease(self, "3.62", tags: "3.59.2", "3.62.3"),
            SDKRelease(self, "3.59", tags: "3.57.5", "3.59.1"), SDKRelease(self, "3.57", tags: "3.0.0", "3.57.4"),
        ]
        }
    }

    /// The release `version` names (the newest when `nil`), or `nil` when none does.
    public func release(_ version: String?) -> SDKRelease? {
        guard let version else { return releases.first }
        return releases.first { $0.matches(version) && !$0.version.isEmpty }
    }

    /// Why `version` names no release, with the versions a scenario may name.
    func unknownVersion(_ version: String) -> String {
        guard releases.contains(where: { !$0.version.isEmpty }) else { return "\(rawValue) takes no version" }
        let listed = releases.map { release in
            let tags = release.firstTag == release.lastTag ? release.lastTag : "\(release.firstTag) to \(release.lastTag)"
            return "\(release.name) (tags \(tags))"
        }
        return "no modelled release of \(rawValue) covers \(version); expected \(rawValue) (the newest) or one of \(listed.joined(separator: ", "))"
    }
}

extension SDKProfile {
    /// The library name the vendor's events carry for this SDK, as exports show it:
    /// Segment's `context.library.name`, Amplitude's `library` before the slash, PostHog's
    /// `$lib`, Snowplow's `v_tracker` before the dash (analytics-swift 1.10.0
    /// `Sources/Segment/Plugins/Context.swift`, analytics-kotlin 1.25.0 `Constants.LIBRARY_NAME`,
    /// Amplitude-Swift v1.18.6 `Constants.SDK_LIBRARY`, Amplitude-Kotlin's
    /// `amplitude-analytics-android`, posthog-ios `postHogiOSSdkName`, Snowplow's `kSPVersion`
    /// and `TRACKER_LABEL`). What `aviary fit` reads a fleet's profile back from.
    public var libraryName: String {
        switch self {
        case .aviary: "aviary"
        case .segmentSwift: "analytics-swift"
        case .segmentKotlin: "analytics-kotlin"
        case .amplitudeSwift: "amplitude-swift"
        case .amplitudeKotlin: "amplitude-analytics-android"
        case .snowplowIOS: "ios"
        case .snowplowAndroid: "andr"
        case .posthogIOS: "posthog-ios"
        }
    }

    /// The profile whose SDK's events carry `library` as their library name, if one does.
    public static func named(library: String) -> SDKProfile? {
        allCases.first { $0.libraryName == library }
    }
}

extension SDKRelease {
    /// The version the SDK's events carry: the newest tag the release stands for, without a
    /// leading `v`.
    public var libraryVersion: String {
        lastTag.hasPrefix("v") ? String(lastTag.dropFirst()) : lastTag
    }

    /// The modelled release of `profile` for an SDK version seen in an export: the one whose
    /// tags cover it, else the nearest by version number (`exact` false).
    public static func nearest(_ profile: SDKProfile, version: String) -> (release: SDKRelease, exact: Bool) {
        if let exact = profile.releases.first(where: { !$0.version.isEmpty && $0.mode.isEmpty && $0.matches(version) }) {
            return (exact, true)
        }
        let candidates = profile.releases.filter { $0.mode.isEmpty }
        guard let seen = numbers(version) else { return (candidates.first ?? profile.releases[0], false) }
        let distance = { (release: SDKRelease) -> Double in
            guard let tag = numbers(release.lastTag) else { return .infinity }
            let weights = [1e6, 1e3, 1.0]
            return zip(seen + [0, 0, 0], tag + [0, 0, 0]).prefix(3).enumerated().reduce(0) { $0 + weights[$1.offset] * Double(abs($1.element.0 - $1.element.1)) }
        }
        return (candidates.min { distance($0) < distance($1) } ?? profile.releases[0], false)
    }
}

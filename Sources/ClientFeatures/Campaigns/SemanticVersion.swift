/// A dotted version such as `2.1`, `10.3.1` or `3.0.0-beta.2`, ordered as semantic versions.
///
/// Missing numeric components count as zero (`2.1` equals `2.1.0`). A pre-release sorts before
/// its release (`3.0.0-beta < 3.0.0`); pre-release identifiers compare numerically when both are
/// numbers and as text otherwise, numbers first. Build metadata after `+` is ignored.
///
/// `SemanticVersion` is `Sendable`: it is a plain value.
public struct SemanticVersion: Comparable, Hashable, Sendable, CustomStringConvertible {
    /// The numeric components, e.g. `[10, 3, 1]`.
    public let components: [Int]
    /// The dot-separated pre-release identifiers, empty for a release.
    public let preRelease: [String]

    /// Parses `text`, or returns `nil` if it is not a dotted version.
    ///
    /// - Parameter text: One to any number of non-negative integers separated by dots, then an
    ///   optional `-pre.release` and an optional `+build`.
    public init?(_ text: String) {
        var body = Substring(text)
        if let plus = body.firstIndex(of: "+") { body = body[..<plus] }
        var pre: [String] = []
        if let dash = body.firstIndex(of: "-") {
            pre = body[body.index(after: dash)...].split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            guard !pre.isEmpty, pre.allSatisfy({ !$0.isEmpty }) else { return nil }
            body = body[..<dash]
        }
        let parts = body.split(separator: ".", omittingEmptySubsequences: false)
        var numbers: [Int] = []
        for part in parts {
            guard !part.isEmpty, part.allSatisfy(\.isASCII), let number = Int(part), number >= 0 else { return nil }
            numbers.append(number)
        }
        components = numbers
        preRelease = pre
    }

    /// The version written back as text (without build metadata).
    public var description: String {
        components.map(String.init).joined(separator: ".") + (preRelease.isEmpty ? "" : "-" + preRelease.joined(separator: "."))
    }

    /// Equal when the numeric components agree (zero-padded) and the pre-release identifiers match.
    public static func == (lhs: SemanticVersion, rhs: SemanticVersion) -> Bool {
        compare(lhs, rhs) == 0
    }

    /// Hashes the components without trailing zeros, so that `2.1` and `2.1.0` hash alike.
    public func hash(into hasher: inout Hasher) {
        var trimmed = components[...]
        while trimmed.last == 0 { trimmed = trimmed.dropLast() }
        hasher.combine(Array(trimmed))
        hasher.combine(preRelease)
    }

    /// Orders by numeric components, then releases after pre-releases.
    public static func < (lhs: SemanticVersion, rhs: SemanticVersion) -> Bool {
        compare(lhs, rhs) < 0
    }

    private static func compare(_ lhs: SemanticVersion, _ rhs: SemanticVersion) -> Int {
        for index in 0..<max(lhs.components.count, rhs.components.count) {
            let l = index < lhs.components.count ? lhs.components[index] : 0
            let r = index < rhs.components.count ? rhs.components[index] : 0
            if l != r { return l < r ? -1 : 1 }
        }
        switch (lhs.preRelease.isEmpty, rhs.preRelease.isEmpty) {
        case (true, true): return 0
        case (true, false): return 1
        case (false, true): return -1
        case (false, false): break
        }
        for (l, r) in zip(lhs.preRelease, rhs.preRelease) where l != r {
            switch (Int(l), Int(r)) {
            case let (ln?, rn?): return ln < rn ? -1 : 1
            case (_?, nil): return -1
            case (nil, _?): return 1
            case (nil, nil): return l < r ? -1 : 1
            }
        }
        return lhs.preRelease.count == rhs.preRelease.count ? 0 : (lhs.preRelease.count < rhs.preRelease.count ? -1 : 1)
    }
}

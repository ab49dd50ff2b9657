import ExperimentModel

/// A device attribute that a segment condition tests.
///
/// `SegmentAttribute` is `Sendable`: it is a plain value.
public enum SegmentAttribute: Hashable, Sendable {
    /// ``DeviceAttributes/appVersion`` (`"attribute": "app_version"`).
    case appVersion
    /// ``DeviceAttributes/os`` (`"attribute": "os"`).
    case os
    /// ``DeviceAttributes/osVersion`` (`"attribute": "os_version"`).
    case osVersion
    /// ``DeviceAttributes/deviceType`` (`"attribute": "device_type"`).
    case deviceType
    /// A key of ``DeviceAttributes/custom`` (`"custom_attribute": "plan"`).
    case custom(String)

    static let builtIn: [String: SegmentAttribute] = [
        "app_version": .appVersion, "os": .os, "os_version": .osVersion, "device_type": .deviceType,
    ]

    func value(in attributes: DeviceAttributes) -> String? {
        switch self {
        case .appVersion: attributes.appVersion
        case .os: attributes.os
        case .osVersion: attributes.osVersion
        case .deviceType: attributes.deviceType
        case .custom(let name): attributes.custom[name]
        }
    }
}

/// How a segment condition compares an attribute with its operand.
///
/// String comparisons are exact (case-sensitive). Version comparisons use ``SemanticVersion``;
/// an attribute that is not a version never matches them.
///
/// `SegmentOperator` is `Sendable`: it is a plain value.
public enum SegmentOperator: String, CaseIterable, Hashable, Sendable {
    /// The attribute equals the operand.
    case equals
    /// The attribute differs from the operand.
    case notEquals = "not_equals"
    /// The attribute contains the operand.
    case contains
    /// The attribute does not contain the operand.
    case notContains = "not_contains"
    /// The operand, a regular expression, matches somewhere in the attribute (anchor with `^…$`).
    case matchesRegex = "regex"
    /// The attribute is the same version as the operand.
    case versionEquals = "version_eq"
    /// The attribute is a later version than the operand.
    case versionGreaterThan = "version_gt"
    /// The attribute is the operand's version or later.
    case versionGreaterThanOrEqual = "version_gte"
    /// The attribute is an earlier version than the operand.
    case versionLessThan = "version_lt"
    /// The attribute is the operand's version or earlier.
    case versionLessThanOrEqual = "version_lte"

    var isVersionComparison: Bool { rawValue.hasPrefix("version_") }
}

/// One test of a device attribute, e.g. app version ≥ 2.1.
///
/// `SegmentCondition` is `Sendable`: it is a plain value.
public struct SegmentCondition: Hashable, Sendable {
    /// The attribute tested.
    public let attribute: SegmentAttribute
    /// The comparison.
    public let comparison: SegmentOperator
    /// The right-hand operand as sent.
    public let operand: String

    /// Creates a condition; `nil` if `operand` is not a version (for version comparisons) or
    /// not a regular expression (for ``SegmentOperator/matchesRegex``).
    public init?(attribute: SegmentAttribute, comparison: SegmentOperator, operand: String) {
        if comparison.isVersionComparison, SemanticVersion(operand) == nil { return nil }
        if comparison == .matchesRegex, (try? Regex(operand)) == nil { return nil }
        self.attribute = attribute
        self.comparison = comparison
        self.operand = operand
    }

    /// Whether the device satisfies the condition.
    ///
    /// A device that does not report the attribute (an unset custom attribute) never matches,
    /// whatever the operator: a campaign does not enrol users on missing data.
    public func matches(_ attributes: DeviceAttributes) -> Bool {
        guard let value = attribute.value(in: attributes) else { return false }
        switch comparison {
        case .equals: return value == operand
        case .notEquals: return value != operand
        case .contains: return value.contains(operand)
        case .notContains: return !value.contains(operand)
        case .matchesRegex:
            guard let regex = try? Regex(operand) else { return false }
            return value.contains(regex)
        case .versionEquals, .versionGreaterThan, .versionGreaterThanOrEqual, .versionLessThan, .versionLessThanOrEqual:
            guard let version = SemanticVersion(value), let bound = SemanticVersion(operand) else { return false }
            switch comparison {
            case .versionEquals: return version == bound
            case .versionGreaterThan: return version > bound
            case .versionGreaterThanOrEqual: return version >= bound
            case .versionLessThan: return version < bound
            default: return version <= bound
            }
        }
    }
}

/// A campaign's `segment_object`: conditions combined with AND, OR and NOT.
///
/// The JSON form is recursive:
/// ```json
/// { "and": [ { "attribute": "app_version", "operator": "version_gte", "value": "2.1" },
///            { "or": [ { "attribute": "os", "operator": "equals", "value": "iOS" },
///                      { "custom_attribute": "plan", "operator": "equals", "value": "pro" } ] } ] }
/// ```
/// `{ "not": … }` negates. Operators are the raw values of ``SegmentOperator``.
///
/// `SegmentExpression` is `Sendable`: it is a plain value.
public indirect enum SegmentExpression: Hashable, Sendable {
    /// A single condition.
    case condition(SegmentCondition)
    /// Every sub-expression holds.
    case all([SegmentExpression])
    /// At least one sub-expression holds.
    case any([SegmentExpression])
    /// The sub-expression does not hold.
    case not(SegmentExpression)

    /// Whether the device belongs to the segment.
    ///
    /// - Complexity: O(*n*) in the number of conditions.
    public func matches(_ attributes: DeviceAttributes) -> Bool {
        switch self {
        case .condition(let condition): condition.matches(attributes)
        case .all(let parts): parts.allSatisfy { $0.matches(attributes) }
        case .any(let parts): parts.contains { $0.matches(attributes) }
        case .not(let part): !part.matches(attributes)
        }
    }

    init(parsing value: JSONValue?, path: SettingsPath) throws(SettingsError) {
        let reader = try SettingsReader(value, path: path)
        let combinators = ["and", "or", "not"].filter { reader.members[$0] != nil }
        if combinators.count > 1 || (combinators.count == 1 && reader.members.count > 1) {
            throw SettingsError(
                path: path, expected: "exactly one of and, or, not, or a condition",
                found: "keys " + reader.members.keys.sorted().joined(separator: ", "))
        }
        switch combinators.first {
        case "and"?, "or"?:
            let key = combinators[0]
            let elements = try reader.array(key)
            guard !elements.isEmpty else {
                throw SettingsError(path: reader.childPath(key), expected: "a non-empty array", found: "[]")
            }
            var parts: [SegmentExpression] = []
            for (index, element) in elements.enumerated() {
                parts.append(try SegmentExpression(parsing: element, path: reader.childPath(key).element(index)))
            }
            self = key == "and" ? .all(parts) : .any(parts)
        case "not"?:
            self = .not(try SegmentExpression(parsing: reader.members["not"], path: reader.childPath("not")))
        default:
            self = .condition(try Self.parseCondition(reader))
        }
    }

    private static func parseCondition(_ reader: SettingsReader) throws(SettingsError) -> SegmentCondition {
        let attribute: SegmentAttribute
        switch (reader.members["attribute"], reader.members["custom_attribute"]) {
        case (let builtIn?, nil):
            guard let name = builtIn.stringValue, let known = SegmentAttribute.builtIn[name] else {
                throw SettingsError(
                    path: reader.childPath("attribute"),
                    expected: "one of " + SegmentAttribute.builtIn.keys.sorted().joined(separator: ", "),
                    value: builtIn)
            }
            attribute = known
        case (nil, _?):
            attribute = .custom(try reader.string("custom_attribute"))
        default:
            throw SettingsError(
                path: reader.path, expected: "a condition with exactly one of attribute, custom_attribute",
                found: "keys " + reader.members.keys.sorted().joined(separator: ", "))
        }
        let operatorName = try reader.string("operator")
        guard let comparison = SegmentOperator(rawValue: operatorName) else {
            throw SettingsError(
                path: reader.childPath("operator"),
                expected: "one of " + SegmentOperator.allCases.map(\.rawValue).joined(separator: ", "),
                value: reader.members["operator"])
        }
        let operand = try reader.string("value")
        guard let condition = SegmentCondition(attribute: attribute, comparison: comparison, operand: operand) else {
            throw SettingsError(
                path: reader.childPath("value"),
                expected: comparison == .matchesRegex ? "a regular expression" : "a version such as 2.1.0",
                value: reader.members["value"])
        }
        return condition
    }
}

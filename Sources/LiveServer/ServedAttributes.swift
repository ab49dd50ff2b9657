import Allocators

/// The device attributes a server's segments are made of, as the served scenario lists them
/// (`population.attributes`): a decision request names the device's value of each, and a
/// contextual allocator decides in the segment they make.
///
/// Segments are numbered as the simulator numbers them, the first attribute's value varying
/// slowest, so a contextual policy learned in a simulated fleet and one learned by a server
/// agree on what segment 5 is.
///
/// `Sendable`: an immutable value.
package struct ServedAttributes: Sendable {
    /// The attributes, in order, each with its values in order.
    package let attributes: [(name: String, values: [String])]
    /// The segments and their features, for a contextual allocator: made once, since a replay
    /// checks every logged segment against their count.
    package let contexts: ContextSpace

    /// No attributes: every device in the one segment.
    package static let none = ServedAttributes([])

    package init(_ attributes: [(name: String, values: [String])]) {
        self.attributes = attributes
        // Cannot throw: a scenario's attributes have two values or more and make at most
        // 4,096 segments (checked when it is read).
        contexts = try! ContextSpace(valueCounts: attributes.map(\.values.count))
    }

    /// Whether devices have attributes at all.
    package var isEmpty: Bool { attributes.isEmpty }

    /// The segment of a device whose attribute `name` has value `values[name]`: every
    /// attribute named once, with one of its values.
    ///
    /// - Throws: ``APIError`` 400 naming the attribute (`attributes.NAME`) that is unknown,
    ///   missing, or has a value the scenario does not list.
    package func context(of values: [String: String], field: String = "attributes") throws(APIError) -> Int {
        if let unknown = values.keys.sorted().first(where: { key in !attributes.contains { $0.name == key } }) {
            throw APIError.badField("\(field).\(unknown)", expected: expectedNames, status: 400)
        }
        var context = 0
        for attribute in attributes {
            guard let value = values[attribute.name] else {
                throw APIError.badField("\(field).\(attribute.name)", expected: "the device's \(attribute.name): " + attribute.values.joined(separator: ", "), status: 400)
            }
            guard let index = attribute.values.firstIndex(of: value) else {
                throw APIError.badField("\(field).\(attribute.name)", expected: attribute.values.joined(separator: ", "), status: 400)
            }
            context = context * attribute.values.count + index
        }
        return context
    }

    /// The segment of a device tagged with Conductrics targeting `features`: one value of each
    /// attribute, in any order (the attributes' values are told apart by name, so a value two
    /// attributes share must be sent as `NAME:VALUE`, or as attributes to `/v1/decisions`).
    ///
    /// - Throws: ``APIError`` 400 naming `field` for a feature that is no attribute's value, one
    ///   that two attributes share, or an attribute without one.
    package func context(ofFeatures features: [String], field: String = "features") throws(APIError) -> Int {
        var values: [String: String] = [:]
        for feature in features where !feature.isEmpty {
            let named = feature.split(separator: ":", maxSplits: 1).map(String.init)
            let owners = named.count == 2
                ? attributes.filter { $0.name == named[0] && $0.values.contains(named[1]) }
                : attributes.filter { $0.values.contains(feature) }
            let value = named.count == 2 ? named[1] : feature
            guard owners.count == 1 else {
                throw APIError.badField(field, expected: owners.isEmpty
                    ? "each feature one of the attributes' values (\(feature) is none): " + expectedValues
                    : "\(feature) is a value of \(owners.map(\.name).joined(separator: " and ")): send it as NAME:\(feature)", status: 400)
            }
            guard values.updateValue(value, forKey: owners[0].name) == nil else {
                throw APIError.badField(field, expected: "one value of \(owners[0].name), not two", status: 400)
            }
        }
        return try context(of: values, field: field)
    }

    private var expectedNames: String {
        "attributes named " + attributes.map(\.name).joined(separator: ", ")
    }

    private var expectedValues: String {
        attributes.map { "\($0.name): \($0.values.joined(separator: ", "))" }.joined(separator: "; ")
    }
}

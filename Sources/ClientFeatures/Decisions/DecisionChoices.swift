/// The choices a decision offers, parsed strictly from the service's compact notation.
///
/// A single decision lists codes separated by commas: `"a,b"`, `"old,new"`. A multi-decision
/// (several decisions made at once, as in a multivariate test) names each decision and lists its
/// codes, separating decisions with `/`: `"color:red,blue/size:sm,md,lg"`.
///
/// Parsing rejects what the service would misread: empty lists, empty or duplicate codes,
/// duplicate decision names, a decision without `:` or with two, and characters outside letters,
/// digits, `-`, `_` and `.`. Each error quotes the offending part.
///
/// `DecisionChoices` is `Sendable`: it is an immutable value.
public struct DecisionChoices: Hashable, Sendable, CustomStringConvertible {
    /// One decision's choices: for a multi-decision, a named decision such as `color:red,blue`.
    public struct Facet: Hashable, Sendable {
        /// The decision's name; `nil` for a single decision.
        public let name: String?
        /// The choice codes in the order given; the first is the fallback.
        public let options: [String]
    }

    /// The decisions, in the order given: one unnamed facet for a single decision.
    public let facets: [Facet]

    /// Parses a choice list.
    ///
    /// - Parameters:
    ///   - text: `"a,b"` for a single decision, `"color:red,blue/size:sm,md"` for several.
    ///   - multiple: Whether `text` names several decisions.
    /// - Throws: ``DecisionError`` naming the offending part.
    /// - Complexity: O(*n*) in the length of `text`.
    public init(parsing text: String, multiple: Bool = false) throws(DecisionError) {
        facets = multiple ? try Self.parseFacets(text) : [Facet(name: nil, options: try Self.parseOptions(Substring(text), in: text, decision: nil))]
    }

    /// Whether the choices name several decisions.
    public var isMultiple: Bool { facets.first?.name != nil }

    /// What a device shows when no decision arrives: the first choice of each decision.
    public var fallback: DecisionSelection {
        if isMultiple {
            return .multiple(Dictionary(uniqueKeysWithValues: facets.map { ($0.name!, $0.options[0]) }))
        }
        return .single(facets[0].options[0])
    }

    /// Whether `selection` picks one offered code for every decision and nothing else.
    public func accepts(_ selection: DecisionSelection) -> Bool {
        switch selection {
        case .single(let code):
            return !isMultiple && facets[0].options.contains(code)
        case .multiple(let codes):
            guard isMultiple, codes.count == facets.count else { return false }
            return facets.allSatisfy { facet in codes[facet.name!].map(facet.options.contains) ?? false }
        }
    }

    /// The canonical notation: `a,b` or `color:red,blue/size:sm,md`.
    public var description: String {
        facets.map { facet in
            let options = facet.options.joined(separator: ",")
            return facet.name.map { "\($0):\(options)" } ?? options
        }.joined(separator: "/")
    }

    private static func parseFacets(_ text: String) throws(DecisionError) -> [Facet] {
        guard !text.isEmpty else {
            throw DecisionError("choices are empty; expected named decisions such as \"color:red,blue/size:sm,md\"")
        }
        var facets: [Facet] = []
        var names: Set<String> = []
        for (index, part) in text.split(separator: "/", omittingEmptySubsequences: false).enumerated() {
            let position = index + 1
            guard !part.isEmpty else {
                throw DecisionError("empty decision at position \(position) in \"\(text)\"; expected name:choice,choice")
            }
            let pieces = part.split(separator: ":", omittingEmptySubsequences: false)
            guard pieces.count == 2 else {
                let problem = pieces.count == 1 ? "has no ':'" : "has more than one ':'"
                throw DecisionError("decision \"\(part)\" in \"\(text)\" \(problem); expected name:choice,choice")
            }
            let name = String(pieces[0])
            guard !name.isEmpty else {
                throw DecisionError("decision \"\(part)\" at position \(position) in \"\(text)\" has no name before ':'")
            }
            if let bad = DecisionCode.firstDisallowed(in: name) {
                throw DecisionError("decision name \"\(name)\" in \"\(text)\" contains \(DecisionCode.quoted(bad)); names use letters, digits, '-', '_' and '.'")
            }
            guard names.insert(name).inserted else {
                throw DecisionError("duplicate decision name \"\(name)\" in \"\(text)\"")
            }
            facets.append(Facet(name: name, options: try parseOptions(pieces[1], in: text, decision: name)))
        }
        return facets
    }

    private static func parseOptions(_ list: Substring, in text: String, decision: String?) throws(DecisionError) -> [String] {
        let owner = decision.map { " of decision \"\($0)\"" } ?? ""
        guard !list.isEmpty else {
            if let decision {
                throw DecisionError("decision \"\(decision)\" in \"\(text)\" has no choices after ':'")
            }
            throw DecisionError("choices are empty; expected a comma-separated list such as \"a,b\"")
        }
        var options: [String] = []
        var seen: Set<String> = []
        for (index, piece) in list.split(separator: ",", omittingEmptySubsequences: false).enumerated() {
            let option = String(piece)
            guard !option.isEmpty else {
                throw DecisionError("empty choice at position \(index + 1)\(owner) in \"\(text)\"")
            }
            if decision == nil, let separator = option.first(where: { $0 == ":" || $0 == "/" }) {
                throw DecisionError("choice \"\(option)\" in \"\(text)\" contains '\(separator)'; named decisions such as \"color:red,blue/size:sm,md\" are made with decisions(agent:choices:point:at:)")
            }
            if let bad = DecisionCode.firstDisallowed(in: option) {
                throw DecisionError("choice \"\(option)\"\(owner) in \"\(text)\" contains \(DecisionCode.quoted(bad)); codes use letters, digits, '-', '_' and '.'")
            }
            guard seen.insert(option).inserted else {
                throw DecisionError("duplicate choice \"\(option)\"\(owner) in \"\(text)\"")
            }
            options.append(option)
        }
        return options
    }
}

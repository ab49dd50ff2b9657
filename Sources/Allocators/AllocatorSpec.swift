import ExperimentModel
import Randomness

/// A named allocator with its parameters: what a scenario file or a command-line flag asks for.
///
/// A spec is validated when it is made, so a scenario with a bad allocator fails before a run
/// starts; ``makeAllocator(variantCount:seed:contexts:)`` then builds a fresh allocator per replicate.
///
/// The textual form is `name` or `name(key=value, key=value)`, e.g. `thompson(floor=0.01)`,
/// `epsilon-greedy(epsilon=0.1, decay=0.0001)`, `uniform(split=80/20)`,
/// `external(command="python3 policy.py", timeout=5)`: a value is a number, a split such as
/// `80/20`, a bare word (`sequential`), or text in double quotes (`\"` and `\\` inside stand for
/// `"` and `\`).
///
/// Besides the built-in cases, a spec can name any allocator in ``AllocatorRegistry``: the
/// `external` allocator that Aviary ships, and those a package adds.
public enum AllocatorSpec: Hashable, Sendable, CustomStringConvertible {
    /// A fixed split; `weights` `nil` means even.
    case uniform(weights: [Double]?)
    /// ε-greedy with optional decay.
    case epsilonGreedy(epsilon: Double, decay: Double)
    /// Beta–Bernoulli Thompson sampling.
    case thompson(priorAlpha: Double, priorBeta: Double, draws: Int, floor: Double)
    /// UCB1.
    case ucb1
    /// A fixed split until a view count or a significant test, then the winner.
    case exploreThenCommit(views: Int?, significance: Double?, minimumViewsPerVariant: Int, weights: [Double]?,
                           test: ExploreThenCommit.StoppingTest = .z)
    /// LinUCB over the device's context (``LinUCB``).
    case linUCB(alpha: Double, ridge: Double)
    /// Linear Thompson sampling over the device's context (``LinearThompsonSampling``).
    case linearThompson(scale: Double, ridge: Double, draws: Int, floor: Double)
    /// ε-greedy over ridge estimates in the device's context (``RidgeEpsilonGreedy``).
    case ridgeEpsilonGreedy(epsilon: Double, ridge: Double)
    /// Thompson sampling in the leaves of a tree over the device's attributes (``TreeThompsonSampling``).
    case treeThompson(minimumViews: Int, depth: Int, priorAlpha: Double, priorBeta: Double, draws: Int, floor: Double)
    /// Eppo's inverse-gap rule over ridge estimates in the device's context (``InverseGapWeighting``).
    case inverseGap(gamma: Double, floor: Double, ridge: Double)
    /// An allocator found in ``AllocatorRegistry`` by name, with its parameters as given.
    case registered(name: String, parameters: [String: Value])

    /// The built-in allocator names, in the order the documentation lists them.
    public static let builtInNames = ["uniform", "epsilon-greedy", "thompson", "ucb1", "explore-then-commit",
                                      "linucb", "linear-thompson", "epsilon-greedy-ridge", "tree-thompson", "inverse-gap"]

    /// The allocator names understood: the built-in ones, then the registered ones
    /// (``AllocatorRegistry``) in the order they were registered.
    public static var names: [String] { builtInNames + AllocatorRegistry.names }

    /// The parameter keys each allocator accepts.
    public static let parameterKeys: [String: [String]] = [
        "uniform": ["split"],
        "epsilon-greedy": ["epsilon", "decay"],
        "thompson": ["prior-alpha", "prior-beta", "draws", "floor"],
        "ucb1": [],
        "explore-then-commit": ["views", "significance", "minimum-views", "split", "test", "tuning"],
        "linucb": ["alpha", "ridge"],
        "linear-thompson": ["v", "ridge", "draws", "floor"],
        "epsilon-greedy-ridge": ["epsilon", "ridge"],
        "tree-thompson": ["minimum-views", "depth", "prior-alpha", "prior-beta", "draws", "floor"],
        "inverse-gap": ["gamma", "floor", "ridge"],
    ]

    /// Whether the allocator chooses by the device's context (its attributes' segment), so
    /// that a scenario must give devices attributes and a device evaluates its snapshots in
    /// its own context.
    public var isContextual: Bool {
        switch self {
        case .linUCB, .linearThompson, .ridgeEpsilonGreedy, .treeThompson, .inverseGap: true
        case .registered(let name, let parameters): AllocatorRegistry.registration(named: name)?.contextual(parameters) ?? false
        default: false
        }
    }

    /// Whether the allocator ends by sending every view to one winner of its own choosing
    /// (explore-then-commit), so that its commitment is a decision to judge.
    public var commitsToWinner: Bool {
        if case .exploreThenCommit = self { return true }
        return false
    }

    /// The allocator's name, as used in reports.
    public var name: String {
        switch self {
        case .uniform: "uniform"
        case .epsilonGreedy: "epsilon-greedy"
        case .thompson: "thompson"
        case .ucb1: "ucb1"
        case .exploreThenCommit: "explore-then-commit"
        case .linUCB: "linucb"
        case .linearThompson: "linear-thompson"
        case .ridgeEpsilonGreedy: "epsilon-greedy-ridge"
        case .treeThompson: "tree-thompson"
        case .inverseGap: "inverse-gap"
        case .registered(let name, _): name
        }
    }

    /// A parameter value: a number, a split such as `80/20`, or text.
    public enum Value: Hashable, Sendable {
        /// A number, such as `0.1`.
        case number(Double)
        /// Numbers joined by `/`, such as the split `80/20`.
        case numbers([Double])
        /// Text, written in double quotes in the textual form.
        case text(String)
    }

    /// Creates a spec from a name and parameters, validating both.
    ///
    /// - Throws: `AllocatorError` for an unknown name, an unknown key, a value of the wrong
    ///   kind, or a value out of range.
    public init(name: String, parameters: [String: Value] = [:]) throws(AllocatorError) {
        if Self.parameterKeys[name] == nil, let registration = AllocatorRegistry.registration(named: name) {
            try Self.check(parameters.keys, of: name, allowed: registration.parameterKeys)
            self = .registered(name: name, parameters: parameters)
            try validate()
            return
        }
        guard let allowed = Self.parameterKeys[name] else {
            throw AllocatorError("unknown allocator '\(name)'; expected one of \(Self.names.joined(separator: ", "))")
        }
        try Self.check(parameters.keys, of: name, allowed: allowed)
        let reader = AllocatorParameters(allocator: name, values: parameters)
        switch name {
        case "uniform":
            self = .uniform(weights: try reader.numbers("split"))
        case "epsilon-greedy":
            guard let epsilon = try reader.number("epsilon") else {
                throw AllocatorError("epsilon-greedy: parameter 'epsilon' is required (a rate in [0, 1])")
            }
            self = .epsilonGreedy(epsilon: epsilon, decay: try reader.number("decay") ?? 0)
        case "thompson":
            self = .thompson(
                priorAlpha: try reader.number("prior-alpha") ?? 1,
                priorBeta: try reader.number("prior-beta") ?? 1,
                draws: try reader.integer("draws") ?? 10_000,
                floor: try reader.number("floor") ?? 0
            )
        case "ucb1":
            self = .ucb1
        case "linucb":
            self = .linUCB(alpha: try reader.number("alpha") ?? 1, ridge: try reader.number("ridge") ?? 1)
        case "linear-thompson":
            self = .linearThompson(scale: try reader.number("v") ?? 0.25, ridge: try reader.number("ridge") ?? 1,
                                   draws: try reader.integer("draws") ?? 1_000, floor: try reader.number("floor") ?? 0)
        case "epsilon-greedy-ridge":
            guard let epsilon = try reader.number("epsilon") else {
                throw AllocatorError("epsilon-greedy-ridge: parameter 'epsilon' is required (a rate in [0, 1])")
            }
            self = .ridgeEpsilonGreedy(epsilon: epsilon, ridge: try reader.number("ridge") ?? 1)
        case "tree-thompson":
            self = .treeThompson(minimumViews: try reader.integer("minimum-views") ?? 200, depth: try reader.integer("depth") ?? 8,
                                 priorAlpha: try reader.number("prior-alpha") ?? 1, priorBeta: try reader.number("prior-beta") ?? 1,
                                 draws: try reader.integer("draws") ?? 10_000, floor: try reader.number("floor") ?? 0)
        case "inverse-gap":
            self = .inverseGap(gamma: try reader.number("gamma") ?? 100, floor: try reader.number("floor") ?? 0, ridge: try reader.number("ridge") ?? 1)
        case "explore-then-commit":
            let test: ExploreThenCommit.StoppingTest
            switch try reader.text("test") {
            case nil, "z"?:
                guard try reader.number("tuning") == nil else {
                    throw AllocatorError("explore-then-commit: 'tuning' belongs to test=sequential")
                }
                test = .z
            case "sequential"?:
                test = .sequential(tuning: try reader.number("tuning") ?? 5_000)
            case let other?:
                throw AllocatorError("explore-then-commit: test is '\(other)'; expected z or sequential")
            }
            self = .exploreThenCommit(
                views: try reader.integer("views"),
                significance: try reader.number("significance"),
                minimumViewsPerVariant: try reader.integer("minimum-views") ?? 100,
                weights: try reader.numbers("split"),
                test: test
            )
        default:
            throw AllocatorError("unknown allocator '\(name)'; expected one of \(Self.names.joined(separator: ", "))")
        }
        try validate()
    }

    /// Checks that every key is one the allocator takes; `allowed` `nil` takes any key.
    private static func check(_ keys: Dictionary<String, Value>.Keys, of name: String, allowed: [String]?) throws(AllocatorError) {
        guard let allowed else { return }
        for key in keys.sorted() where !allowed.contains(key) {
            let expected = allowed.isEmpty ? "it takes no parameters" : "expected one of \(allowed.joined(separator: ", "))"
            throw AllocatorError("\(name): unknown parameter '\(key)'; \(expected)")
        }
    }

    /// Parses the textual form, `name` or `name(key=value, …)`.
    ///
    /// - Throws: `AllocatorError` naming the part that does not parse or validate.
    public init(parsing text: String) throws(AllocatorError) {
        let trimmed = text.trimmingSpaces
        guard let open = trimmed.firstIndex(of: "(") else {
            try self.init(name: trimmed)
            return
        }
        guard trimmed.hasSuffix(")") else {
            throw AllocatorError("allocator '\(text)': missing ')' after the parameters")
        }
        let name = String(trimmed[..<open]).trimmingSpaces
        let body = trimmed[trimmed.index(after: open)..<trimmed.index(before: trimmed.endIndex)]
        var parameters: [String: Value] = [:]
        for item in try Self.items(of: body, in: text) {
            let parts = item.split(separator: "=", maxSplits: 1).map { String($0).trimmingSpaces }
            guard parts.count == 2, !parts[0].isEmpty else {
                throw AllocatorError("allocator '\(text)': '\(item.trimmingSpaces)' is not key=value")
            }
            if parts[1].hasPrefix("\"") {
                parameters[parts[0]] = .text(try Self.unquote(parts[1], key: parts[0], in: text))
                continue
            }
            if Self.isWord(parts[1]) {
                parameters[parts[0]] = .text(parts[1])
                continue
            }
            let pieces = parts[1].split(separator: "/")
            let numbers = pieces.compactMap { Double($0.trimmingSpaces) }
            guard !pieces.isEmpty, numbers.count == pieces.count else {
                throw AllocatorError("allocator '\(text)': value of '\(parts[0])' is '\(parts[1])', expected a number or a split such as 80/20")
            }
            parameters[parts[0]] = pieces.count == 1 && parts[0] != "split" ? .number(numbers[0]) : .numbers(numbers)
        }
        try self.init(name: name, parameters: parameters)
    }

    /// The comma-separated items of a parameter list; commas inside double quotes belong to the
    /// quoted text.
    private static func items(of body: Substring, in text: String) throws(AllocatorError) -> [Substring] {
        var items: [Substring] = []
        var start = body.startIndex, index = body.startIndex
        var quoted = false, escaped = false
        while index < body.endIndex {
            let character = body[index]
            if escaped {
                escaped = false
            } else if quoted && character == "\\" {
                escaped = true
            } else if character == "\"" {
                quoted.toggle()
            } else if character == "," && !quoted {
                items.append(body[start..<index])
                start = body.index(after: index)
            }
            index = body.index(after: index)
        }
        guard !quoted else {
            throw AllocatorError("allocator '\(text)': a quoted value has no closing '\"'")
        }
        items.append(body[start..<body.endIndex])
        // As `split(separator:)` would: empty items are no items.
        return items.filter { !$0.isEmpty }
    }

    /// The text inside double quotes, with `\"` and `\\` unescaped.
    private static func unquote(_ value: String, key: String, in text: String) throws(AllocatorError) -> String {
        var result = ""
        var escaped = false
        for (offset, character) in value.dropFirst().enumerated() {
            if escaped {
                result.append(character)
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else if character == "\"" {
                guard offset == value.count - 2 else {
                    throw AllocatorError("allocator '\(text)': value of '\(key)' has text after its closing '\"'")
                }
                return result
            } else {
                result.append(character)
            }
        }
        throw AllocatorError("allocator '\(text)': value of '\(key)' has no closing '\"'")
    }

    /// The textual form of a value, as ``init(parsing:)`` reads it: a word as it is, other text
    /// quoted.
    static func format(_ value: Value, key: String) -> String {
        switch value {
        case .number(let x): format(x)
        case .numbers(let xs): xs.map(format).joined(separator: "/")
        case .text(let text) where isWord(text): text
        case .text(let text): "\"" + text.replacingAll("\\", with: "\\\\").replacingAll("\"", with: "\\\"") + "\""
        }
    }

    /// Whether `text` is a bare word: a letter, then letters, digits, `-` or `_`. A word is text
    /// without quotes, and never a number (a number starts with a digit, a sign or a point).
    static func isWord(_ text: String) -> Bool {
        guard let first = text.unicodeScalars.first, first.properties.isAlphabetic, first.isASCII else { return false }
        return text.unicodeScalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "-" || $0 == "_") }
    }

    static func format(_ x: Double) -> String {
        x == x.rounded() && abs(x) < 1e15 ? String(Int(x)) : String(x)
    }

    /// Checks the parameters that do not depend on the number of variants.
    func validate() throws(AllocatorError) {
        _ = try makeAllocator(variantCount: variantCountForValidation, seed: StreamSeed(0))
    }

    private var variantCountForValidation: Int {
        switch self {
        case .uniform(let weights?), .exploreThenCommit(_, _, _, let weights?, _): weights.count
        // As many variants as the floor allows, capped: a tiny floor would otherwise ask for
        // more variants than an Int holds (1 / 1e-320 is infinite) or than memory does.
        case .thompson(_, _, _, let floor) where floor > 0: max(1, Int(min(1 / floor, 64).rounded(.down)))
        case .linearThompson(_, _, _, let floor) where floor > 0: max(1, Int(min(1 / floor, 64).rounded(.down)))
        case .treeThompson(_, _, _, _, _, let floor) where floor > 0: max(1, Int(min(1 / floor, 64).rounded(.down)))
        case .inverseGap(_, let floor, _) where floor > 0: max(1, Int(min(1 / floor, 64).rounded(.down)))
        case .registered(_, let parameters):
            if case .numbers(let weights)? = parameters["split"] { weights.count } else { 2 }
        default: 2
        }
    }

    /// Builds a fresh allocator for an experiment with `variantCount` variants.
    ///
    /// - Throws: `AllocatorError` if the parameters do not fit that many variants (a split
    ///   with another count, a floor too large).
    public func makeAllocator(variantCount: Int, seed: StreamSeed, contexts: ContextSpace = .single) throws(AllocatorError) -> any Allocator {
        switch self {
        case .uniform(let weights):
            try UniformSplit(variantCount: variantCount, weights: weights, seed: seed)
        case .epsilonGreedy(let epsilon, let decay):
            try EpsilonGreedy(variantCount: variantCount, epsilon: epsilon, decay: decay, seed: seed)
        case .thompson(let priorAlpha, let priorBeta, let draws, let floor):
            try ThompsonSampling(variantCount: variantCount, priorAlpha: priorAlpha, priorBeta: priorBeta, draws: draws, floor: floor, seed: seed)
        case .ucb1:
            try UCB1(variantCount: variantCount, seed: seed)
        case .exploreThenCommit(let views, let significance, let minimum, let weights, let test):
            try ExploreThenCommit(variantCount: variantCount, explorationViews: views, significance: significance, minimumViewsPerVariant: minimum,
                                  weights: weights, test: test, seed: seed)
        case .linUCB(let alpha, let ridge):
            try LinUCB(variantCount: variantCount, contexts: contexts, alpha: alpha, ridge: ridge, seed: seed)
        case .linearThompson(let scale, let ridge, let draws, let floor):
            try LinearThompsonSampling(variantCount: variantCount, contexts: contexts, scale: scale, ridge: ridge, draws: draws, floor: floor, seed: seed)
        case .ridgeEpsilonGreedy(let epsilon, let ridge):
            try RidgeEpsilonGreedy(variantCount: variantCount, contexts: contexts, epsilon: epsilon, ridge: ridge, seed: seed)
        case .treeThompson(let minimumViews, let depth, let priorAlpha, let priorBeta, let draws, let floor):
            try TreeThompsonSampling(variantCount: variantCount, contexts: contexts, minimumViews: minimumViews, depth: depth,
                                     priorAlpha: priorAlpha, priorBeta: priorBeta, draws: draws, floor: floor, seed: seed)
        case .inverseGap(let gamma, let floor, let ridge):
            try InverseGapWeighting(variantCount: variantCount, contexts: contexts, gamma: gamma, floor: floor, ridge: ridge, seed: seed)
        case .registered(let name, let parameters):
            try Self.makeRegistered(name, parameters: parameters, variantCount: variantCount, seed: seed, contexts: contexts)
        }
    }

    private static func makeRegistered(_ name: String, parameters: [String: Value], variantCount: Int, seed: StreamSeed,
                                       contexts: ContextSpace) throws(AllocatorError) -> any Allocator {
        guard let registration = AllocatorRegistry.registration(named: name) else {
            throw AllocatorError("unknown allocator '\(name)'; expected one of \(names.joined(separator: ", "))")
        }
        return try registration.make(AllocatorParameters(allocator: name, values: parameters), variantCount, seed, contexts)
    }

    /// The textual form, which ``init(parsing:)`` reads back.
    public var description: String {
        let format: (Double) -> String = Self.format
        var parts: [String] = []
        switch self {
        case .uniform(let weights):
            if let weights { parts.append("split=" + weights.map(format).joined(separator: "/")) }
        case .epsilonGreedy(let epsilon, let decay):
            parts.append("epsilon=\(format(epsilon))")
            if decay != 0 { parts.append("decay=\(format(decay))") }
        case .thompson(let priorAlpha, let priorBeta, let draws, let floor):
            if priorAlpha != 1 { parts.append("prior-alpha=\(format(priorAlpha))") }
            if priorBeta != 1 { parts.append("prior-beta=\(format(priorBeta))") }
            if draws != 10_000 { parts.append("draws=\(draws)") }
            if floor != 0 { parts.append("floor=\(format(floor))") }
        case .ucb1:
            break
        case .exploreThenCommit(let views, let significance, let minimum, let weights, let test):
            if let views { parts.append("views=\(views)") }
            if let significance { parts.append("significance=\(format(significance))") }
            if minimum != 100 { parts.append("minimum-views=\(minimum)") }
            if let weights { parts.append("split=" + weights.map(format).joined(separator: "/")) }
            if case .sequential(let tuning) = test {
                parts.append("test=sequential")
                if tuning != 5_000 { parts.append("tuning=\(format(tuning))") }
            }
        case .linUCB(let alpha, let ridge):
            if alpha != 1 { parts.append("alpha=\(format(alpha))") }
            if ridge != 1 { parts.append("ridge=\(format(ridge))") }
        case .linearThompson(let scale, let ridge, let draws, let floor):
            if scale != 0.25 { parts.append("v=\(format(scale))") }
            if ridge != 1 { parts.append("ridge=\(format(ridge))") }
            if draws != 1_000 { parts.append("draws=\(draws)") }
            if floor != 0 { parts.append("floor=\(format(floor))") }
        case .ridgeEpsilonGreedy(let epsilon, let ridge):
            parts.append("epsilon=\(format(epsilon))")
            if ridge != 1 { parts.append("ridge=\(format(ridge))") }
        case .treeThompson(let minimumViews, let depth, let priorAlpha, let priorBeta, let draws, let floor):
            if minimumViews != 200 { parts.append("minimum-views=\(minimumViews)") }
            if depth != 8 { parts.append("depth=\(depth)") }
            if priorAlpha != 1 { parts.append("prior-alpha=\(format(priorAlpha))") }
            if priorBeta != 1 { parts.append("prior-beta=\(format(priorBeta))") }
            if draws != 10_000 { parts.append("draws=\(draws)") }
            if floor != 0 { parts.append("floor=\(format(floor))") }
        case .inverseGap(let gamma, let floor, let ridge):
            if gamma != 100 { parts.append("gamma=\(format(gamma))") }
            if floor != 0 { parts.append("floor=\(format(floor))") }
            if ridge != 1 { parts.append("ridge=\(format(ridge))") }
        case .registered(_, let parameters):
            parts = parameters.keys.sorted().map { "\($0)=\(Self.format(parameters[$0]!, key: $0))" }
        }
        return parts.isEmpty ? name : "\(name)(\(parts.joined(separator: ", ")))"
    }
}

extension StringProtocol {
    var trimmingSpaces: String {
        String(drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed())
    }

    /// The string with every `target` replaced by `replacement` (Foundation-free).
    func replacingAll(_ target: Character, with replacement: String) -> String {
        var result = ""
        for character in self {
            if character == target { result += replacement } else { result.append(character) }
        }
        return result
    }
}

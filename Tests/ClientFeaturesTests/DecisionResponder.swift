import Allocators
@testable import ClientFeatures
import ExperimentModel

/// A decision service's side of the exchange, for the client's tests: answers ``DecisionRequest``s
/// by asking an allocator.
///
/// The allocator's variants are the request's choices: for a single decision, variant *i* is
/// the *i*-th choice; for a multi-decision, each variant is one combination (a full factorial
/// design), numbered in mixed radix with the first decision most significant, so
/// `"color:red,blue/size:sm,md,lg"` has six variants and variant 4 is `blue`, `md`. A request
/// whose choices do not match the allocator's variant count gets a failure response naming both.
///
/// Decisions are sticky per session, agent and point (when `sticky` is on): a repeated request
/// gets the same variant and the allocator sees one view per assignment. The first goal in a
/// session credits a conversion, worth the goal's value (1 by default), to each variant the
/// session was assigned; later goals are acknowledged without counting, so a variant's
/// successes count converting sessions. Goals without a decision are acknowledged and ignored,
/// as the service does. Expiring a session forgets its assignments.
///
/// One responder serves one agent's allocator; route requests by ``DecisionRequest/agent`` when
/// several agents run.
///
/// `DecisionResponder` is `Sendable` when its allocator is.
struct DecisionResponder<A: Allocator> {
    struct SessionKey: Hashable {
        var session: String
        var agent: String
    }

    struct SessionState {
        /// Variant per decision point (`""` for the default point).
        var assignments: [String: Int] = [:]
        var converted = false
    }

    /// The allocator choosing the variants, with the feedback it has learnt from.
    private(set) var allocator: A
    /// Whether repeated decisions in a session reuse the earlier variant.
    let sticky: Bool
    private var sessions: [SessionKey: SessionState] = [:]

    /// Creates a responder over `allocator`.
    ///
    /// - Parameters:
    ///   - allocator: Chooses variants and learns from views and goals.
    ///   - sticky: Whether a session keeps its variant at each point until it expires.
    init(allocator: A, sticky: Bool = true) {
        self.allocator = allocator
        self.sticky = sticky
    }

    /// Answers one request.
    ///
    /// - Complexity: O(*d*) for a decision with *d* named decisions, plus the allocator's cost;
    ///   O(*p* log *p*) for a goal in a session decided at *p* points.
    mutating func respond(to request: DecisionRequest) -> DecisionResponse {
        let key = SessionKey(session: request.sessionID, agent: request.agent)
        switch request.kind {
        case .decision(let point, let choices):
            let combinations = choices.combinationCount
            guard combinations == allocator.variantCount else {
                return .failure("agent \"\(request.agent)\" has \(allocator.variantCount) variants but the request offers \(combinations) combinations (\(choices))")
            }
            let pointKey = point ?? ""
            let variant: Int
            if sticky, let assigned = sessions[key]?.assignments[pointKey] {
                variant = assigned
            } else {
                variant = allocator.choose()
                allocator.record(.view(variant))
                sessions[key, default: SessionState()].assignments[pointKey] = variant
            }
            switch choices.selection(forCombination: variant) {
            case .single(let code): return .decision(code)
            case .multiple(let codes): return .decisions(codes)
            }
        case .goal(_, let value):
            guard var state = sessions[key], !state.assignments.isEmpty, !state.converted else {
                return .success(["status": "ignored"])
            }
            state.converted = true
            sessions[key] = state
            let variants = Set(state.assignments.values).sorted()
            for variant in variants {
                allocator.record(.conversion(variant, value: value ?? 1))
            }
            return .success(["status": "rewarded"])
        case .expireSession:
            sessions[key] = nil
            return .accepted
        }
    }
}

extension DecisionResponder: Sendable where A: Sendable {}

extension DecisionChoices {
    /// The number of distinct selections: the product of each decision's choice count.
    var combinationCount: Int {
        facets.reduce(1) { $0 * $1.options.count }
    }

    /// The selection numbered `index` in mixed radix, the first decision most significant.
    func selection(forCombination index: Int) -> DecisionSelection {
        precondition(index >= 0 && index < combinationCount, "combination \(index) out of range 0..<\(combinationCount)")
        if !isMultiple { return .single(facets[0].options[index]) }
        var remainder = index
        var codes: [String: String] = [:]
        for facet in facets.reversed() {
            codes[facet.name!] = facet.options[remainder % facet.options.count]
            remainder /= facet.options.count
        }
        return .multiple(codes)
    }
}

/// The choice codes a decision produced: one code, or one code per named decision.
///
/// `DecisionSelection` is `Sendable`: it is a plain value.
public enum DecisionSelection: Hashable, Sendable, CustomStringConvertible {
    /// The code chosen by a single decision, e.g. `"b"` from `"a,b"`.
    case single(String)
    /// The code chosen for each named decision, e.g. `["color": "red", "size": "md"]` from
    /// `"color:red,blue/size:sm,md,lg"`.
    case multiple([String: String])

    /// The code of a single decision; `nil` for a multi-decision.
    public var code: String? {
        if case .single(let code) = self { return code }
        return nil
    }

    /// The code chosen for the named decision of a multi-decision; `nil` if there is none.
    public subscript(decision name: String) -> String? {
        if case .multiple(let codes) = self { return codes[name] }
        return nil
    }

    /// `b`, or `color:red/size:md` with the names in ascending order.
    public var description: String {
        switch self {
        case .single(let code):
            return code
        case .multiple(let codes):
            return codes.keys.sorted().map { "\($0):\(codes[$0]!)" }.joined(separator: "/")
        }
    }
}

import ExperimentModel

/// The parameters of one allocator spec, read by name with a clear error for a value of the
/// wrong kind: what a registered allocator's factory (``AllocatorRegistration``) receives.
///
/// `Sendable`: an immutable value.
public struct AllocatorParameters: Sendable {
    /// The allocator's name, which every error message starts with.
    public let allocator: String
    /// The parameters as given, by key.
    public let values: [String: AllocatorSpec.Value]

    /// Wraps the parameters of the allocator `allocator`.
    public init(allocator: String, values: [String: AllocatorSpec.Value]) {
        self.allocator = allocator
        self.values = values
    }

    /// The number given for `key`, or `nil` if there is none.
    ///
    /// - Throws: `AllocatorError` if the value is a list or text.
    public func number(_ key: String) throws(AllocatorError) -> Double? {
        switch values[key] {
        case nil: return nil
        case .number(let x): return x
        case .numbers(let xs) where xs.count == 1: return xs[0]
        case .numbers: throw AllocatorError("\(allocator): parameter '\(key)' takes one number, not a list")
        case .text(let text): throw AllocatorError("\(allocator): parameter '\(key)' is \"\(text)\"; it must be a number")
        }
    }

    /// The whole number given for `key`, or `nil` if there is none.
    ///
    /// - Throws: `AllocatorError` if the value is not a whole number.
    public func integer(_ key: String) throws(AllocatorError) -> Int? {
        guard let x = try number(key) else { return nil }
        guard x == x.rounded(), abs(x) < 1e15 else {
            throw AllocatorError("\(allocator): parameter '\(key)' is \(x); it must be a whole number")
        }
        return Int(x)
    }

    /// The numbers given for `key` (a split such as `80/20`, or one number), or `nil`.
    ///
    /// - Throws: `AllocatorError` if the value is text.
    public func numbers(_ key: String) throws(AllocatorError) -> [Double]? {
        switch values[key] {
        case nil: return nil
        case .number(let x): return [x]
        case .numbers(let xs): return xs
        case .text(let text): throw AllocatorError("\(allocator): parameter '\(key)' is \"\(text)\"; it must be a number or a split such as 80/20")
        }
    }

    /// The text given for `key`, or `nil` if there is none.
    ///
    /// - Throws: `AllocatorError` if the value is a number.
    public func text(_ key: String) throws(AllocatorError) -> String? {
        switch values[key] {
        case nil: return nil
        case .text(let text): return text
        case .number, .numbers: throw AllocatorError("\(allocator): parameter '\(key)' must be text: a word, or in double quotes, e.g. \(key)=\"…\"")
        }
    }
}

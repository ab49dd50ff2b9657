/// A scenario (file or flags) that cannot run, naming where and what is wrong.
///
/// The message reads `FILE: KEY.PATH: what is wrong; what was expected`, so a typo in a
/// hand-edited scenario is found without reading code.
public struct ScenarioError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The scenario file, if the scenario came from one.
    public var file: String?
    /// The key path, such as `experiments[0].variants[1].rate`.
    public var key: String
    /// What is wrong and what was expected.
    public var problem: String

    /// Creates an error for `key`.
    public init(file: String? = nil, key: String, _ problem: String) {
        self.file = file
        self.key = key
        self.problem = problem
    }

    public var description: String {
        [file, key.isEmpty ? nil : key, problem].compactMap { $0 }.joined(separator: ": ")
    }
}

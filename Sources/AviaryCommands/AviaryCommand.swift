import ArgumentParser

/// The `aviary` command line: simulate and benchmark mobile A/B-testing clients.
public struct AviaryCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "aviary",
        abstract: "Simulate mobile A/B-testing clients and compare allocation strategies.",
        subcommands: [RunCommand.self, FitCommand.self, LoadTestCommand.self, ValidateCommand.self, ScenariosCommand.self, BanditCommand.self, EvaluateCommand.self, ReportCommand.self, MergeCommand.self, ServeCommand.self, QueueWriterCommand.self]
    )

    public init() {}
}

/// A failure found after parsing (a bad scenario, a bad allocator spec): printed as one line,
/// `Error: …`, with exit code 1 and no usage text.
struct CommandFailure: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}

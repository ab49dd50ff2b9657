import ArgumentParser

/// The `aviary` command line: simulate and benchmark mobile A/B-testing clients.
public struct AviaryCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "aviary",
        abstract: "Simulate mobile A/B-testing clients and compare allocation strategies.",
        subcommands: []
    )

    public init() {}
}

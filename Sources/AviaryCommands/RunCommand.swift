import ArgumentParser

/// `aviary run`: the main job.
struct RunCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run the built-in allocator comparison and write CSV reports."
    )

    @OptionGroup var bandit: BanditOptions

    func run() throws {
        try bandit.makeCommand().run()
    }
}

import AviaryCommands

// An async `main` runs AsyncParsableCommand's asynchronous entry point, which `serve` and
// `loadtest --live` need; a top-level call would resolve to the synchronous one.
@main
struct Aviary {
    static func main() async {
        await AviaryCommand.main(registering: [])
    }
}

import AviaryCommands

// `@main` picks AsyncParsableCommand's asynchronous entry point, which `serve` and
// `loadtest --live` need; a top-level `main()` call would resolve to the synchronous one.
@main
extension AviaryCommand {}

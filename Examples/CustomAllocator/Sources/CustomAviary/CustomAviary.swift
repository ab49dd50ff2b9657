import AviaryCommands
import Softmax

/// Aviary's command line with one more allocator: `--allocator 'softmax(temperature=0.01)'`,
/// or `- softmax(temperature=0.01)` in a scenario's `allocators`.
@main
struct CustomAviary {
    static func main() async {
        await AviaryCommand.main(registering: [Softmax.registration])
    }
}

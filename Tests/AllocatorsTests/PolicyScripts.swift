import Foundation
import Testing

/// Tiny policy programs written into a temporary folder, removed when the value is released.
final class PolicyScripts {
    let folder: URL

    init() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("aviary-policies-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(at: folder)
    }

    /// Writes a Python policy that answers `hello` with `hello` (a Python expression; by
    /// default the protocol version alone), writes its process id to
    /// `NAME.pid`, and answers every other message with `reply(message)`, a Python expression
    /// evaluated with `message` (a dict) and `os`, `sys`, `time` in scope; returns the spec.
    func python(_ name: String, reply: String, parameters: String = "", hello: String = #"{"protocol": 1}"#) throws -> String {
        let script = """
        import json, os, sys, time
        open(\(quoted(path("\(name).pid"))), "w").write(str(os.getpid()))
        for line in sys.stdin:
            message = json.loads(line)
            if message["type"] == "hello":
                out = \(hello)
            else:
                out = \(reply)
            sys.stdout.write(out if isinstance(out, str) else json.dumps(out))
            sys.stdout.write("\\n")
            sys.stdout.flush()
        """
        try script.write(to: folder.appendingPathComponent("\(name).py"), atomically: true, encoding: .utf8)
        let file = path("\(name).py")
        return #"external(command="python3 \#(file)"\#(parameters))"#
    }

    func path(_ name: String) -> String { folder.appendingPathComponent(name).path }

    /// The process id a policy wrote.
    func pid(_ name: String) throws -> Int32 {
        try #require(Int32(String(contentsOfFile: path("\(name).pid"), encoding: .utf8)))
    }

    private func quoted(_ text: String) -> String { "'" + text + "'" }
}

/// Whether process `pid` is gone: ended and reaped, not even a zombie.
func processIsGone(_ pid: Int32) -> Bool {
    kill(pid, 0) == -1 && errno == ESRCH
}

/// The package's root folder, found from this file's path.
let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

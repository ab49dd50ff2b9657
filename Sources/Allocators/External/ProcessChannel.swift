#if canImport(Glibc)
import ExperimentModel
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A policy process started with `/bin/sh -c COMMAND`, spoken to line by line over its stdin
/// and stdout; its stderr is Aviary's, so a policy's traceback reaches the terminal.
///
/// The process leads a process group of its own, and ``close()`` ends the whole group and
/// reaps the leader, so neither zombies nor orphans outlive a run. Every wait for the process
/// (a reply, room in the pipe) is bounded by `timeout` seconds of wall-clock time: this is
/// I/O at the edge of the simulation, and the timeout is the only clock it reads.
///
/// Not `Sendable`: one allocator owns it, on one thread.
final class ProcessChannel: PolicyChannel {
    private let pid: pid_t
    private let input: Int32
    private let output: Int32
    private let timeout: Double
    private let command: String
    private var buffer: [UInt8] = []
    private var closed = false
    private var exitStatus: Int32?

    /// Starts `command` under `/bin/sh -c`.
    ///
    /// - Throws: `AllocatorError` if the pipes or the process cannot be created.
    init(command: String, timeout: Double) throws(AllocatorError) {
        _ = Self.ignoreBrokenPipes
        self.command = command
        self.timeout = timeout
        var toChild: [Int32] = [-1, -1], fromChild: [Int32] = [-1, -1]
        guard pipe(&toChild) == 0 else { throw AllocatorError("cannot create a pipe: \(Self.errorText())") }
        guard pipe(&fromChild) == 0 else {
            Glibc.close(toChild[0]); Glibc.close(toChild[1])
            throw AllocatorError("cannot create a pipe: \(Self.errorText())")
        }
        // Close-on-exec, so that a policy started on another thread does not inherit these ends.
        // (Glibc's module map hides `pipe2`; in the moment before this a policy started
        // elsewhere could inherit one, which at worst keeps this child's stdin open, and
        // `close()` ends the child anyway.)
        for descriptor in toChild + fromChild { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, toChild[0], 0)
        posix_spawn_file_actions_adddup2(&actions, fromChild[1], 1)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // A group of its own (to end it whole), SIGPIPE back to its default, nothing blocked.
        var defaults = sigset_t(), mask = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGPIPE)
        sigemptyset(&mask)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setsigmask(&attributes, &mask)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
        // A simple command replaces the shell (`exec`), so the policy is Aviary's own child and
        // is reaped by it; a compound one (`cd x && python3 y`) runs under the shell, and ending
        // the process group ends it too.
        let isSimple = !command.contains { ";&|()\n`".contains($0) }
        let words: [String] = ["/bin/sh", "-c", isSimple ? "exec " + command : command]
        let arguments: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) }
        defer { arguments.forEach { free($0) } }
        var child: pid_t = 0
        let status = posix_spawn(&child, "/bin/sh", &actions, &attributes, arguments + [nil], environ)
        Glibc.close(toChild[0])
        Glibc.close(fromChild[1])
        guard status == 0 else {
            Glibc.close(toChild[1]); Glibc.close(fromChild[0])
            throw AllocatorError("cannot start '\(command)': \(String(cString: strerror(status)))")
        }
        pid = child
        input = toChild[1]
        output = fromChild[0]
        _ = fcntl(input, F_SETFL, fcntl(input, F_GETFL) | O_NONBLOCK)
    }

    deinit {
        close()
    }

    func send(_ message: String) throws(AllocatorError) {
        var bytes = Array(message.utf8)
        bytes.append(UInt8(ascii: "\n"))
        let deadline = Self.now() + timeout
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { Glibc.write(input, $0.baseAddress, $0.count) }
            if count > 0 {
                sent += count
            } else if count < 0 && (errno == EAGAIN || errno == EINTR) {
                guard try wait(for: input, events: Int16(POLLOUT), until: deadline) else {
                    throw AllocatorError("the policy process did not read its input within \(Self.seconds(timeout)) (the timeout)")
                }
            } else {
                throw AllocatorError(exitDescription(reaping: true))
            }
        }
    }

    func receive() throws(AllocatorError) -> String {
        let deadline = Self.now() + timeout
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return line
            }
            guard try wait(for: output, events: Int16(POLLIN), until: deadline) else {
                throw AllocatorError("no reply within \(Self.seconds(timeout)) (the timeout; raise it with timeout=SECONDS)")
            }
            let count = chunk.withUnsafeMutableBytes { Glibc.read(output, $0.baseAddress, $0.count) }
            if count > 0 {
                buffer.append(contentsOf: chunk[..<count])
            } else if count == 0 {
                throw AllocatorError(exitDescription(reaping: true))
            } else if errno != EINTR && errno != EAGAIN {
                throw AllocatorError("cannot read from the policy process: \(Self.errorText())")
            }
        }
    }

    /// Closes the process's stdin and gives it a moment to exit on its own, then ends its whole
    /// process group and reaps it.
    func close() {
        guard !closed else { return }
        closed = true
        Glibc.close(input)
        if exitStatus == nil {
            // Up to half a second for the policy to see end of input and exit.
            let deadline = Self.now() + 0.5
            var pollDescriptor = pollfd(fd: output, events: Int16(POLLIN), revents: 0)
            var chunk = [UInt8](repeating: 0, count: 4096)
            while Self.now() < deadline {
                let ready = poll(&pollDescriptor, 1, Int32(max(1, (deadline - Self.now()) * 1000)))
                guard ready > 0 else { if ready < 0 && errno == EINTR { continue } else { break } }
                let count = chunk.withUnsafeMutableBytes { Glibc.read(output, $0.baseAddress, $0.count) }
                if count <= 0 && !(count < 0 && errno == EINTR) { break }
            }
        }
        // The leader is not reaped yet, so the group id is still this group's.
        kill(-pid, SIGKILL)
        if exitStatus == nil { _ = reap(blocking: true) }
        Glibc.close(output)
    }

    /// Whether the descriptor became ready before the deadline.
    private func wait(for descriptor: Int32, events: Int16, until deadline: Double) throws(AllocatorError) -> Bool {
        var pollDescriptor = pollfd(fd: descriptor, events: events, revents: 0)
        while true {
            let left = deadline - Self.now()
            guard left > 0 else { return false }
            let ready = poll(&pollDescriptor, 1, Int32(min(left * 1000, 3_600_000).rounded(.up)))
            if ready > 0 { return true }
            if ready == 0 { return false }
            guard errno == EINTR else { throw AllocatorError("cannot wait for the policy process: \(Self.errorText())") }
        }
    }

    /// What ended the process, once it closed its output or its input.
    private func exitDescription(reaping: Bool) -> String {
        // Give an exiting process a moment to finish, so its status can be reported.
        let deadline = Self.now() + 1
        while exitStatus == nil && Self.now() < deadline {
            if reap(blocking: false) { break }
            var pause = timespec(tv_sec: 0, tv_nsec: 5_000_000)
            nanosleep(&pause, nil)
        }
        guard let status = exitStatus else { return "the policy process closed its output" }
        if status & 0x7f == 0 { return "the policy process exited with status \((status >> 8) & 0xff)" }
        return "the policy process was killed by signal \(status & 0x7f)"
    }

    /// Reaps the process if it has exited (or waits for it); `true` once reaped.
    private func reap(blocking: Bool) -> Bool {
        var status: Int32 = 0
        while true {
            let result = waitpid(pid, &status, blocking ? 0 : WNOHANG)
            if result == pid {
                exitStatus = status
                return true
            }
            if result < 0 && errno == EINTR { continue }
            return false
        }
    }

    /// Writing to a policy that exited must be an error, not the end of Aviary.
    private static let ignoreBrokenPipes: Void = {
        signal(SIGPIPE, SIG_IGN)
    }()

    private static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    private static func seconds(_ x: Double) -> String {
        x == x.rounded() ? "\(Int(x)) s" : "\(x) s"
    }

    private static func errorText() -> String {
        String(cString: strerror(errno))
    }
}

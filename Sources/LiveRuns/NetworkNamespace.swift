import Foundation
import LiveDevices
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A network namespace joined to this one by a veth pair, for faults the kernel applies: the
/// fault proxy's listeners live inside it, so every request crosses the veth link, which is
/// taken down for a refusing outage, firewalled (`DROP`) for a hanging one, and made lossy with
/// iptables' `statistic` match. Linux, root, `ip` (iproute2) and `iptables` only.
///
/// `Sendable`: immutable after creation; its methods only run commands.
final class NetworkNamespace: Sendable {
    let name: String
    /// The veth end in this namespace.
    let hostInterface: String
    /// The address the devices connect to: the veth end inside the namespace.
    let address: String
    private let ip: String
    private let iptables: String
    /// The namespace's /30, kept unreachable while the link is down.
    private let fallbackRoute: String

    /// Creates the namespace and the link, or says what this machine lacks.
    init() throws(LiveLoadTest.Failure) {
        guard geteuid() == 0 else {
            throw LiveLoadTest.Failure(description: "--netns needs root (it creates a network namespace and a veth pair); run without --netns and the fault proxy applies the scenario's faults")
        }
        let find = { (tool: String) in ["/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"].map { $0 + tool }.first { FileManager.default.isExecutableFile(atPath: $0) } }
        guard let ip = find("ip") else {
            throw LiveLoadTest.Failure(description: "--netns needs iproute2's `ip` (apt-get install iproute2)")
        }
        guard let iptables = find("iptables") else {
            throw LiveLoadTest.Failure(description: "--netns needs `iptables` for loss and hanging outages (apt-get install iptables)")
        }
        self.ip = ip
        self.iptables = iptables
        let id = getpid() % 10_000
        name = "aviary-\(id)"
        hostInterface = "avh\(id)"
        // A /30 of our own, inside a namespace this run made: the only place traffic goes.
        let subnet = Int(id % 250) + 1
        address = "10.213.\(subnet).2"
        let peer = "avn\(id)"
        fallbackRoute = "10.213.\(subnet).0/30"
        do {
            try run(ip, "netns", "add", name)
            try run(ip, "link", "add", hostInterface, "type", "veth", "peer", "name", peer)
            try run(ip, "link", "set", peer, "netns", name)
            try run(ip, "addr", "add", "10.213.\(subnet).1/30", "dev", hostInterface)
            try run(ip, "link", "set", hostInterface, "up")
            try run(ip, "netns", "exec", name, ip, "addr", "add", "\(address)/30", "dev", peer)
            try run(ip, "netns", "exec", name, ip, "link", "set", peer, "up")
            try run(ip, "netns", "exec", name, ip, "link", "set", "lo", "up")
            // Without this route a downed link sends the namespace's traffic to the default
            // gateway, which may drop it (a hang), reset it or even accept it, depending on the
            // machine: with it, a connection fails at once (EHOSTUNREACH) everywhere.
            try run(ip, "route", "add", "unreachable", fallbackRoute, "metric", "4000")
        } catch {
            destroy()
            throw LiveLoadTest.Failure(description: "--netns: cannot set up the namespace (\(error)); this machine may not allow network namespaces")
        }
    }

    /// Removes the namespace (and with it the veth pair) and the firewall rules.
    func destroy() {
        try? run(iptables, "-D", "OUTPUT", "-o", hostInterface, "-j", "DROP")
        try? setLoss(0)
        try? run(ip, "link", "del", hostInterface)
        try? run(ip, "route", "del", "unreachable", fallbackRoute, "metric", "4000")
        try? run(ip, "netns", "del", name)
    }

    /// Takes the link down (connections fail at once: the fallback route is unreachable) or
    /// brings it back.
    func setLink(up: Bool) throws {
        try run(ip, "link", "set", hostInterface, up ? "up" : "down")
    }

    /// Drops every packet to the namespace (requests hang), or stops.
    func setBlackhole(_ on: Bool) throws {
        try run(iptables, on ? "-I" : "-D", "OUTPUT", "-o", hostInterface, "-j", "DROP")
    }

    /// Loses packets to the namespace with `probability` (0 removes the rule).
    func setLoss(_ probability: Double) throws {
        if let old = loss.withLock({ $0 }) {
            try? run(iptables, "-D", "OUTPUT", "-o", hostInterface, "-m", "statistic", "--mode", "random", "--probability", old, "-j", "DROP")
            loss.withLock { $0 = nil }
        }
        guard probability > 0 else { return }
        let text = String(format: "%.6f", probability)
        try run(iptables, "-A", "OUTPUT", "-o", hostInterface, "-m", "statistic", "--mode", "random", "--probability", text, "-j", "DROP")
        loss.withLock { $0 = text }
    }

    /// Resets connections to `port` (a partition's route), or stops.
    func setRefused(port: Int, _ on: Bool) throws {
        try run(iptables, on ? "-I" : "-D", "OUTPUT", "-o", hostInterface, "-p", "tcp", "--dport", String(port), "-j", "REJECT", "--reject-with", "tcp-reset")
    }

    /// The loss rule in force, as iptables was given it.
    private let loss = Mutex<String?>(nil)

    /// A listening TCP socket bound inside the namespace, on `address` and a free port.
    ///
    /// The socket is made on a thread that joins the namespace and leaves it again: a socket
    /// belongs to the namespace it was made in, wherever it is used later.
    func listeningSocket() throws(LiveLoadTest.Failure) -> (descriptor: Int32, port: Int) {
        final class Box: @unchecked Sendable { var result: Result<(Int32, Int), LiveLoadTest.Failure>? }
        let box = Box()
        let done = DispatchSemaphore(value: 0)
        let name = self.name, address = self.address
        let thread = Thread {
            defer { done.signal() }
            box.result = Self.bindInside(namespace: name, address: address)
        }
        thread.start()
        done.wait()
        return try box.result!.get()
    }

    private static func bindInside(namespace: String, address: String) -> Result<(Int32, Int), LiveLoadTest.Failure> {
        let failure = { (what: String) in Result<(Int32, Int), LiveLoadTest.Failure>.failure(.init(description: "--netns: \(what): \(String(cString: strerror(errno)))")) }
        let original = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC)
        let target = open("/var/run/netns/\(namespace)", O_RDONLY | O_CLOEXEC)
        guard original >= 0, target >= 0 else { return failure("cannot open the namespaces") }
        defer {
            close(original)
            close(target)
        }
        let newNetwork: Int32 = 0x4000_0000  // CLONE_NEWNET
        // glibc declares setns(2) only under _GNU_SOURCE, which Swift's Glibc module lacks.
        guard let symbol = dlsym(nil, "setns") else { return failure("setns is not available") }
        let setns = unsafeBitCast(symbol, to: (@convention(c) (Int32, Int32) -> Int32).self)
        guard setns(target, newNetwork) == 0 else { return failure("cannot enter \(namespace)") }
        defer { _ = setns(original, newNetwork) }
        let socketDescriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard socketDescriptor >= 0 else { return failure("socket") }
        var yes: Int32 = 1
        setsockopt(socketDescriptor, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var socketAddress = sockaddr_in()
        socketAddress.sin_family = sa_family_t(AF_INET)
        socketAddress.sin_port = 0
        inet_pton(AF_INET, address, &socketAddress.sin_addr)
        let bound = withUnsafePointer(to: &socketAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socketDescriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(socketDescriptor, 4096) == 0 else {
            close(socketDescriptor)
            return failure("cannot listen on \(address)")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &socketAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socketDescriptor, $0, &length) }
        }
        return .success((socketDescriptor, Int(UInt16(bigEndian: socketAddress.sin_port))))
    }

    private func run(_ arguments: String...) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: arguments[0])
        process.arguments = Array(arguments.dropFirst())
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            throw LiveLoadTest.Failure(description: "`\(arguments.joined(separator: " "))` failed: \(message)")
        }
    }
}

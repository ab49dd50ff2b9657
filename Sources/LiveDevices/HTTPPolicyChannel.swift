import Allocators
import AsyncHTTPClient
import ExperimentModel
import Foundation
import NIOCore
import NIOHTTP1
import Synchronization

/// Carries the allocator protocol's messages to a policy service over HTTP: one POST per
/// message, the JSON message as the body and the reply as the response's body, so that
/// `external(url=…)` can run a simulation against a team's real allocation service.
///
/// Every request of one allocator carries the header `Aviary-Session: <id>`, unique in this
/// process, so a service can tell concurrent allocators (replicates, experiments) apart; its
/// `hello` starts the session. The requests go through the live mode's HTTP client
/// (``HTTPTransport/makeClient(connections:eventLoopGroup:)``), one connection per allocator.
///
/// Not `Sendable`: one allocator owns it, on one of the simulation's worker threads, where it
/// waits for each reply.
final class HTTPPolicyChannel: PolicyChannel {
    private let client: HTTPClient
    private let url: String
    private let timeout: Double
    private let session: String
    private var unanswered: [String] = []
    private var closed = false

    private static let sessions = Atomic<Int>(0)

    init(url: String, timeout: Double) {
        self.url = url
        self.timeout = timeout
        self.client = HTTPTransport.makeClient(connections: 1)
        self.session = "\(getpid())-\(Self.sessions.wrappingAdd(1, ordering: .relaxed).newValue)"
    }

    deinit {
        close()
    }

    /// Sending is deferred to ``receive()``: HTTP carries a message and its reply together.
    func send(_ message: String) throws(AllocatorError) {
        unanswered.append(message)
    }

    func receive() throws(AllocatorError) -> String {
        precondition(!unanswered.isEmpty, "receive() without a message sent")
        let message = unanswered.removeFirst()
        let response: HTTPClient.Response
        do {
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "application/json")
            headers.add(name: "Aviary-Session", value: session)
            let request = try HTTPClient.Request(url: url, method: .POST, headers: headers, body: .string(message))
            response = try client.execute(request: request, deadline: .now() + .nanoseconds(Int64(timeout * 1e9))).wait()
        } catch {
            if case .timeout = HTTPTransport.failure(error) {
                throw AllocatorError("no reply from \(url) within \(timeout) s (the timeout; raise it with timeout=SECONDS)")
            }
            throw AllocatorError("cannot reach the policy service at \(url): \(error)")
        }
        guard response.status == .ok else {
            throw AllocatorError("the policy service at \(url) answered HTTP \(response.status.code)")
        }
        let body = response.body.map { String(buffer: $0) } ?? ""
        return body.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func close() {
        guard !closed else { return }
        closed = true
        try? client.syncShutdown()
    }
}

/// Live mode's part in `external(url=…)`.
package enum PolicyService {
    /// Registers the HTTP channel for `external(url=…)` with ``AllocatorRegistry``; live builds
    /// of `aviary` call it at startup. Calling it again changes nothing.
    package static func registerConnector() {
        AllocatorRegistry.registerURLConnector { url, timeout in HTTPPolicyChannel(url: url, timeout: timeout) }
    }
}

import Foundation
import Hummingbird

/// The keys `aviary serve` asks for: client keys on the routes devices call, and an optional
/// admin key on the operator's (`/v1/stats`, `/metrics`). With no client key the write and decision
/// routes are open, so such a server listens on loopback only (``checkExposure(host:)``).
///
/// A key is never printed: ``description`` gives counts. Keys are compared in constant time,
/// so that the time a refusal takes says nothing about how much of a guess was right.
///
/// `Sendable`: a plain value.
package struct APIKeys: Sendable, CustomStringConvertible {
    /// Which key a route asks for.
    enum Scope: Sendable {
        /// Any client key.
        case client
        /// The admin key; a client key where there is no admin key.
        case admin
    }

    /// How a route's wire format carries the key.
    enum Form: Sendable {
        /// `Authorization: Bearer KEY` (Aviary's JSON API).
        case bearer
        /// `x-mpath-apikey: KEY`, or else `Authorization: Bearer KEY` (the Conductrics routes).
        case conductrics
        /// `Authorization: Basic` with the key as the user name and no password, as Segment's
        /// write key goes, or else `Authorization: Bearer KEY` (Segment's OAuth form).
        case basic
    }

    private let clients: [[UInt8]]
    private let admin: [UInt8]?

    /// Keys for a server; none (the default) leaves every route open.
    ///
    /// - Precondition: No key is empty (``problem(with:)`` says what a key may hold).
    package init(clientKeys: [String] = [], adminKey: String? = nil) {
        precondition(!clientKeys.contains(where: \.isEmpty) && adminKey?.isEmpty != true, "an empty API key")
        self.clients = clientKeys.map { Array($0.utf8) }
        self.admin = adminKey.map { Array($0.utf8) }
    }

    /// Client keys the server accepts.
    package var clientKeyCount: Int { clients.count }
    /// Whether `/v1/stats` and `/metrics` ask for an admin key rather than a client key.
    package var hasAdminKey: Bool { admin != nil }
    /// Whether the write and decision routes ask for a key.
    package var requiresKeys: Bool { !clients.isEmpty }

    package var description: String {
        let client = clients.isEmpty ? "no client key: every route open" : "\(clients.count) client key(s) required"
        return client + (admin == nil ? "" : ", an admin key on /v1/stats and /metrics")
    }

    /// Why `key` cannot be a key, or `nil` if it can: a key is what a header carries after
    /// `Bearer `, so visible ASCII without spaces; and without commas, which separate the keys
    /// of `AVIARY_API_KEYS`. The message never repeats the key.
    package static func problem(with key: String) -> String? {
        if key.isEmpty { return "a key is empty" }
        guard key.utf8.allSatisfy({ (0x21...0x7E).contains($0) && $0 != UInt8(ascii: ",") }) else {
            return "a key must be visible ASCII characters without spaces or commas"
        }
        return nil
    }

    /// Refuses to listen on anything but loopback without client keys: anyone who could reach
    /// such a server could write events and steer its allocators.
    ///
    /// - Throws: ``ServeError`` with one line saying why and how to fix it.
    package func checkExposure(host: String) throws(ServeError) {
        guard !requiresKeys, !Self.isLoopback(host) else { return }
        throw ServeError(
            "refusing to listen on \(host) without API keys: anyone who can reach it could write events and decisions; "
                + "give keys with --api-key, --api-key-file or AVIARY_API_KEYS, or listen on 127.0.0.1")
    }

    /// Whether `host` is a loopback address (127.0.0.0/8, ::1) or `localhost`.
    package static func isLoopback(_ host: String) -> Bool {
        let host = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        if host.lowercased() == "localhost" { return true }
        var ipv4 = in_addr()
        if inet_pton(AF_INET, host, &ipv4) == 1 { return UInt32(bigEndian: ipv4.s_addr) >> 24 == 127 }
        var ipv6 = in6_addr()
        guard inet_pton(AF_INET6, host, &ipv6) == 1 else { return false }
        return withUnsafeBytes(of: &ipv6) { bytes in bytes.prefix(15).allSatisfy { $0 == 0 } && bytes[15] == 1 }
    }

    /// Whether `headers` carry, in `form`, a key `scope` accepts.
    func permits(_ headers: HTTPFields, scope: Scope, form: Form) -> Bool {
        let accepted = scope == .admin ? (admin.map { [$0] } ?? clients) : clients
        guard !accepted.isEmpty else { return true }
        guard let presented = Self.presented(headers, form: form) else { return false }
        // Every key is compared in full, whichever matches.
        var matches: UInt8 = 0
        for key in accepted { matches |= Self.equal(key, presented) }
        return matches != 0
    }

    /// Whether `key`, carried in a request's body (Amplitude's and PostHog's `api_key`), is a
    /// client key; any key does when the server asks for none.
    func permits(bodyKey key: String?) -> Bool {
        guard !clients.isEmpty else { return true }
        guard let key, !key.isEmpty else { return false }
        let presented = Array(key.utf8)
        var matches: UInt8 = 0
        for client in clients { matches |= Self.equal(client, presented) }
        return matches != 0
    }

    /// Whether `headers` carry a key at all, in `form` (to tell a missing key from a wrong one).
    static func presents(_ headers: HTTPFields, form: Form) -> Bool {
        presented(headers, form: form) != nil
    }

    static let conductricsHeader = HTTPFields.Element.Name("x-mpath-apikey")!

    private static func presented(_ headers: HTTPFields, form: Form) -> [UInt8]? {
        if form == .conductrics, let key = headers[conductricsHeader], !key.isEmpty { return Array(key.utf8) }
        guard let authorization = headers[.authorization] else { return nil }
        let parts = authorization.split(separator: " ", maxSplits: 1)
        guard parts.count == 2 else { return nil }
        let key = parts[1].trimmingCharacters(in: .whitespaces)
        if form == .basic, parts[0].lowercased() == "basic" {
            guard let decoded = Data(base64Encoded: key).map({ Array($0) }) else { return nil }
            // KEY: (no password), as Segment's clients send it; else the user name before the
            // first colon.
            let user = decoded.last == UInt8(ascii: ":") ? decoded.dropLast() : decoded.split(separator: UInt8(ascii: ":"), maxSplits: 1, omittingEmptySubsequences: false)[0]
            return user.isEmpty ? nil : Array(user)
        }
        guard parts[0].lowercased() == "bearer" else { return nil }
        return key.isEmpty ? nil : Array(key.utf8)
    }

    /// 1 if `key` and `presented` are the same bytes, else 0, in time that depends on their
    /// lengths only: every byte of the longer is compared (the shorter padded with zeros) and
    /// the differences accumulated, with no early return.
    static func equal(_ key: [UInt8], _ presented: [UInt8]) -> UInt8 {
        var difference = UInt(bitPattern: key.count ^ presented.count)
        for index in 0..<max(key.count, presented.count) {
            let a = index < key.count ? key[index] : 0
            let b = index < presented.count ? presented[index] : 0
            difference |= UInt(a ^ b)
        }
        return difference == 0 ? 1 : 0
    }
}

/// Answers 401 unless the request carries a key its route accepts, before the route reads the
/// body or looks anything up.
struct KeyMiddleware<Context: RequestContext>: RouterMiddleware {
    let keys: APIKeys
    let scope: APIKeys.Scope
    let form: APIKeys.Form

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard keys.permits(request.headers, scope: scope, form: form) else { return unauthorized(request.headers) }
        return try await next(request, context)
    }

    private func unauthorized(_ headers: HTTPFields) -> Response {
        let missing = !APIKeys.presents(headers, form: form)
        let which = scope == .admin && keys.hasAdminKey ? "the admin key" : "a client key"
        let field = form == .conductrics ? "x-mpath-apikey" : "Authorization"
        let expected = form == .conductrics ? "x-mpath-apikey: KEY or Authorization: Bearer KEY with \(which)" : "Authorization: Bearer KEY with \(which)"
        var response = ExperimentHTTPServer.failure(APIError(status: 401, missing ? "missing API key" : "wrong API key", field: field, expected: expected))
        response.headers[.wwwAuthenticate] = #"Bearer realm="aviary""#
        return response
    }
}

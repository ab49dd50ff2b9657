import Allocators
import AsyncHTTPClient
import ClientEngine
import ExperimentServer
import Foundation
import Testing
@testable import LiveDevices
@testable import LiveRuns
@testable import LiveServer

/// `aviary serve --tls-cert --tls-key`: HTTP/1.1 over TLS with a certificate the test makes with
/// the `openssl` command, checked from outside with `curl --cacert`, as an operator would.
struct TLSServerTests {
    static let clientKey = "tls-client-key"

    /// A self-signed certificate for `localhost` and 127.0.0.1 and its key, in a fresh folder.
    struct Certificate {
        let folder: URL
        var certificate: String { folder.appendingPathComponent("cert.pem").path }
        var key: String { folder.appendingPathComponent("key.pem").path }

        init(commonName: String = "localhost") async throws {
            folder = FileManager.default.temporaryDirectory.appendingPathComponent("aviary-tls-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            let made = try await ExternalCommand.run("openssl", [
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=\(commonName)",
                "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                "-keyout", folder.appendingPathComponent("key.pem").path, "-out", folder.appendingPathComponent("cert.pem").path,
            ])
            try #require(made.status == 0, "openssl could not make a certificate: \(made.errors)")
        }

        func remove() { try? FileManager.default.removeItem(at: folder) }
    }

    /// Runs `body` against a keyed TLS server listening on every address (allowed: it has keys).
    static func withServer(_ body: (ExperimentService, Int, Certificate) async throws -> Void) async throws {
        let certificate = try await Certificate()
        defer { certificate.remove() }
        var configuration = ServerConfiguration(experiments: ExperimentServiceTests.experiments, allocator: try AllocatorSpec(parsing: "uniform"), cadence: .everyEvents(1))
        configuration.keys = APIKeys(clientKeys: [clientKey])
        configuration.tls = try TLSCredentials(certificateFile: certificate.certificate, keyFile: certificate.key)
        let service = try ExperimentService(configuration)
        let server = try await ExperimentHTTPServer(service: service).start(host: "0.0.0.0", executor: ServerThreads.shared)
        do {
            try await body(service, server.port, certificate)
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }

    /// `curl` trusting only `certificate`; returns its exit status, the HTTP status and the body.
    static func curl(_ url: String, certificate: Certificate?, _ arguments: [String] = []) async throws -> (status: Int32, code: Int?, body: String) {
        let trust = certificate.map { ["--cacert", $0.certificate] } ?? []
        let result = try await ExternalCommand.run("curl", ["--silent", "--show-error", "--max-time", "30", "--write-out", "\n%{http_code}"] + trust + arguments + [url])
        var lines = result.output.split(separator: "\n", omittingEmptySubsequences: false)
        let code = lines.popLast().flatMap { Int($0) }
        return (result.status, code == 0 ? nil : code, lines.joined(separator: "\n"))
    }

    @Test func answersHealthAndKeyedEventsOverTLS() async throws {
        try await Self.withServer { service, port, certificate in
            let health = try await Self.curl("https://127.0.0.1:\(port)/health", certificate: certificate)
            #expect(health.status == 0)
            #expect(health.code == 200)
            #expect(health.body == #"{"status":"ok"}"#)

            let post = ["--header", "Content-Type: application/json", "--data", BoundsTests.events(3)]
            let refused = try await Self.curl("https://127.0.0.1:\(port)/v1/events", certificate: certificate, post)
            #expect(refused.code == 401, "a TLS server asks for the key all the same")

            let keyed = try await Self.curl("https://localhost:\(port)/v1/events", certificate: certificate, post + ["--header", "Authorization: Bearer \(Self.clientKey)"])
            #expect(keyed.code == 200, "\(keyed.body)")
            #expect(keyed.body.contains(#""acknowledged":["1#0","1#1","1#2"]"#), "\(keyed.body)")
            #expect(service.stats().eventsAccepted == 3)
        }
    }

    @Test func refusesPlainHTTPAndUntrustedClients() async throws {
        try await Self.withServer { service, port, _ in
            let plain = try await Self.curl("http://127.0.0.1:\(port)/health", certificate: nil)
            #expect(plain.status != 0, "plain HTTP to the TLS port must fail, got \(plain.code.map(String.init) ?? "no status"): \(plain.body)")
            #expect(plain.code == nil)

            // Without the test's certificate as a trust root, curl cannot verify the server.
            let untrusted = try await Self.curl("https://127.0.0.1:\(port)/health", certificate: nil)
            #expect(untrusted.status == 60, "curl's exit status for an unverifiable certificate; got \(untrusted.status): \(untrusted.body)")
            #expect(service.stats().batches == 0)
        }
    }

    /// The live generator's transport (async-http-client) over TLS, trusting the certificate:
    /// experiment data fetched and events acknowledged, with the key.
    @Test func theGeneratorsTransportSpeaksTLS() async throws {
        try await Self.withServer { service, port, certificate in
            var configuration = HTTPClient.Configuration()
            configuration.tlsConfiguration = .makeClientConfiguration()
            configuration.tlsConfiguration?.trustRoots = .file(certificate.certificate)
            let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
            let transport = HTTPTransport(baseURL: "https://localhost:\(port)", client: client, timeout: 10, defaults: HTTPTransportTests.defaults, apiKey: Self.clientKey)
            let fetched = await transport.send(Request(id: RequestID(1), kind: .fetchExperiments))
            let batch = HTTPTransportTests.events(device: 5, 1...10)
            let sent = await transport.send(Request(id: RequestID(2), kind: .sendEvents(batch)))
            try await client.shutdown()
            guard case .experimentData(let data) = fetched else {
                Issue.record("expected experiment data over TLS, got \(fetched)")
                return
            }
            #expect(data.experiments.map(\.id) == ["checkout", "feed"])
            guard case .acknowledged(let ids) = sent else {
                Issue.record("expected an acknowledgement over TLS, got \(sent)")
                return
            }
            #expect(ids == batch.map(\.id))
            #expect(service.stats().eventsAccepted == 10)
        }
    }

    /// TLS alone does not open other addresses: a server without client keys stays on loopback.
    @Test func tlsWithoutKeysStaysOnLoopback() async throws {
        let certificate = try await Certificate()
        defer { certificate.remove() }
        var configuration = ServerConfiguration(experiments: ExperimentServiceTests.experiments, allocator: try AllocatorSpec(parsing: "uniform"))
        configuration.tls = try TLSCredentials(certificateFile: certificate.certificate, keyFile: certificate.key)
        let server = ExperimentHTTPServer(service: try ExperimentService(configuration))
        await #expect(throws: ServeError.self) { _ = try await server.start(host: "0.0.0.0", executor: ServerThreads.shared) }
        let running = try await server.start(host: "127.0.0.1", executor: ServerThreads.shared)
        let health = try await Self.curl("https://127.0.0.1:\(running.port)/health", certificate: certificate)
        await running.stop()
        #expect(health.code == 200)
    }

    @Test func namesTheFileItCannotUse() async throws {
        let certificate = try await Certificate()
        let other = try await Certificate(commonName: "other")
        defer {
            certificate.remove()
            other.remove()
        }
        let missing = certificate.folder.appendingPathComponent("missing.pem").path
        let cases: [(certificate: String, key: String, message: String)] = [
            (missing, certificate.key, "TLS certificate \(missing): cannot read it"),
            (certificate.certificate, missing, "TLS key \(missing): cannot read it"),
            (certificate.key, certificate.key, "TLS certificate \(certificate.key): not a PEM certificate"),
            (certificate.certificate, certificate.certificate, "TLS key \(certificate.certificate): not an unencrypted PEM private key"),
            (certificate.certificate, other.key, "TLS key \(other.key) does not belong to the certificate in \(certificate.certificate)"),
        ]
        for (certificateFile, keyFile, message) in cases {
            let error = #expect(throws: ServeError.self) { try TLSCredentials(certificateFile: certificateFile, keyFile: keyFile) }
            #expect(error?.description.hasPrefix(message) == true, "\(error?.description ?? "no error"), expected \(message)")
        }
    }
}

/// A program run to its end, found on `PATH`, its output captured: the tests' `openssl` and
/// `curl`. A missing program fails the test with its name and how to install it.
struct ExternalCommand {
    /// Runs `program` with `arguments`; waits without blocking a thread of the test's pool.
    static func run(_ program: String, _ arguments: [String]) async throws -> (status: Int32, output: String, errors: String) {
        let located = try await locate(program)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: located)
        process.arguments = arguments
        // Output goes to files, not pipes: draining a pipe would block a thread of the
        // cooperative pool, which the in-process server under test needs (two on a small machine).
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("aviary-command-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let output = folder.appendingPathComponent("stdout")
        let errors = folder.appendingPathComponent("stderr")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errors.path, contents: nil)
        process.standardOutput = try FileHandle(forWritingTo: output)
        process.standardError = try FileHandle(forWritingTo: errors)
        process.standardInput = FileHandle.nullDevice
        let status: Int32 = try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do {
                try process.run()
            } catch {
                process.terminationHandler = nil
                continuation.resume(throwing: error)
            }
        }
        return (status, try String(contentsOf: output, encoding: .utf8), try String(contentsOf: errors, encoding: .utf8))
    }

    private static func locate(_ program: String) async throws -> String {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for folder in path.split(separator: ":") {
            let candidate = "\(folder)/\(program)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        throw Missing(description: "\(program) is not installed (not on PATH \(path)); these tests need it: apt-get install -y \(program)")
    }

    struct Missing: Error, CustomStringConvertible {
        let description: String
    }
}

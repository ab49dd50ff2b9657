#if Live
@testable import AviaryCommands
import Foundation
@testable import LiveServer
import Simulation
import Testing

/// `aviary serve`'s flags for keys, TLS and slow clients, parsed as the command line gives them.
@Suite struct ServeCommandFlagTests {
    @Test func keysComeFromTheFlagsTheFileAndTheEnvironment() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("aviary-keys-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        try "# the mobile apps\nfile-one\n\n   file-two  \r\n# retired: old-key\n#\n".write(to: file, atomically: true, encoding: .utf8)
        let command = try ServeCommand.parse(["--api-key", "flag-one", "--api-key-file", file.path, "--admin-key", "flag-admin"])
        let keys = try command.loadKeys(environment: ["AVIARY_API_KEYS": "env-one, env-two,", "AVIARY_ADMIN_KEY": "env-admin"])
        #expect(keys.clientKeyCount == 5)
        #expect(keys.hasAdminKey)
        for key in ["flag-one", "file-one", "file-two", "env-one", "env-two"] {
            #expect(keys.permits([.authorization: "Bearer \(key)"], scope: .client, form: .bearer), "\(key)")
        }
        for key in ["old-key", "# the mobile apps", "#", "the"] {
            #expect(!keys.permits([.authorization: "Bearer \(key)"], scope: .client, form: .bearer), "\(key)")
        }
        // --admin-key wins over AVIARY_ADMIN_KEY.
        #expect(keys.permits([.authorization: "Bearer flag-admin"], scope: .admin, form: .bearer))
        #expect(!keys.permits([.authorization: "Bearer env-admin"], scope: .admin, form: .bearer))
        let fromEnvironment = try ServeCommand.parse([]).loadKeys(environment: ["AVIARY_ADMIN_KEY": "env-admin"])
        #expect(fromEnvironment.permits([.authorization: "Bearer env-admin"], scope: .admin, form: .bearer))
        #expect(!fromEnvironment.requiresKeys)
        // The description counts; it never shows a key.
        #expect(!"\(keys)".contains("flag-one") && "\(keys)".contains("5 client key(s)"))
    }

    @Test func aBadKeyIsRefusedWithoutBeingRepeated() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("aviary-keys-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        try "good-key\nbad key-secret\n".write(to: file, atomically: true, encoding: .utf8)
        let error = #expect(throws: CommandFailure.self) { try ServeCommand.parse(["--api-key-file", file.path]).loadKeys(environment: [:]) }
        #expect(error?.description.contains("line 2") == true)
        #expect(error?.description.contains("secret") == false)
        #expect(throws: CommandFailure.self) { try ServeCommand.parse(["--api-key", "a,b"]).loadKeys(environment: [:]) }
        #expect(throws: CommandFailure.self) { try ServeCommand.parse(["--admin-key", ""]).loadKeys(environment: [:]) }
    }

    @Test func slowBodyFlagsReachTheConnectionLimits() throws {
        let defaults = try ServeCommand.parse([]).serverConfiguration(.builtInDefault).connections
        // Kestrel's least body rate and grace; a minute for a whole request, as nginx's body timeout.
        #expect(defaults.minBodyRate == 240 && defaults.bodyRateGrace == .seconds(5) && defaults.requestTimeout == .seconds(60))
        let command = try ServeCommand.parse(["--min-body-rate", "1000", "--body-rate-grace", "2.5", "--request-timeout", "30"])
        let limits = try command.serverConfiguration(.builtInDefault).connections
        #expect(limits.minBodyRate == 1000 && limits.bodyRateGrace == .seconds(2.5) && limits.requestTimeout == .seconds(30))
        #expect(try ServeCommand.parse(["--min-body-rate", "0"]).serverConfiguration(.builtInDefault).connections.minBodyRate == 0, "0: no least rate")
    }

    @Test(arguments: [
        (["--min-body-rate=-1"], "--min-body-rate is -1.0"),
        (["--min-body-rate", "inf"], "--min-body-rate is inf"),
        (["--request-timeout", "0"], "--request-timeout is 0.0"),
        (["--body-rate-grace", "100000"], "--body-rate-grace is 100000.0"),
    ])
    func slowBodyFlagsOutOfRangeAreRefused(arguments: [String], message: String) throws {
        let error = #expect(throws: (any Error).self) { try ServeCommand.parse(arguments) }
        #expect(error.map { ServeCommand.message(for: $0) }?.contains(message) == true, "\(error.map { ServeCommand.message(for: $0) } ?? "")")
    }

    @Test(arguments: [
        (["--tls-cert", "cert.pem"], "--tls-cert needs --tls-key"),
        (["--tls-key", "key.pem"], "--tls-key needs --tls-cert"),
    ])
    func commandNeedsBothFiles(arguments: [String], message: String) throws {
        let error = #expect(throws: (any Error).self) { try ServeCommand.parse(arguments) }
        #expect(error.map { ServeCommand.message(for: $0) }?.contains(message) == true)
        let command = try ServeCommand.parse(["--tls-cert", "cert.pem", "--tls-key", "key.pem"])
        #expect(command.tlsCertificate == "cert.pem" && command.tlsKey == "key.pem")
    }
}
#endif

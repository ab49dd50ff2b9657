import Foundation
import NIOSSL

/// The certificate chain and private key `aviary serve` presents when it speaks HTTP/1.1 over
/// TLS (`--tls-cert`, `--tls-key`), read and checked when the server is configured, so that a
/// wrong file is one line at start rather than a failed handshake for every client.
///
/// `Sendable`: immutable values; swift-nio-ssl's certificate and key types are `Sendable`.
package struct TLSCredentials: Sendable {
    /// The PEM file of the certificate chain, the server's certificate first.
    package let certificateFile: String
    /// The PEM file of the certificate's private key.
    package let keyFile: String
    /// The server side of the handshake: TLS 1.2 or later, no client certificates.
    let configuration: TLSConfiguration

    /// Reads a certificate chain and its private key from PEM files.
    ///
    /// - Parameters:
    ///   - certificateFile: PEM certificates, the server's own first, then any intermediates.
    ///   - keyFile: The PEM private key (unencrypted) of the first certificate.
    /// - Throws: ``ServeError`` naming the file that cannot be read, holds no PEM certificate or
    ///   key, or whose key does not belong to the certificate.
    package init(certificateFile: String, keyFile: String) throws(ServeError) {
        let certificates: [NIOSSLCertificate]
        do {
            certificates = try NIOSSLCertificate.fromPEMBytes(Self.read(certificateFile, what: "TLS certificate"))
        } catch let error as ServeError {
            throw error
        } catch {
            throw ServeError("TLS certificate \(certificateFile): not a PEM certificate (\(error)); expected -----BEGIN CERTIFICATE-----")
        }
        guard !certificates.isEmpty else {
            throw ServeError("TLS certificate \(certificateFile): no certificate in it; expected -----BEGIN CERTIFICATE-----")
        }
        let key: NIOSSLPrivateKey
        do {
            key = try NIOSSLPrivateKey(bytes: Self.read(keyFile, what: "TLS key"), format: .pem)
        } catch let error as ServeError {
            throw error
        } catch {
            throw ServeError("TLS key \(keyFile): not an unencrypted PEM private key (\(error))")
        }
        var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: certificates.map { .certificate($0) }, privateKey: .privateKey(key))
        configuration.minimumTLSVersion = .tlsv12
        // Making a context is where BoringSSL checks that the key is the certificate's.
        do {
            _ = try NIOSSLContext(configuration: configuration)
        } catch {
            throw ServeError("TLS key \(keyFile) does not belong to the certificate in \(certificateFile) (\(error))")
        }
        self.certificateFile = certificateFile
        self.keyFile = keyFile
        self.configuration = configuration
    }

    private static func read(_ path: String, what: String) throws(ServeError) -> [UInt8] {
        do {
            return Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        } catch {
            throw ServeError("\(what) \(path): cannot read it: \(error.localizedDescription)")
        }
    }
}

import COpenSSL
import Foundation
import Locking

/// An OpenSSL server context for a loop's TLS listener: the certificate chain and key, TLS 1.2 or later with AEAD
/// ciphers only (the API's policy), no ALPN. OpenSSL makes connections from one context on any thread; ``reload()``
/// replaces the context new connections are made from (a renewed certificate), while each connection keeps a
/// reference to the one it was made from.
package final class ServerTLSContext: Sendable {
    /// Why the context could not be made.
    package struct SetupError: Error, CustomStringConvertible {
        /// What failed.
        package let description: String
    }

    /// The `SSL_CTX` new connections are made from.
    private let current: LockedValue<UInt>
    private let certificate: String
    private let privateKey: String
    private let minimumVersion: String

    /// Loads `certificate` (PEM chain) and `privateKey` (PEM); `minimumVersion` is `"1.2"` or `"1.3"`.
    package init(certificate: String, privateKey: String, minimumVersion: String = "1.2") throws(SetupError) {
        let context = try Self.make(certificate: certificate, privateKey: privateKey, minimumVersion: minimumVersion)
        current = LockedValue(UInt(bitPattern: context))
        self.certificate = certificate
        self.privateKey = privateKey
        self.minimumVersion = minimumVersion
    }

    deinit { SSL_CTX_free(OpaquePointer(bitPattern: current.withLock { $0 })) }

    /// Runs `body` with the context new connections are made from (`SSL_new` takes its own reference).
    package func withContext<T>(_ body: (OpaquePointer) -> T) -> T {
        current.withLock { body(OpaquePointer(bitPattern: $0)!) }
    }

    /// Reads the certificate and key files again and makes new connections from them; connections already open keep
    /// theirs. Throws, and keeps the context it had, when a file cannot be read or the key is not the certificate's.
    package func reload() throws(SetupError) {
        let context = try Self.make(certificate: certificate, privateKey: privateKey, minimumVersion: minimumVersion)
        let old = current.withLock { current in
            defer { current = UInt(bitPattern: context) }
            return current
        }
        SSL_CTX_free(OpaquePointer(bitPattern: old))  // each connection made from it holds a reference of its own
    }

    private static func make(
        certificate: String, privateKey: String, minimumVersion: String
    ) throws(SetupError) -> OpaquePointer {
        ERR_clear_error()
        guard let context = SSL_CTX_new(TLS_server_method()) else {
            throw SetupError(description: "SSL_CTX_new failed")
        }
        let version = minimumVersion == "1.3" ? TLS1_3_VERSION : TLS1_2_VERSION
        _ = SSL_CTX_ctrl(context, SSL_CTRL_SET_MIN_PROTO_VERSION, Int(version), nil)
        func fail(_ what: String) -> SetupError {
            ERR_clear_error()
            SSL_CTX_free(context)
            return SetupError(description: what)
        }
        // An idle connection keeps no read or write buffer of its own (OpenSSL frees them between records): a held
        // connection costs its session, not 34 KiB of buffers.
        _ = SSL_CTX_ctrl(context, SSL_CTRL_MODE, Int(SSL_MODE_RELEASE_BUFFERS), nil)
        guard SSL_CTX_set_cipher_list(context, "ECDHE+AESGCM:ECDHE+CHACHA20") == 1 else {
            throw fail("SSL_CTX_set_cipher_list failed")
        }
        guard SSL_CTX_use_certificate_chain_file(context, certificate) == 1 else {
            throw fail("cannot read the certificate \(certificate)")
        }
        guard SSL_CTX_use_PrivateKey_file(context, privateKey, SSL_FILETYPE_PEM) == 1,
            SSL_CTX_check_private_key(context) == 1
        else { throw fail("cannot use the private key \(privateKey) with \(certificate)") }
        return context
    }
}

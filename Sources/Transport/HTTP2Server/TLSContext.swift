import CNGHTTP2
import COpenSSL
import ConnectionLoop
import Foundation
import HTTP2Support

/// An OpenSSL server context (certificate, key, ALPN policy) shared by all TLS connections.
/// Owns its `SSL_CTX`; read-only after init, and OpenSSL allows creating connections from one
/// context on any thread.
final class TLSContext: @unchecked Sendable {  // immutable after init; SSL_CTX_new'd objects are thread-safe
    let context: OpaquePointer

    /// Which protocols ALPN may select.
    enum ALPNPolicy: Int {
        /// `h2` only (no relay).
        case http2 = 0
        /// `h2`, else `http/1.1` (relayed).
        case http2OrHTTP1 = 1
        /// `http/1.1` only (relayed); never `h2`.
        case http1 = 2

        init(_ relay: HTTP2ServerConfiguration.HTTP1Relay?) {
            guard let relay else {
                self = .http2
                return
            }
            self = relay.offersHTTP2 ? .http2OrHTTP1 : .http1
        }
    }

    init(_ tls: HTTP2ServerConfiguration.TLS, alpn: ALPNPolicy = .http2) throws(HTTP2ServerError) {
        ERR_clear_error()
        guard let context = SSL_CTX_new(TLS_server_method()) else {
            throw .setupFailed(reason: "SSL_CTX_new: \(TLSContext.drainErrors())")
        }
        do {
            try TLSContext.configure(context, tls, alpn: alpn)
        } catch {
            SSL_CTX_free(context)
            throw error
        }
        self.context = context
    }

    deinit { SSL_CTX_free(context) }

    private static func configure(
        _ context: OpaquePointer, _ tls: HTTP2ServerConfiguration.TLS, alpn: ALPNPolicy
    ) throws(HTTP2ServerError) {
        // HTTP/2 requires TLS 1.2 or later (RFC 9113 §9.2) and, at 1.2, ephemeral key exchange with an AEAD cipher
        // (§9.2.2); TLS 1.3's suites are all AEAD.
        _ = SSL_CTX_ctrl(context, SSL_CTRL_SET_MIN_PROTO_VERSION, Int(TLS1_2_VERSION), nil)
        guard SSL_CTX_set_cipher_list(context, "ECDHE+AESGCM:ECDHE+CHACHA20") == 1 else {
            throw .setupFailed(reason: "SSL_CTX_set_cipher_list: \(drainErrors())")
        }
        if !FileManager.default.isReadableFile(atPath: tls.certificateChainPath) {
            throw .invalidCertificate(path: tls.certificateChainPath, reason: "file missing or unreadable")
        }
        if !FileManager.default.isReadableFile(atPath: tls.privateKeyPath) {
            throw .invalidPrivateKey(path: tls.privateKeyPath, reason: "file missing or unreadable")
        }
        if SSL_CTX_use_certificate_chain_file(context, tls.certificateChainPath) != 1 {
            throw .invalidCertificate(path: tls.certificateChainPath, reason: drainErrors())
        }
        if SSL_CTX_use_PrivateKey_file(context, tls.privateKeyPath, SSL_FILETYPE_PEM) != 1 {
            if ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH {
                ERR_clear_error()
                throw .certificateKeyMismatch(
                    certificatePath: tls.certificateChainPath, privateKeyPath: tls.privateKeyPath)
            }
            throw .invalidPrivateKey(path: tls.privateKeyPath, reason: drainErrors())
        }
        if SSL_CTX_check_private_key(context) != 1 {
            ERR_clear_error()
            throw .certificateKeyMismatch(certificatePath: tls.certificateChainPath, privateKeyPath: tls.privateKeyPath)
        }
        // The callback's argument is the policy's raw value as a pointer (nil: h2 only).
        SSL_CTX_set_alpn_select_cb(context, selectALPN, UnsafeMutableRawPointer(bitPattern: alpn.rawValue))
    }

    /// Creates the per-connection TLS state (server side, memory BIOs).
    func makeConnection() -> TLSEngine? {
        TLSEngine(context: context, role: .server)
    }

    /// The OpenSSL error queue of this thread as text (and empties it).
    static func drainErrors() -> String {
        OpenSSLErrors.drain()
    }
}

/// ALPN policy (`arg`: a ``TLSContext/ALPNPolicy`` raw value as a pointer). `h2` only: select it when offered,
/// else refuse. `h2` or HTTP/1.1: `h2` when offered, else `http/1.1` when offered, else refuse. HTTP/1.1 only:
/// `http/1.1` when offered, else no ALPN answer at all (as a server without HTTP/2 answers a client offering only
/// `h2`). A client that sends no ALPN extension never reaches this callback.
private func selectALPN(
    _ ssl: OpaquePointer?, _ out: UnsafeMutablePointer<UnsafePointer<UInt8>?>?,
    _ outlen: UnsafeMutablePointer<UInt8>?, _ input: UnsafePointer<UInt8>?, _ inlen: UInt32,
    _ arg: UnsafeMutableRawPointer?
) -> Int32 {
    guard let out, let outlen, let input else { return SSL_TLSEXT_ERR_ALERT_FATAL }
    let selected = out.withMemoryRebound(to: UnsafeMutablePointer<UInt8>?.self, capacity: 1) {
        nghttp2_select_next_protocol($0, outlen, input, inlen)
    }
    let policy = TLSContext.ALPNPolicy(rawValue: Int(bitPattern: arg)) ?? .http2
    if policy == .http1 { return selectHTTP1(out, outlen, input, inlen) }
    // nghttp2_select_next_protocol: 1 = h2, 0 = http/1.1, -1 = neither.
    if selected == 1 || (selected == 0 && policy == .http2OrHTTP1) { return SSL_TLSEXT_ERR_OK }
    return SSL_TLSEXT_ERR_ALERT_FATAL
}

/// Selects `http/1.1` from the client's ALPN list (length-prefixed names), or answers no ALPN when it is absent.
private func selectHTTP1(
    _ out: UnsafeMutablePointer<UnsafePointer<UInt8>?>, _ outlen: UnsafeMutablePointer<UInt8>,
    _ input: UnsafePointer<UInt8>, _ inlen: UInt32
) -> Int32 {
    let wanted = Array("http/1.1".utf8)
    var index = 0
    while index < Int(inlen) {
        let length = Int(input[index])
        let start = index + 1
        guard start + length <= Int(inlen) else { break }
        if length == wanted.count, (0..<length).allSatisfy({ input[start + $0] == wanted[$0] }) {
            out.pointee = input + start
            outlen.pointee = UInt8(length)
            return SSL_TLSEXT_ERR_OK
        }
        index = start + length
    }
    return SSL_TLSEXT_ERR_NOACK
}

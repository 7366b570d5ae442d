import CNGHTTP2
import COpenSSL
import Foundation

/// An OpenSSL server context (certificate, key, ALPN policy) shared by all TLS connections.
/// Owns its `SSL_CTX`; read-only after init, and OpenSSL allows creating connections from one
/// context on any thread.
final class TLSContext: @unchecked Sendable {  // immutable after init; SSL_CTX_new'd objects are thread-safe
    let context: OpaquePointer

    init(_ tls: HTTP2ServerConfiguration.TLS) throws(HTTP2ServerError) {
        ERR_clear_error()
        guard let context = SSL_CTX_new(TLS_server_method()) else {
            throw .setupFailed(reason: "SSL_CTX_new: \(TLSContext.drainErrors())")
        }
        do {
            try TLSContext.configure(context, tls)
        } catch {
            SSL_CTX_free(context)
            throw error
        }
        self.context = context
    }

    deinit { SSL_CTX_free(context) }

    private static func configure(
        _ context: OpaquePointer, _ tls: HTTP2ServerConfiguration.TLS
    ) throws(HTTP2ServerError) {
        // HTTP/2 requires TLS 1.2 or later (RFC 9113 §9.2).
        _ = SSL_CTX_ctrl(context, SSL_CTRL_SET_MIN_PROTO_VERSION, Int(TLS1_2_VERSION), nil)
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
        SSL_CTX_set_alpn_select_cb(context, selectALPN, nil)
    }

    /// Creates the per-connection TLS state (server side, memory BIOs).
    func makeConnection() -> TLSConnection? {
        TLSConnection(context: context)
    }

    /// The OpenSSL error queue of this thread as text (and empties it).
    static func drainErrors() -> String {
        var parts: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            parts.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return parts.isEmpty ? "unknown OpenSSL error" : parts.joined(separator: "; ")
    }
}

/// ALPN policy: select `h2` when offered; refuse a client that offers ALPN without `h2`.
/// A client that sends no ALPN extension never reaches this callback and is spoken to in HTTP/2.
private func selectALPN(
    _ ssl: OpaquePointer?, _ out: UnsafeMutablePointer<UnsafePointer<UInt8>?>?,
    _ outlen: UnsafeMutablePointer<UInt8>?, _ input: UnsafePointer<UInt8>?, _ inlen: UInt32,
    _ arg: UnsafeMutableRawPointer?
) -> Int32 {
    guard let out, let outlen, let input else { return SSL_TLSEXT_ERR_ALERT_FATAL }
    let selected = out.withMemoryRebound(to: UnsafeMutablePointer<UInt8>?.self, capacity: 1) {
        nghttp2_select_next_protocol($0, outlen, input, inlen)
    }
    return selected == 1 ? SSL_TLSEXT_ERR_OK : SSL_TLSEXT_ERR_ALERT_FATAL
}

/// One connection's TLS engine. Encrypted bytes move through memory BIOs, so all socket I/O stays in
/// the event loop (non-blocking `recv`/`send` with `MSG_NOSIGNAL`). Confined to the event-loop thread.
final class TLSConnection {
    let ssl: OpaquePointer
    private let readBIO: OpaquePointer
    private let writeBIO: OpaquePointer
    private(set) var handshakeComplete = false

    init?(context: OpaquePointer) {
        guard let ssl = SSL_new(context) else { return nil }
        guard let readBIO = BIO_new(BIO_s_mem()), let writeBIO = BIO_new(BIO_s_mem()) else {
            SSL_free(ssl)
            return nil
        }
        // An empty read BIO means "retry later", not end of file.
        _ = BIO_ctrl(readBIO, BIO_C_SET_BUF_MEM_EOF_RETURN, -1, nil)
        _ = BIO_ctrl(writeBIO, BIO_C_SET_BUF_MEM_EOF_RETURN, -1, nil)
        SSL_set_bio(ssl, readBIO, writeBIO)  // the SSL now owns both BIOs
        SSL_set_accept_state(ssl)
        self.ssl = ssl
        self.readBIO = readBIO
        self.writeBIO = writeBIO
    }

    deinit { SSL_free(ssl) }

    enum Outcome {
        case ok
        case closed
        case failed
    }

    /// Hands received ciphertext to OpenSSL.
    func receiveCiphertext(_ bytes: UnsafeRawBufferPointer) {
        var offset = 0
        while offset < bytes.count {
            let written = BIO_write(readBIO, bytes.baseAddress! + offset, Int32(bytes.count - offset))
            if written <= 0 { break }
            offset += Int(written)
        }
    }

    /// Advances the handshake; `.ok` also while it still waits for the peer.
    func continueHandshake() -> Outcome {
        if handshakeComplete { return .ok }
        ERR_clear_error()
        let result = SSL_do_handshake(ssl)
        if result == 1 {
            handshakeComplete = true
            return .ok
        }
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE: return .ok
        default:
            ERR_clear_error()
            return .failed
        }
    }

    /// Decrypts available application data into `buffer`, calling `consume` per chunk.
    func readPlaintext(
        into buffer: UnsafeMutableRawBufferPointer, _ consume: (UnsafeRawBufferPointer) -> Bool
    )
        -> Outcome
    {
        while true {
            ERR_clear_error()
            let count = SSL_read(ssl, buffer.baseAddress, Int32(buffer.count))
            if count > 0 {
                if !consume(UnsafeRawBufferPointer(rebasing: buffer[0..<Int(count)])) { return .failed }
                continue
            }
            switch SSL_get_error(ssl, count) {
            case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE: return .ok
            case SSL_ERROR_ZERO_RETURN: return .closed
            default:
                ERR_clear_error()
                return .failed
            }
        }
    }

    /// Encrypts `bytes`; the ciphertext is then available from ``drainCiphertext(into:)``.
    func writePlaintext(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        while offset < bytes.count {
            ERR_clear_error()
            let written = SSL_write(ssl, bytes.baseAddress! + offset, Int32(bytes.count - offset))
            if written <= 0 {
                ERR_clear_error()
                return false
            }
            offset += Int(written)
        }
        return true
    }

    /// Moves pending ciphertext (handshake records, alerts, application data) into `output`.
    func drainCiphertext(into output: inout OutputBuffer) {
        while BIO_ctrl_pending(writeBIO) > 0 {
            let pending = Int(BIO_ctrl_pending(writeBIO))
            let read = output.appendWith(maximumCount: pending) { pointer in
                Int(BIO_read(writeBIO, pointer, Int32(pending)))
            }
            if read <= 0 { break }
        }
    }
}

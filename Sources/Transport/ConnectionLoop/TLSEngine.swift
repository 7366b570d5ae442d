import COpenSSL

/// One connection's TLS engine, client or server side. Encrypted bytes move through memory BIOs, so all socket
/// I/O stays in the caller's event loop (non-blocking `recv`/`send`). Confined to the event-loop thread.
package final class TLSEngine {
    /// Which end of the handshake this engine plays.
    package enum Role {
        case client
        case server
    }

    /// The result of a TLS step.
    package enum Outcome {
        case ok
        case closed
        case failed
    }

    /// The OpenSSL connection (for ALPN, peer certificate and verification queries).
    package let ssl: OpaquePointer
    private var readBIO: OpaquePointer
    private var writeBIO: OpaquePointer
    /// Whether the handshake has finished.
    package private(set) var handshakeComplete = false
    /// Whether the memory BIOs that carried the handshake were replaced by fresh ones.
    package private(set) var handshakeBuffersReleased = false

    /// Creates the engine from a configured `SSL_CTX`; `nil` when OpenSSL is out of memory.
    package init?(context: OpaquePointer, role: Role) {
        guard let ssl = SSL_new(context) else { return nil }
        guard let (readBIO, writeBIO) = Self.memoryBIOs() else {
            SSL_free(ssl)
            return nil
        }
        SSL_set_bio(ssl, readBIO, writeBIO)  // the SSL now owns both BIOs
        switch role {
        case .client: SSL_set_connect_state(ssl)
        case .server: SSL_set_accept_state(ssl)
        }
        self.ssl = ssl
        self.readBIO = readBIO
        self.writeBIO = writeBIO
    }

    deinit { SSL_free(ssl) }

    /// A read and a write memory BIO, an empty read BIO meaning "retry later", not end of file.
    private static func memoryBIOs() -> (OpaquePointer, OpaquePointer)? {
        guard let readBIO = BIO_new(BIO_s_mem()) else { return nil }
        guard let writeBIO = BIO_new(BIO_s_mem()) else {
            BIO_free(readBIO)
            return nil
        }
        _ = BIO_ctrl(readBIO, BIO_C_SET_BUF_MEM_EOF_RETURN, -1, nil)
        _ = BIO_ctrl(writeBIO, BIO_C_SET_BUF_MEM_EOF_RETURN, -1, nil)
        return (readBIO, writeBIO)
    }

    /// Once the handshake is over and both BIOs are empty, swaps in fresh ones: a memory BIO keeps the largest
    /// buffer it ever held, and the handshake's (the certificate chain going out) would stay with every idle
    /// connection for its life.
    private func releaseHandshakeBuffers() {
        guard handshakeComplete, !handshakeBuffersReleased, BIO_ctrl_pending(readBIO) == 0,
            BIO_ctrl_pending(writeBIO) == 0, let (fresh, freshWrite) = Self.memoryBIOs()
        else { return }
        SSL_set_bio(ssl, fresh, freshWrite)  // frees the old pair
        readBIO = fresh
        writeBIO = freshWrite
        handshakeBuffersReleased = true
    }

    /// Hands received ciphertext to OpenSSL.
    package func receiveCiphertext(_ bytes: UnsafeRawBufferPointer) {
        var offset = 0
        while offset < bytes.count {
            let written = BIO_write(readBIO, bytes.baseAddress! + offset, Int32(bytes.count - offset))
            if written <= 0 { break }
            offset += Int(written)
        }
    }

    /// Advances the handshake; `.ok` also while it still waits for the peer. A client calls it once before
    /// anything was received, to produce its ClientHello.
    package func continueHandshake() -> Outcome {
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

    /// Decrypts available application data into `buffer`, calling `consume` per chunk; `consume` returns
    /// `false` to stop.
    package func readPlaintext(
        into buffer: UnsafeMutableRawBufferPointer, _ consume: (UnsafeRawBufferPointer) -> Bool
    ) -> Outcome {
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
    package func writePlaintext(_ bytes: UnsafeRawBufferPointer) -> Bool {
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
    package func drainCiphertext(into output: inout OutputBuffer) {
        while BIO_ctrl_pending(writeBIO) > 0 {
            let pending = Int(BIO_ctrl_pending(writeBIO))
            let read = output.appendWith(maximumCount: pending) { pointer in
                Int(BIO_read(writeBIO, pointer, Int32(pending)))
            }
            if read <= 0 { break }
        }
        if !handshakeBuffersReleased { releaseHandshakeBuffers() }
    }

    /// The ALPN protocol the handshake selected, or `nil`.
    package var selectedALPN: String? {
        var data: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &data, &length)
        guard let data, length > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(length)), as: UTF8.self)
    }
}

/// OpenSSL's error queue.
package enum OpenSSLErrors {
    /// The OpenSSL error queue of this thread as text (and empties it).
    package static func drain() -> String {
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

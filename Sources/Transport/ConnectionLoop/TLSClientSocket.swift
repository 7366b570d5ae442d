import COpenSSL
import Foundation

/// A blocking TLS client connection (a line protocol's client side: an IMAP device, a test peer): TCP to
/// `host:port`, the server's certificate verified against a CA file for `host` (a name, sent as SNI, or an IP
/// address), TLS 1.2 or later, reads that give up after the receive timeout. Used from one thread at a time.
package final class TLSClientSocket {
    /// Why the connection failed.
    package struct Failure: Error, CustomStringConvertible {
        /// What failed.
        package let description: String
    }

    private let context: OpaquePointer
    private let ssl: OpaquePointer
    private let fd: Int32

    /// The connected socket, for a caller that watches it with epoll (and may make it non-blocking: see
    /// ``readAvailable(into:)``).
    package var descriptor: Int32 { fd }

    /// Connects and completes the handshake.
    package init(host: String, port: UInt16, caFile: String, timeoutSeconds: Int = 30) throws(Failure) {
        guard let context = SSL_CTX_new(TLS_client_method()) else { throw Failure(description: "SSL_CTX_new failed") }
        _ = SSL_CTX_ctrl(context, SSL_CTRL_SET_MIN_PROTO_VERSION, Int(TLS1_2_VERSION), nil)
        guard SSL_CTX_load_verify_locations(context, caFile, nil) == 1 else {
            SSL_CTX_free(context)
            throw Failure(description: "cannot read the CA file \(caFile)")
        }
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
        let fd: Int32
        do {
            fd = try Self.connect(host: host, port: port, timeoutSeconds: timeoutSeconds)
        } catch {
            SSL_CTX_free(context)
            throw error
        }
        guard let ssl = SSL_new(context) else {
            close(fd)
            SSL_CTX_free(context)
            throw Failure(description: "SSL_new failed")
        }
        let isAddress = host.contains(":") || host.split(separator: ".").allSatisfy { UInt8($0) != nil }
        if isAddress {
            _ = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host)
        } else {
            _ = SSL_set1_host(ssl, host)
            host.withCString { name in
                _ = SSL_ctrl(
                    ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, Int(TLSEXT_NAMETYPE_host_name),
                    UnsafeMutableRawPointer(mutating: name))
            }
        }
        SSL_set_fd(ssl, fd)
        ERR_clear_error()
        guard SSL_connect(ssl) == 1 else {
            let verification = SSL_get_verify_result(ssl)
            let reason =
                verification != Int(X509_V_OK)
                ? "the server's certificate is not trusted: \(String(cString: X509_verify_cert_error_string(verification)))"
                : "the TLS handshake failed"
            ERR_clear_error()
            SSL_free(ssl)
            close(fd)
            SSL_CTX_free(context)
            throw Failure(description: reason)
        }
        self.context = context
        self.ssl = ssl
        self.fd = fd
    }

    deinit {
        _ = SSL_shutdown(ssl)
        SSL_free(ssl)
        close(fd)
        SSL_CTX_free(context)
    }

    /// Sends every byte.
    package func write(_ bytes: [UInt8]) throws(Failure) {
        var offset = 0
        while offset < bytes.count {
            ERR_clear_error()
            let written = bytes[offset...].withUnsafeBytes { SSL_write(ssl, $0.baseAddress, Int32($0.count)) }
            guard written > 0 else {
                ERR_clear_error()
                throw Failure(description: "the connection failed while sending")
            }
            offset += Int(written)
        }
    }

    /// Reads what is there (waiting for some): the bytes, or empty when the peer closed.
    package func read(maximum: Int = 64 * 1024) throws(Failure) -> [UInt8] {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: maximum, alignment: 1)
        defer { buffer.deallocate() }
        let count = try read(into: buffer)
        return Array(buffer[0..<count])
    }

    /// Reads what is there (waiting for some) into `buffer`: how many bytes, 0 when the peer closed.
    package func read(into buffer: UnsafeMutableRawBufferPointer) throws(Failure) -> Int {
        // On this blocking socket, "nothing there yet" is the receive timeout running out.
        guard let count = try readAvailable(into: buffer) else {
            throw Failure(description: "the connection timed out while reading")
        }
        return count
    }

    /// Reads what is there into `buffer`: how many bytes, 0 when the peer closed, `nil` when a whole TLS record has
    /// not arrived yet (on a non-blocking socket, at once; on a blocking one, once the receive timeout ran out).
    package func readAvailable(into buffer: UnsafeMutableRawBufferPointer) throws(Failure) -> Int? {
        ERR_clear_error()
        let count = SSL_read(ssl, buffer.baseAddress, Int32(clamping: buffer.count))
        if count > 0 { return Int(count) }
        let error = SSL_get_error(ssl, count)
        ERR_clear_error()
        switch error {
        case SSL_ERROR_ZERO_RETURN: return 0
        case SSL_ERROR_WANT_READ: return nil
        default: throw Failure(description: "the connection failed while reading")
        }
    }

    /// From now on, reads decrypt what ``supply(_:)`` hands over instead of reading the socket themselves: for a
    /// caller that reads the socket (with `recvmsg`, for each read's kernel receive time). Writes still go to the
    /// socket. With nothing supplied, ``readAvailable(into:)`` answers `nil`.
    package func readFromMemory() throws(Failure) {
        guard let memory = BIO_new(BIO_s_mem()) else { throw Failure(description: "BIO_new failed") }
        SSL_set0_rbio(ssl, memory)
    }

    /// Bytes the caller read from the socket, for the next reads (after ``readFromMemory()``).
    package func supply(_ bytes: UnsafeRawBufferPointer) {
        _ = BIO_write(SSL_get_rbio(ssl), bytes.baseAddress, Int32(clamping: bytes.count))
    }

    private static func connect(host: String, port: UInt16, timeoutSeconds: Int) throws(Failure) -> Int32 {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_NUMERICSERV
        var found: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &found) == 0, let found else {
            throw Failure(description: "cannot resolve \(host)")
        }
        defer { freeaddrinfo(found) }
        var entry: UnsafeMutablePointer<addrinfo>? = found
        while let current = entry {
            let fd = socket(current.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            if fd >= 0 {
                var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
                setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                // A line protocol's client writes a command and waits for its answer: nothing to gather.
                var noDelay: Int32 = 1
                setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &noDelay, socklen_t(MemoryLayout<Int32>.size))
                if Glibc.connect(fd, current.pointee.ai_addr, current.pointee.ai_addrlen) == 0 { return fd }
                close(fd)
            }
            entry = current.pointee.ai_next
        }
        throw Failure(description: "cannot connect to \(host):\(port)")
    }
}

import CNGHTTP2
import ConnectionLoop
import Foundation
import HTTP2Support

/// The cleartext side of a relayed HTTP/1.1 connection: a non-blocking socket to the configured
/// ``HTTP2ServerConfiguration/HTTP1Relay`` and the client's decrypted bytes waiting to be written to it.
/// Confined to the event-loop thread, like its ``Connection``.
final class RelayUpstream {
    let fd: Int32
    var output = OutputBuffer()
    var interest: UInt32 = 0

    init(fd: Int32) { self.fd = fd }

    /// Connects to `relay` (a blocking connect: the target is on loopback), then makes the socket non-blocking.
    static func open(_ relay: HTTP2ServerConfiguration.HTTP1Relay) -> RelayUpstream? {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_NUMERICSERV
        var found: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(relay.host, String(relay.port), &hints, &found) == 0, let found else { return nil }
        defer { freeaddrinfo(found) }
        var entry: UnsafeMutablePointer<addrinfo>? = found
        while let current = entry {
            let fd = socket(current.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            if fd >= 0 {
                if connect(fd, current.pointee.ai_addr, current.pointee.ai_addrlen) == 0 {
                    _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK)
                    var one: Int32 = 1
                    _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                    return RelayUpstream(fd: fd)
                }
                close(fd)
            }
            entry = current.pointee.ai_next
        }
        return nil
    }
}

extension Connection {
    /// Called once when the TLS handshake completes: a client that chose `http/1.1` (only possible with a relay
    /// configured), or offered no ALPN when the relay takes those too, loses its HTTP/2 session and is connected
    /// to the relay target. `false` closes the connection.
    func handshakeCompleted(_ tls: TLSEngine) -> Bool {
        guard let target = loop.configuration.http1Relay,
            tls.selectedALPN == "http/1.1" || (tls.selectedALPN == nil && target.includesClientsWithoutALPN)
        else { return true }
        guard let upstream = RelayUpstream.open(target) else { return false }
        if let session { nghttp2_session_del(session) }
        session = nil
        relay = upstream
        loop.registerRelay(self)
        return true
    }

    /// Writes what the client sent to the relay target, as far as its socket takes it.
    func flushRelay() {
        guard let relay else { return }
        switch SocketIO.write(relay.fd, from: &relay.output) {
        case .drained, .blocked: break
        case .failed: markClose(.relayClosed)
        }
    }

    /// Reads the relay target's answer and sends it to the client through TLS.
    func readFromRelay(now: UInt64) {
        guard let relay, let tls, closeReason == nil, output.count < Connection.highWater else { return }
        let end = SocketIO.read(relay.fd, into: loop.readBuffer, budget: 256 * 1024) { bytes in
            lastActivity = now
            guard tls.writePlaintext(bytes) else { return false }
            tls.drainCiphertext(into: &output)
            return output.count < Connection.highWater
        }
        switch end {
        case .drained: break
        case .stopped: if output.count < Connection.highWater { markClose(.protocolError) }
        case .peerClosed, .failed: markClose(.relayClosed)
        }
    }
}

import Foundation
import HTTP2Server
import HTTPServer

/// Real servers on loopback, fed raw bytes over a fresh TCP connection per input: HTTP2Server over h2c, and
/// mailboxd's router on HTTPServer over HTTP/1.1. Each input must leave the server answering.
final class ServerFuzz: Sendable {
    static let http2 = ServerFuzz(http2: ())
    static let http1 = ServerFuzz(http1: ())

    let port: UInt16
    /// Bytes sent before the input (the HTTP/2 client preface), so the input starts at the frames.
    let prefix: [UInt8]
    private let keepAlive: any Sendable

    private init(http2: Void) {
        let server = HTTP2Server(
            configuration: HTTP2ServerConfiguration(
                host: "127.0.0.1", port: 0, tls: nil, maxConcurrentStreams: 100, idleTimeout: .seconds(5),
                shutdownGracePeriod: .seconds(1)),
            inlineHandler: { request in
                HTTP2Response(status: request.path == "/slow" ? 503 : 200, body: Data(request.body.prefix(64)))
            })
        try! server.start()
        port = UInt16(server.port)
        prefix = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
        keepAlive = server
    }

    private init(http1: Void) {
        let server = try! HTTPServer(
            configuration: HTTPServer.Configuration(port: 0, threadCount: 2, requestTimeout: .seconds(2)),
            router: APIFuzz.shared.router)
        port = server.port
        prefix = []
        keepAlive = server
    }

    /// Sends `prefix + bytes`, half-closes, and reads until the server closes or 200 ms pass.
    func send(_ bytes: Data) {
        let payload = Data(prefix) + bytes
        let socket = connectLoopback()
        defer { close(socket) }
        payload.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let sent = Glibc.send(socket, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
                if sent <= 0 { return }
                offset += sent
            }
        }
        shutdown(socket, Int32(SHUT_WR))
        // Up to 200 ms for the first bytes, then until the server closes or pauses for 5 ms (a kept-alive
        // HTTP/1.1 connection stays open after its answers).
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        var answer = Data()
        var wait = timeval(tv_sec: 0, tv_usec: 200_000)
        while answer.count < 1 << 20 {
            setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
            let count = recv(socket, &buffer, buffer.count, 0)
            if count <= 0 { break }
            answer.append(contentsOf: buffer[0..<count])
            wait = timeval(tv_sec: 0, tv_usec: 5_000)
        }
        guard prefix.isEmpty else { return }
        // Every status line of the answers: 5xx only where the protocol says so: 503 while shutting down, and
        // 505 for an HTTP version libmicrohttpd does not speak (RFC 9110, section 15.6.6).
        let text = String(decoding: answer, as: UTF8.self)
        for line in text.split(separator: "\r\n") where line.hasPrefix("HTTP/1.") {
            let status = line.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
            if status >= 500, status != 503, status != 505 { violated("HTTPServer answered \(line.prefix(40))") }
        }
    }

    private func connectLoopback() -> Int32 {
        // A signal (libFuzzer's timers) can interrupt connect(): that is no refusal, so try again on a new socket.
        for _ in 0..<8 {
            let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            // Close with a reset, not TIME_WAIT: tens of thousands of connections would exhaust the local ports.
            var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
            setsockopt(socket, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            if connected == 0 { return socket }
            let code = errno
            close(socket)
            if code != EINTR {
                violated("the server stopped accepting connections: \(String(cString: strerror(code)))")
            }
        }
        violated("connecting to the server was interrupted eight times in a row")
    }
}

import Foundation
import Testing

@testable import IMAP

/// Several loops serve one listener and count against one limit: with room for two connections over two loops, five
/// clients get two greetings and three refusals, wherever each lands.
@Suite struct IMAPServerLimitTests {
    @Test func loopsSharingAListenerShareItsConnectionLimit() throws {
        let server = try IMAPServer(
            configuration: .init(host: "127.0.0.1", port: 0, tls: nil, maxConnections: 2, loopThreads: 2),
            backend: IMAPSessionTests.Backend(messages: []))
        server.start()
        defer { server.shutdown() }
        var sockets: [Int32] = []
        defer { for fd in sockets { close(fd) } }
        var firstLines: [String] = []
        for _ in 0..<5 {
            let fd = try Self.connect(port: server.port)
            sockets.append(fd)
            firstLines.append(Self.readLine(fd))
        }
        #expect(firstLines.filter { $0.hasPrefix("* OK [CAPABILITY") }.count == 2, "\(firstLines)")
        #expect(firstLines.filter { $0 == "* BYE Too many connections; try again later" }.count == 3, "\(firstLines)")
    }

    static func connect(port: UInt16) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else { throw POSIXError(.ECONNREFUSED) }
        // A server that never answers fails the test rather than holding it forever.
        var limit = timeval(tv_sec: 30, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        return fd
    }

    /// The first line the server sends (blocking until its end or the connection's).
    static func readLine(_ fd: Int32) -> String {
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while recv(fd, &byte, 1, 0) == 1 {
            if byte == 0x0A { break }
            if byte != 0x0D { line.append(byte) }
        }
        return String(decoding: line, as: UTF8.self)
    }
}

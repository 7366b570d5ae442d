import TestSupport
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
        var clients: [LineClient] = []
        var firstLines: [String] = []
        for _ in 0..<5 {
            let client = try LineClient(port: server.port)
            clients.append(client)
            firstLines.append(client.line(timeout: 30) ?? "(nothing)")
        }
        #expect(firstLines.filter { $0.hasPrefix("* OK [CAPABILITY") }.count == 2, "\(firstLines)")
        #expect(firstLines.filter { $0 == "* BYE Too many connections; try again later" }.count == 3, "\(firstLines)")
        withExtendedLifetime(clients) {}
    }
}

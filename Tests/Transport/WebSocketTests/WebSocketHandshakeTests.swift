import Testing

@testable import WebSocket

/// The opening handshake: the request head read by http-parser as bytes arrive, and checked as RFC 6455 §4.2 says.
@Suite struct WebSocketHandshakeTests {
    static let request = Array(
        ("GET /jmap/ws?ticket=abc HTTP/1.1\r\nHost: mail.example.com:8444\r\nUpgrade: websocket\r\n"
            + "Connection: keep-alive, Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            + "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: chat, jmap\r\n\r\n").utf8)

    func feed(_ reader: RequestHeadReader, _ bytes: [UInt8]) -> RequestHeadReader.Outcome {
        bytes.withUnsafeBytes { reader.feed($0) }
    }

    @Test func aHeadSplitAcrossReadsIsReadWholeAndTheFramesAfterItAreKept() throws {
        let reader = RequestHeadReader()
        let frames: [UInt8] = [0x81, 0x80, 1, 2, 3, 4]
        let bytes = Self.request + frames
        var outcome = RequestHeadReader.Outcome.incomplete
        for start in stride(from: 0, to: bytes.count, by: 7) where outcome == .incomplete {
            outcome = feed(reader, Array(bytes[start..<min(bytes.count, start + 7)]))
        }
        guard case .complete(let head, let rest) = outcome else {
            Issue.record("not complete: \(outcome)")
            return
        }
        #expect(head.method == "GET")
        #expect(head.path == "/jmap/ws")
        #expect(head.query == "ticket=abc")
        #expect(head.header("sec-websocket-version") == "13")
        #expect(head.header("Host") == "mail.example.com:8444")
        #expect(frames.starts(with: rest) && !rest.isEmpty, "the bytes after the head are the first frames' (\(rest))")
    }

    @Test func aMalformedOrOversizedHeadIsRefused() {
        #expect(
            {
                if case .invalid = feed(RequestHeadReader(), Array("GET /jmap/ws HTTP/1.1\r\nHost x\r\n\r\n".utf8)) {
                    return true
                }
                return false
            }())
        let long = Array("GET /jmap/ws HTTP/1.1\r\nX-Padding: ".utf8) + Array(repeating: UInt8(ascii: "a"), count: 9000)
        #expect(feed(RequestHeadReader(limit: 8192), long) == .tooLarge)
    }

    func header(_ name: String, in fields: [String: String]) -> String? {
        fields.first { $0.key.lowercased() == name.lowercased() }?.value
    }

    @Test func theAcceptValueIsRFC6455sExample() throws {
        let reader = RequestHeadReader()
        guard case .complete(let head, _) = feed(reader, Self.request) else {
            Issue.record("the head was not read")
            return
        }
        // RFC 6455 §1.3: this key's accept value.
        #expect(
            WebSocketHandshake.accept(header: head.header, subprotocol: "jmap")
                == .success("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="))
        let response = String(
            decoding: WebSocketHandshake.switchingProtocols(accept: "x", subprotocol: "jmap"), as: UTF8.self)
        #expect(response.hasPrefix("HTTP/1.1 101 Switching Protocols\r\n") && response.hasSuffix("\r\n\r\n"))
        #expect(response.contains("Sec-WebSocket-Protocol: jmap\r\n"))
    }

    @Test(arguments: [
        (["Upgrade": "h2c", "Connection": "Upgrade"], 426, "upgradeRequired"),
        (
            ["Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "8"], 426,
            "unsupportedWebSocketVersion"
        ),
        (
            [
                "Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
                "Sec-WebSocket-Key": "short",
            ],
            400, "invalidWebSocketKey"
        ),
        (
            [
                "Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
                "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Protocol": "chat",
            ], 400, "unsupportedSubprotocol"
        ),
    ])
    func aRequestThatIsNotAJMAPWebSocketIsRefusedWithItsStatus(
        _ fields: [String: String], _ status: Int, _ code: String
    ) {
        guard
            case .failure(let refusal) = WebSocketHandshake.accept(
                header: { header($0, in: fields) }, subprotocol: "jmap")
        else {
            Issue.record("accepted: \(fields)")
            return
        }
        #expect(refusal.status == status)
        #expect(refusal.code == code)
        let answer = String(decoding: WebSocketHandshake.response(to: refusal), as: UTF8.self)
        #expect(answer.hasPrefix("HTTP/1.1 \(status) "))
        #expect(answer.contains("Connection: close\r\n") && answer.contains("\"error\":\"\(code)\""))
    }
}

import JSONText
import Testing

@testable import JMAP

/// What a client may send on a JMAP WebSocket (RFC 8887 §4.3), read, and the RequestErrors for what it may not.
@Suite struct JMAPWebSocketMessageTests {
    func parse(_ text: String) -> Result<JMAPWebSocketMessage, JMAPWebSocketError> {
        JMAPWebSocketMessage.parse(Array(text.utf8))
    }

    func error(_ text: String) -> JMAPWebSocketError? {
        if case .failure(let error) = parse(text) { return error }
        return nil
    }

    @Test func theThreeMessagesAreRead() throws {
        let request = #"{"@type":"Request","id":"r1","using":[],"methodCalls":[]}"#
        guard case .success(.request(let id, let value)) = parse(request) else {
            Issue.record("not a request")
            return
        }
        #expect(id == "r1")
        #expect(value.object?["methodCalls"] == .array([]))
        #expect(
            try parse(#"{"@type":"WebSocketPushEnable","dataTypes":["Email","Mailbox"],"pushState":"s"}"#).get()
                == .pushEnable(dataTypes: ["Email", "Mailbox"], pushState: "s"))
        #expect(
            try parse(#"{"@type":"WebSocketPushEnable","dataTypes":null}"#).get()
                == .pushEnable(dataTypes: nil, pushState: nil))
        #expect(try parse(#"{"@type":"WebSocketPushDisable"}"#).get() == .pushDisable)
    }

    @Test(
        arguments: [
            ("not JSON", "notJSON", nil),
            (#"["@type"]"#, "notRequest", nil),
            (#"{"id":"x","using":[]}"#, "notRequest", "x"),
            (#"{"@type":"Subscribe","id":"y"}"#, "notRequest", "y"),
            (#"{"@type":"Request","id":7}"#, "notRequest", nil),
            (#"{"@type":"WebSocketPushEnable","dataTypes":["Calendar"]}"#, "notRequest", nil),
            (#"{"@type":"WebSocketPushEnable","pushState":5}"#, "notRequest", nil),
        ] as [(String, String, String?)])
    func aMessageThatIsNoneOfThemIsARequestError(_ text: String, _ type: String, _ requestID: String?) throws {
        let failure = try #require(error(text), "\(text) was accepted")
        #expect(failure.error.type == type, "\(text)")
        #expect(failure.requestID == requestID, "\(text)")
        let message = try #require(failure.message.object)
        #expect(message["@type"] == "RequestError")
        #expect(message["type"] == .string("urn:ietf:params:jmap:error:" + type))
        #expect(message["requestId"] == requestID.map(JSONValue.string))
    }

    @Test func theSocketsURLSharesTheAPIsHost() {
        #expect(
            JMAPServer.webSocketURL(baseURL: "https://127.0.0.1:8443", port: 8444) == "wss://127.0.0.1:8444/jmap/ws")
        #expect(JMAPServer.webSocketURL(baseURL: "https://[::1]:8443", port: 8444) == "wss://[::1]:8444/jmap/ws")
        #expect(
            JMAPServer.webSocketURL(baseURL: "https://mail.example.com/base", port: 443)
                == "wss://mail.example.com:443/jmap/ws")
        #expect(JMAPServer.webSocketURL(baseURL: "http://localhost:8080", port: 9) == "ws://localhost:9/jmap/ws")
        #expect(
            JMAPServer.origin(sharingHostWith: "https://[::1]:9443", scheme: "https", port: 8443)
                == "https://[::1]:8443")
    }
}

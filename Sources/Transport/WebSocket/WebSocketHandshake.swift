import Foundation
import JSONText
import OpenSSLCrypto

/// The server's half of RFC 6455's opening handshake (§4.2): checks an upgrade request and computes
/// `Sec-WebSocket-Accept`. Transport-free: the HTTP server reads the headers and sends the `101`.
package enum WebSocketHandshake {
    /// The only protocol version RFC 6455 defines.
    package static let version = "13"
    /// The GUID RFC 6455 §1.3 appends to the client's key.
    static let keyGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    /// Why an upgrade request cannot be accepted: the HTTP status to answer with, the project's error code, a message
    /// for the developer, and the header fields RFC 6455 wants on that answer.
    package struct Refusal: Error, Equatable, Sendable {
        /// 400, or 426 for a request that is not a version-13 WebSocket upgrade.
        package var status: Int
        /// The `error` member of the JSON body.
        package var code: String
        /// The `message` member of the JSON body.
        package var message: String
        /// Fields to send with the refusal (`Sec-WebSocket-Version` after a wrong version, §4.4).
        package var headers: [(name: String, value: String)] = []

        /// A refusal answered with `status`, the error `code` and `message`, and `headers`.
        package init(status: Int, code: String, message: String, headers: [(name: String, value: String)] = []) {
            self.status = status
            self.code = code
            self.message = message
            self.headers = headers
        }

        package static func == (lhs: Refusal, rhs: Refusal) -> Bool {
            lhs.status == rhs.status && lhs.code == rhs.code && lhs.message == rhs.message
                && lhs.headers.map(\.name) == rhs.headers.map(\.name)
                && lhs.headers.map(\.value) == rhs.headers.map(\.value)
        }
    }

    /// The `Sec-WebSocket-Accept` value for a request that opens a WebSocket speaking `subprotocol`, or the refusal.
    /// `header` looks a request header up by name (case-insensitively).
    package static func accept(header: (String) -> String?, subprotocol: String) -> Result<String, Refusal> {
        let upgrade = Self.tokens(header("Upgrade"))
        let connection = Self.tokens(header("Connection"))
        guard upgrade.contains("websocket"), connection.contains("upgrade") else {
            return .failure(
                Refusal(
                    status: 426, code: "upgradeRequired",
                    message: "This resource is a WebSocket: send 'Upgrade: websocket' and 'Connection: Upgrade'.",
                    headers: [("Upgrade", "websocket"), ("Sec-WebSocket-Version", version)]))
        }
        guard header("Sec-WebSocket-Version")?.trimmingCharacters(in: .whitespaces) == version else {
            return .failure(
                Refusal(
                    status: 426, code: "unsupportedWebSocketVersion",
                    message: "Only WebSocket version 13 (RFC 6455) is spoken.",
                    headers: [("Sec-WebSocket-Version", version)]))
        }
        guard let key = header("Sec-WebSocket-Key")?.trimmingCharacters(in: .whitespaces), key.utf8.count == 24,
            Data(base64Encoded: key)?.count == 16
        else {
            return .failure(
                Refusal(
                    status: 400, code: "invalidWebSocketKey",
                    message: "'Sec-WebSocket-Key' must be the base64 of 16 bytes."))
        }
        let offered = (header("Sec-WebSocket-Protocol") ?? "").split(separator: ",").map {
            $0.trimmingCharacters(in: .whitespaces)
        }
        guard offered.contains(subprotocol) else {
            return .failure(
                Refusal(
                    status: 400, code: "unsupportedSubprotocol",
                    message:
                        "The WebSocket must be opened with the '\(subprotocol)' subprotocol (Sec-WebSocket-Protocol)."))
        }
        return .success(acceptValue(forKey: key))
    }

    /// The `101 Switching Protocols` answer that opens the WebSocket.
    package static func switchingProtocols(accept: String, subprotocol: String) -> [UInt8] {
        Array(
            ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Accept: \(accept)\r\nSec-WebSocket-Protocol: \(subprotocol)\r\n\r\n").utf8)
    }

    /// A refusal as an HTTP/1.1 answer: the JSON body `{"error","message"}` and `Connection: close`.
    package static func response(to refusal: Refusal) -> [UInt8] {
        let body = "{\"error\":\(JSONText.quoted(refusal.code)),\"message\":\(JSONText.quoted(refusal.message))}"
        var head = "HTTP/1.1 \(refusal.status) \(reasons[refusal.status] ?? "Error")\r\n"
        head += "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n"
        head += "Cache-Control: no-store\r\nConnection: close\r\n"
        for (name, value) in refusal.headers where !(name + value).contains(where: { $0 == "\r" || $0 == "\n" }) {
            head += "\(name): \(value)\r\n"
        }
        return Array((head + "\r\n" + body).utf8)
    }

    private static let reasons = [
        400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
        408: "Request Timeout",
        426: "Upgrade Required", 429: "Too Many Requests", 431: "Request Header Fields Too Large",
        503: "Service Unavailable",
    ]

    /// `base64(SHA-1(key + GUID))` (RFC 6455 §4.2.2).
    package static func acceptValue(forKey key: String) -> String {
        Data(SHA1.hash(Array((key + keyGUID).utf8))).base64EncodedString()
    }

    /// A header's comma-separated tokens, lowercased.
    private static func tokens(_ value: String?) -> [String] {
        (value ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
    }
}

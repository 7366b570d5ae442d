import Foundation
import TestSupport
import Testing

/// Requests that two HTTP parsers could frame differently, sent as raw bytes to the real mailboxd over TLS (the API)
/// and plain HTTP (the metrics listener), each with a second request appended: refused with 400 before any
/// handler, the connection closed, and the appended request never answered.
@Suite(.serialized) struct RequestFramingTests {
    /// What the server sent back for `bytes` and whether it closed the connection (a Python peer: raw sockets).
    static func exchange(_ bytes: String, port: UInt16, ca: String?) throws -> (received: String, closed: Bool) {
        let result = try Subprocess.run(
            TestEnvironment.python,
            [TestEnvironment.peer("http1_raw_exchange.py"), String(port)] + (ca.map { [$0] } ?? []),
            input: bytes)
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any],
            "the raw peer failed: \(result.stderr)")
        return (object["received"] as? String ?? "", object["closed"] as? Bool ?? false)
    }

    /// A request with two `Content-Length` fields and a JSON body of `actual` bytes, then an appended request.
    static func smuggling(_ path: String, lengths: (Int, Int), body: String, authorization: String? = nil) -> String {
        var head = "POST \(path) HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        if let authorization { head += "Authorization: \(authorization)\r\n" }
        head += "Content-Length: \(lengths.0)\r\nContent-Length: \(lengths.1)\r\n\r\n"
        return head + body + "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"
    }

    static func expectRefused(_ answer: (received: String, closed: Bool), _ label: String) {
        #expect(answer.received.hasPrefix("HTTP/1.1 400 "), "\(label): \(answer.received.prefix(120).debugDescription)")
        #expect(answer.received.contains("malformedRequest"), "\(label): not the framing check's refusal")
        #expect(answer.closed, "\(label): the connection stayed open")
        let statuses = answer.received.components(separatedBy: "HTTP/1.1 ").dropFirst().map { $0.prefix(3) }
        #expect(statuses == ["400"], "\(label): more than one answer: \(answer.received.debugDescription)")
    }

    @Test func twoContentLengthsAreRefusedBeforeAnyHandlerOnEveryListener() async throws {
        let cluster = try await Cluster.start(accounts: ["alice"])
        let signIn = #"{"username":"alice","password":"password-alice","deviceName":"smuggled"}"#
        let delivery = #"{"to":"alice","from":"x@example.com","subject":"hidden","body":"b"}"#
        let ca = cluster.ca
        let apiPort = cluster.apiPort
        let metricsPort = cluster.metricsPort
        let token = cluster.deliveryToken.trimmingCharacters(in: .whitespacesAndNewlines)
        try await offPool {
            for (listener, port, trust) in [("TLS API", apiPort, Optional(ca)), ("plain metrics", metricsPort, nil)] {
                let count = signIn.utf8.count
                Self.expectRefused(
                    try Self.exchange(
                        Self.smuggling("/v1/session", lengths: (5, count), body: signIn), port: port, ca: trust),
                    "\(listener): session 5 then \(count)")
                Self.expectRefused(
                    try Self.exchange(
                        Self.smuggling("/v1/session", lengths: (count, count), body: signIn), port: port, ca: trust),
                    "\(listener): session \(count) twice")
                Self.expectRefused(
                    try Self.exchange(
                        Self.smuggling(
                            "/v1/deliveries", lengths: (delivery.utf8.count, 5), body: delivery,
                            authorization: "Bearer \(token)"), port: port, ca: trust),
                    "\(listener): delivery \(delivery.utf8.count) then 5")
            }
        }
        // Nothing was stored by the refused deliveries; a well-framed request is still served.
        let session = try await cluster.login("alice")
        let listing = try await cluster.call(.get, cluster.api + "/v1/messages", token: session)
        #expect(listing.status == 200)
        #expect((listing.body["messages"] as? [Any])?.isEmpty == true)
    }
}

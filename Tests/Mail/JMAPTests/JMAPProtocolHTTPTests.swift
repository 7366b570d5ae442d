import Foundation
import HTTPClient
import MailboxHTTPAPI
import MailboxService
import MailboxStore
import SignalDispatch
import TestSupport
import Testing

/// JMAP through mailboxd's listener (in process, plain HTTP, SQLite): Basic credentials under the sign-in
/// throttle, request bodies past JMAP's and the listener's limits, and blob downloads across accounts.
@Suite struct JMAPProtocolHTTPTests {
    final class Service: Sendable {
        static let maxBodySize = 64 * 1024

        let directory: TemporaryDirectory
        let service: MailboxService
        let client = HTTPClient(configuration: .init(httpVersion: .http1))
        var base: String { "http://127.0.0.1:\(service.port)" }

        init() async throws {
            directory = try TemporaryDirectory(prefix: "jmap-http")
            var configuration = ServiceConfiguration(dataDirectory: directory.path("data"), deliveryToken: "token")
            configuration.port = 0
            configuration.maxBodySize = Self.maxBodySize
            configuration.store.passwordParameters = .testing
            configuration.signIn.perUsernameAndAddress = 3
            configuration.signIn.perUsernameBeforeDelay = 1000
            service = try MailboxService(configuration: configuration, router: PushRouter([RecordingPushService()]))
            for name in ["alice", "bob"] {
                try await service.store.createAccount(username: name, password: "password-\(name)")
            }
        }

        func shutdown() async {
            await service.shutdown()
            client.shutdown()
        }

        static func basic(_ username: String, _ password: String) -> String {
            "Basic " + Data("\(username):\(password)".utf8).base64EncodedString()
        }

        func api(_ body: Data, authorization: String?) async throws -> HTTPClient.Response {
            var headers: HTTPHeaders = ["Content-Type": "application/json"]
            if let authorization { headers.add(name: "Authorization", value: authorization) }
            return try await client.execute(
                HTTPClient.Request(method: .post, url: base + "/jmap/api", headers: headers, body: body))
        }

        func get(_ path: String, authorization: String) async throws -> HTTPClient.Response {
            try await client.execute(HTTPClient.Request(url: base + path, headers: ["Authorization": authorization]))
        }

        func accountID(_ username: String) async throws -> Int64 {
            try #require(try await service.store.account(username: username)).id
        }
    }

    static func json(_ response: HTTPClient.Response) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: response.body) as? [String: Any])
    }

    static let echo = Data(
        #"{"using":["urn:ietf:params:jmap:core"],"methodCalls":[["Core/echo",{"hello":true},"c"]]}"#.utf8)

    @Test func failedBasicSignInsAreThrottledWith429AndAnErrorBody() async throws {
        let s = try await Service()
        let right = Service.basic("alice", "password-alice")
        #expect(try await s.api(Self.echo, authorization: right).status == 200)
        let anonymous = try await s.api(Self.echo, authorization: nil)
        #expect(anonymous.status == 401)
        #expect(anonymous.headers["WWW-Authenticate"]?.contains("Basic") == true)
        for _ in 0..<3 {
            let wrong = try await s.api(Self.echo, authorization: Service.basic("alice", "wrong"))
            #expect(wrong.status == 401)
            // RFC 9110 §15.5.2: every 401 carries a challenge. A wrong password's 401 comes from the sign-in
            // check, which adds none.
            #expect(wrong.headers["WWW-Authenticate"]?.contains("Basic") == true)
        }
        // Past the limit even the right password is refused from this address, until the window moves on.
        let throttled = try await s.api(Self.echo, authorization: right)
        #expect(throttled.status == 429)
        #expect(Int(throttled.headers["Retry-After"] ?? "") ?? 0 >= 1)
        let body = try Self.json(throttled)
        #expect(body["error"] as? String == "tooManyAttempts")
        #expect((body["message"] as? String)?.isEmpty == false)
        #expect(try await s.get("/.well-known/jmap", authorization: right).status == 429)
        // Another username from the same address is not locked out by alice's failures.
        #expect(try await s.api(Self.echo, authorization: Service.basic("bob", "password-bob")).status == 200)
        await s.shutdown()
    }

    @Test func bodiesPastMaxSizeRequestAreALimitAndPastTheListenersLimit413() async throws {
        let s = try await Service()
        let auth = Service.basic("alice", "password-alice")
        let session = try Self.json(try await s.get("/.well-known/jmap", authorization: auth))
        let core = try #require((session["capabilities"] as? [String: Any])?["urn:ietf:params:jmap:core"])
        let maxSizeRequest = try #require((core as? [String: Any])?["maxSizeRequest"] as? Int)
        #expect(maxSizeRequest == Service.maxBodySize / 2)

        func padded(_ size: Int) -> Data {
            let head = #"{"using":["urn:ietf:params:jmap:core"],"methodCalls":[],"pad":""#
            return Data((head + String(repeating: "x", count: size - head.utf8.count - 2) + "\"}").utf8)
        }
        #expect(try await s.api(padded(maxSizeRequest), authorization: auth).status == 200)

        let overJMAP = try await s.api(padded(maxSizeRequest + 1), authorization: auth)
        #expect(overJMAP.status == 400)
        #expect(overJMAP.headers["Content-Type"] == "application/problem+json")
        let problem = try Self.json(overJMAP)
        #expect(problem["type"] as? String == "urn:ietf:params:jmap:error:limit")
        #expect(problem["limit"] as? String == "maxSizeRequest")
        #expect(problem["status"] as? Int == 400)

        let overListener = try await s.api(padded(Service.maxBodySize + 1), authorization: auth)
        #expect(overListener.status == 413)
        #expect(try Self.json(overListener)["error"] as? String == "payloadTooLarge")

        let notJSON = try await s.api(Data("{\"using\":".utf8), authorization: auth)
        #expect(notJSON.status == 400)
        #expect(try Self.json(notJSON)["type"] as? String == "urn:ietf:params:jmap:error:notJSON")
        // The listener still serves the same client afterwards.
        #expect(try await s.api(Self.echo, authorization: auth).status == 200)
        await s.shutdown()
    }

    @Test func anotherAccountsBlobIsNotFoundNotForbidden() async throws {
        let s = try await Service()
        let alice = try await s.accountID("alice")
        let bob = try await s.accountID("bob")
        let mine = try await s.service.store.deliver(
            MessageParts.composed(to: "alice", from: "sender@example.com", subject: "mine", body: "Alice's text")
        ).id
        let theirs = try await s.service.store.deliver(
            MessageParts.composed(to: "bob", from: "sender@example.com", subject: "theirs", body: "Bob's text")
        ).id
        let auth = Service.basic("alice", "password-alice")

        let own = try await s.get(
            "/jmap/download/\(alice)/M\(mine)/mail.eml?accept=message/rfc822", authorization: auth)
        #expect(own.status == 200)
        #expect(String(decoding: own.body, as: UTF8.self).contains("Alice's text"))
        #expect(own.headers["Content-Type"] == "message/rfc822")

        for path in [
            "/jmap/download/\(alice)/M\(theirs)/mail.eml", "/jmap/download/\(bob)/M\(theirs)/mail.eml",
            "/jmap/download/\(bob)/M\(mine)/mail.eml", "/jmap/download/\(alice)/P\(theirs)_1/part.txt",
            "/jmap/download/\(alice)/Mnope/mail.eml",
        ] {
            let response = try await s.get(path, authorization: auth)
            #expect(response.status == 404, "\(path)")
            #expect(try Self.json(response)["error"] as? String == "notFound", "\(path)")
            #expect(!String(decoding: response.body, as: UTF8.self).contains("Bob's text"))
        }
        await s.shutdown()
    }
}

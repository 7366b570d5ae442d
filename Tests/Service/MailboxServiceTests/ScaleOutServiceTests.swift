import Foundation
import HTTPClient
import Locking
import MailboxStore
import OpenSSLCrypto
import Push
import SignalDispatch
import TestSupport
import Testing

@testable import MailboxService

/// mailboxd instances (in process, plain HTTP) sharing one real PostgreSQL database: a change written anywhere
/// wakes the dispatcher that sends its signal, login limits hold across instances, and a database outage is a
/// 503 that ends by itself.
@Suite("Scale-out service")
struct ScaleOutServiceTests {
    final class Instance: Sendable {
        let directory: TemporaryDirectory
        let service: MailboxService
        let client = HTTPClient(configuration: .init(httpVersion: .http1))
        var api: String { "http://127.0.0.1:\(service.port)" }

        init(database: String, name: String, sender: RecordingPushService, idleCheck: Double = 3600) throws {
            directory = try TemporaryDirectory(prefix: "scale-\(name)")
            var configuration = ServiceConfiguration(dataDirectory: directory.path("data"), deliveryToken: "t")
            configuration.database = .postgres(url: database)
            configuration.port = 0
            configuration.store.passwordParameters = .testing
            configuration.store.postgresConnections = 4
            configuration.store.instanceID = name
            var dispatcher = SignalDispatcher.Configuration()
            dispatcher.idleCheckInterval = idleCheck  // so only a notification can wake it
            service = try MailboxService(
                configuration: configuration, router: PushRouter([sender]), dispatcherConfiguration: dispatcher)
        }

        func shutdown() async {
            await service.shutdown()
            client.shutdown()
        }

        func call(
            _ method: HTTPMethod, _ path: String, token: String? = nil, json: String? = nil
        ) async throws
            -> (status: Int, body: [String: Any])
        {
            var headers: HTTPHeaders = ["Content-Type": "application/json"]
            if let token { headers.add(name: "Authorization", value: "Bearer \(token)") }
            let response = try await client.execute(
                HTTPClient.Request(method: method, url: api + path, headers: headers, body: json.map { Data($0.utf8) }))
            let object = (try? JSONSerialization.jsonObject(with: response.body)) as? [String: Any] ?? [:]
            return (response.status, object)
        }

        func login(_ name: String, password: String? = nil) async throws -> (status: Int, token: String?) {
            let secret = password ?? "password-\(name)"
            let result = try await call(
                .post, "/v1/session", json: #"{"username":"\#(name)","password":"\#(secret)"}"#)
            return (result.status, result.body["accessToken"] as? String)
        }
    }

    @Test func aChangeWrittenByAnyProcessWakesTheDispatcherAtOnce() async throws {
        let database = try PostgresServer.shared().makeDatabase()
        let sender = RecordingPushService()
        let a = try Instance(database: database, name: "a", sender: sender)
        let b = try Instance(database: database, name: "b", sender: sender)
        let alice = try await a.service.store.createAccount(username: "alice", password: "password-alice")
        let token = try #require(try await b.login("alice").token)
        let registered = try await a.call(
            .post, "/v1/devices", token: token,
            json:
                #"{"token":"\#(String(repeating: "ab", count: 32))","topic":"com.example.mail","environment":"sandbox"}"#
        )
        #expect(registered.status == 201)
        #expect(await eventually { sender.sent.count == 1 }, "the registration's signal")
        let key = try #require(SignalKey(base64URL: registered.body["signalKey"] as? String ?? ""))

        // A process with no dispatcher writes (as an MTA-facing or batch process would): the instances' dispatchers
        // sleep for an hour between polls, so only the notification at commit can wake one.
        let writer = try MailboxStore(database: .postgres(url: database))
        let receipt = try await writer.deliver(
            NewMessage(to: "alice", from: "x@example.com", subject: "Hello", body: "Body"))
        #expect(
            await eventually { sender.sent.last?.signal.tag == key.tag(of: receipt.state.description) },
            "a dispatcher woke for a change committed elsewhere")
        let listed = try await b.call(.get, "/v1/messages", token: token)
        #expect((listed.body["messages"] as? [[String: Any]])?.count == 1)
        #expect(alice.id > 0)
        await a.shutdown()
        await b.shutdown()
    }

    @Test func failedLoginsCountAcrossInstances() async throws {
        let database = try PostgresServer.shared().makeDatabase()
        let sender = RecordingPushService()
        let a = try Instance(database: database, name: "a", sender: sender)
        let b = try Instance(database: database, name: "b", sender: sender)
        try await a.service.store.createAccount(username: "alice", password: "password-alice")
        for _ in 0..<5 { #expect(try await a.login("alice", password: "wrong-password").status == 401) }
        // The sixth try goes to the other instance, as a load balancer would send it: still refused.
        #expect(try await b.login("alice", password: "wrong-password").status == 429)
        #expect(try await b.login("alice").status == 429, "even the right password waits out the window")
        await a.shutdown()
        await b.shutdown()
    }

    @Test func aDatabaseOutageIsA503ThatEndsByItself() async throws {
        let server = try PostgresServer.dedicated()
        let database = try server.makeDatabase()
        let instance = try Instance(database: database, name: "a", sender: RecordingPushService(), idleCheck: 1)
        try await instance.service.store.createAccount(username: "alice", password: "password-alice")
        let token = try #require(try await instance.login("alice").token)
        #expect(try await instance.call(.get, "/v1/messages", token: token).status == 200)

        try server.stop()
        let down = try await instance.call(.get, "/v1/messages", token: token)
        #expect(down.status == 503)
        #expect(down.body["error"] as? String == "storageUnavailable")
        #expect(try await instance.call(.get, "/healthz").status == 503, "a load balancer takes it out")
        let delivery = try await instance.call(
            .post, "/v1/deliveries", token: "t",
            json: #"{"to":"alice","from":"x@example.com","subject":"s","body":"b"}"#)
        #expect(delivery.status == 503)

        try server.start()
        // No restart of the instance: its connections come back on the next request.
        #expect(try await instance.call(.get, "/healthz").status == 200)
        #expect(try await instance.call(.get, "/v1/messages", token: token).status == 200)
        await instance.shutdown()
    }

    /// A JMAP event stream held on one instance hears a delivery another instance committed (its one-second look
    /// at the shared store), and one committed through its own instance at once (the commit's wake-up).
    @Test func anEventStreamHearsChangesCommittedThroughEitherInstance() async throws {
        let database = try PostgresServer.shared().makeDatabase()
        let sender = RecordingPushService()
        let a = try Instance(database: database, name: "a", sender: sender)
        let b = try Instance(database: database, name: "b", sender: sender)
        _ = try await a.service.store.createAccount(username: "alice", password: "password-alice")
        let curl = try requireTool("curl")
        let basic = "Basic " + Data("alice:password-alice".utf8).base64EncodedString()
        func stream(then deliver: Instance) async throws -> String {
            let listener = try ChildProcess(
                curl,
                [
                    "-sN", "-H", "Authorization: \(basic)",
                    a.api + "/jmap/eventsource?types=Email&closeafter=state&ping=0",
                ],
                logDirectory: a.directory.url.path)
            // The stream is open, with its baseline taken, once its opening comment arrives.
            let opened = try await offPool { listener.waitForOutput(timeout: 30) { $0.contains(": stream opened") } }
            #expect(opened, "the event stream did not open: \(listener.errorOutput)")
            _ = try await deliver.service.store.deliver(
                NewMessage(to: "alice", from: "x@example.com", subject: "Hello", body: "Body"))
            _ = await eventually { !listener.isRunning }
            listener.stop()
            return listener.output
        }
        let other = try await stream(then: b)
        let own = try await stream(then: a)
        await a.shutdown()
        await b.shutdown()
        #expect(other.contains("event: state") && other.contains("\"Email\""), "\(other)")
        #expect(own.contains("event: state"), "\(own)")
    }
}

import Durations
import Foundation
import JMAP
import JSONText
import MailboxHTTPAPI
import MailboxStore
import TestSupport
import Testing

/// The engines the JMAP protocol suite runs on: every test at the `JMAPServer` level takes one as its argument.
enum JMAPEngine: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres

    var testDescription: String { rawValue }
}

/// One method response: `[name, arguments, method call id]`.
struct MethodResponse {
    var name: String
    var arguments: JSONValue
    var callID: String

    /// A string argument.
    func string(_ key: String) -> String? { arguments[key]?.string }
    /// A list of strings argument (`[]` when absent or not a list of strings).
    func strings(_ key: String) -> [String] { arguments[key]?.array?.compactMap(\.string) ?? [] }
    /// A `/get`'s `list` (`[]` when absent).
    var list: [JSONValue] { arguments["list"]?.array ?? [] }
    /// The `id`s of a `/get`'s `list`.
    var listIDs: [String] { list.compactMap { $0["id"]?.string } }
    /// An error response's `type`.
    var errorType: String? { name == "error" ? string("type") : nil }
}

/// A store of its own on one engine (a temporary SQLite file, or a fresh database on the test process's PostgreSQL
/// server), with a clock the test moves, two accounts, and the JMAP API over it.
final class JMAPFixture: Sendable {
    static let using: JSONValue = [.string(JMAPCapability.core), .string(JMAPCapability.mail)]
    static let baseURL = "https://mail.example.test"

    let directory: TemporaryDirectory
    let store: MailboxStore
    let clock: ManualClock
    let server: JMAPServer
    let alice: JMAPAccount
    let bob: JMAPAccount

    init(
        _ engine: JMAPEngine, limits: JMAPLimits = JMAPLimits(), tombstoneRetention: TimeInterval = 30 * 86_400
    ) async throws {
        directory = try TemporaryDirectory(prefix: "jmap")
        let database: StoreDatabase
        switch engine {
        case .sqlite: database = .sqlite(path: directory.path("mail.sqlite"))
        case .postgres: database = .postgres(url: try PostgresServer.shared().makeDatabase())
        }
        let clock = ManualClock(start: Date(timeIntervalSince1970: 1_800_000_000))
        var configuration = MailboxStore.Configuration()
        configuration.passwordParameters = .testing
        configuration.tombstoneRetention = tombstoneRetention
        configuration.postgresConnections = 2
        store = try MailboxStore(database: database, configuration: configuration, clock: clock)
        self.clock = clock
        server = JMAPServer(store: store, limits: limits)
        let alice = try await store.createAccount(username: "alice", password: "password-alice")
        let bob = try await store.createAccount(username: "bob", password: "password-bob")
        self.alice = JMAPAccount(id: alice.id, username: alice.username)
        self.bob = JMAPAccount(id: bob.id, username: bob.username)
    }

    /// Delivers a message made of fields (as `POST /v1/deliveries` does) and returns its email id.
    @discardableResult
    func deliver(to account: JMAPAccount, subject: String = "Hello") async throws -> String {
        try await store.deliver(
            MessageParts.composed(
                to: account.username, from: "sender@example.com", subject: subject, body: "Body of \(subject)")
        ).id
    }

    /// Delivers a raw RFC 5322 message as the LMTP listener does and returns its email id.
    @discardableResult
    func ingest(_ raw: String, to account: JMAPAccount) async throws -> String {
        let message = MessageParts.ingested(
            Array(raw.utf8), recipient: account.username, envelopeSender: "envelope@example.org")
        return try await store.deliver(message).id
    }

    /// Sends a raw request body as `account`.
    func send(_ body: Data, as account: JMAPAccount? = nil) async -> Result<JSONValue, JMAPRequestError> {
        await server.handle(body, account: account ?? alice, baseURL: Self.baseURL)
    }

    /// Sends `methodCalls` (each `[name, arguments, id]`) with `using`, as `account`; the request must succeed.
    func request(
        _ methodCalls: [JSONValue], using: JSONValue = JMAPFixture.using, as account: JMAPAccount? = nil
    ) async throws -> [MethodResponse] {
        let body: JSONValue = ["using": using, "methodCalls": .array(methodCalls)]
        let response = try await send(Data(body.json.utf8), as: account).get()
        let invocations = try #require(response["methodResponses"]?.array)
        return try invocations.map { invocation in
            let parts = try #require(invocation.array)
            try #require(parts.count == 3)
            return MethodResponse(
                name: try #require(parts[0].string), arguments: parts[1], callID: try #require(parts[2].string))
        }
    }

    /// One method call for `account` (its `accountId` added): its one response.
    func call(
        _ name: String, _ arguments: [String: JSONValue] = [:], as account: JMAPAccount? = nil
    ) async throws -> MethodResponse {
        var arguments = arguments
        arguments["accountId"] = arguments["accountId"] ?? .string((account ?? alice).jmapID)
        let responses = try await request([[.string(name), .object(arguments), "c0"]], as: account)
        try #require(responses.count == 1)
        return responses[0]
    }

    /// The account's current Email state.
    func emailState(_ account: JMAPAccount? = nil) async throws -> String {
        try #require(try await call("Email/get", ["ids": []], as: account).string("state"))
    }
}

/// The request-level error of a refused request (`nil` when the request was answered).
func requestError(_ result: Result<JSONValue, JMAPRequestError>) -> JMAPRequestError? {
    if case .failure(let error) = result { return error }
    return nil
}

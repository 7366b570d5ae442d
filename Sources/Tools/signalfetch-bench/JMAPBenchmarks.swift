import Foundation
import HTTPServer
import JMAP
import MailboxHTTPAPI
import MailboxStore
import OpenSSLCrypto
import ServiceMetrics
import SignalDispatch

/// What a JMAP client's sync costs: `Email/changes` and `Email/get` (with the text bodies, as `/v1/changes`
/// inlines them) for 100 new messages, in a small and a large mailbox, and against the same sync through
/// `/v1/changes`. Both go through the API's router in this process: authentication, the handler, the store and the
/// JSON, without the TLS and HTTP parsing both paths share.
enum JMAPBenchmarks {
    /// One account's sync through the router, from the state before its 100 newest messages.
    struct Sync {
        let router: Router
        let token: String
        let accountID: Int64
        let since: SyncState

        /// The time of one JMAP sync (`Email/changes`, then `Email/get` of what it created), in milliseconds.
        func jmap() async throws -> Double {
            let body = """
                {"using":["urn:ietf:params:jmap:core","urn:ietf:params:jmap:mail"],"methodCalls":[\
                ["Email/changes",{"accountId":"\(accountID)","sinceState":"\(since)","maxChanges":500},"c"],\
                ["Email/get",{"accountId":"\(accountID)","#ids":{"resultOf":"c","name":"Email/changes",\
                "path":"/created"},"properties":["id","threadId","mailboxIds","keywords","from","to","subject",\
                "receivedAt","size","preview","textBody","bodyValues"],"fetchTextBodyValues":true},"g"]]}
                """
            let request = HTTPRequest(
                method: "POST", path: "/jmap/api",
                headers: ["Authorization": "Bearer \(token)", "Host": "127.0.0.1:8443"],
                body: Data(body.utf8))
            let start = ContinuousClock.now
            let response = try await router.handle(request)
            let elapsed = seconds(since: start) * 1000
            guard response.status == .ok,
                let object = try JSONSerialization.jsonObject(with: response.body) as? [String: Any],
                let calls = object["methodResponses"] as? [[Any]], calls.count == 2,
                let get = calls[1][1] as? [String: Any], (get["list"] as? [Any])?.count == 100
            else { throw BenchError("the JMAP sync did not return the 100 new emails") }
            return elapsed
        }

        /// The time of the same sync through `GET /v1/changes`, in milliseconds.
        func v1() async throws -> Double {
            let request = HTTPRequest(
                method: "GET", path: "/v1/changes", queryString: "since=\(since)&max=500",
                headers: ["Authorization": "Bearer \(token)"])
            let start = ContinuousClock.now
            let response = try await router.handle(request)
            let elapsed = seconds(since: start) * 1000
            guard response.status == .ok,
                let object = try JSONSerialization.jsonObject(with: response.body) as? [String: Any],
                (object["created"] as? [Any])?.count == 100
            else { throw BenchError("/v1/changes did not return the 100 new messages") }
            return elapsed
        }
    }

    /// The router over `fixture`'s store, with a session for its account.
    static func sync(_ fixture: StoreBenchmarks.ChangesFixture) async throws -> Sync {
        let api = MailboxAPI(
            store: fixture.store, configuration: .init(deliveryToken: SecureRandom.base64URL(24)), metrics: Metrics(),
            push: PushRouter([]))
        let token = SecureRandom.base64URL(32)
        _ = try await fixture.store.createSession(
            accountID: fixture.accountID, tokenHash: SHA256.hash(token), deviceName: "bench")
        return Sync(router: api.router, token: token, accountID: fixture.accountID, since: fixture.since)
    }

    /// Medians (ms) of a JMAP sync in the small and the large mailbox, and of the `/v1/changes` sync in the small
    /// one, sampled in turn so all three see the same machine.
    static func syncLatency(
        small: StoreBenchmarks.ChangesFixture, large: StoreBenchmarks.ChangesFixture
    ) async throws -> (jmapSmall: Double, jmapLarge: Double, v1Small: Double) {
        let smallSync = try await sync(small)
        let largeSync = try await sync(large)
        var samples: [[Double]] = [[], [], []]
        for round in 0..<105 {
            let taken = [try await smallSync.jmap(), try await largeSync.jmap(), try await smallSync.v1()]
            guard round >= 5 else { continue }  // the first rounds warm the caches
            for (index, value) in taken.enumerated() { samples[index].append(value) }
        }
        let medians = samples.map { $0.sorted()[$0.count / 2] }
        return (medians[0], medians[1], medians[2])
    }
}

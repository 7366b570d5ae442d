import Foundation
import HTTPClient
import TestSupport
import Testing

/// mailboxd on a PostgreSQL that is not always there: a database not up at start-up, and a two-node cluster run by
/// pg_auto_failover whose primary is killed under it.
@Suite("Failover", .serialized)
struct FailoverServiceTests {
    @Test func aDatabaseNotUpAtStartUpIsWaitedForWhileHealthzAnswers503() async throws {
        let server = try PostgresServer.dedicated()
        try server.stop()
        let directory = try TemporaryDirectory(prefix: "failover-startup")
        let data = directory.path("data")
        _ = try Subprocess.run(TestEnvironment.executable("mailboxd").path, ["dev-setup", "--data-dir", data])
        let port = freeLocalPort()
        // Neither host is up: the first never will be, the second is the server stopped above.
        let url =
            "postgresql://postgres@127.0.0.1:\(freeLocalPort()),127.0.0.1:\(server.port)/postgres"
            + "?target_session_attrs=read-write"
        let mailboxd = try ChildProcess(
            TestEnvironment.executable("mailboxd").path,
            [
                "serve", "--data-dir", data, "--listen", "127.0.0.1:\(port)", "--apns-topic", "com.example.a",
                "--database", url,
            ], logDirectory: directory.url.path)
        defer { mailboxd.stop() }
        try #require(waitForPort(port), "mailboxd did not listen while waiting: \(mailboxd.errorOutput)")
        let client = HTTPClient(configuration: .init(httpVersion: .http1, tls: .init(caFile: data + "/tls/ca.pem")))
        defer { client.shutdown() }
        let waiting = try await client.execute(HTTPClient.Request(url: "https://127.0.0.1:\(port)/healthz"))
        #expect(waiting.status == 503)
        let body = try JSONSerialization.jsonObject(with: waiting.body) as? [String: Any]
        #expect(body?["error"] as? String == "storageUnavailable", "\(String(decoding: waiting.body, as: UTF8.self))")
        #expect(waiting.headers["Retry-After"] != nil)
        let api = try await client.execute(
            HTTPClient.Request(method: .post, url: "https://127.0.0.1:\(port)/v1/session", body: Data("{}".utf8)))
        #expect(api.status == 503, "every path waits for the store")
        #expect(mailboxd.isRunning, "it keeps trying rather than exiting: \(mailboxd.errorOutput)")
        #expect(mailboxd.errorOutput.contains("is unavailable"), "\(mailboxd.errorOutput)")
        #expect(mailboxd.errorOutput.contains("trying again in"), "\(mailboxd.errorOutput)")

        try await offPool { try server.start() }
        let started = await eventually(timeout: .seconds(60)) {
            (try? await client.execute(HTTPClient.Request(url: "https://127.0.0.1:\(port)/healthz")))?.status == 200
        }
        #expect(started, "it started once the database answered: \(mailboxd.errorOutput)")
        #expect(mailboxd.errorOutput.contains("the database answers; starting"), "\(mailboxd.errorOutput)")
    }

    @Test func deliveriesAcrossAFailoverAreAnswered503UntilTheStandbyIsPromotedAndTheDeviceConverges()
        async throws
    {
        let postgres = try await offPool { try PostgresCluster() }
        let cluster = try await Cluster.start(accounts: [], mailboxdArguments: ["--database", postgres.url])
        try await cluster.addAccount("alice", database: postgres.url)
        let session = try await cluster.login("alice")
        let token = try await cluster.registerDevice(session: session)
        let stream = try await cluster.notifications(token)
        let first = try await cluster.deliver(to: "alice", subject: "before", body: "x")
        _ = await stream.waitFor(count: 1)

        try await offPool { _ = try postgres.killPrimary() }
        var statuses: [Int: Int] = [:]
        var delivered: [String: Any]?
        _ = try await eventually(timeout: .seconds(90)) {
            let result = try await cluster.call(
                .post, cluster.api + "/v1/deliveries", token: cluster.deliveryToken,
                json: ["to": "alice", "from": "s@example.com", "subject": "after", "body": "y"])
            statuses[result.status, default: 0] += 1
            if result.status == 201 { delivered = result.body }
            return delivered != nil
        }
        let after = try #require(delivered, "no delivery succeeded after the failover: \(statuses)")
        #expect(Set(statuses.keys).isSubset(of: [201, 503]), "only 503 while the database was away: \(statuses)")

        // Both deliveries are there, and the device is signalled with the newest state.
        let listed = try await cluster.call(.get, cluster.api + "/v1/messages", token: session)
        let ids = Set((listed.body["messages"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String })
        #expect(ids == Set([first["id"] as? String, after["id"] as? String].compactMap { $0 }))
        let state = try #require(after["state"] as? String)
        let tag = try #require(cluster.tag(of: state, device: token))
        #expect(
            await stream.waitForPayload(containing: tag),
            "the device got no signal for the state after the failover")
        let health = try await cluster.call(.get, cluster.api + "/healthz")
        #expect(health.status == 200)
    }
}

import Foundation
import TestSupport
import Testing

/// mailboxd's push senders through a real HTTP proxy (Debian's tinyproxy): the signal reaches apns-sim through the
/// proxy's tunnel, and while the proxy is down the signal waits in the outbox and is sent once it is back.
@Suite(.serialized) struct PushProxyTests {
    @Test func signalsGoThroughTheProxyAndWaitForItWhenItIsDown() async throws {
        let directory = try TemporaryDirectory(prefix: "push-proxy")
        let credentials = (user: "mailboxd", password: "proxy-pw-\(UUID().uuidString.prefix(8))")
        var proxy = try TinyProxy.start(in: directory.url.path, credentials: credentials)
        let cluster = try await Cluster.start(mailboxdArguments: ["--push-proxy", proxy.url(credentials: credentials)])
        #expect(cluster.mailboxd.errorOutput.contains("push services through the proxy 127.0.0.1:\(proxy.port)"))
        #expect(!cluster.mailboxd.errorOutput.contains(credentials.password))
        let session = try await cluster.login("alice")
        let token = try await cluster.registerDevice(session: session)
        let stream = try await cluster.notifications(token)
        _ = await stream.waitFor(count: 1)  // registration signals the current state

        let first = try await cluster.deliver(to: "alice", subject: "through the proxy", body: "x")
        let firstState = try #require(first["state"] as? String)
        let firstTag = try #require(cluster.tag(of: firstState, device: token))
        #expect(await stream.waitForPayload(containing: firstTag, timeout: 30), "\(cluster.mailboxd.errorOutput)")
        // The tunnel went to apns-sim's sandbox listener; the proxy saw that and nothing of the request inside.
        #expect(proxy.log.contains("CONNECT 127.0.0.1:\(cluster.sandboxPort)"), "\(proxy.log)")
        #expect(!proxy.log.contains("/3/device"))

        // The proxy goes down: the next signal fails, is kept in the outbox and retried.
        proxy.kill()
        let second = try await cluster.deliver(to: "alice", subject: "while the proxy is down", body: "y")
        let secondState = try #require(second["state"] as? String)
        let secondTag = try #require(cluster.tag(of: secondState, device: token))
        let failed = await eventually {
            let page = try? await cluster.call(.get, cluster.metrics)
            let metrics = String(decoding: page?.data ?? Data(), as: UTF8.self)
            return metrics.split(separator: "\n").contains { $0.hasPrefix("mailboxd_signals_failed_total{") }
        }
        #expect(failed, "no failed attempt counted while the proxy was down")
        // Back on the same port: the kept signal goes out, nothing lost.
        proxy = try TinyProxy.start(in: directory.url.path, port: proxy.port, credentials: credentials)
        #expect(await stream.waitForPayload(containing: secondTag, timeout: 90), "\(cluster.mailboxd.errorOutput)")
    }
}

import Foundation
import HTTPClient
import TestSupport
import Testing

/// mailboxd's push senders through a real HTTP proxy (Debian's tinyproxy): the signal reaches apns-sim through the
/// proxy's tunnel, and while the proxy is down the signal waits in the outbox and is sent once it is back; with the
/// three simulators serving only the proxy's outgoing address, APNs, FCM (its token endpoint too) and Web Push
/// signals arrive, so they went through it.
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

    @Test func everyServiceIsReachedOnlyThroughTheProxy() async throws {
        let directory = try TemporaryDirectory(prefix: "push-proxy-only")
        // The proxy connects out from 127.0.0.2; the simulators serve that address only.
        let proxy = try TinyProxy.start(in: directory.url.path, outgoingAddress: "127.0.0.2")
        let onlyTheProxy = ["--allow-peer", "127.0.0.2"]
        let cluster = try await Cluster.start(
            accounts: ["alice"], mailboxdArguments: ["--push-proxy", proxy.url()], simArguments: onlyTheProxy,
            fcm: true, fcmSimArguments: onlyTheProxy, webpush: true, webPushSimArguments: onlyTheProxy)
        let fcmPort = try #require(cluster.fcmPorts?.provider)
        let webPushPort = try #require(cluster.webPushPorts?.provider)
        let providerPorts = [cluster.providerPort, cluster.sandboxPort, fcmPort, webPushPort]

        // A direct connection to any provider listener is closed before TLS.
        let curl = try requireTool("curl")
        for port in providerPorts {
            let direct = try await offPool {
                try Subprocess.run(curl, ["-sk", "--max-time", "10", "-o", "/dev/null", "https://127.0.0.1:\(port)/"])
            }
            #expect(direct.status != 0, "a direct connection to port \(port) was served")
        }

        let session = try await cluster.login("alice")
        let iphone = try await cluster.registerDevice(session: session)
        let apns = try await cluster.notifications(iphone)
        let android = try await cluster.registerAndroidDevice(session: session)
        let fcm = try await cluster.messages(android.token)
        let browser = try await cluster.registerBrowser(session: session)
        let response = try await cluster.client.stream(
            HTTPClient.Request(url: cluster.webPush + "/sim/subscriptions/\(browser.id)/messages"))
        try #require(response.status == 200)
        let web = WebPushMessages(response: response)

        let receipt = try await cluster.deliver(to: "alice", subject: "only through the proxy", body: "x")
        let state = try #require(receipt["state"] as? String)
        let apnsTag = try #require(cluster.tag(of: state, device: iphone))
        let fcmTag = try #require(cluster.tag(of: state, device: android.token))
        let webTag = try #require(cluster.tag(of: state, device: browser.id))
        #expect(await apns.waitForPayload(containing: apnsTag, timeout: 30), "APNs: \(cluster.mailboxd.errorOutput)")
        #expect(await fcm.waitForPayload(containing: fcmTag, timeout: 30), "FCM: \(cluster.mailboxd.errorOutput)")
        #expect(await web.waitFor(tag: webTag) != nil, "Web Push: \(cluster.mailboxd.errorOutput)")
        // Each service's tunnel (FCM's token endpoint shares its listener) went through the proxy.
        for port in [cluster.sandboxPort, fcmPort, webPushPort] {
            #expect(proxy.log.contains("CONNECT 127.0.0.1:\(port)"), "no tunnel to \(port): \(proxy.log)")
        }
    }
}

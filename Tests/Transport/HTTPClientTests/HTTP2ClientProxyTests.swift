import Foundation
import HTTP2Client
import HTTP2Server
import TestSupport
import Testing

/// HTTP2Client through a real HTTP proxy (Debian's tinyproxy) with `CONNECT`: TLS and HTTP/2 end to end inside the
/// tunnel, credentials, the `NO_PROXY` list, and the address check applied before the proxy is asked.
@Suite(.serialized) struct HTTP2ClientProxyTests {
    struct Fixture {
        let directory: TemporaryDirectory
        let certificates: TestCertificates
        let server: HTTP2Server

        init() throws {
            directory = try TemporaryDirectory()
            certificates = try TestCertificates.make(in: directory, name: "trusted")
            server = HTTP2Server(
                configuration: HTTP2ServerConfiguration(
                    tls: .init(
                        certificateChainPath: certificates.serverCertificate, privateKeyPath: certificates.serverKey))
            ) { request in
                HTTP2Response(status: 200, headers: [], body: Data("through \(request.path)".utf8))
            }
            try server.start()
        }

        func client(
            proxy: HTTP2Client.Proxy?, host: String = "127.0.0.1", permitsAddress: (@Sendable (String) -> Bool)? = nil
        ) -> HTTP2Client {
            HTTP2Client(
                configuration: .init(
                    baseURL: "https://\(host):\(server.port)", tls: .init(caFile: certificates.caCertificate),
                    connectTimeout: .seconds(10), permitsAddress: permitsAddress, proxy: proxy))
        }
    }

    @Test func aRequestGoesThroughTheProxysTunnelWithItsCredentials() async throws {
        let fixture = try Fixture()
        let proxy = try TinyProxy.start(in: fixture.directory.url.path, credentials: ("mail", "s3cret-pw"))
        let client = fixture.client(
            proxy: try HTTP2Client.Proxy(url: "http://mail:s3cret-pw@127.0.0.1:\(proxy.port)"))
        defer { client.shutdown() }
        let response = try await client.execute(.init(path: "/hello"))
        #expect(response.status == 200)
        #expect(String(decoding: response.body, as: UTF8.self) == "through /hello")
        // The proxy saw the tunnel to the origin and nothing of the request inside it.
        let seen = proxy.log
        #expect(seen.contains("CONNECT 127.0.0.1:\(fixture.server.port)"), "\(seen)")
        #expect(!seen.contains("/hello"))
    }

    @Test func wrongCredentialsFailWithTheProxysStatusAndNeverThePassword() async throws {
        let fixture = try Fixture()
        let proxy = try TinyProxy.start(in: fixture.directory.url.path, credentials: ("mail", "s3cret-pw"))
        let client = fixture.client(
            proxy: try HTTP2Client.Proxy(url: "http://mail:wrong-pw@127.0.0.1:\(proxy.port)"))
        defer { client.shutdown() }
        do {
            _ = try await client.execute(.init(path: "/hello"))
            Issue.record("a tunnel was opened with the wrong credentials")
        } catch {
            // 407 is the standard answer; tinyproxy answers CONNECT with 401.
            #expect(
                [
                    HTTPClientError.connectionFailed("the proxy refused the tunnel: HTTP 407"),
                    .connectionFailed("the proxy refused the tunnel: HTTP 401"),
                ].contains(error))
            #expect(!"\(error)".contains("wrong-pw"))
        }
    }

    @Test func aHostOnTheNoProxyListIsReachedDirectly() async throws {
        let fixture = try Fixture()
        // The proxy's port is closed: only a direct connection can succeed.
        let closed = freeLocalPort()
        let proxy = try HTTP2Client.Proxy(url: "http://127.0.0.1:\(closed)", noProxy: "example.test, localhost")
        #expect(!proxy.applies(to: "localhost") && !proxy.applies(to: "push.example.test"))
        #expect(proxy.applies(to: "127.0.0.1") && proxy.applies(to: "example.org"))
        let direct = fixture.client(proxy: proxy, host: "localhost")
        defer { direct.shutdown() }
        #expect(try await direct.execute(.init(path: "/direct")).status == 200)
        let proxied = fixture.client(proxy: proxy)
        defer { proxied.shutdown() }
        await #expect(throws: HTTPClientError.self) { try await proxied.execute(.init(path: "/direct")) }
    }

    @Test func theAddressCheckComesFirstAndTheTunnelGoesToTheCheckedAddress() async throws {
        let fixture = try Fixture()
        let proxy = try TinyProxy.start(in: fixture.directory.url.path)
        let settings = try HTTP2Client.Proxy(url: "http://127.0.0.1:\(proxy.port)")
        let refusing = fixture.client(proxy: settings, host: "localhost", permitsAddress: { _ in false })
        defer { refusing.shutdown() }
        await #expect(throws: HTTPClientError.connectionFailed("no address of localhost is permitted")) {
            try await refusing.execute(.init(path: "/x"))
        }
        let checked = fixture.client(proxy: settings, host: "localhost", permitsAddress: { $0 == "127.0.0.1" })
        defer { checked.shutdown() }
        #expect(try await checked.execute(.init(path: "/checked")).status == 200)
        let seen = proxy.log
        #expect(seen.contains("CONNECT 127.0.0.1:\(fixture.server.port)"), "\(seen)")
        #expect(!seen.contains("CONNECT localhost"))
    }

    @Test func badProxyURLsAreRefused() {
        for url in [
            "https://127.0.0.1:3128", "http://127.0.0.1", "http://127.0.0.1:0", "http://127.0.0.1:3128/path",
            "http://user@127.0.0.1:3128", "http://:3128", "127.0.0.1:3128",
        ] {
            #expect(throws: HTTPClientError.self, "\(url)") { try HTTP2Client.Proxy(url: url) }
        }
        let parsed = try? HTTP2Client.Proxy(url: "http://us%40er:p%3Ass@[::1]:8080/")
        #expect(parsed?.host == "::1" && parsed?.port == 8080 && parsed?.credentials == "us@er:p:ss")
    }
}

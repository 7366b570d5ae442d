import Push
import Testing

@testable import PushWebPush

/// The outbound-request rules, on the URL alone: this suite opens no socket.
@Suite struct WebPushEndpointPolicyTests {
    let policy = WebPushEndpointPolicy()

    func refusal(_ endpoint: String, _ policy: WebPushEndpointPolicy = WebPushEndpointPolicy()) -> String? {
        do {
            _ = try policy.check(endpoint)
            return nil
        } catch {
            #expect(error.code == "invalidEndpoint")
            #expect(!error.message.contains(endpoint))
            return error.message
        }
    }

    @Test func publicHttpsEndpointsAreSplitIntoOriginAndPath() throws {
        let mozilla = try policy.check("https://updates.push.services.mozilla.com/wpush/v2/gAAAAABk?x=1")
        #expect(mozilla.origin == "https://updates.push.services.mozilla.com")
        #expect(mozilla.path == "/wpush/v2/gAAAAABk?x=1")
        let withPort = try policy.check("https://Push.Example.com:8443/p/1")
        #expect(withPort.origin == "https://push.example.com:8443")
        #expect(withPort.port == 8443)
        let v6 = try policy.check("https://[2001:4860:4860::8888]/send")
        #expect(v6.origin == "https://[2001:4860:4860::8888]")
        #expect(try policy.check("https://93.184.216.34/x").host == "93.184.216.34")
    }

    @Test(arguments: [
        "http://push.example.com/x", "ftp://push.example.com/x", "push.example.com/x", "https:///x",
        "https://user:pw@push.example.com/x", "https://push.example.com/x#frag", "https://push.example.com/a b",
    ])
    func onlyPlainHttpsURLsAreAccepted(endpoint: String) {
        #expect(refusal(endpoint) != nil)
    }

    @Test func anOversizedEndpointIsRefused() {
        #expect(refusal("https://push.example.com/" + String(repeating: "a", count: 1100))?.contains("longer") == true)
    }

    @Test(arguments: [
        ("https://127.0.0.1/x", "loopback"), ("https://127.0.0.2:4443/x", "loopback"), ("https://[::1]/x", "loopback"),
        ("https://localhost/x", "loopback"), ("https://localhost./x", "loopback"),
        ("https://a.localhost/x", "loopback"),
        ("https://127.1/x", "loopback"), ("https://2130706433/x", "loopback"), ("https://0x7f.1/x", "loopback"),
        ("https://[::ffff:127.0.0.1]/x", "loopback"), ("https://10.1.2.3/x", "private"),
        ("https://172.16.0.1/x", "private"), ("https://172.31.255.255/x", "private"),
        ("https://192.168.1.1/x", "private"), ("https://[fd00::1]/x", "private"), ("https://[fc00::1]/x", "private"),
        ("https://169.254.169.254/latest", "link-local"), ("https://[fe80::1]/x", "link-local"),
        ("https://100.64.0.1/x", "shared"), ("https://0.0.0.0/x", "unspecified"), ("https://[::]/x", "unspecified"),
        ("https://224.0.0.1/x", "multicast"), ("https://[ff02::1]/x", "multicast"),
        ("https://[64:ff9b::a00:1]/x", "private"),
    ])
    func internalAddressesAreRefused(endpoint: String, range: String) {
        #expect(refusal(endpoint)?.contains(range) == true)
    }

    @Test func publicNeighboursOfInternalRangesAreAccepted() throws {
        for host in ["172.15.255.255", "172.32.0.1", "11.0.0.1", "100.128.0.1", "169.253.1.1", "[2001:db8::1]"] {
            #expect(throws: Never.self) { try policy.check("https://\(host)/x") }
        }
    }

    @Test func anAllowedHostIsExemptWithOrWithoutItsPort() throws {
        let byPort = WebPushEndpointPolicy(allowedHosts: ["127.0.0.1:4443"])
        #expect(try byPort.check("https://127.0.0.1:4443/push/1").origin == "https://127.0.0.1:4443")
        #expect(refusal("https://127.0.0.1:4444/push/1", byPort) != nil)
        #expect(refusal("https://127.0.0.2:4443/push/1", byPort) != nil)
        let byHost = WebPushEndpointPolicy(allowedHosts: ["WebPush-Sim"])
        #expect(try byHost.check("https://webpush-sim:2201/push/1").host == "webpush-sim")
        let v6 = WebPushEndpointPolicy(allowedHosts: ["[::1]:4443"])
        #expect(try v6.check("https://[::1]:4443/p").origin == "https://[::1]:4443")
    }

    @Test func resolvedAddressesArePermittedOnlyWhenPublic() {
        #expect(WebPushEndpointPolicy.permitsAddress("93.184.216.34"))
        #expect(WebPushEndpointPolicy.permitsAddress("2606:4700::1111"))
        for address in ["127.0.0.1", "10.0.0.1", "::1", "fe80::1%eth0", "169.254.169.254", "::ffff:10.0.0.1", ""] {
            #expect(!WebPushEndpointPolicy.permitsAddress(address))
        }
    }
}

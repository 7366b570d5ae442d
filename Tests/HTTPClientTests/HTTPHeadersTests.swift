import Testing

@testable import HTTPClient

@Suite struct HTTPHeadersTests {
    @Test func lookupIsCaseInsensitiveAndKeepsOrder() {
        var headers: HTTPHeaders = ["Content-Type": "application/json", "X-Trace": "a"]
        headers.add(name: "x-trace", value: "b")
        #expect(headers["content-type"] == "application/json")
        #expect(headers["CONTENT-TYPE"] == "application/json")
        #expect(headers.values(for: "X-TRACE") == ["a", "b"])
        #expect(headers.map(\.name) == ["Content-Type", "X-Trace", "x-trace"])
        #expect(headers["missing"] == nil)
    }

    @Test func replaceOrAddKeepsOneFieldInPlace() {
        var headers = HTTPHeaders([("A", "1"), ("B", "2"), ("a", "3"), ("C", "4")])
        headers.replaceOrAdd(name: "a", value: "9")
        #expect(headers.map(\.name) == ["A", "B", "C"])
        #expect(headers["A"] == "9")
        headers.replaceOrAdd(name: "D", value: "5")
        #expect(headers["d"] == "5")
        headers.remove(name: "b")
        #expect(!headers.contains("B"))
        #expect(headers.count == 3)
    }

    @Test func descriptionNamesFieldsWithoutValues() {
        let headers: HTTPHeaders = ["Authorization": "bearer secret-token-value"]
        #expect(headers.description.contains("Authorization"))
        #expect(!headers.description.contains("secret"))
    }

    @Test func pinsAreFormattedForLibcurl() {
        let tls = TLSConfiguration(pinnedPublicKeys: ["AAAA", "sha256//BBBB"])
        #expect(tls.curlPinnedPublicKey == "sha256//AAAA;sha256//BBBB")
        #expect(TLSConfiguration().curlPinnedPublicKey == nil)
    }
}

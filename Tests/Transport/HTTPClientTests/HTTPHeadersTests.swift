import Testing

@testable import HTTPClient

@Suite struct HTTPHeadersTests {
    @Test(arguments: [
        ("Content-Type: application/json\r\n", "Content-Type", "application/json"),
        ("  X-Spaced \t:  a value  with spaces \t\r\n", "X-Spaced", "a value  with spaces"),
        ("x-url: https://example.com:8443/path\r\n", "x-url", "https://example.com:8443/path"),
        ("x-empty:\r\n", "x-empty", ""),
        ("x-bare-lf: v\n", "x-bare-lf", "v"),
        ("x-utf8: caf\u{E9}\r\n", "x-utf8", "caf\u{E9}"),
    ])
    func headerLinesSplitAtTheFirstColon(_ line: String, _ name: String, _ value: String) {
        let field = Array(line.utf8).withUnsafeBytes { Transfer.headerField($0) }
        #expect(field?.name == name)
        #expect(field?.value == value)
    }

    @Test func headerLineWithoutColonIsIgnored() {
        #expect(Array("not a header\r\n".utf8).withUnsafeBytes { Transfer.headerField($0) } == nil)
    }

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

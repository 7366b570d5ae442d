import Foundation
import NetworkAddress

/// A libpq connection URI checked before it is handed to libpq as written:
/// `postgresql://[USER[:PASSWORD]@][HOST[:PORT][,HOST[:PORT]…]][/DB][?KEY=VALUE&…]`, where a host is a name, an
/// IPv4 address, `[an IPv6 address]`, or a percent-encoded Unix socket folder. A host list names the members of a
/// cluster; with `target_session_attrs=read-write` libpq connects to whichever of them is the primary.
/// `URLComponents` cannot read a host list, so the URI is taken apart here.
public struct PostgresURL: Sendable {
    /// The URI as given.
    public let text: String
    /// The hosts and ports of the authority, in order (`port` is nil when left to libpq's default).
    public let hosts: [(host: String, port: Int?)]
    /// The scheme with its `://`, `USER[:PASSWORD]` before the `@`, the host list after it, and the path and query
    /// that follow, as written.
    private let scheme: Substring
    private let userInfo: Substring?
    private let hostList: Substring
    private let tail: Substring

    /// Why a URI was refused: what is wrong, never the URI itself (it may hold a password).
    public struct Invalid: Error, Sendable, Equatable, CustomStringConvertible {
        /// What is wrong.
        public let description: String
    }

    /// Parses `text`, refusing what libpq would refuse or misread: an empty host in a list, a port that is not a
    /// number from 1 to 65535, a bad character in a host, whitespace, a malformed %-escape.
    public init(_ text: String) throws(Invalid) {
        guard let schemeEnd = text.range(of: "://"), ["postgresql", "postgres"].contains(text[..<schemeEnd.lowerBound])
        else { throw Invalid(description: "expected postgresql://USER@HOST:PORT/DB") }
        guard !text.contains(where: { $0.isWhitespace || $0.isNewline }) else {
            throw Invalid(description: "whitespace in the URL")
        }
        scheme = text[..<schemeEnd.upperBound]
        let rest = text[schemeEnd.upperBound...]
        guard !rest.isEmpty else { throw Invalid(description: "expected postgresql://USER@HOST:PORT/DB") }
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        userInfo = authority.lastIndex(of: "@").map { authority[..<$0] }
        hostList = userInfo.map { authority[authority.index(after: $0.endIndex)...] } ?? authority
        tail = rest[authorityEnd...]
        var hosts: [(String, Int?)] = []
        if !hostList.isEmpty {
            for entry in hostList.split(separator: ",", omittingEmptySubsequences: false) {
                hosts.append(try Self.hostAndPort(entry))
            }
        }
        // libpq decodes the user, database and parameters and refuses a malformed escape or a NUL; so is it here.
        // (`URLComponents` cannot serve: it accepts all of these.)
        for part in [userInfo ?? "", tail] where !Self.hasValidEscapes(part) {
            throw Invalid(description: "a malformed %-escape in the user, database or parameters")
        }
        self.text = text
        self.hosts = hosts
    }

    /// Whether every `%` in `text` starts two hex digits, and none of them is `%00`.
    private static func hasValidEscapes(_ text: Substring) -> Bool {
        var rest = text[...]
        while let percent = rest.firstIndex(of: "%") {
            let digits = rest[rest.index(after: percent)...].prefix(2)
            guard digits.count == 2, digits.allSatisfy(\.isHexDigit), digits != "00" else { return false }
            rest = rest[digits.endIndex...]
        }
        return true
    }

    private static func hostAndPort(_ entry: Substring) throws(Invalid) -> (String, Int?) {
        guard !entry.isEmpty else { throw Invalid(description: "an empty host in the host list") }
        let parts: (host: Substring, port: Substring?)
        do {
            parts = try HostPortSyntax.split(entry)
        } catch {
            throw Invalid(description: error.description)
        }
        let host = parts.host
        if entry.hasPrefix("[") {
            guard host.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." || $0 == "%" }) else {
                throw Invalid(description: "a malformed [IPv6 address]")
            }
        } else {
            let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_%")
            guard host.allSatisfy(allowed.contains) else { throw Invalid(description: "a bad character in a host") }
        }
        guard let port = parts.port else { return (String(host), nil) }
        guard let number = HostPortSyntax.port(port) else {
            throw Invalid(description: "a port that is not a number from 1 to 65535")
        }
        return (String(host), Int(number))
    }

    /// The URI with any password (in the user part or a `password=` parameter) replaced by `***`, for logs.
    public var redacted: String {
        var user = ""
        if let userInfo {
            user = (userInfo.firstIndex(of: ":").map { userInfo[..<$0] + ":***" } ?? String(userInfo)) + "@"
        }
        var redactedTail = String(tail)
        if let query = tail.firstIndex(of: "?") {
            let parameters = tail[tail.index(after: query)...].split(separator: "&", omittingEmptySubsequences: false)
                .map { $0.hasPrefix("password=") ? "password=***" : String($0) }
            redactedTail = tail[...query] + parameters.joined(separator: "&")
        }
        return scheme + user + hostList + redactedTail
    }
}

import APNs
import APNsSimulator
import Foundation
import HTTPClient
import JMAP
import JSONText
import MailboxStore
import OpenSSLCrypto
import Push
import ServerSentEvents

/// Parsers of short untrusted strings and byte streams.
enum TextFuzz {
    // MARK: State strings

    /// A state the store accepts prints back as it was read, and its tag is one every signal may carry.
    static func state(_ bytes: Data) {
        let text = String(decoding: bytes, as: UTF8.self)
        guard let parsed = SyncState(parsing: text) else { return }
        guard parsed.description == text else { violated("a state reads back differently") }
        let tag = SignalKey().tag(of: text)
        guard (try? ContentFreeSignal(alias: nil, tag: tag.rawValue)) != nil else {
            violated("a state's tag is refused by the APNs signal")
        }
    }

    // MARK: JMAP request JSON

    /// What JMAP's reader accepts, Foundation's reads too (it is never laxer than JSON); and what it reads, it
    /// writes as text it reads back to the same text.
    static func jmapJSON(_ bytes: Data) {
        guard let value = JSONValue.parse(bytes) else { return }
        if (try? JSONSerialization.jsonObject(with: bytes, options: [.fragmentsAllowed])) == nil {
            violated("JMAP's JSON reader accepted what JSONSerialization refuses")
        }
        let text = value.json
        guard let again = JSONValue.parse(Data(text.utf8)) else { violated("JSON written by JSONValue does not read") }
        guard again.json == text else { violated("JSONValue's JSON does not read back to the same text") }
    }

    // MARK: JWTs

    /// The fixed key the JWT target verifies with; the seed corpus holds tokens it signed.
    static let key: P256PrivateKey = {
        let pem = """
            -----BEGIN PRIVATE KEY-----
            MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgeea6W2AEi+1nz2Ie
            53OHE+VcFug14dCo0z04VZMtJC2hRANCAASJgCyQiFj/Zoonql3HQT0fOVk/+VYi
            4pDsyeY8jIWGKgbALcnYEfglshj5OsE72nc7mL9+y+1NqfoTlopAjrOW
            -----END PRIVATE KEY-----
            """
        return try! P256PrivateKey(pemRepresentation: pem)
    }()
    static let publicKey = try! key.publicKey
    static let keyID = "FUZZKEY123"
    static let teamID = "FUZZTEAM12"
    nonisolated(unsafe) static var verifier = ProviderTokenVerifier(
        keys: [ProviderKey(keyID: keyID, teamID: teamID, publicKey: publicKey)], tokenLifetime: .infinity)

    /// Decoding never crashes; whatever verifies decodes to the same claims; apns-sim accepts only a token
    /// that verifies with its key. apns-sim reads the token after `bearer ` without the whitespace around it, as
    /// HTTP drops it around a field value: that token is the one that must verify.
    static func jwt(_ bytes: Data) {
        let token = String(decoding: bytes, as: UTF8.self)
        let unverified = try? JWT.decodeUnverified(token)
        let verified = try? JWT.verifyES256(token, key: publicKey)
        if let verified, verified != unverified { violated("verified claims differ from the decoded ones") }
        let answer = verifier.authorize("bearer " + token, now: Date(timeIntervalSince1970: 1_800_000_000))
        if answer == nil, (try? JWT.verifyES256(token.trimmingCharacters(in: .whitespaces), key: publicKey)) == nil {
            violated("apns-sim accepted a token that does not verify")
        }
    }

    // MARK: Server-Sent Events

    /// The events do not depend on how the stream was cut into chunks.
    static func serverSentEvents(_ bytes: Data) {
        var whole = ServerSentEventParser()
        let expected = whole.feed(bytes)
        var chunked = ServerSentEventParser()
        var events: [ServerSentEvent] = []
        var rest = bytes[...]
        var step = 1
        while !rest.isEmpty {
            let size = min(rest.count, 1 + (step * 7) % 13)
            events += chunked.feed(Data(rest.prefix(size)))
            rest = rest.dropFirst(size)
            step += 1
        }
        guard events == expected else { violated("chunking changed the events") }
        guard chunked.lastEventID == whole.lastEventID else { violated("chunking changed the last event id") }
    }

    // MARK: APNs responses

    /// Any body and `Retry-After` value gives a reason that is printable and short.
    static func apnsResponse(_ bytes: Data) {
        let (body, header) = split(bytes)
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let error = APNsError(
            status: 400, body: body, apnsID: nil, retryAfter: String(decoding: header, as: UTF8.self), now: now)
        let reason = error.reason.rawValue
        guard reason.utf8.count <= 64, reason.unicodeScalars.allSatisfy({ $0.isASCII && $0.value >= 0x20 }) else {
            violated("an unreadable reason got through")
        }
        if let retry = error.retryAfter, retry < .zero { violated("a negative Retry-After") }
    }

    // MARK: apns-sim provider requests

    static let gateway = APNsGateway(
        configuration: APNsGatewayConfiguration(
            providerKeys: [ProviderKey(keyID: keyID, teamID: teamID, publicKey: publicKey)],
            providerTokenLifetime: .infinity, logCapacity: 64))
    static let validStatuses: Set<Int> = [200, 400, 403, 404, 405, 410, 413, 429, 500, 503]
    /// A registered device and a valid token, written `{token}` and `{jwt}` in inputs, so the fuzzer gets
    /// past the token and authorization checks to the payload and routing.
    static let deviceToken = gateway.registerDevice(topic: "com.example.fuzz", environment: .sandbox)
    static let validJWT = try! JWT.makeES256(
        claims: JWTClaims(keyID: keyID, issuer: teamID, issuedAt: Int64(Date().timeIntervalSince1970)), key: key)

    /// A request written as `METHOD PATH\nname: value\n…\n\nbody`: every answer is one of APNs's statuses with
    /// a `{"reason"}` body when it is not 200.
    static func providerRequest(_ bytes: Data) {
        let blank = bytes.firstRange(of: Data("\n\n".utf8))
        let head = String(decoding: bytes[..<(blank?.lowerBound ?? bytes.endIndex)], as: UTF8.self)
            .replacingOccurrences(of: "{token}", with: deviceToken).replacingOccurrences(of: "{jwt}", with: validJWT)
        let body = blank.map { Data(bytes[$0.upperBound...]) } ?? Data()
        var lines = head.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let requestLine = lines.isEmpty ? [] : lines.removeFirst().split(separator: " ", maxSplits: 1).map(String.init)
        let headers = lines.compactMap { line -> HTTPField? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return HTTPField(
                String(line[..<colon]), String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces))
        }
        let request = APNsProviderRequest(
            method: requestLine.first ?? "POST", path: requestLine.count > 1 ? requestLine[1] : "/3/device/",
            headers: headers, body: body, connectionID: UInt64(bytes.count % 3),
            environment: bytes.count % 2 == 0 ? .sandbox : nil)
        let response = gateway.handle(request)
        guard validStatuses.contains(response.status) else { violated("status \(response.status)") }
        guard (response.status == 200) == (response.reason == nil) else { violated("a reason with 200") }
        if response.status != 200 {
            guard let object = try? JSONSerialization.jsonObject(with: response.body) as? [String: Any],
                let reason = object["reason"] as? String, !reason.isEmpty
            else { violated("an error without a reason body") }
        }
    }
}

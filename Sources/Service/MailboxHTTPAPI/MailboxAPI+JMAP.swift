import Durations
import Foundation
import HTTPServer
import JMAP
import LoopEvents
import MailboxStore
import OpenSSLCrypto

/// JMAP (RFC 8620, RFC 8621) on the API's listener: the Session at `/.well-known/jmap`, `POST /jmap/api`, blob
/// downloads and the event stream. A request is authenticated with a `/v1/session` access token (Bearer) or with
/// the username and password (Basic), which the sign-in throttle counts as it counts `POST /v1/session`.
extension MailboxAPI {
    func addJMAPRoutes(to router: inout Router) {
        router.get("/.well-known/jmap", handler: jmapAuthenticated(jmapSession))
        router.post("/jmap/api", handler: jmapAuthenticated(jmapAPI))
        router.get(
            "/jmap/download/:accountId/:blobId/:name",
            handler: jmapAuthenticated(jmapDownload))
        router.post(
            "/jmap/upload/:accountId", handler: jmapAuthenticated(jmapUpload))
        router.get("/jmap/eventsource", handler: jmapAuthenticated(jmapEventSource))
        if configuration.jmapWebSocketPort != nil {
            router.post("/jmap/ws-ticket", handler: jmapAuthenticated(jmapWebSocketTicket))
        }
    }

    typealias JMAPHandler = @Sendable (HTTPRequest, JMAPAccount) async throws -> HTTPResponse

    /// Bearer or Basic, else 401 with a `WWW-Authenticate` challenge for both.
    func jmapAuthenticated(_ handler: @escaping JMAPHandler) -> HTTPHandler {
        { request in
            var response = try await handler(request, try await jmapAccount(request))
            response.headers.replaceOrAdd(name: "Cache-Control", value: "no-store")
            return response
        }
    }

    static let jmapChallenge = "Bearer, Basic realm=\"mailboxd\", charset=\"UTF-8\""

    /// The account a request's Bearer token or Basic credentials name; 401 with a challenge for both otherwise.
    func jmapAccount(_ request: HTTPRequest) async throws -> JMAPAccount {
        let challenge: HTTPHeaders = ["WWW-Authenticate": Self.jmapChallenge]
        let accountID: Int64
        var sessionID: Int64?
        if let token = request.bearerToken {
            guard !token.isEmpty, token.utf8.count <= 256,
                let session = try await store.session(tokenHash: SHA256.hash(token))
            else {
                throw HTTPError(
                    .unauthorized, code: "unauthorized", message: "The token is invalid or revoked.",
                    headers: challenge)
            }
            accountID = session.accountID
            sessionID = session.id
        } else if let (username, password) = Self.basicCredentials(request) {
            do {
                accountID = try await signIn(username: username, password: password, request: request)
            } catch var error as HTTPError where error.status == .unauthorized {
                // A wrong password is challenged as a missing one is (RFC 9110 §11.6.1).
                error.headers.replaceOrAdd(name: "WWW-Authenticate", value: Self.jmapChallenge)
                throw error
            }
        } else {
            throw HTTPError(
                .unauthorized, code: "unauthorized", message: "A bearer token or Basic credentials are required.",
                headers: challenge)
        }
        guard let account = try await store.account(id: accountID) else {
            throw HTTPError.unauthorized("The account no longer exists.")
        }
        return JMAPAccount(id: account.id, username: account.username, sessionID: sessionID)
    }

    /// `Authorization: Basic base64(username:password)`, when the request has it.
    static func basicCredentials(_ request: HTTPRequest) -> (String, String)? {
        guard let value = request.headers["Authorization"] else { return nil }
        let parts = value.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "basic", parts[1].utf8.count <= 2048,
            let decoded = Data(base64Encoded: String(parts[1]).trimmingCharacters(in: .whitespaces)),
            let text = String(data: decoded, encoding: .utf8), let colon = text.firstIndex(of: ":")
        else { return nil }
        return (String(text[..<colon]), String(text[text.index(after: colon)...]))
    }

    /// The `https://host:port` clients reached this listener at (from `Host`), for the Session's URLs.
    func jmapBaseURL(_ request: HTTPRequest) throws -> String {
        if let configured = configuration.jmapBaseURL { return configured }
        guard let host = request.headers["Host"], (1...255).contains(host.utf8.count),
            host.utf8.allSatisfy({ byte in
                (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                    || Array(".-:[]".utf8).contains(byte)
            })
        else { throw HTTPError(.badRequest, code: "invalidHost", message: "The Host header is missing or malformed.") }
        return (configuration.servesTLS ? "https://" : "http://") + host
    }

    func jmapSession(_ request: HTTPRequest, _ account: JMAPAccount) async throws -> HTTPResponse {
        .json(text: jmap.session(for: account, baseURL: try jmapBaseURL(request)).json)
    }

    func jmapAPI(_ request: HTTPRequest, _ account: JMAPAccount) async throws -> HTTPResponse {
        // A request that may write (a `/set`, `/import` or `/copy` call) is an arrival when the account's state moved
        // while it ran: read before and after only when someone traces the loop.
        let traced = feed?.isObserved == true && Self.mayWrite(request.body)
        let startedAt = store.currentTime
        let before = traced ? try? await store.currentState(accountID: account.id).modseq : nil
        let result = await jmap.handle(request.body, account: account, baseURL: try jmapBaseURL(request))
        if let feed, let before, let after = try? await store.currentState(accountID: account.id).modseq,
            after > before
        {
            feed.arrived(
                Arrival(
                    kind: .jmap, accountID: account.id, modseq: after, startedAt: startedAt,
                    endedAt: store.currentTime, traceparent: request.headers["traceparent"]))
        }
        switch result {
        case .success(let response):
            return .json(data: Data(response.jsonBytes))
        case .failure(let problem):
            return HTTPResponse(
                status: .badRequest, headers: ["Content-Type": "application/problem+json"],
                body: Data(problem.body.json.utf8))
        }
    }

    /// Whether a JMAP request names a method that may write (`…/set`, `…/import`, `…/copy`).
    static func mayWrite(_ body: Data) -> Bool {
        ["/set\"", "/import\"", "/copy\""].contains { body.range(of: Data($0.utf8)) != nil }
    }

    func jmapDownload(_ request: HTTPRequest, _ account: JMAPAccount) async throws -> HTTPResponse {
        // Another account's blob is answered as one that does not exist: existence must not leak.
        guard request.parameter("accountId") == account.jmapID, let blobID = request.parameter("blobId"),
            let found = try await jmap.blob(blobID, accountID: account.id)
        else { throw HTTPError.notFound("No such blob for this account.") }
        var type = found.type
        if let accept = request.query("accept") {
            let halves = accept.lowercased().utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
            if halves.count == 2, halves.allSatisfy(MessageParts.isToken) { type = accept.lowercased() }
        }
        let name = request.parameter("name") ?? "blob"
        return HTTPResponse(
            status: .ok,
            headers: [
                "Content-Type": type,
                "Content-Disposition": MessageParts.contentDisposition(filename: name, partID: blobID),
                "X-Content-Type-Options": "nosniff",
            ],
            body: Data(found.bytes))
    }

    func jmapUpload(_ request: HTTPRequest, _ account: JMAPAccount) async throws -> HTTPResponse {
        throw HTTPError(
            .forbidden, code: "uploadNotSupported",
            message: "Uploads are not supported: emails arrive by delivery (the Session says maxSizeUpload 0).")
    }

    /// `GET eventSourceUrl` (RFC 8620 §7.3): StateChange events as the account changes, `ping` events, and with
    /// `Last-Event-ID` the change since that event at once.
    func jmapEventSource(_ request: HTTPRequest, _ account: JMAPAccount) async throws -> HTTPResponse {
        let typesText = request.query("types") ?? "*"
        let types: Set<String>? =
            typesText == "*" ? nil : Set(typesText.split(separator: ",").map { String($0) })
        if let types, let unknown = types.first(where: { !TypeStates.types.contains($0) }) {
            throw HTTPError(.badRequest, code: "invalidArgument", message: "Unknown type '\(unknown)' in 'types'.")
        }
        let closeAfter = request.query("closeafter") ?? "no"
        guard closeAfter == "state" || closeAfter == "no" else {
            throw HTTPError(.badRequest, code: "invalidArgument", message: "'closeafter' must be 'state' or 'no'.")
        }
        let pingText = request.query("ping") ?? "0"
        guard pingText.utf8.count <= 6, let ping = Int(pingText), ping >= 0 else {
            throw HTTPError(.badRequest, code: "invalidArgument", message: "'ping' must be a whole number of seconds.")
        }
        var lastSeen: Int64?
        if let lastEventID = request.headers["Last-Event-ID"] {
            // A foreign or malformed id is older than anything: the current states are sent.
            lastSeen = (try? store.parseState(lastEventID))?.modseq ?? -1
        }
        // The client's interval, raised to at least 5 s so pings cannot flood.
        let options = JMAPEventStreams.Options(
            types: types, closeAfterState: closeAfter == "state", pingInterval: ping == 0 ? 0 : min(max(ping, 5), 3600))
        return .eventStream(try await jmapEventStreams.open(account: account, options: options, lastSeen: lastSeen))
    }
}

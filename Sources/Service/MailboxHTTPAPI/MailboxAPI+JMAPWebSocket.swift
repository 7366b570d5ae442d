import Durations
import Foundation
import HTTPServer
import JMAP
import JSONText
import Locking
import MailboxStore
import OpenSSLCrypto
import WebSocket

/// JMAP over WebSocket (RFC 8887): its listener (``JMAPWebSocketServer``) authenticates each opening handshake by the
/// API's rules, here: a Bearer token or Basic credentials (the sign-in throttle counts these as it counts
/// `POST /v1/session`), or, for a browser, which cannot put an `Authorization` header on a WebSocket, `?ticket=` from
/// `POST /jmap/ws-ticket`.
extension MailboxAPI {
    /// Authenticates opening handshakes for the API listening on `apiPort`, whose URLs JMAP's answers name.
    package func jmapWebSocketAuthenticator(apiPort: UInt16) -> JMAPWebSocketServer.Authenticator {
        { head, remoteAddress in
            var headers = HTTPHeaders()
            for field in head.headers { headers.add(name: field.name, value: field.value) }
            let request = HTTPRequest(
                method: .get, path: head.path, queryString: head.query, headers: headers, remoteAddress: remoteAddress)
            do {
                let account: JMAPAccount
                if let ticket = request.query("ticket") {
                    guard let redeemed = jmapTickets.redeem(ticket) else {
                        throw HTTPError(
                            .unauthorized, code: "unauthorized",
                            message:
                                "The ticket is unknown, expired or already used; ask POST /jmap/ws-ticket for another.")
                    }
                    account = redeemed
                } else {
                    account = try await jmapAccount(request)
                }
                return .success((account, try apiBaseURL(request, apiPort: apiPort)))
            } catch {
                // The API's mapping, as its StoreErrors middleware applies it to every route.
                let refusal =
                    (error as? HTTPError) ?? (error as? MailboxStoreError).map(Self.httpError(for:)) ?? .internalError
                return .failure(
                    WebSocketHandshake.Refusal(
                        status: refusal.status.rawValue, code: refusal.code, message: refusal.message,
                        headers: refusal.headers.map { ($0.name, $0.value) }))
            }
        }
    }

    /// Whether the session a socket was opened with still lives (its token, or the token its ticket was made from,
    /// would still sign in): `nil` when the store cannot say now. A socket opened with the password has no session.
    package func jmapWebSocketReauthorizer() -> JMAPWebSocketServer.Reauthorizer {
        { [store] account in
            guard let session = account.sessionID else { return true }
            return try? await store.sessionLives(id: session, accountID: account.id)
        }
    }

    /// The API's URL prefix for a request that reached the WebSocket listener: the configured one, else the scheme,
    /// the request's host and the API's port, so that answers name the same URLs (and session state) as the API's.
    func apiBaseURL(_ request: HTTPRequest, apiPort: UInt16) throws -> String {
        if let configured = configuration.jmapBaseURL { return configured }
        let base = try jmapBaseURL(request)
        return JMAPServer.origin(
            sharingHostWith: base, scheme: base.hasPrefix("https://") ? "https" : "http", port: apiPort)
    }

    /// `POST /jmap/ws-ticket` (Bearer): a single-use ticket for `?ticket=` on `/jmap/ws`, valid for 60 s.
    func jmapWebSocketTicket(_ request: HTTPRequest, _ account: JMAPAccount) async throws -> HTTPResponse {
        guard account.sessionID != nil else {
            throw HTTPError(
                .unauthorized, code: "unauthorized", message: "Tickets are issued for a bearer token only.",
                headers: ["WWW-Authenticate": "Bearer"])
        }
        guard let ticket = jmapTickets.issue(for: account) else {
            throw HTTPError(
                .tooManyRequests, code: "tooManyTickets",
                message:
                    "This account has the most unused tickets (\(WebSocketTickets.maxPerAccount)); use one or wait a minute."
            )
        }
        let url = JMAPServer.webSocketURL(baseURL: try jmapBaseURL(request), port: configuration.jmapWebSocketPort ?? 0)
        let body: JSONValue = [
            "ticket": .string(ticket), "expiresIn": .int(Int64(WebSocketTickets.lifetimeSeconds)),
            "url": .string(url + "?ticket=" + ticket),
        ]
        return HTTPResponse(status: .created, headers: ["Content-Type": "application/json"], body: Data(body.jsonBytes))
    }
}

/// Single-use tickets that open a JMAP WebSocket from a browser: 32 random bytes, kept only as their SHA-256, valid for
/// ``lifetimeSeconds``, gone once used. They live in this process, so behind a load balancer the socket must reach the
/// instance that issued its ticket (or the client authenticates the upgrade with its token instead).
final class WebSocketTickets: Sendable {
    /// How long a ticket is valid.
    static let lifetimeSeconds = 60
    /// Unused tickets one account may hold.
    static let maxPerAccount = 16

    private struct Entry {
        var account: JMAPAccount
        var expires: UInt64
    }

    private let entries = LockedValue<[String: Entry]>([:])
    private let now: @Sendable () -> UInt64

    /// Tickets timed by `now` (monotonic nanoseconds).
    init(now: @escaping @Sendable () -> UInt64 = MonotonicTime.nanoseconds) { self.now = now }

    /// A new ticket for `account`; `nil` when it holds its most unused ones.
    func issue(for account: JMAPAccount) -> String? {
        let ticket = SecureRandom.base64URL(32)
        let time = now()
        let issued = entries.withLock { entries -> Bool in
            entries = entries.filter { $0.value.expires > time }
            guard entries.values.count(where: { $0.account.id == account.id }) < Self.maxPerAccount else {
                return false
            }
            entries[Hex.encode(SHA256.hash(ticket))] = Entry(
                account: account, expires: time + UInt64(Self.lifetimeSeconds) * 1_000_000_000)
            return true
        }
        return issued ? ticket : nil
    }

    /// The account a ticket was issued to, once: `nil` when it is unknown, expired or used.
    func redeem(_ ticket: String) -> JMAPAccount? {
        guard ticket.utf8.count <= 128 else { return nil }
        let key = Hex.encode(SHA256.hash(ticket))
        let time = now()
        return entries.withLock { entries in
            guard let entry = entries.removeValue(forKey: key), entry.expires > time else { return nil }
            return entry.account
        }
    }
}

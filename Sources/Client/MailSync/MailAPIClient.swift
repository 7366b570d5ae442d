import Foundation
import Locking

/// The mailbox API (`/v1` and JMAP's event source) over any ``MailHTTPExchange``: a ``ChangeStreamTransport`` for
/// the sync engine plus the session, device and delivery calls a client needs around it. The paths, the JSON and
/// the mapping of refusals to ``MailSyncError`` are here, once; the exchange only moves bytes.
///
/// ```swift
/// let exchange = try URLSessionMailExchange(baseURL: "https://mail.example.com")   // MailSyncURLSession
/// let api = MailAPIClient(exchange: exchange)
/// try await api.login(username: "alice", password: password, deviceName: "phone")
/// let changes = try await api.fetchChanges(since: state, max: 100)
/// ```
public final class MailAPIClient: MailTransport {
    /// The HTTP stack the calls go through.
    public let exchange: any MailHTTPExchange
    private let token: LockedValue<String?>

    /// Creates a client over `exchange`, optionally with an access token already known.
    public init(exchange: any MailHTTPExchange, accessToken: String? = nil) {
        self.exchange = exchange
        self.token = LockedValue(accessToken)
    }

    /// The bearer token sent with each call (set by ``login(username:password:deviceName:)``).
    public var accessToken: String? {
        get { token.withLock { $0 } }
        set { token.withLock { $0 = newValue } }
    }

    // MARK: - MailTransport

    /// `GET /v1/changes?since=…&max=…`.
    public func fetchChanges(since state: String, max: Int) async throws -> MessageChanges {
        let response = try await send("GET", "/v1/changes?since=\(Self.query(state))&max=\(max)", endpoint: "changes")
        return try decode(MessageChanges.self, response, endpoint: "changes")
    }

    /// `GET /v1/messages?cursor=…&limit=…`.
    public func fetchAllMessages(cursor: String?, limit: Int) async throws -> MessagePage {
        var path = "/v1/messages?limit=\(limit)"
        if let cursor { path += "&cursor=\(Self.query(cursor))" }
        let response = try await send("GET", path, endpoint: "messages")
        return try decode(MessagePage.self, response, endpoint: "messages")
    }

    /// `GET /v1/messages/{id}`.
    public func fetchMessage(id: String) async throws -> MailMessage {
        let response = try await send("GET", "/v1/messages/\(Self.pathSegment(id))", endpoint: "message")
        return try decode(MailMessage.self, response, endpoint: "message")
    }

    /// `PATCH /v1/messages/{id}`.
    public func updateMessage(id: String, _ update: MessageUpdate) async throws -> MailMessage {
        let response = try await send(
            "PATCH", "/v1/messages/\(Self.pathSegment(id))", body: try JSONEncoder().encode(update), endpoint: "message"
        )
        return try decode(MailMessage.self, response, endpoint: "message")
    }

    /// `DELETE /v1/messages/{id}`.
    public func deleteMessage(id: String) async throws {
        _ = try await send("DELETE", "/v1/messages/\(Self.pathSegment(id))", endpoint: "message")
    }

    // MARK: - Plumbing

    /// Sends a request with the bearer token (or `bearer` when given; `""` sends none) and returns a 2xx response; any other
    /// status becomes a ``MailSyncError``.
    func send(
        _ method: String, _ path: String, body: Data? = nil, bearer: String? = nil, endpoint: String
    ) async throws -> MailHTTPResponse {
        var headers = [(name: "Accept", value: "application/json")]
        if let authorization = bearer ?? accessToken, !authorization.isEmpty {
            headers.append((name: "Authorization", value: "Bearer " + authorization))
        }
        if body != nil { headers.append((name: "Content-Type", value: "application/json")) }
        let response = try await exchange.send(
            MailHTTPRequest(method: method, path: path, headers: headers, body: body))
        guard (200..<300).contains(response.status) else { throw Self.error(for: response) }
        return response
    }

    func decode<T: Decodable>(_ type: T.Type, _ response: MailHTTPResponse, endpoint: String) throws -> T {
        do {
            return try JSONDecoder().decode(type, from: response.body)
        } catch {
            throw MailSyncError.invalidResponse("malformed JSON in the \(endpoint) response")
        }
    }

    /// Maps an error response to a ``MailSyncError`` from its status and `{"error": code}` body.
    static func error(for response: MailHTTPResponse) -> MailSyncError {
        let code = (try? JSONDecoder().decode(ErrorBody.self, from: response.body))?.error
        switch (response.status, code) {
        case (401, "invalidCredentials"): return .server(status: 401, code: code, retryAfter: nil)
        case (401, _): return .unauthorized
        case (_, "cannotCalculateChanges"): return .cannotCalculateChanges
        case (400, "invalidState"): return .invalidState
        case (404, _): return .notFound
        default:
            return .server(status: response.status, code: code, retryAfter: retryAfter(response.headers))
        }
    }

    static func retryAfter(_ headers: [String: String]) -> Duration? {
        guard let text = headers["retry-after"]?.trimmingCharacters(in: .whitespaces), let seconds = Int(text),
            seconds >= 0
        else { return nil }
        return .seconds(seconds)
    }

    static func query(_ value: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? value
    }

    static func pathSegment(_ value: String) -> String { query(value) }

    struct ErrorBody: Decodable {
        var error: String
    }
}

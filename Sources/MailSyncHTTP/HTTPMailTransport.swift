import Foundation
import HTTPClient
import Locking
import MailSync

/// The mailbox API over ``HTTPClient``: a ``MailTransport`` for the sync engine plus the session, device
/// and delivery calls a client needs around it.
///
/// ```swift
/// let http = HTTPClient(configuration: .init(tls: .init(caFile: "ca.pem")))
/// let transport = try HTTPMailTransport(baseURL: "https://127.0.0.1:8443", client: http)
/// try await transport.login(username: "alice", password: password, deviceName: "phone")
/// let changes = try await transport.fetchChanges(since: state, max: 100)
/// ```
public final class HTTPMailTransport: MailTransport {
    /// The server's base URL without a trailing slash, e.g. `https://127.0.0.1:8443`.
    public let baseURL: String
    let client: HTTPClient
    private let token: LockedValue<String?>

    /// Creates a transport for the server at `baseURL`, optionally with an access token already known.
    public init(baseURL: String, client: HTTPClient, accessToken: String? = nil) throws {
        var base = baseURL
        while base.hasSuffix("/") { base.removeLast() }
        guard base.hasPrefix("http://") || base.hasPrefix("https://") else {
            throw MailSyncError.invalidResponse("the server URL must start with http:// or https://")
        }
        self.baseURL = base
        self.client = client
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
        let response = try await send(.get, "/v1/changes?since=\(Self.query(state))&max=\(max)", endpoint: "changes")
        return try decode(MessageChanges.self, response, endpoint: "changes")
    }

    /// `GET /v1/messages?cursor=…&limit=…`.
    public func fetchAllMessages(cursor: String?, limit: Int) async throws -> MessagePage {
        var path = "/v1/messages?limit=\(limit)"
        if let cursor { path += "&cursor=\(Self.query(cursor))" }
        let response = try await send(.get, path, endpoint: "messages")
        return try decode(MessagePage.self, response, endpoint: "messages")
    }

    /// `GET /v1/messages/{id}`.
    public func fetchMessage(id: String) async throws -> MailMessage {
        let response = try await send(.get, "/v1/messages/\(Self.pathSegment(id))", endpoint: "message")
        return try decode(MailMessage.self, response, endpoint: "message")
    }

    /// `PATCH /v1/messages/{id}`.
    public func updateMessage(id: String, _ update: MessageUpdate) async throws -> MailMessage {
        let response = try await send(
            .patch, "/v1/messages/\(Self.pathSegment(id))", body: try JSONEncoder().encode(update), endpoint: "message")
        return try decode(MailMessage.self, response, endpoint: "message")
    }

    /// `DELETE /v1/messages/{id}`.
    public func deleteMessage(id: String) async throws {
        _ = try await send(.delete, "/v1/messages/\(Self.pathSegment(id))", endpoint: "message")
    }

    // MARK: - Plumbing

    /// Sends a request with the bearer token (or `bearer` when given; `""` sends none) and returns a 2xx response; any other
    /// status becomes a ``MailSyncError``.
    func send(
        _ method: HTTPMethod, _ path: String, body: Data? = nil, bearer: String? = nil, endpoint: String
    ) async throws -> HTTPResponse {
        var headers: HTTPHeaders = ["Accept": "application/json"]
        if let authorization = bearer ?? accessToken, !authorization.isEmpty {
            headers.add(name: "Authorization", value: "Bearer " + authorization)
        }
        if body != nil { headers.add(name: "Content-Type", value: "application/json") }
        let response: HTTPResponse
        do {
            response = try await client.execute(
                HTTPRequest(method: method, url: baseURL + path, headers: headers, body: body))
        } catch let error as HTTPClientError {
            throw MailSyncError.network(error.description)
        }
        guard (200..<300).contains(response.status) else { throw Self.error(for: response) }
        return response
    }

    func decode<T: Decodable>(_ type: T.Type, _ response: HTTPResponse, endpoint: String) throws -> T {
        do {
            return try JSONDecoder().decode(type, from: response.body)
        } catch {
            throw MailSyncError.invalidResponse("malformed JSON in the \(endpoint) response")
        }
    }

    /// Maps an error response to a ``MailSyncError`` from its status and `{"error": code}` body.
    static func error(for response: HTTPResponse) -> MailSyncError {
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

    static func retryAfter(_ headers: HTTPHeaders) -> Duration? {
        guard let text = headers["Retry-After"]?.trimmingCharacters(in: .whitespaces), let seconds = Int(text),
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

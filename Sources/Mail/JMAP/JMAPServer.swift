import Foundation
import JSONText
import Locking
import MailboxStore
import NetworkAddress

/// The capability URIs this server speaks.
public enum JMAPCapability {
    /// RFC 8620: the core protocol.
    public static let core = "urn:ietf:params:jmap:core"
    /// RFC 8621: mail.
    public static let mail = "urn:ietf:params:jmap:mail"
    /// RFC 9749: the VAPID key push subscriptions are signed with.
    public static let webPushVAPID = "urn:ietf:params:jmap:webpush-vapid"
    /// RFC 8887: JMAP over WebSocket.
    public static let webSocket = "urn:ietf:params:jmap:websocket"
}

/// The limits the Session advertises and the API enforces (RFC 8620 §2, RFC 8621 §1.3.1).
public struct JMAPLimits: Sendable, Equatable {
    /// The largest request body, in bytes.
    public var maxSizeRequest = 10_000_000
    /// Requests one account may have in progress at once.
    public var maxConcurrentRequests = 8
    /// Method calls in one request.
    public var maxCallsInRequest = 32
    /// Ids one `/get` may ask for.
    public var maxObjectsInGet = 500
    /// Objects one `/set` may touch (creations, updates and destructions together).
    public var maxObjectsInSet = 500
    /// The most changes one `/changes` answers, whatever the client asks for.
    public var maxChanges = 5000

    /// The defaults.
    public init() {}
}

/// Who a request is from: the account it acts on.
public struct JMAPAccount: Sendable, Equatable {
    /// The store's account id.
    public var id: Int64
    /// The username.
    public var username: String
    /// The session whose access token authenticated the request; `nil` when the password did. Push subscriptions
    /// belong to the credentials that made them.
    public var sessionID: Int64?

    /// Creates an account reference.
    public init(id: Int64, username: String, sessionID: Int64? = nil) {
        self.id = id
        self.username = username
        self.sessionID = sessionID
    }

    /// The account's id as JMAP spells it.
    public var jmapID: String { String(id) }
}

/// A request-level error (RFC 8620 §3.6.1): the whole request is refused with a problem-details body.
public struct JMAPRequestError: Error, Sendable, Equatable {
    /// The problem type's last segment (`notJSON`, `notRequest`, `unknownCapability`, `limit`).
    public var type: String
    /// What was wrong, for a developer.
    public var detail: String
    /// For `limit`: the name of the limit.
    public var limit: String?

    /// The problem-details object (RFC 7807), with the project's `error` and `message` members alongside.
    public var body: JSONValue {
        var members: [String: JSONValue] = [
            "type": .string("urn:ietf:params:jmap:error:" + type), "status": 400, "detail": .string(detail),
            "error": .string(type), "message": .string(detail),
        ]
        if let limit { members["limit"] = .string(limit) }
        return .object(members)
    }
}

/// A method-level error (RFC 8620 §3.6.2): the call answers `["error", {"type", …}, callId]`.
struct MethodError: Error, Sendable, Equatable {
    var type: String
    var description: String?
    var extra: [String: JSONValue] = [:]

    init(_ type: String, _ description: String? = nil, extra: [String: JSONValue] = [:]) {
        self.type = type
        self.description = description
        self.extra = extra
    }

    var arguments: JSONValue {
        var members = extra
        members["type"] = .string(type)
        if let description { members["description"] = .string(description) }
        return .object(members)
    }

    static func invalidArguments(_ description: String) -> MethodError { MethodError("invalidArguments", description) }

    /// The method error for a store failure.
    static func from(_ error: any Error) -> MethodError {
        guard let error = error as? MailboxStoreError else {
            if let error = error as? MethodError { return error }
            return MethodError("serverFail", "An internal error occurred.")
        }
        switch error {
        case .cannotCalculateChanges, .malformedState:
            return MethodError("cannotCalculateChanges", "Changes cannot be calculated from that state.")
        case .notFound: return MethodError("accountNotFound")
        case .invalidArgument(let what): return .invalidArguments("Invalid \(what).")
        case .storage(let failure) where failure.isUnavailable:
            return MethodError("serverUnavailable", "Storage is temporarily unavailable; try again later.")
        case .schemaTooNew: return MethodError("serverUnavailable", "Storage is temporarily unavailable.")
        default: return MethodError("serverFail", "An internal error occurred.")
        }
    }
}

/// The JMAP API (RFC 8620, RFC 8621) over the mailbox store: the Session object and `POST apiUrl`. Transport,
/// authentication, downloads and the event stream are the HTTP layer's; this type turns one authenticated
/// request's body into its response.
public struct JMAPServer: Sendable {
    let store: MailboxStore
    /// The advertised and enforced limits.
    public let limits: JMAPLimits
    /// What tells push subscriptions of changes; `nil`: push subscriptions cannot be made.
    public let push: JMAPPushNotifier?
    /// The VAPID public key pushes are signed with (base64url), advertised as RFC 9749's `applicationServerKey`;
    /// a reload replaces it (``replaceApplicationServerKey(_:)``).
    public var applicationServerKey: String? { serverKey.withLock { $0 } }
    private let serverKey: LockedValue<String?>
    /// The port of the JMAP WebSocket listener (RFC 8887), advertised in the Session; `nil`: none.
    public let webSocketPort: UInt16?

    /// Creates the API over `store`.
    public init(
        store: MailboxStore, limits: JMAPLimits = JMAPLimits(), push: JMAPPushNotifier? = nil,
        applicationServerKey: String? = nil, webSocketPort: UInt16? = nil
    ) {
        self.store = store
        self.limits = limits
        self.push = push
        serverKey = LockedValue(applicationServerKey)
        self.webSocketPort = webSocketPort
    }

    /// Advertises `key` from now on (the VAPID key was replaced).
    public func replaceApplicationServerKey(_ key: String?) { serverKey.withLock { $0 = key } }

    /// The WebSocket URL beside `baseURL`: its host, the WebSocket listener's `port`, `wss://` for `https://`.
    public static func webSocketURL(baseURL: String, port: UInt16) -> String {
        origin(sharingHostWith: baseURL, scheme: baseURL.hasPrefix("https://") ? "wss" : "ws", port: port) + "/jmap/ws"
    }

    /// `scheme://HOST:port`, HOST being `baseURL`'s (`https://HOST[:PORT][/…]`), read by the one `HOST[:PORT]` reader.
    public static func origin(sharingHostWith baseURL: String, scheme: String, port: UInt16) -> String {
        let authority = (baseURL.components(separatedBy: "://").last ?? "").prefix { $0 != "/" }
        var host = String((try? HostPortSyntax.split(authority))?.host ?? authority)
        if host.contains(":") { host = "[" + host + "]" }
        return "\(scheme)://\(host):\(port)"
    }

    /// The Session resource (RFC 8620 §2) for `account`, its URLs under `baseURL` (`https://host:port`).
    public func session(for account: JMAPAccount, baseURL: String) -> JSONValue {
        let core: JSONValue = [
            "maxSizeUpload": 0, "maxConcurrentUpload": 1, "maxSizeRequest": .int(limits.maxSizeRequest),
            "maxConcurrentRequests": .int(limits.maxConcurrentRequests),
            "maxCallsInRequest": .int(limits.maxCallsInRequest), "maxObjectsInGet": .int(limits.maxObjectsInGet),
            "maxObjectsInSet": .int(limits.maxObjectsInSet), "collationAlgorithms": ["i;ascii-casemap"],
        ]
        let mail: JSONValue = [
            "maxMailboxesPerEmail": 1, "maxMailboxDepth": 1, "maxSizeMailboxName": 100,
            "maxSizeAttachmentsPerEmail": 0, "emailQuerySortOptions": .strings(MessageOrder.allCases.map(\.rawValue)),
            "mayCreateTopLevelMailbox": false,
        ]
        let accountID = account.jmapID
        var capabilities: [String: JSONValue] = [JMAPCapability.core: core, JMAPCapability.mail: [:]]
        if push != nil, let applicationServerKey {
            capabilities[JMAPCapability.webPushVAPID] = ["applicationServerKey": .string(applicationServerKey)]
        }
        if let webSocketPort {
            capabilities[JMAPCapability.webSocket] = [
                "url": .string(Self.webSocketURL(baseURL: baseURL, port: webSocketPort)), "supportsPush": true,
            ]
        }
        return [
            "capabilities": .object(capabilities),
            "accounts": [
                accountID: [
                    "name": .string(account.username), "isPersonal": true, "isReadOnly": false,
                    "accountCapabilities": [JMAPCapability.core: [:], JMAPCapability.mail: mail],
                ]
            ],
            "primaryAccounts": [JMAPCapability.core: .string(accountID), JMAPCapability.mail: .string(accountID)],
            "username": .string(account.username),
            "apiUrl": .string(baseURL + "/jmap/api"),
            "downloadUrl": .string(baseURL + "/jmap/download/{accountId}/{blobId}/{name}?accept={type}"),
            "uploadUrl": .string(baseURL + "/jmap/upload/{accountId}/"),
            "eventSourceUrl": .string(
                baseURL + "/jmap/eventsource?types={types}&closeafter={closeafter}&ping={ping}"),
            "state": .string(sessionState(account: account, baseURL: baseURL)),
        ]
    }

    /// The Session's state: it changes only when what the Session says changes (its account, its URLs, this build's
    /// limits).
    func sessionState(account: JMAPAccount, baseURL: String) -> String {
        // FNV-1a over "ID USERNAME BASEURL KEY PORT 1", part by part: every answer carries it, so no string is
        // built for it.
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        let key = push == nil ? "" : applicationServerKey ?? ""
        for (index, part) in [String(account.id), account.username, baseURL, key, String(webSocketPort ?? 0), "1"]
            .enumerated()
        {
            if index > 0 { hash = (hash ^ 0x20) &* 0x100_0000_01b3 }
            for byte in part.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        }
        return String(hash, radix: 16)
    }

    /// Where a task that runs requests best runs (``MailboxStore/readExecutor``): a transport that makes a task for
    /// each request makes it there.
    public var taskExecutor: (any TaskExecutor)? { store.readExecutor }

    /// Runs one `POST apiUrl` body for `account`: the Response object (RFC 8620 §3.4), or the request-level error.
    public func handle(_ body: Data, account: JMAPAccount, baseURL: String) async -> Result<JSONValue, JMAPRequestError>
    {
        guard body.count <= limits.maxSizeRequest else {
            return .failure(
                JMAPRequestError(
                    type: "limit", detail: "The request is larger than maxSizeRequest.", limit: "maxSizeRequest"))
        }
        guard let value = JSONValue.parse(body) else {
            return .failure(
                JMAPRequestError(
                    type: "notJSON",
                    detail: "The body is not JSON (or nests deeper than \(JSONValue.maximumDepth) levels)."))
        }
        return await handle(request: value, account: account, baseURL: baseURL)
    }

    /// Runs one Request object already parsed (a WebSocket message's, whose size the socket checked).
    public func handle(
        request value: JSONValue, account: JMAPAccount, baseURL: String
    ) async -> Result<JSONValue, JMAPRequestError> {
        let request: APIRequest
        switch APIRequest.parse(value) {
        case .success(let parsed): request = parsed
        case .failure(let error): return .failure(error)
        }
        let known = [JMAPCapability.core, JMAPCapability.mail, JMAPCapability.webPushVAPID, JMAPCapability.webSocket]
        if let unknown = request.using.first(where: { !known.contains($0) }) {
            return .failure(
                JMAPRequestError(
                    type: "unknownCapability", detail: "The server does not support the capability '\(unknown)'."))
        }
        guard request.calls.count <= limits.maxCallsInRequest else {
            return .failure(
                JMAPRequestError(
                    type: "limit", detail: "The request has more method calls than maxCallsInRequest.",
                    limit: "maxCallsInRequest"))
        }
        // The calls run where the store's reads are calls (no hop when the caller's task already prefers it).
        let responses = await withTaskExecutorPreference(store.readExecutor) {
            var responses: [(name: String, arguments: JSONValue, callID: String)] = []
            let using = Set(request.using)
            for call in request.calls {
                let context = MethodContext(server: self, account: account, using: using)
                let answered: [(String, JSONValue)]
                do {
                    let arguments = try ResultReferences.resolve(call.arguments, against: responses)
                    answered = try await context.run(call.name, arguments)
                } catch {
                    answered = [("error", MethodError.from(error).arguments)]
                }
                for (name, arguments) in answered { responses.append((name, arguments, call.callID)) }
            }
            return responses
        }
        var response: [String: JSONValue] = [
            "methodResponses": .array(
                responses.map { .array([.string($0.name), $0.arguments, .string($0.callID)]) }),
            "sessionState": .string(sessionState(account: account, baseURL: baseURL)),
        ]
        if let created = request.createdIDs { response["createdIds"] = .object(created) }
        return .success(.object(response))
    }
}

/// A parsed Request object (RFC 8620 §3.3).
struct APIRequest {
    struct Call {
        var name: String
        var arguments: [String: JSONValue]
        var callID: String
    }

    var using: [String]
    var calls: [Call]
    var createdIDs: [String: JSONValue]?

    static func parse(_ value: JSONValue) -> Result<APIRequest, JMAPRequestError> {
        func notRequest(_ detail: String) -> Result<APIRequest, JMAPRequestError> {
            .failure(JMAPRequestError(type: "notRequest", detail: detail))
        }
        guard let object = value.object else { return notRequest("The request must be a JSON object.") }
        guard let using = object["using"]?.array, let names = Optional(using.compactMap(\.string)),
            names.count == using.count
        else { return notRequest("'using' must be an array of capability strings.") }
        guard let methodCalls = object["methodCalls"]?.array else {
            return notRequest("'methodCalls' must be an array of invocations.")
        }
        var calls: [Call] = []
        for invocation in methodCalls {
            guard let parts = invocation.array, parts.count == 3, let name = parts[0].string,
                let arguments = parts[1].object, let callID = parts[2].string
            else { return notRequest("Each method call must be [name, arguments object, method call id].") }
            calls.append(Call(name: name, arguments: arguments, callID: callID))
        }
        var createdIDs: [String: JSONValue]?
        if let created = object["createdIds"], !created.isNull {
            guard let map = created.object, map.values.allSatisfy({ $0.string != nil }) else {
                return notRequest("'createdIds' must map creation ids to ids.")
            }
            createdIDs = map
        }
        return .success(APIRequest(using: names, calls: calls, createdIDs: createdIDs))
    }
}

/// Result references (RFC 8620 §3.7): an argument `#name` of `{"resultOf","name","path"}` takes the value the
/// path points at in an earlier response of this request.
enum ResultReferences {
    static func resolve(
        _ arguments: [String: JSONValue], against responses: [(name: String, arguments: JSONValue, callID: String)]
    ) throws -> [String: JSONValue] {
        var resolved = arguments
        for (key, reference) in arguments where key.hasPrefix("#") {
            let name = String(key.dropFirst())
            guard arguments[name] == nil else {
                throw MethodError.invalidArguments("'\(name)' is given both as a value and as a result reference.")
            }
            guard let object = reference.object, let resultOf = object["resultOf"]?.string,
                let method = object["name"]?.string, let path = object["path"]?.string
            else {
                throw MethodError("invalidResultReference", "A result reference needs resultOf, name and path.")
            }
            guard let source = responses.first(where: { $0.callID == resultOf && $0.name == method }) else {
                throw MethodError(
                    "invalidResultReference", "No earlier response '\(method)' has the call id '\(resultOf)'.")
            }
            guard let value = JSONPointer.evaluate(path, in: source.arguments) else {
                throw MethodError("invalidResultReference", "The path '\(path)' names nothing in that response.")
            }
            resolved[key] = nil
            resolved[name] = value
        }
        return resolved
    }
}

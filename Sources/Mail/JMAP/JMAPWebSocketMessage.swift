import Foundation
import JSONText

/// What a client may send on a JMAP WebSocket (RFC 8887 §4.3): a Request, or push turned on or off.
public enum JMAPWebSocketMessage: Sendable, Equatable {
    /// A Request object (its `@type` and `id` beside the usual members), answered by a Response with `requestId`.
    case request(id: String?, JSONValue)
    /// `WebSocketPushEnable`: StateChanges for `dataTypes` (`nil`: every type) from now on, and at once if the
    /// account's state is no longer `pushState`.
    case pushEnable(dataTypes: Set<String>?, pushState: String?)
    /// `WebSocketPushDisable`.
    case pushDisable

    /// Reads one text message; the RequestError to answer when it is not one of the three.
    public static func parse(_ text: [UInt8]) -> Result<JMAPWebSocketMessage, JMAPWebSocketError> {
        guard let value = JSONValue.parse(text) else {
            return .failure(
                JMAPWebSocketError(
                    requestID: nil,
                    JMAPRequestError(
                        type: "notJSON",
                        detail: "The message is not JSON (or nests deeper than \(JSONValue.maximumDepth) levels).")))
        }
        guard let object = value.object else {
            return .failure(JMAPWebSocketError(requestID: nil, notRequest("A message must be a JSON object.")))
        }
        let requestID = object["id"]?.string
        if let id = object["id"], !id.isNull, requestID == nil {
            return .failure(JMAPWebSocketError(requestID: nil, notRequest("'id' must be a string.")))
        }
        switch object["@type"]?.string {
        case "Request":
            return .success(.request(id: requestID, value))
        case "WebSocketPushEnable":
            var types: Set<String>?
            if let dataTypes = object["dataTypes"], !dataTypes.isNull {
                guard let names = dataTypes.array?.compactMap(\.string), names.count == dataTypes.array?.count else {
                    return .failure(
                        JMAPWebSocketError(requestID: requestID, notRequest("'dataTypes' must be null or type names.")))
                }
                if let unknown = names.first(where: { !TypeStates.types.contains($0) }) {
                    return .failure(
                        JMAPWebSocketError(
                            requestID: requestID, notRequest("Unknown type '\(unknown)' in 'dataTypes'.")))
                }
                types = Set(names)
            }
            let pushState = object["pushState"]?.string
            if let state = object["pushState"], !state.isNull, pushState == nil {
                return .failure(JMAPWebSocketError(requestID: requestID, notRequest("'pushState' must be a string.")))
            }
            return .success(.pushEnable(dataTypes: types, pushState: pushState))
        case "WebSocketPushDisable":
            return .success(.pushDisable)
        case let type?:
            return .failure(
                JMAPWebSocketError(
                    requestID: requestID,
                    notRequest(
                        "Unknown @type '\(type.prefix(64))': a message is a Request, WebSocketPushEnable or "
                            + "WebSocketPushDisable.")))
        case nil:
            return .failure(JMAPWebSocketError(requestID: requestID, notRequest("A message needs an '@type'.")))
        }
    }

    private static func notRequest(_ detail: String) -> JMAPRequestError {
        JMAPRequestError(type: "notRequest", detail: detail)
    }
}

/// A RequestError on a WebSocket (RFC 8887 §4.3.4): the request-level error with `@type` and the `requestId` of the
/// request it answers, when that was readable.
public struct JMAPWebSocketError: Error, Sendable, Equatable {
    /// The `id` of the request that failed.
    public var requestID: String?
    /// The error.
    public var error: JMAPRequestError

    /// An error answering `requestID`.
    public init(requestID: String?, _ error: JMAPRequestError) {
        self.requestID = requestID
        self.error = error
    }

    /// The message to send.
    public var message: JSONValue {
        guard case .object(var members) = error.body else { return error.body }
        members["@type"] = "RequestError"
        if let requestID { members["requestId"] = .string(requestID) }
        return .object(members)
    }
}

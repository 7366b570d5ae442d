import Foundation

/// A fully received HTTP request, handed to a handler.
public struct HTTPRequest: Sendable {
    /// The request method.
    public var method: HTTPMethod
    /// The path as sent, without the query string and still percent-encoded (`/v1/messages/a%20b`).
    public var path: String
    /// The raw query string after `?` (empty when there is none).
    public var queryString: String
    /// The query parameters in order, percent-decoded (`+` decodes to a space).
    public var queryItems: [(name: String, value: String)]
    /// The request header fields (case-insensitive lookup).
    public var headers: HTTPHeaders
    /// The request body.
    public var body: Data
    /// Parameters captured by the route pattern (`:id` → `pathParameters["id"]`), percent-decoded.
    public var pathParameters: [String: String]
    /// The client's IP address as text (`127.0.0.1`, `::1`), or an empty string when unknown.
    public var remoteAddress: String

    /// Creates a request; the server does this, tests and adapters may too.
    public init(
        method: HTTPMethod, path: String, queryString: String = "", headers: HTTPHeaders = HTTPHeaders(),
        body: Data = Data(), pathParameters: [String: String] = [:], remoteAddress: String = ""
    ) {
        self.method = method
        self.path = path
        self.queryString = queryString
        self.queryItems = Self.parseQuery(queryString)
        self.headers = headers
        self.body = body
        self.pathParameters = pathParameters
        self.remoteAddress = remoteAddress
    }

    /// The first value of the query parameter `name`, percent-decoded.
    public func query(_ name: String) -> String? { queryItems.first { $0.name == name }?.value }

    /// The body's fields as an HTML form sends them (`application/x-www-form-urlencoded`), percent-decoded.
    public var formFields: [(name: String, value: String)] { Self.parseQuery(String(decoding: body, as: UTF8.self)) }

    /// The value of the cookie `name` in the `Cookie` header fields, if any.
    public func cookie(_ name: String) -> String? {
        for header in headers.values(for: "Cookie") {
            for pair in header.split(separator: ";") {
                let trimmed = pair.trimmingCharacters(in: .whitespaces)
                guard let equals = trimmed.firstIndex(of: "="), trimmed[..<equals] == name else { continue }
                return String(trimmed[trimmed.index(after: equals)...])
            }
        }
        return nil
    }

    /// Every value of the query parameter `name`, in order.
    public func queryValues(_ name: String) -> [String] { queryItems.filter { $0.name == name }.map(\.value) }

    /// The query parameters as a dictionary (the first value wins for repeated names).
    public var queryParameters: [String: String] {
        var result: [String: String] = [:]
        for item in queryItems where result[item.name] == nil { result[item.name] = item.value }
        return result
    }

    /// The path parameter `name` captured by the route.
    public func parameter(_ name: String) -> String? { pathParameters[name] }

    /// The body as UTF-8 text (invalid sequences are replaced).
    public var bodyText: String { String(decoding: body, as: UTF8.self) }

    /// The bearer token of the `Authorization` header, if it has the `Bearer` scheme.
    public var bearerToken: String? {
        guard let value = headers["Authorization"] else { return nil }
        let parts = value.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        let token = parts[1].trimmingCharacters(in: .whitespaces)
        return token.isEmpty ? nil : token
    }

    /// Decodes the JSON body as `T`.
    ///
    /// Throws a 400 `HTTPError`: `invalidJSON` when the body is empty or not JSON, `invalidRequest` when
    /// the JSON does not have the expected shape. The message names the offending field, never the body.
    public func decodeJSON<T: Decodable>(
        _ type: T.Type = T.self, decoder: JSONDecoder = JSONDecoder()
    ) throws(HTTPError) -> T {
        guard !body.isEmpty else {
            throw HTTPError(.badRequest, code: "invalidJSON", message: "The request body is empty; JSON expected.")
        }
        do {
            return try decoder.decode(T.self, from: body)
        } catch let error as DecodingError {
            throw Self.describe(error)
        } catch {
            throw HTTPError(.badRequest, code: "invalidJSON", message: "The request body is not valid JSON.")
        }
    }

    /// Decodes the JSON body as `T`, refusing fields outside `allowedFields`.
    ///
    /// Throws a 400 `HTTPError`: `invalidJSON` when the body is not JSON, `invalidRequest` when it is not an
    /// object or does not have the expected shape, `unknownField` naming the first unexpected field.
    public func decodeJSON<T: Decodable>(
        _ type: T.Type = T.self, allowedFields: Set<String>, decoder: JSONDecoder = JSONDecoder()
    ) throws(HTTPError) -> T {
        guard let object = try? JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed]) else {
            throw HTTPError(.badRequest, code: "invalidJSON", message: "The request body is not valid JSON.")
        }
        guard let dictionary = object as? [String: Any] else {
            throw HTTPError(.badRequest, code: "invalidRequest", message: "The request body must be a JSON object.")
        }
        if let unknown = dictionary.keys.filter({ !allowedFields.contains($0) }).sorted().first {
            throw HTTPError(
                .badRequest, code: "unknownField", message: "Unknown field '\(String(unknown.prefix(64)))'.")
        }
        do {
            return try decoder.decode(T.self, from: body)
        } catch let error as DecodingError {
            let described = Self.describe(error)
            // The body is JSON (checked above): a value the decoder cannot represent is a bad field, not bad JSON.
            if described.code == "invalidJSON" {
                throw .invalidRequest("A field has a value of the wrong kind or out of range.")
            }
            throw described
        } catch {
            throw .invalidRequest("The request body does not have the expected shape.")
        }
    }

    static func describe(_ error: DecodingError) -> HTTPError {
        func field(_ path: [any CodingKey], extra: (any CodingKey)? = nil) -> String {
            let keys = path + (extra.map { [$0] } ?? [])
            let text = keys.map { key in key.intValue.map { "[\($0)]" } ?? key.stringValue }
                .joined(separator: ".").replacingOccurrences(of: ".[", with: "[")
            return text.isEmpty ? "the top-level value" : "'\(text)'"
        }
        switch error {
        case .keyNotFound(let key, let context):
            return .invalidRequest("Missing required field \(field(context.codingPath, extra: key)).")
        case .valueNotFound(_, let context):
            return .invalidRequest("Field \(field(context.codingPath)) must not be null.")
        case .typeMismatch(let type, let context):
            return .invalidRequest("Field \(field(context.codingPath)) has the wrong type (expected \(type)).")
        case .dataCorrupted(let context):
            if context.codingPath.isEmpty {
                return HTTPError(.badRequest, code: "invalidJSON", message: "The request body is not valid JSON.")
            }
            return .invalidRequest("Field \(field(context.codingPath)) has an invalid value.")
        @unknown default:
            return .invalidRequest("The request body does not have the expected shape.")
        }
    }

    static func parseQuery(_ query: String) -> [(name: String, value: String)] {
        guard !query.isEmpty else { return [] }
        var items: [(name: String, value: String)] = []
        for pair in query.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = percentDecode(String(parts[0]), plusAsSpace: true)
            let value = parts.count > 1 ? percentDecode(String(parts[1]), plusAsSpace: true) : ""
            items.append((name, value))
        }
        return items
    }

    /// Percent-decodes `text`; malformed escapes are kept as they are.
    static func percentDecode(_ text: String, plusAsSpace: Bool) -> String {
        let source = plusAsSpace ? text.replacingOccurrences(of: "+", with: " ") : text
        guard source.contains("%") else { return source }
        return source.removingPercentEncoding ?? source
    }
}

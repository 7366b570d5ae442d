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
        let parts = value.utf8.split(separator: UInt8(ascii: " "), maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, String(Substring(parts[0])).lowercased() == "bearer" else { return nil }
        // Spaces and tabs around the token are not part of it.
        let blank = { (byte: UInt8) in byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        guard let first = parts[1].firstIndex(where: { !blank($0) }),
            let last = parts[1].lastIndex(where: { !blank($0) })
        else { return nil }
        return String(Substring(parts[1][first...last]))
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
        _ type: T.Type = T.self, allowedFields: Set<String>
    ) throws(HTTPError) -> T {
        // One parse: the keys are checked inside the decode, before `T` reads its fields.
        let decoder = JSONDecoder()
        decoder.userInfo[FieldChecked<T>.allowedFields] = allowedFields
        do {
            return try decoder.decode(FieldChecked<T>.self, from: body).value
        } catch let unknown as UnknownField {
            throw HTTPError(
                .badRequest, code: "unknownField", message: "Unknown field '\(String(unknown.name.prefix(64)))'.")
        } catch let field as FieldError {
            // The body is a JSON object (its keys were read): a value the decoder cannot represent (its parser's
            // own error, a number out of range) is a bad field, not bad JSON.
            guard let error = field.error as? DecodingError, case let described = Self.describe(error),
                described.code != "invalidJSON"
            else { throw .invalidRequest("A field has a value of the wrong kind or out of range.") }
            throw described
        } catch DecodingError.typeMismatch(_, let context) where context.codingPath.isEmpty {
            throw .invalidRequest("The request body must be a JSON object.")
        } catch let error as DecodingError {
            throw Self.describe(error)
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
        // Most text has neither: a byte scan, not a Foundation search, for every path segment and query item.
        let plus = plusAsSpace && text.utf8.contains(UInt8(ascii: "+"))
        let source = plus ? text.replacingOccurrences(of: "+", with: " ") : text
        guard source.utf8.contains(UInt8(ascii: "%")) else { return source }
        return source.removingPercentEncoding ?? source
    }
}

/// `T` decoded from a JSON object whose keys are all in the decoder's `allowedFields` (else ``UnknownField``,
/// naming the first in sorted order): the key check and the decode are one parse.
private struct FieldChecked<T: Decodable>: Decodable {
    static var allowedFields: CodingUserInfoKey { CodingUserInfoKey(rawValue: "signalfetch.allowedFields")! }

    let value: T

    init(from decoder: any Decoder) throws {
        let allowed = decoder.userInfo[Self.allowedFields] as? Set<String> ?? []
        let keys = try decoder.container(keyedBy: AnyKey.self).allKeys
        if let unknown = keys.map(\.stringValue).filter({ !allowed.contains($0) }).min() {
            throw UnknownField(name: unknown)
        }
        do {
            value = try T(from: decoder)
        } catch {
            throw FieldError(error: error)
        }
    }
}

/// A field of a request body the endpoint's type could not read (the body itself is a JSON object).
private struct FieldError: Error {
    let error: any Error
}

/// A field of a request body that its endpoint does not take.
private struct UnknownField: Error {
    let name: String
}

/// Any key of a JSON object.
private struct AnyKey: CodingKey {
    let stringValue: String
    var intValue: Int? { nil }

    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

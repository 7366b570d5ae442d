/// An HTTP request method such as `GET` or `POST`.
public struct HTTPMethod: RawRepresentable, Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The method token as sent on the wire, in upper case (`"GET"`).
    public let rawValue: String

    /// Creates a method from its token; the token is upper-cased.
    public init(rawValue: String) { self.rawValue = rawValue.uppercased() }

    /// Creates a method from a string literal such as `"PATCH"`.
    public init(stringLiteral value: String) { self.init(rawValue: value) }

    /// The method token.
    public var description: String { rawValue }

    /// `GET`.
    public static let get = HTTPMethod(rawValue: "GET")
    /// `HEAD`.
    public static let head = HTTPMethod(rawValue: "HEAD")
    /// `POST`.
    public static let post = HTTPMethod(rawValue: "POST")
    /// `PUT`.
    public static let put = HTTPMethod(rawValue: "PUT")
    /// `PATCH`.
    public static let patch = HTTPMethod(rawValue: "PATCH")
    /// `DELETE`.
    public static let delete = HTTPMethod(rawValue: "DELETE")
    /// `OPTIONS`.
    public static let options = HTTPMethod(rawValue: "OPTIONS")
}

/// One header field, for both ends and both protocols: what HTTPServer and HTTP2Server hand their handlers, what
/// HTTPClient and HTTP2Client send and receive, and what the simulators record. Fields keep the order they came in;
/// HTTP/2 carries names in lowercase, HTTP/1.1 as given, and ``HTTPHeaders`` looks them up ignoring case.
public struct HTTPField: Sendable, Hashable {
    /// The field name.
    public var name: String
    /// The field value.
    public var value: String

    /// Creates a field.
    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }

    /// Creates a field: `HTTPField("content-type", "application/json")`.
    public init(_ name: String, _ value: String) {
        self.init(name: name, value: value)
    }
}

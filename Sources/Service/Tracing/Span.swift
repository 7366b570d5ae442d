/// One span of a change's trace, as OTLP carries it. Its attributes are ``SpanAttribute``s, which only the
/// content-free keys and shapes of ``SpanAttribute/Key`` can make.
public struct Span: Sendable {
    /// OTLP's span kinds.
    public enum Kind: Int, Sendable {
        /// Work inside the process (the commit).
        case `internal` = 1
        /// A request served (an arrival, a fetch).
        case server = 2
        /// A request made (a signal to a push service).
        case client = 3
    }

    /// Its trace and id.
    public var context: SpanContext
    /// The span it is part of, or `nil` for the trace's root.
    public var parent: SpanID?
    /// What it is (`arrival api`, `commit`, `signal apns`, `fetch`).
    public var name: String
    /// Its kind.
    public var kind: Kind
    /// When it began, nanoseconds since 1970.
    public var start: UInt64
    /// When it ended, nanoseconds since 1970.
    public var end: UInt64
    /// What it is about, content-free.
    public var attributes: [SpanAttribute]
    /// Other spans it follows from (a caller's, the arrivals a commit coalesced, the change a fetch began at).
    public var links: [SpanContext]
    /// Whether it failed (OTLP's status `ERROR`).
    public var failed: Bool

    /// A span from `start` to `end`, seconds since 1970.
    public init(
        context: SpanContext, parent: SpanID?, name: String, kind: Kind, start: Double, end: Double,
        attributes: [SpanAttribute] = [], links: [SpanContext] = [], failed: Bool = false
    ) {
        self.context = context
        self.parent = parent
        self.name = name
        self.kind = kind
        self.start = Self.nanoseconds(start)
        self.end = max(self.start, Self.nanoseconds(end))
        self.attributes = attributes
        self.links = links
        self.failed = failed
    }

    /// Whole seconds and the fraction apart: a Double holds 1.7e18 nanoseconds only to within a few hundred.
    static func nanoseconds(_ seconds: Double) -> UInt64 {
        guard seconds > 0, seconds < 1e10 else { return 0 }
        let whole = seconds.rounded(.down)
        return UInt64(whole) * 1_000_000_000 + UInt64(((seconds - whole) * 1e9).rounded())
    }
}

/// One attribute of a span: a key from the allowed list and a value of the shape that key takes. Like a signal's
/// payload, a span carries ids, aliases, names of services and apps, counts and outcomes — never a subject, an
/// address, a token, a username or a body — and this is where that is enforced: a key not on the list cannot be
/// written, and a string that is not a short run of letters, digits and `.`, `_`, `-`, `:` is refused.
public struct SpanAttribute: Sendable, Equatable {
    /// The keys a span may carry.
    public enum Key: String, Sendable, CaseIterable {
        /// The account's id in the store (a number, not its username).
        case account = "signalfetch.account"
        /// The account's modseq after the change.
        case modseq = "signalfetch.modseq"
        /// Where the change came in (`api`, `lmtp`, `imap`, `jmap`).
        case arrival = "signalfetch.arrival"
        /// The device's alias (random, made by the store).
        case device = "signalfetch.device"
        /// The device's push service.
        case service = "signalfetch.push.service"
        /// The device's app (a bundle id, an Android package, a Web Push key's name).
        case app = "signalfetch.push.app"
        /// `production` or `sandbox`.
        case environment = "signalfetch.push.environment"
        /// The dispatcher's outcome (`sent`, `retry`, `dropped`, `deferred`, `defect`).
        case outcome = "signalfetch.signal.outcome"
        /// The push service's reason for a refusal (`BadDeviceToken`, `UNREGISTERED`, …).
        case reason = "signalfetch.signal.reason"
        /// The attempt, from 1.
        case attempt = "signalfetch.signal.attempt"
        /// Whether the signal stood for more than one change.
        case coalesced = "signalfetch.signal.coalesced"
        /// The session that fetched (its id in the store, not its token).
        case session = "signalfetch.session"
        /// The modseq a fetch asked from.
        case since = "signalfetch.fetch.since"
        /// How a device fetched (`api`, `imap`).
        case path = "signalfetch.fetch.path"
    }

    /// A value.
    public enum Value: Sendable, Equatable {
        /// A whole number.
        case int(Int64)
        /// A flag.
        case bool(Bool)
        /// A short token (see ``SpanAttribute``).
        case string(String)
    }

    /// The key.
    public let key: Key
    /// The value.
    public let value: Value

    /// A number.
    public static func int(_ key: Key, _ value: Int64) -> SpanAttribute { SpanAttribute(key: key, value: .int(value)) }

    /// A flag.
    public static func bool(_ key: Key, _ value: Bool) -> SpanAttribute { SpanAttribute(key: key, value: .bool(value)) }

    /// A short token, or `nil` (and nothing written) when `value` is not one: see ``isToken(_:)``.
    public static func token(_ key: Key, _ value: String) -> SpanAttribute? {
        isToken(value) ? SpanAttribute(key: key, value: .string(value)) : nil
    }

    /// The most a string attribute may hold.
    public static let maximumTokenLength = 64

    /// Whether `value` may be a string attribute: 1 to 64 of `A-Z a-z 0-9 . _ - :`. No space (no subject or
    /// phrase), no `@` (no address), nothing as long as a token or a key.
    public static func isToken(_ value: String) -> Bool {
        let bytes = value.utf8
        guard !bytes.isEmpty, bytes.count <= maximumTokenLength else { return false }
        return bytes.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"),
                UInt8(ascii: ":"):
                true
            default: false
            }
        }
    }
}

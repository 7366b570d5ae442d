import OpenSSLCrypto

/// A trace's id: 16 bytes, never all zero, written as 32 lowercase hex digits (W3C Trace Context, OTLP).
public struct TraceID: Hashable, Sendable, CustomStringConvertible {
    /// The 16 bytes.
    public let bytes: [UInt8]

    /// The id made of `bytes` (16, not all zero), or `nil`.
    public init?(bytes: [UInt8]) {
        guard bytes.count == 16, bytes.contains(where: { $0 != 0 }) else { return nil }
        self.bytes = bytes
    }

    /// The id written as 32 hex digits, or `nil`.
    public init?(hex: some StringProtocol) {
        guard hex.utf8.count == 32, let bytes = TraceHex.decode(hex) else { return nil }
        self.init(bytes: bytes)
    }

    /// The 32 lowercase hex digits.
    public var description: String { Hex.encode(bytes) }
}

/// A span's id: 8 bytes, never all zero, written as 16 lowercase hex digits.
public struct SpanID: Hashable, Sendable, CustomStringConvertible {
    /// The 8 bytes.
    public let bytes: [UInt8]

    /// The id made of `bytes` (8, not all zero), or `nil`.
    public init?(bytes: [UInt8]) {
        guard bytes.count == 8, bytes.contains(where: { $0 != 0 }) else { return nil }
        self.bytes = bytes
    }

    /// The id written as 16 hex digits, or `nil`.
    public init?(hex: some StringProtocol) {
        guard hex.utf8.count == 16, let bytes = TraceHex.decode(hex) else { return nil }
        self.init(bytes: bytes)
    }

    /// A random id.
    public static func random() -> SpanID {
        var generator = SystemRandomNumberGenerator()
        while true {
            let value = generator.next() as UInt64
            if value != 0 { return SpanID(bytes: withUnsafeBytes(of: value.bigEndian, Array.init))! }
        }
    }

    /// The 16 lowercase hex digits.
    public var description: String { Hex.encode(bytes) }
}

/// A span somewhere: its trace and its own id (what a parent or a link names).
public struct SpanContext: Hashable, Sendable {
    /// The trace.
    public var traceID: TraceID
    /// The span.
    public var spanID: SpanID

    /// The span `spanID` of `traceID`.
    public init(traceID: TraceID, spanID: SpanID) {
        self.traceID = traceID
        self.spanID = spanID
    }

    /// Reads a W3C `traceparent` header (`00-<trace id>-<span id>-<flags>`): `nil` for one that is malformed, of
    /// version `ff`, or names an all-zero id, which the recommendation says to ignore (a new trace starts). A
    /// version after `00` may carry more fields after the flags; they are ignored, as it says.
    public init?(traceparent: String) {
        let fields = traceparent.split(separator: "-", omittingEmptySubsequences: false)
        guard fields.count >= 4, fields[0].utf8.count == 2, let version = TraceHex.decode(fields[0])?.first,
            version != 0xff, fields[3].utf8.count == 2, TraceHex.decode(fields[3]) != nil,
            version != 0 || (fields.count == 4 && traceparent.utf8.count == 55),
            let trace = TraceID(hex: fields[1]), let span = SpanID(hex: fields[2])
        else { return nil }
        self.init(traceID: trace, spanID: span)
    }

    /// The `traceparent` header naming this span (version 00, sampled).
    public var traceparent: String { "00-\(traceID)-\(spanID)-01" }
}

/// Lowercase hex only, as W3C Trace Context writes ids (a header with an uppercase digit is malformed).
enum TraceHex {
    static func decode(_ text: some StringProtocol) -> [UInt8]? {
        guard !text.utf8.contains(where: { (UInt8(ascii: "A")...UInt8(ascii: "F")).contains($0) }) else { return nil }
        return Hex.decode(text)
    }
}

/// The ids of one change's trace, which every instance sharing the store and every later fetch derive alike from
/// what they already have — the store's epoch, the account and the modseq the change committed — so a signal sent
/// by another instance, or a fetch served by a third, joins the trace without asking anyone. The epoch is the
/// store's own random value, so the ids say nothing to whoever cannot read the store.
public enum ChangeTrace {
    /// The trace of the change that brought `accountID` to `modseq` in the store of `epoch`.
    public static func traceID(epoch: String, accountID: Int64, modseq: Int64) -> TraceID {
        let digest = SHA256.hash("signalfetch.trace\u{0}\(epoch)\u{0}\(accountID)\u{0}\(modseq)")
        return TraceID(bytes: Array(digest.prefix(16))) ?? TraceID(bytes: [1] + [UInt8](repeating: 0, count: 15))!
    }

    /// The ids of the change's arrival span (the one that committed at its modseq) and its commit span: the same
    /// wherever they are derived (one digest of the trace id, halved).
    public static func spanIDs(_ trace: TraceID) -> (arrival: SpanID, commit: SpanID) {
        let digest = SHA256.hash(Array("signalfetch.span".utf8) + trace.bytes)
        let fallback = SpanID(bytes: [1, 0, 0, 0, 0, 0, 0, 0])!
        return (SpanID(bytes: Array(digest[0..<8])) ?? fallback, SpanID(bytes: Array(digest[8..<16])) ?? fallback)
    }

    /// The commit span of the change that brought `accountID` to `modseq`: the parent of its signals and fetches.
    public static func commit(epoch: String, accountID: Int64, modseq: Int64) -> SpanContext {
        let trace = traceID(epoch: epoch, accountID: accountID, modseq: modseq)
        return SpanContext(traceID: trace, spanID: spanIDs(trace).commit)
    }
}

import Locking
import OpenSSLCrypto
import Synchronization

/// A trace's id: 16 bytes, never all zero, written as 32 lowercase hex digits (W3C Trace Context, OTLP). Held as two
/// integers, so a span and every id it names are values without a buffer of their own.
public struct TraceID: Hashable, Sendable, CustomStringConvertible {
    /// The first 8 bytes, big-endian.
    public let high: UInt64
    /// The last 8 bytes, big-endian.
    public let low: UInt64

    /// The id of `high` and `low` (not both zero), or `nil`.
    public init?(high: UInt64, low: UInt64) {
        guard high | low != 0 else { return nil }
        self.high = high
        self.low = low
    }

    /// The id made of `bytes` (16, not all zero), or `nil`.
    public init?(bytes: some Collection<UInt8>) {
        guard bytes.count == 16 else { return nil }
        self.init(high: UInt64(bigEndianBytes: bytes.prefix(8)), low: UInt64(bigEndianBytes: bytes.dropFirst(8)))
    }

    /// The id written as 32 hex digits, or `nil`.
    public init?(hex: some StringProtocol) {
        guard hex.utf8.count == 32, let bytes = TraceHex.decode(hex) else { return nil }
        self.init(bytes: bytes)
    }

    /// The 16 bytes.
    public var bytes: [UInt8] { high.bigEndianBytes + low.bigEndianBytes }

    /// Appends the 32 lowercase hex digits to `out`.
    func appendHex(to out: inout [UInt8]) {
        Hex.append(high, to: &out)
        Hex.append(low, to: &out)
    }

    /// The 32 lowercase hex digits.
    public var description: String {
        var out: [UInt8] = []
        out.reserveCapacity(32)
        appendHex(to: &out)
        return String(decoding: out, as: UTF8.self)
    }
}

/// A span's id: 8 bytes, never all zero, written as 16 lowercase hex digits.
public struct SpanID: Hashable, Sendable, CustomStringConvertible {
    /// The 8 bytes, big-endian.
    public let value: UInt64

    /// The id `value` (not zero), or `nil`.
    public init?(value: UInt64) {
        guard value != 0 else { return nil }
        self.value = value
    }

    /// The id made of `bytes` (8, not all zero), or `nil`.
    public init?(bytes: some Collection<UInt8>) {
        guard bytes.count == 8 else { return nil }
        self.init(value: UInt64(bigEndianBytes: bytes))
    }

    /// The id written as 16 hex digits, or `nil`.
    public init?(hex: some StringProtocol) {
        guard hex.utf8.count == 16, let bytes = TraceHex.decode(hex) else { return nil }
        self.init(bytes: bytes)
    }

    /// A random id. Ids need to differ, not to be secret: each is the next of a counter that started at a random
    /// value, mixed by SplitMix64's finalizer (a bijection, so no two ids this process makes are the same), with no
    /// call into the kernel for each.
    public static func random() -> SpanID {
        while true {
            var mixed = randomCounter.wrappingAdd(0x9E37_79B9_7F4A_7C15, ordering: .relaxed).newValue
            mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
            mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
            mixed ^= mixed >> 31
            if let id = SpanID(value: mixed) { return id }
        }
    }

    private static let randomCounter = Atomic<UInt64>(UInt64.random(in: .min ... .max))

    /// The 8 bytes.
    public var bytes: [UInt8] { value.bigEndianBytes }

    /// Appends the 16 lowercase hex digits to `out`.
    func appendHex(to out: inout [UInt8]) { Hex.append(value, to: &out) }

    /// The 16 lowercase hex digits.
    public var description: String {
        var out: [UInt8] = []
        out.reserveCapacity(16)
        appendHex(to: &out)
        return String(decoding: out, as: UTF8.self)
    }
}

extension UInt64 {
    /// The number whose big-endian bytes are `bytes` (8 of them).
    fileprivate init(bigEndianBytes bytes: some Collection<UInt8>) {
        self = bytes.reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// The 8 big-endian bytes.
    fileprivate var bigEndianBytes: [UInt8] { withUnsafeBytes(of: bigEndian, Array.init) }
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
    /// The ids of one change: its trace, and its arrival and commit spans.
    public struct IDs: Sendable, Equatable {
        /// The change's trace.
        public var trace: TraceID
        /// The span of the arrival that committed at the change's modseq.
        public var arrival: SpanID
        /// The commit span: the parent of the change's signals and fetches.
        public var commit: SpanID
    }

    /// The ids of the change that brought `accountID` to `modseq` in the store of `epoch` (``traceID(epoch:accountID:modseq:)``
    /// and ``spanIDs(_:)``), derived once for a recent change: the tracer's commit, signal and fetch spans and the
    /// console's signal events name the same change within a second or two, and each derivation is two SHA-256s.
    public static func ids(epoch: String, accountID: Int64, modseq: Int64) -> IDs {
        let slot = Int(
            truncatingIfNeeded: (UInt64(bitPattern: accountID) &* 0x9E37_79B9_7F4A_7C15 ^ UInt64(bitPattern: modseq))
                % UInt64(recentCapacity))
        if let kept = recent.withLock({ $0[slot] }), kept.accountID == accountID, kept.modseq == modseq,
            kept.epoch == epoch
        {
            return kept.ids
        }
        let trace = traceID(epoch: epoch, accountID: accountID, modseq: modseq)
        let spans = spanIDs(trace)
        let ids = IDs(trace: trace, arrival: spans.arrival, commit: spans.commit)
        recent.withLock { $0[slot] = Recent(epoch: epoch, accountID: accountID, modseq: modseq, ids: ids) }
        return ids
    }

    private struct Recent {
        var epoch: String
        var accountID: Int64
        var modseq: Int64
        var ids: IDs
    }

    /// Recent changes' ids, one slot each by a hash of the account and modseq (a newer change takes its slot).
    private static let recentCapacity = 4_096
    private static let recent = LockedValue<[Recent?]>(Array(repeating: nil, count: recentCapacity))

    /// The trace of the change that brought `accountID` to `modseq` in the store of `epoch`: the first half of the
    /// SHA-256 of `signalfetch.trace`, the epoch, the account and the modseq in decimal, each after a NUL.
    public static func traceID(epoch: String, accountID: Int64, modseq: Int64) -> TraceID {
        var input: [UInt8] = []
        input.reserveCapacity(64 + epoch.utf8.count)
        input.append(contentsOf: "signalfetch.trace\u{0}".utf8)
        input.append(contentsOf: epoch.utf8)
        input.append(0)
        input.append(contentsOf: String(accountID).utf8)
        input.append(0)
        input.append(contentsOf: String(modseq).utf8)
        let digest = SHA256.hash(input)
        return TraceID(bytes: digest.prefix(16)) ?? TraceID(high: 1 << 56, low: 0)!
    }

    /// The ids of the change's arrival span (the one that committed at its modseq) and its commit span: the same
    /// wherever they are derived (one digest of the trace id, halved).
    public static func spanIDs(_ trace: TraceID) -> (arrival: SpanID, commit: SpanID) {
        var input: [UInt8] = []
        input.reserveCapacity(32)
        input.append(contentsOf: "signalfetch.span".utf8)
        input.append(contentsOf: trace.bytes)
        let digest = SHA256.hash(input)
        let fallback = SpanID(value: 1 << 56)!
        return (SpanID(bytes: digest[0..<8]) ?? fallback, SpanID(bytes: digest[8..<16]) ?? fallback)
    }

    /// The commit span of the change that brought `accountID` to `modseq`: the parent of its signals and fetches.
    public static func commit(epoch: String, accountID: Int64, modseq: Int64) -> SpanContext {
        let ids = ids(epoch: epoch, accountID: accountID, modseq: modseq)
        return SpanContext(traceID: ids.trace, spanID: ids.commit)
    }
}

import Foundation
import HTTPServer
import Locking
import LoopEvents
import Push
import ServiceMetrics
import TestSupport
import Testing

@testable import MailboxStore
@testable import SignalDispatch
@testable import Tracing

/// W3C Trace Context as the recommendation reads it: what is taken, and what starts a new trace instead.
@Suite struct TraceparentTests {
    @Test func aWellFormedHeaderIsRead() throws {
        let context = try #require(
            SpanContext(traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
        #expect(context.traceID.description == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(context.spanID.description == "00f067aa0ba902b7")
        #expect(context.traceparent == "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
    }

    @Test func aLaterVersionMayCarryMoreFields() {
        #expect(SpanContext(traceparent: "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes") != nil)
    }

    @Test(arguments: [
        "", "00", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  // uppercase
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  // all-zero trace
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  // all-zero span
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  // version ff
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",  // version 00 has four fields
        "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",  // 31 digits
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
    ])
    func aMalformedHeaderStartsANewTrace(_ header: String) {
        #expect(SpanContext(traceparent: header) == nil)
    }
}

/// The ids every instance derives alike for one change.
@Suite struct ChangeTraceTests {
    @Test func theSameChangeHasTheSameIdsAndAnotherHasOthers() {
        let one = ChangeTrace.commit(epoch: "e1", accountID: 7, modseq: 42)
        #expect(one == ChangeTrace.commit(epoch: "e1", accountID: 7, modseq: 42))
        #expect(one.traceID != ChangeTrace.commit(epoch: "e1", accountID: 7, modseq: 43).traceID)
        #expect(one.traceID != ChangeTrace.commit(epoch: "e1", accountID: 8, modseq: 42).traceID)
        #expect(one.traceID != ChangeTrace.commit(epoch: "e2", accountID: 7, modseq: 42).traceID)
        #expect(one.spanID == ChangeTrace.spanIDs(one.traceID).commit)
        #expect(one.spanID != ChangeTrace.spanIDs(one.traceID).arrival)
    }

    /// The derivation is a contract between instances (and versions) sharing a store: pinned to its bytes, the
    /// SHA-256 of `signalfetch.trace\0e1\07\042`, then of `signalfetch.span` and the trace id.
    @Test func theIdsAreThoseOfTheDerivation() {
        let trace = ChangeTrace.traceID(epoch: "e1", accountID: 7, modseq: 42)
        #expect(trace.description == "04899efe526565578192f76be7e0b022")
        #expect(TraceID(hex: trace.description) == trace)
        #expect(TraceID(bytes: trace.bytes) == trace)
        let spans = ChangeTrace.spanIDs(trace)
        #expect(spans.arrival.description == "dafdffb40bba5f2e")
        #expect(spans.commit.description == "6412d99c0e96c7dc")
        #expect(SpanID(bytes: spans.commit.bytes) == spans.commit)
    }

    /// The ids kept for recent changes are always those derived: many changes share a slot of what is kept, and two
    /// stores' epochs name the same account and modseq.
    @Test func keptIdsAreTheDerivedOnes() {
        for round in 0..<2 {
            for epoch in ["e1", "e2"] {
                for account in Int64(1)...3 {
                    for modseq in Int64(1)...1_000 {
                        let trace = ChangeTrace.traceID(epoch: epoch, accountID: account, modseq: modseq)
                        let spans = ChangeTrace.spanIDs(trace)
                        let ids = ChangeTrace.ids(epoch: epoch, accountID: account, modseq: modseq)
                        guard ids.trace == trace, ids.arrival == spans.arrival, ids.commit == spans.commit else {
                            Issue.record("round \(round): \(epoch) \(account) \(modseq) kept other ids")
                            return
                        }
                    }
                }
            }
        }
    }

    @Test func randomSpanIdsAreNeverZeroAndNeverRepeat() {
        let ids = (0..<20_000).map { _ in SpanID.random() }
        #expect(Set(ids).count == ids.count)
        #expect(ids.allSatisfy { $0.value != 0 && $0.description.utf8.count == 16 })
    }

    @Test func anAllZeroIdIsNone() {
        #expect(TraceID(bytes: [UInt8](repeating: 0, count: 16)) == nil)
        #expect(TraceID(high: 0, low: 1) != nil)
        #expect(SpanID(value: 0) == nil)
        #expect(SpanID(bytes: [1, 2, 3]) == nil)
    }
}

/// The content guard: what a span's string attributes may hold.
@Suite struct SpanAttributeGuardTests {
    @Test(arguments: ["alice@example.com", "Hello world", "", String(repeating: "a", count: 65), "ça", "a/b", "a\"b"])
    func aValueThatCouldBeContentIsRefused(_ value: String) {
        #expect(SpanAttribute.token(.device, value) == nil)
    }

    @Test(arguments: ["dev_3k9x-Q", "com.example.signalfetch", "BadDeviceToken", "oauth:invalid_grant", "sandbox"])
    func tokensAreTaken(_ value: String) {
        #expect(SpanAttribute.token(.device, value)?.value == .string(value))
    }
}

/// OTLP's JSON encoding: the ids as hex, 64-bit numbers as strings, kinds as numbers.
@Suite struct OTLPJSONTests {
    @Test func aSpanIsWrittenAsOTLPJSON() throws {
        let commit = ChangeTrace.commit(epoch: "e", accountID: 1, modseq: 2)
        let span = Span(
            context: SpanContext(traceID: commit.traceID, spanID: SpanID(hex: "0102030405060708")!),
            parent: commit.spanID, name: "signal \"apns\"", kind: .client, start: 1_700_000_000.25,
            end: 1_700_000_000.5, attributes: [.int(.account, 1), .bool(.coalesced, false), .token(.service, "apns")!],
            links: [commit], failed: true)
        let body = OTLPJSON.request([span], service: "mailboxd", instance: "a-1")
        let root = try #require(try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])
        let resource = try #require((root["resourceSpans"] as? [[String: Any]])?.first)
        let attributes = try #require((resource["resource"] as? [String: Any])?["attributes"] as? [[String: Any]])
        #expect(attributes.compactMap { $0["key"] as? String } == ["service.name", "service.instance.id"])
        let scope = try #require((resource["scopeSpans"] as? [[String: Any]])?.first)
        let written = try #require((scope["spans"] as? [[String: Any]])?.first)
        #expect(written["traceId"] as? String == commit.traceID.description)
        #expect(written["spanId"] as? String == "0102030405060708")
        #expect(written["parentSpanId"] as? String == commit.spanID.description)
        #expect(written["name"] as? String == "signal \"apns\"")
        #expect(written["kind"] as? Int == 3)
        #expect(written["startTimeUnixNano"] as? String == "1700000000250000000")
        #expect(written["endTimeUnixNano"] as? String == "1700000000500000000")
        #expect((written["status"] as? [String: Any])?["code"] as? Int == 2)
        let values = try #require(written["attributes"] as? [[String: Any]]).compactMap {
            $0["value"] as? [String: Any]
        }
        #expect(values[0]["intValue"] as? String == "1")
        #expect(values[1]["boolValue"] as? Bool == false)
        #expect(values[2]["stringValue"] as? String == "apns")
        #expect((written["links"] as? [[String: Any]])?.first?["spanId"] as? String == commit.spanID.description)
    }

    @Test func numbersAreWrittenWhole() throws {
        let span = Span(
            context: ChangeTrace.commit(epoch: "e", accountID: 1, modseq: 2), parent: nil, name: "commit",
            kind: .internal, start: 0, end: 9_999_999_999.5,
            attributes: [.int(.account, 0), .int(.modseq, -42), .int(.since, .max), .int(.session, .min)])
        let body = OTLPJSON.request([span], service: "mailboxd", instance: "a-1")
        let root = try #require(try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])
        let resource = try #require((root["resourceSpans"] as? [[String: Any]])?.first)
        let scope = try #require((resource["scopeSpans"] as? [[String: Any]])?.first)
        let written = try #require((scope["spans"] as? [[String: Any]])?.first)
        #expect(written["startTimeUnixNano"] as? String == "0")
        #expect(written["endTimeUnixNano"] as? String == "9999999999500000000")
        let values = try #require(written["attributes"] as? [[String: Any]]).compactMap {
            ($0["value"] as? [String: Any])?["intValue"] as? String
        }
        #expect(values == ["0", "-42", "9223372036854775807", "-9223372036854775808"])
    }

    @Test func theEndpointGetsThePathOTLPNames() throws {
        #expect(try SpanExporter.endpoint("http://127.0.0.1:4318") == "http://127.0.0.1:4318/v1/traces")
        #expect(try SpanExporter.endpoint("https://otel.example/") == "https://otel.example/v1/traces")
        #expect(try SpanExporter.endpoint("https://otel.example/custom") == "https://otel.example/custom")
        for bad in ["ftp://h", "http://user:pw@h", "http://h/?q", "127.0.0.1:4318", ""] {
            #expect(throws: TracingConfigurationError.self) { try SpanExporter.endpoint(bad) }
        }
    }
}

/// One change's spans from the loop's events, as the tracer joins them.
@Suite struct ChangeTracerTests {
    static func report(account: Int64, modseq: Int64, at: Double) -> SignalReport {
        let item = OutboxItem(
            deviceID: 1, address: PushAddress(service: .apns, token: "t", app: "com.example.app"), alias: "dev_abc",
            signalKey: nil, modseq: modseq, state: SyncState(epoch: "e", modseq: modseq), unread: 1, attempts: 0,
            registeredAt: 0, accountID: account, lastSignalledModseq: modseq - 1)
        return SignalReport(item: item, outcome: .sent, reason: nil, latency: 0.01, at: at)
    }

    @Test func anArrivalItsCommitASignalAndAFetchAreOneTrace() throws {
        let spans = LockedSpans()
        let tracer = ChangeTracer(epoch: "e", now: { 100.5 }, sink: { spans.append($0) })
        let caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        // Two deliveries to one account committed together (modseq 5 and 6), one to another account.
        tracer.committed([
            CommittedChange(accountID: 1, modseq: 6, at: 100.4), CommittedChange(accountID: 2, modseq: 3, at: 100.4),
        ])
        tracer.arrived(Arrival(kind: .api, accountID: 1, modseq: 5, startedAt: 100.0, endedAt: 100.6))
        tracer.arrived(
            Arrival(kind: .lmtp, accountID: 1, modseq: 6, startedAt: 100.1, endedAt: 100.6, traceparent: caller))
        tracer.release(final: false)
        tracer.release(final: false)
        #expect(spans.all.isEmpty, "a commit waits through two batches for its arrivals")
        tracer.release(final: false)
        tracer.signalled(Self.report(account: 1, modseq: 6, at: 101))
        tracer.fetched(Fetch(sessionID: 9, accountID: 1, since: 4, modseq: 6, startedAt: 101.1, at: 101.2))
        tracer.fetched(Fetch(sessionID: 9, accountID: 1, since: 6, modseq: 6, startedAt: 101.3, at: 101.4))

        let trace = ChangeTrace.traceID(epoch: "e", accountID: 1, modseq: 6)
        let mine = spans.all.filter { $0.context.traceID == trace }
        #expect(mine.map(\.name).sorted() == ["arrival api", "arrival lmtp", "commit", "fetch", "signal apns"])
        let commit = try #require(mine.first { $0.name == "commit" })
        let parent = try #require(mine.first { $0.name == "arrival lmtp" })
        let coalesced = try #require(mine.first { $0.name == "arrival api" })
        #expect(parent.parent == nil && parent.context.spanID == ChangeTrace.spanIDs(trace).arrival)
        #expect(parent.links == [SpanContext(traceparent: caller)!])
        #expect(commit.parent == parent.context.spanID)
        #expect(commit.links == [coalesced.context])
        #expect(commit.context == ChangeTrace.commit(epoch: "e", accountID: 1, modseq: 6))
        for child in mine where child.name == "fetch" || child.name.hasPrefix("signal") {
            #expect(child.parent == commit.context.spanID)
        }
        let fetch = try #require(mine.first { $0.name == "fetch" })
        #expect(fetch.links == [ChangeTrace.commit(epoch: "e", accountID: 1, modseq: 4)])
        #expect(spans.all.filter { $0.name == "fetch" }.count == 1, "a fetch that reached nothing new is no span")
        // The other account's change is a trace of its own, with a commit and no arrival.
        let other = spans.all.filter { $0.context.traceID == ChangeTrace.traceID(epoch: "e", accountID: 2, modseq: 3) }
        #expect(other.map(\.name) == ["commit"] && other.first?.parent == nil)
    }

    @Test func anArrivalWhoseCommitWasNotSeenIsWrittenAlone() {
        let spans = LockedSpans()
        let tracer = ChangeTracer(epoch: "e", now: { 1 }, sink: { spans.append($0) })
        tracer.arrived(Arrival(kind: .imap, accountID: 3, modseq: 9, startedAt: 0.5, endedAt: 0.9))
        tracer.release(final: false)
        #expect(spans.all.isEmpty, "it waits a batch for its commit")
        tracer.release(final: false)
        #expect(spans.all.map(\.name) == ["arrival imap"])
        #expect(spans.all.first?.context.traceID == ChangeTrace.traceID(epoch: "e", accountID: 3, modseq: 9))
    }
}

final class LockedSpans: Sendable {
    private let spans = LockedValue<[Span]>([])

    func append(_ more: [Span]) { spans.withLock { $0 += more } }

    var all: [Span] { spans.withLock { $0 } }
}

/// The exporter's loop against a collector on loopback (the project's HTTP server): a backlog goes in batches, and the
/// tracer is asked for its held spans once an interval, however many batches the backlog takes, and when stopping.
@Suite struct SpanExporterTests {
    @Test func aBacklogIsSentInBatchesAndTheTracerIsAskedOnceAnIntervalAndWhenStopping() async throws {
        let received = LockedValue<[Int]>([])
        let collector = try HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, threadCount: 1)) { request in
            let root = try JSONSerialization.jsonObject(with: request.body) as? [String: Any]
            let scope = ((root?["resourceSpans"] as? [[String: Any]])?.first?["scopeSpans"] as? [[String: Any]])?.first
            received.withLock { $0.append((scope?["spans"] as? [Any])?.count ?? -1) }
            return HTTPResponse(status: .ok)
        }
        var configuration = SpanExporter.Configuration(endpoint: "http://127.0.0.1:\(collector.port)/v1/traces")
        configuration.batchSize = 3
        configuration.queueCapacity = 10
        // Longer than the test: the tracer is asked only at the stop.
        configuration.interval = .seconds(3_600)
        let metrics = Metrics()
        let exporter = SpanExporter(configuration: configuration, metrics: metrics, log: { _ in })
        let asked = LockedValue<[Bool]>([])
        let trace = ChangeTrace.traceID(epoch: "e", accountID: 1, modseq: 1)
        @Sendable func spans(_ count: Int) -> [Span] {
            (0..<count).map { _ in
                Span(
                    context: SpanContext(traceID: trace, spanID: .random()), parent: nil, name: "fetch",
                    kind: .server, start: 1, end: 2)
            }
        }
        exporter.export(spans(10))
        exporter.start { final in
            // The tracer's held spans, more than the queue holds, handed over the first time it is asked for all.
            let first = asked.withLock { asked in
                defer { asked.append(final) }
                return !asked.contains(true)
            }
            return final && first ? spans(12) : []
        }
        // What was queued before the start, in batches, before any interval has passed.
        #expect(await eventually { received.withLock { $0 }.reduce(0, +) == 10 })
        await exporter.shutdown()
        await collector.shutdown()
        #expect(received.withLock { $0 }.reduce(0, +) == 22)
        #expect(metrics.value("mailboxd_trace_spans_dropped_total", labels: "reason=\"queueFull\"") == 0)
        #expect(received.withLock { $0 }.allSatisfy { (1...3).contains($0) })
        #expect(asked.withLock { $0 }.allSatisfy { $0 } && !asked.withLock { $0 }.isEmpty)
    }
}

extension SpanExporterTests {
    /// At a stop, a collector that fails the first batch is not tried again for each of the others (each try could
    /// wait out the timeouts): the rest is counted at once.
    @Test func aStopWithTheCollectorFailingCountsWhatIsLeftWithoutTryingEachBatch() async throws {
        let requests = LockedValue(0)
        let collector = try HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, threadCount: 1)) { _ in
            requests.withLock { $0 += 1 }
            return HTTPResponse(status: .serviceUnavailable)
        }
        var configuration = SpanExporter.Configuration(endpoint: "http://127.0.0.1:\(collector.port)/v1/traces")
        configuration.batchSize = 3
        configuration.interval = .seconds(3_600)
        let metrics = Metrics()
        let exporter = SpanExporter(configuration: configuration, metrics: metrics, log: { _ in })
        let trace = ChangeTrace.traceID(epoch: "e", accountID: 1, modseq: 1)
        let handed = LockedValue(false)
        exporter.start { final in
            // Ten held spans, handed over at the stop only.
            guard final, !handed.withLock({ $0 }) else { return [] }
            handed.withLock { $0 = true }
            return (0..<10).map { _ in
                Span(
                    context: SpanContext(traceID: trace, spanID: .random()), parent: nil, name: "fetch",
                    kind: .server, start: 1, end: 2)
            }
        }
        await exporter.shutdown()
        await collector.shutdown()
        #expect(requests.withLock { $0 } == 1)
        #expect(metrics.value("mailboxd_trace_spans_dropped_total", labels: "reason=\"refused\"") == 10)
    }
}

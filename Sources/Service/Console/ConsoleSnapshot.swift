import Foundation
import MailboxStore
import Tracing

/// What the console paints first, before its event stream: the recent events (`events`, as the stream sends
/// them), every device, the outbox and each push service, freshness, and the store. `lastEventId` is where the
/// stream takes over.
struct ConsoleSnapshot: Encodable {
    struct Device: Encodable {
        var alias: String
        var account: String
        var service: String
        var app: String
        var environment: String
        var lastSignalAt: Int64?
        var lastSignalledModseq: Int64
        /// The trace of the change last signalled (`docs/operations.md`, "Tracing"), for an operator to paste.
        var trace: String?
    }

    struct Instance: Encodable {
        var id: String
        var startedAt: Int64
        var seenAt: Int64
        var live: Bool
        var changes: Int64
        var signalsSent: Int64
        var signalsFailed: Int64
    }

    struct Outbox: Encodable {
        var service: String
        var depth: Int
        var retrying: Int
        var oldestPendingSeconds: Double?
    }

    var lastEventId: Int
    var now: Int64
    var instance: String
    var store: String
    var devices: [Device]
    var outbox: [Outbox]
    var gateways: [GatewayStats]
    var freshness: FreshnessSummary
    /// Every process sharing the store that reported in the last minute (the cluster view, from the store).
    var instances: [Instance]
}

extension ConsoleFeed {
    /// The snapshot, as JSON: at most the newest `events` events.
    public func snapshotJSON(events limit: Int = 500) async throws -> Data {
        // The event id first: events after it come on the stream, and the store's view is at least as new.
        let last = lastEventID
        let kept = (events(after: max(0, last - limit)) ?? []).suffix(limit)
        let devices = try await store.deviceSummaries()
        let outbox = try await store.outboxSummaries()
        let instances = try await store.instances(seenWithin: 60)
        let now = store.currentTime
        let engine: String =
            switch store.database {
            case .sqlite: "sqlite"
            case .postgres: "postgresql"
            }
        let snapshot = ConsoleSnapshot(
            lastEventId: last, now: Self.millis(now), instance: store.instanceID, store: engine,
            devices: devices.map {
                ConsoleSnapshot.Device(
                    alias: $0.alias, account: $0.username, service: $0.service, app: $0.app,
                    environment: $0.environment, lastSignalAt: $0.lastSignalAt > 0 ? Self.millis($0.lastSignalAt) : nil,
                    lastSignalledModseq: $0.lastSignalledModseq,
                    trace: $0.lastSignalledModseq > 0
                        ? ChangeTrace.traceID(
                            epoch: store.epoch, accountID: $0.accountID, modseq: $0.lastSignalledModseq
                        )
                        .description : nil)
            },
            outbox: outbox.map {
                ConsoleSnapshot.Outbox(
                    service: $0.service, depth: $0.depth, retrying: $0.retrying,
                    oldestPendingSeconds: $0.oldestDueAt.map { max(0, ((now - $0) * 10).rounded() / 10) })
            },
            gateways: gateways, freshness: freshness,
            instances: instances.map {
                ConsoleSnapshot.Instance(
                    id: $0.id, startedAt: Self.millis($0.startedAt), seenAt: Self.millis($0.seenAt),
                    live: now - $0.seenAt <= 3 * Self.reportInterval, changes: $0.changes, signalsSent: $0.signalsSent,
                    signalsFailed: $0.signalsFailed)
            })
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // The events are JSON already (the stream's): spliced in as they are.
        let rest = String(decoding: try encoder.encode(snapshot), as: UTF8.self).dropFirst()
        return Data(("{\"events\":[" + kept.map(\.json).joined(separator: ",") + "]," + rest).utf8)
    }
}

import Foundation
import SQLiteKit

/// `signalfetch-bench store`: the store's figures, each side measured against its baseline in the same run.
extension StoreBenchmarks {
    /// Group commit with 8 producers at NORMAL and FULL (a figure for FULL, NORMAL's ratio a detail), with 64
    /// producers against one transaction per message and against the same producers at OFF, and the sync costs
    /// (``syncFigures(count:large:fresh:)``); `changesOnly` measures only the sync costs.
    static func figures(count: Int, large: Int, changesOnly: Bool, fresh: (String) -> String) async throws -> [Figure] {
        var figures: [Figure] = []
        if !changesOnly {
            var normalRatio = 0.0
            for mode in [SynchronousMode.normal, .full] {
                let figure = try await groupCommitFigure(mode: mode, count: count, fresh: fresh)
                if mode == .normal { normalRatio = figure.ratio } else { figures.append(figure) }
            }
            figures[0].details["normal_ratio"] = .number(normalRatio, decimals: 2)
            figures += try await producers64Figures(count: count, fresh: fresh)
        }
        return figures + (try await syncFigures(large: large, fresh: fresh))
    }

    /// Group commit against one transaction per message with 8 producers at `mode`: two interleaved measurements
    /// (see ``deliveryRates(groupPath:singlePath:synchronous:count:producers:chunks:)``), the best of each side,
    /// with what bounds the ratio as details.
    static func groupCommitFigure(mode: SynchronousMode, count: Int, fresh: (String) -> String) async throws -> Figure {
        var runs: [DeliveryRates] = []
        for _ in 0..<2 {
            runs.append(
                try await deliveryRates(
                    groupPath: fresh("group"), singlePath: fresh("single"), synchronous: mode, count: count,
                    producers: 8))
        }
        let grouped = runs.map(\.group).max() ?? 0
        let single = runs.map(\.single).max() ?? 1
        let mean = { (value: KeyPath<DeliveryRates, Double>) in runs.map { $0[keyPath: value] }.reduce(0, +) / 2 }
        // What the commit alone allows: at most 8 deliveries share one COMMIT, so the ratio cannot pass
        // 8 × (a whole one-message transaction) / (the store's COMMIT), whatever the rest costs; and with the
        // machinery's cost when nothing is written (producers' turnaround, hand-offs, one read per write) added to
        // the commit, the ratio if inserting a message cost no more than reading one.
        let bound = runs.map { 8 / $0.single / $0.groupCommit }.max() ?? 0
        let ceiling = runs.map { 8 / $0.single / ($0.groupCommit + $0.machinery) }.max() ?? 0
        let perTransaction = Double(count * runs.count) / Double(max(1, runs.map(\.batches).reduce(0, +)))
        return Figure(
            "store-group-commit",
            title:
                "MailboxStore group commit vs one transaction per message (synchronous \(mode.rawValue), 8 producers)",
            unit: "deliveries/s", ours: ("group commit", grouped.rounded()),
            baseline: ("one tx per message", single.rounded()),
            goal: 5,
            details: [
                "deliveries": .integer(count), "producers": .integer(8),
                "full_deliveries_per_tx": .number(perTransaction, decimals: 2),
                "full_group_commit_us": .integer(Int(mean(\.groupCommit) * 1e6)),
                "full_single_commit_us": .integer(Int(mean(\.singleCommit) * 1e6)),
                "full_single_tx_us": .integer(Int(1e6 / single)), "full_ratio_bound": .number(bound, decimals: 2),
                "full_machinery_us": .integer(Int(mean(\.machinery) * 1e6)),
                "full_ratio_ceiling": .number(ceiling, decimals: 2),
            ])
    }

    /// 64 producers, as many as an MTA's LMTP sessions and a crowd of senders bring: at FULL against one transaction
    /// per message, and against the same producers at OFF (no fsync: the CPU-bound ceiling), interleaved as above.
    static func producers64Figures(count: Int, fresh: (String) -> String) async throws -> [Figure] {
        var full: [DeliveryRates] = []
        var off: [DeliveryRates] = []
        for _ in 0..<2 {
            full.append(
                try await deliveryRates(
                    groupPath: fresh("group64"), singlePath: fresh("single64"), synchronous: .full, count: count,
                    producers: 64))
            off.append(
                try await deliveryRates(
                    groupPath: fresh("group64off"), singlePath: fresh("single64off"), synchronous: .off, count: count,
                    producers: 64))
        }
        let grouped = full.map(\.group).max() ?? 0
        let single = full.map(\.single).max() ?? 1
        let offRate = off.map(\.group).max() ?? 1
        let details: [String: Figure.Detail] = [
            "deliveries": .integer(count), "producers": .integer(64),
            "full64_deliveries_per_tx": .number(
                Double(count * full.count) / Double(max(1, full.map(\.batches).reduce(0, +))), decimals: 1),
            "full64_group_commit_us": .integer(Int(full.map(\.groupCommit).reduce(0, +) / Double(full.count) * 1e6)),
            "full64_single_tx_per_s": .integer(Int(single)), "off64_group_commit_per_s": .integer(Int(offRate)),
        ]
        return [
            Figure(
                "store-group-commit-64",
                title: "MailboxStore group commit vs one transaction per message (synchronous FULL, 64 producers)",
                unit: "deliveries/s", ours: ("group commit", grouped.rounded()),
                baseline: ("one tx per message", single.rounded()), goal: 10, details: details),
            Figure(
                "store-durability-cost-64",
                title: "Group commit at FULL vs the same 64 producers at synchronous OFF (no fsync)",
                unit: "deliveries/s", ours: ("FULL", grouped.rounded()), baseline: ("OFF", offRate.rounded()),
                goal: 0.8,
                details: details),
        ]
    }

    /// `changes` (and JMAP's sync) for 100 new messages in a `large`-message mailbox against a 1,000-message one,
    /// and JMAP's sync against `/v1/changes` through the API's router.
    static func syncFigures(large: Int, fresh: (String) -> String) async throws -> [Figure] {
        let smallMailbox = try await changesFixture(path: fresh("small"), size: 1_000)
        let largeMailbox = try await changesFixture(path: fresh("large"), size: large)
        let (small, big) = try await changesLatency(small: smallMailbox, large: largeMailbox)
        let sync = try await JMAPBenchmarks.syncLatency(small: smallMailbox, large: largeMailbox)
        let size = large.formatted(.number.grouping(.automatic).locale(Locale(identifier: "en_US")))
        return [
            Figure(
                "store-changes", title: "`changes` for 100 new messages: \(size)-message vs 1,000-message mailbox",
                unit: "ms", ours: ("large mailbox", big), baseline: ("1,000 messages", small), goal: 2,
                higherIsBetter: false, chart: false, details: ["large_mailbox": .integer(large)]),
            Figure(
                "jmap-changes",
                title: "JMAP `Email/changes` + `Email/get` (text bodies) for 100 new emails: \(size)-message vs "
                    + "1,000-message mailbox",
                unit: "ms", ours: ("large mailbox", sync.jmapLarge), baseline: ("1,000 messages", sync.jmapSmall),
                goal: 2, higherIsBetter: false, chart: false, details: ["large_mailbox": .integer(large)]),
            Figure(
                "jmap-vs-v1",
                title: "A sync of 100 new messages: JMAP (`Email/changes` + `Email/get` with text bodies) vs "
                    + "`/v1/changes`, through the API's router (rate ratio)",
                unit: "ms", ours: ("JMAP", sync.jmapSmall), baseline: ("/v1/changes", sync.v1Small),
                ratio: sync.v1Small / sync.jmapSmall, goal: 0.5, chart: false),
        ]
    }
}

import Durations
import Foundation
import Push

/// The load loop of the push-sender benchmarks (`fcm-load`, `webpush-load`): one signal sent `count` times
/// through a ``PushService``, `concurrency` sends in flight, spread over `addresses`; and its JSON result line.
enum PushServiceLoad {
    /// What a run delivered, and why the rest failed (reason → count).
    struct Result: Sendable {
        var delivered = 0
        var failures: [String: Int] = [:]
    }

    static func run(
        _ service: any PushService, _ signal: PushSignal, _ addresses: [PushAddress], count: Int, concurrency: Int
    ) async -> Result {
        await withTaskGroup(of: Result.self) { group in
            for worker in 0..<max(1, min(concurrency, count)) {
                group.addTask {
                    var result = Result()
                    for index in stride(from: worker, to: count, by: max(1, concurrency)) {
                        switch await service.send(signal, to: addresses[index % addresses.count]) {
                        case .delivered: result.delivered += 1
                        case .retry(let reason, _), .defect(let reason), .dropRegistration(let reason, _):
                            result.failures[reason, default: 0] += 1
                        }
                    }
                    return result
                }
            }
            var total = Result()
            for await part in group {
                total.delivered += part.delivered
                total.failures.merge(part.failures, uniquingKeysWith: +)
            }
            return total
        }
    }

    /// Warms up with `warmup` sends (failing if none is delivered), then measures `count` and prints
    /// `{"benchmark":NAME,"signals","succeeded","failed","concurrency","seconds","rate","connections","failures"}`.
    static func measure(
        _ name: String, _ service: any PushService, _ signal: PushSignal, _ addresses: [PushAddress], count: Int,
        concurrency: Int, warmup: Int, connections: () -> Int
    ) async throws {
        if warmup > 0 {
            let warm = await run(service, signal, addresses, count: warmup, concurrency: concurrency)
            guard warm.delivered > 0 else { throw BenchError("warm-up: every signal failed: \(warm.failures)") }
        }
        let start = ContinuousClock.now
        let result = await run(service, signal, addresses, count: count, concurrency: concurrency)
        let elapsed = ContinuousClock.now - start
        let seconds = elapsed.seconds
        let failures = result.failures.sorted { $0.key < $1.key }.map { #""\#($0.key)":\#($0.value)"# }
        TransportBenchmarks.emit(
            #"{"benchmark":"\#(name)","signals":\#(count),"succeeded":\#(result.delivered),"#
                + #""failed":\#(count - result.delivered),"concurrency":\#(concurrency),"#
                + #""seconds":\#(String(format: "%.3f", seconds)),"#
                + #""rate":\#(String(format: "%.1f", Double(result.delivered) / seconds)),"#
                + #""connections":\#(connections()),"failures":{\#(failures.joined(separator: ","))}}"#)
    }
}

import Foundation
import HTTPServer
import Locking
import MailboxHTTPAPI
import MailboxStore
import OpenSSLCrypto
import ServiceMetrics
import SignalDispatch

/// Sign-in latency while mail arrives: `POST /v1/session` (scrypt at the production parameters, on the store's
/// threads) alone, and while `POST /v1/deliveries` runs at a steady rate on the same router and store. A sign-in
/// that waited behind deliveries (or blocked them) would show here.
enum SignInBenchmarks {
    struct Latencies {
        var idle: [Double]
        var loaded: [Double]
        var deliveries: Int
        var seconds: Double

        /// The figure: the p50 under load against the p50 alone (at most 1.5×), the p90s and the rate reached as
        /// details.
        func figure(deliveriesPerSecondTarget target: Double) -> Figure {
            func percentile(_ values: [Double], _ p: Double) -> Double {
                let sorted = values.sorted()
                return sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
            }
            let rate = Double(deliveries) / seconds
            return Figure(
                "signin-under-load",
                title: "Sign-in (POST /v1/session, scrypt) p50 while \(String(format: "%.1f", rate)) deliveries/s run "
                    + "vs alone",
                unit: "ms", ours: ("under load", percentile(loaded, 0.5)), baseline: ("alone", percentile(idle, 0.5)),
                goal: 1.5, higherIsBetter: false, chart: false,
                details: [
                    "deliveries_per_s_target": .integer(Int(target)), "deliveries_per_s": .number(rate, decimals: 1),
                    "p90_ms_alone": .number(percentile(idle, 0.9), decimals: 2),
                    "p90_ms_under_load": .number(percentile(loaded, 0.9), decimals: 2),
                ])
        }
    }

    static func run(path: String, signIns: Int, deliveriesPerSecond: Double) async throws -> Latencies {
        var configuration = MailboxStore.Configuration()
        configuration.synchronous = .full
        let store = try MailboxStore(path: path, configuration: configuration)
        let password = "bench-password-\(SecureRandom.hex(4))"
        _ = try await store.createAccount(username: "signin", password: password)
        let deliveryToken = SecureRandom.base64URL(24)
        let api = MailboxAPI(
            store: store, configuration: .init(deliveryToken: deliveryToken), metrics: Metrics(), push: PushRouter([]))
        let router = api.router
        let signIn = HTTPRequest(
            method: "POST", path: "/v1/session", headers: ["Content-Type": "application/json"],
            body: Data(#"{"username":"signin","password":"\#(password)","deviceName":"bench"}"#.utf8),
            remoteAddress: "127.0.0.1")

        func measure() async throws -> Double {
            let start = ContinuousClock.now
            let response = try await router.handle(signIn)
            guard response.status == .created else { throw BenchError("sign-in answered \(response.status)") }
            return seconds(since: start) * 1000
        }
        _ = try await measure()  // warm up
        var idle: [Double] = []
        for _ in 0..<signIns { idle.append(try await measure()) }

        let delivered = LockedValue(0)
        let interval = 1 / deliveriesPerSecond
        let load = Task {
            var next = ContinuousClock.now
            var n = 0
            while !Task.isCancelled {
                n += 1
                let request = HTTPRequest(
                    method: "POST", path: "/v1/deliveries",
                    headers: ["Authorization": "Bearer \(deliveryToken)", "Content-Type": "application/json"],
                    body: Data(
                        #"{"to":"signin","from":"load@example.com","subject":"Load \#(n)","body":"Message \#(n)"}"#
                            .utf8))
                if let response = try? await router.handle(request), response.status == .created {
                    delivered.withLock { $0 += 1 }
                }
                next = next.advanced(by: .seconds(interval))
                try? await Task.sleep(until: next, clock: .continuous)
            }
        }
        let loadStart = ContinuousClock.now
        try await Task.sleep(for: .milliseconds(500))  // the load reaches its pace first
        var loaded: [Double] = []
        for _ in 0..<signIns { loaded.append(try await measure()) }
        load.cancel()
        _ = await load.value
        return Latencies(
            idle: idle, loaded: loaded, deliveries: delivered.withLock { $0 }, seconds: seconds(since: loadStart))
    }
}

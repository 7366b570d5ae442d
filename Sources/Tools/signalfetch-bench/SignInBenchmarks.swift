import Foundation
import HTTPServer
import Locking
import MailboxHTTPAPI
import MailboxStore
import OpenSSLCrypto
import ServiceMetrics
import SignalDispatch

/// Sign-in latency while mail arrives, and delivery latency while sign-ins run: `POST /v1/session` (scrypt at the
/// production parameters, on the store's threads) alone, then `POST /v1/deliveries` at a steady rate on the same
/// router and store, alone and then while sign-ins run back to back. A sign-in that waited behind deliveries, or
/// deliveries held up behind scrypt on the cooperative pool, would show here.
enum SignInBenchmarks {
    struct Latencies {
        /// Sign-ins (ms) alone, and while deliveries run.
        var idle: [Double]
        var loaded: [Double]
        /// Deliveries made at the load's rate over `seconds`.
        var deliveries: Int
        var seconds: Double
        /// Each delivery's latency (ms) while no sign-in runs, and while sign-ins run.
        var deliveriesAlone: [Double]
        var deliveriesDuringSignIns: [Double]

        /// The sign-ins' side: the p50 under load against the p50 alone (at most 1.5×), the p90s and the rate
        /// reached as details.
        func figure(deliveriesPerSecondTarget target: Double) -> Figure {
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

        /// The deliveries' side: their p99 while sign-ins run, as a share of one sign-in (the loaded p50), at most
        /// a tenth. A delivery held behind scrypt on the cooperative pool waits a good part of a sign-in (measured on
        /// the pool: 0.19 and 0.29 in two rounds of three); beside it on threads of its own, only for the CPU the
        /// two share (about 0.05). The p99 alone is a detail.
        var deliveryFigure: Figure {
            Figure(
                "delivery-during-signins",
                title: "Delivery (POST /v1/deliveries) p99 while sign-ins run back to back vs one sign-in (p50)",
                unit: "ms", ours: ("delivery p99", percentile(deliveriesDuringSignIns, 0.99)),
                baseline: ("one sign-in", percentile(loaded, 0.5)), goal: 0.1, higherIsBetter: false, chart: false,
                details: [
                    "p99_ms_alone": .number(percentile(deliveriesAlone, 0.99), decimals: 2),
                    "p50_ms_alone": .number(percentile(deliveriesAlone, 0.5), decimals: 2),
                    "p50_ms_during_signins": .number(percentile(deliveriesDuringSignIns, 0.5), decimals: 2),
                    "deliveries_alone": .integer(deliveriesAlone.count),
                    "deliveries_during_signins": .integer(deliveriesDuringSignIns.count),
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

        // Deliveries at a steady rate, each timed; `signingIn` says which phase a delivery belongs to.
        let latencies = LockedValue((alone: [Double](), during: [Double]()))
        let signingIn = LockedValue(false)
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
                let during = signingIn.withLock { $0 }
                let start = ContinuousClock.now
                if let response = try? await router.handle(request), response.status == .created {
                    let milliseconds = seconds(since: start) * 1000
                    latencies.withLock { during ? $0.during.append(milliseconds) : $0.alone.append(milliseconds) }
                }
                next = next.advanced(by: .seconds(1 / deliveriesPerSecond))
                try? await Task.sleep(until: next, clock: .continuous)
            }
        }
        // The load reaches its pace, then runs alone about as long as the sign-ins will take, then with them.
        try await Task.sleep(for: .milliseconds(500))
        latencies.withLock { $0 = ([], []) }
        let loadStart = ContinuousClock.now
        try await Task.sleep(for: .milliseconds(Int(idle.reduce(0, +))))
        signingIn.withLock { $0 = true }
        var loaded: [Double] = []
        for _ in 0..<signIns { loaded.append(try await measure()) }
        load.cancel()
        _ = await load.value
        let measured = latencies.withLock { $0 }
        return Latencies(
            idle: idle, loaded: loaded, deliveries: measured.alone.count + measured.during.count,
            seconds: seconds(since: loadStart), deliveriesAlone: measured.alone,
            deliveriesDuringSignIns: measured.during)
    }
}

/// The value at fraction `p` of `values` in order (0 for none).
private func percentile(_ values: [Double], _ p: Double) -> Double {
    guard !values.isEmpty else { return 0 }
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
}

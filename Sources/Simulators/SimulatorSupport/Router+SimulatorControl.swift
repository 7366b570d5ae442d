import Foundation
import HTTPServer

extension Router {
    /// `GET /healthz` (`{"status":"ok"}`) and `GET /metrics` (what `metrics` renders, Prometheus text), as every
    /// simulator's device API answers them.
    package mutating func addHealthRoutes(metrics: @escaping @Sendable () -> String) {
        get("/healthz") { _ in try .json(["status": "ok"]) }
        get("/metrics") { _ in
            HTTPResponse(
                status: .ok, headers: ["Content-Type": "text/plain; version=0.0.4"], body: Data(metrics().utf8))
        }
    }

    /// The control routes every simulator answers alike: `GET` and `PUT /sim/faults` (the gateway's
    /// ``SimulatorControl/FaultsForm``), `GET /sim/log?after=&limit=` (non-negative integers) and `DELETE /sim/log`,
    /// and the health routes. Bad input gets a 400 with `{"error","message"}` and changes nothing.
    package mutating func addControlRoutes<Gateway: SimulatorControl>(for gateway: Gateway) {
        get("/sim/faults") { _ in try .json(Gateway.FaultsForm(gateway.faults)) }
        put("/sim/faults") { request in
            let faults = try request.decodeJSON(Gateway.FaultsForm.self, allowedFields: Gateway.FaultsForm.fields)
                .faults()
            gateway.setFaults(faults)
            return try .json(Gateway.FaultsForm(faults))
        }
        addLogRoutes {
            gateway.logEntries(after: $0, limit: $1)
        } clear: {
            gateway.clearLog()
        }
        addHealthRoutes { gateway.prometheusText }
    }

    /// `GET /sim/log?after=&limit=` (non-negative integers; a bad one is a 400 and reads nothing), the capture
    /// log's entries after sequence `after`, oldest first, at most `limit`; and `DELETE /sim/log`, which clears it.
    package mutating func addLogRoutes<Entry: Encodable & SendableMetatype>(
        entries: @escaping @Sendable (_ after: Int, _ limit: Int) -> [Entry], clear: @escaping @Sendable () -> Void
    ) {
        get("/sim/log") { request in
            guard let after = Int(request.query("after") ?? "0"), after >= 0,
                let limit = Int(request.query("limit") ?? String(Int.max)), limit >= 0
            else { throw HTTPError.invalidRequest("'after' and 'limit' must be non-negative integers.") }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            return try .json(entries(after, limit), encoder: encoder)
        }
        delete("/sim/log") { _ in
            clear()
            return .empty()
        }
    }
}

/// The body of `PUT /sim/devices/{id}/online` on every simulator: whether the device is reachable.
package struct DeviceOnlineJSON: Codable, Sendable {
    /// The fields the request may hold.
    package static let fields: Set<String> = ["online"]
    /// `true` to bring the device online (what was kept for it is delivered), `false` to hold it offline.
    package var online: Bool
}

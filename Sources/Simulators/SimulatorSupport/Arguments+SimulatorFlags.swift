import CommandLineSupport
import Glibc

/// The flags every push-service simulator reads alike: its provider listener's TLS files and the faults in force
/// at start. Each simulator keeps its own flags, defaults and the order it checks them in.
extension Arguments {
    /// `--tls-cert` and `--tls-key`, both required unless `--h2c` asks for cleartext HTTP/2 (then `nil`).
    public func simulatorTLSFiles() throws -> SimulatorTLSFiles? {
        guard !flag("h2c") else { return nil }
        guard let certificate = string("tls-cert"), let key = string("tls-key") else {
            throw UsageError("--tls-cert and --tls-key are required (or --h2c for cleartext HTTP/2)")
        }
        return SimulatorTLSFiles(certificatePath: certificate, privateKeyPath: key)
    }

    /// `--allow-peer` (repeatable): the only source addresses the provider listener serves, each an IP literal.
    public func simulatorAllowedPeers() throws -> Set<String> {
        var peers: Set<String> = []
        for address in all("allow-peer") {
            var v4 = in_addr()
            var v6 = in6_addr()
            guard inet_pton(AF_INET, address, &v4) == 1 || inet_pton(AF_INET6, address, &v6) == 1 else {
                throw UsageError("--allow-peer must be an IP address (got \(address.prefix(64)))")
            }
            peers.insert(address)
        }
        return peers
    }

    /// `--fault-seed`, the fault generator's seed (`nil` when not given).
    public func faultSeed() throws -> UInt64? {
        guard let text = string("fault-seed") else { return nil }
        guard let seed = UInt64(text) else { throw UsageError("--fault-seed must be an integer") }
        return seed
    }

    /// `--name` as a fault's probability, from 0 to 1 (0 when not given).
    public func faultProbability(_ name: String) throws -> Double {
        let value = try double(name, default: 0)
        guard (0...1).contains(value) else { throw UsageError("--\(name) must be between 0 and 1") }
        return value
    }

    /// The faults `--fault-seed`, `--fault-drop`, `--fault-429`, `--fault-503` and `--fault-latency-ms` ask for
    /// (checked in that order): the three probabilities add up to at most 1, the latency is not negative.
    public func simulatorFaults() throws -> SimulatorFaults {
        let seed = try faultSeed()
        let faults = SimulatorFaults(
            dropProbability: try faultProbability("fault-drop"),
            status429Probability: try faultProbability("fault-429"),
            status503Probability: try faultProbability("fault-503"),
            latency: .milliseconds(try int("fault-latency-ms", default: 0)), seed: seed)
        guard faults.dropProbability + faults.status429Probability + faults.status503Probability <= 1 else {
            throw UsageError("--fault-drop, --fault-429 and --fault-503 must add up to at most 1")
        }
        guard faults.latency >= .zero else { throw UsageError("--fault-latency-ms must not be negative") }
        return faults
    }
}

/// The flags the readers above read, declared beside them so each simulator's table lists them from one place.
extension Flag {
    /// `--tls-cert`, `--tls-key` and `--h2c` (``Arguments/simulatorTLSFiles()``) of the `listener`; `h2c` says
    /// what `--h2c` serves.
    package static func simulatorTLS(listener: String = "provider API", h2c: String) -> [Flag] {
        [
            Flag("tls-cert", "FILE", help: "\(listener) certificate chain (PEM; required unless --h2c)"),
            Flag("tls-key", "FILE", help: "\(listener) private key (PEM; required unless --h2c)"),
            Flag(switch: "h2c", help: h2c),
        ]
    }

    /// `--device-listen` at its `default` address, and `--device-connection-limit`.
    package static func simulatorDeviceAPI(default address: String, what: String = "device API") -> [Flag] {
        [
            Flag("device-listen", "HOST:PORT", help: "\(what) address (default \(address))"),
            Flag("device-connection-limit", "N", help: "most device-API connections (default 16384)"),
        ]
    }

    /// The faults ``Arguments/simulatorFaults()`` reads, with the service's own answers: `accepted` the status it
    /// answers a message it then never delivers, `tooMany` and `unavailable` its 429 and 503 as it names them
    /// (`429 TooManyRequests`); `answers` what the latency delays.
    package static func simulatorFaults(
        accepted: String, tooMany: String, unavailable: String, answers: String = "provider"
    ) -> [Flag] {
        [
            Flag("fault-drop", "P", help: "probability of answering \(accepted) and never delivering"),
            Flag("fault-429", "P", help: "probability of \(tooMany)"),
            Flag("fault-503", "P", help: "probability of \(unavailable)"),
            Flag("fault-seed", "N", help: "seed for the fault generator (same seed, same faults)"),
            Flag("fault-latency-ms", "N", help: "delay every \(answers) response by N milliseconds"),
        ]
    }

    /// `--allow-peer` (``Arguments/simulatorAllowedPeers()``).
    package static let simulatorAllowPeer = Flag(
        "allow-peer", "ADDRESS",
        help: "serve the provider API only to connections from this IP address (repeatable; e.g. an",
        "HTTP proxy's outgoing address, so that senders reach the simulator only through it)")
}

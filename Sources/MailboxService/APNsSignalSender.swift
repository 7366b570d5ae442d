import APNs
import Foundation
import MailboxStore

/// Sends content-free signals to APNs (or apns-sim) for outbox rows.
///
/// The signal holds only the badge (the unread count now) and/or `content-available`, the device's opaque
/// alias and the account's state string; `APNsClient` runs the payload guard on the serialized bytes before
/// they reach the wire. The retry decision for each response comes from `RetryPolicy`; the dispatcher keeps
/// the retry schedule in the outbox, so it survives restarts.
public final class APNsSignalSender: SignalSender {
    /// Which kind of signal to send.
    public enum Kind: Sendable {
        /// `badge` + `content-available: 1`: user-visible, push type `alert`, priority 10.
        case badge
        /// `content-available: 1` only: push type `background`, priority 5, throttled by Apple.
        case background
    }

    /// Where and how to send.
    public struct Configuration: Sendable {
        /// The APNs base URL, e.g. `https://api.push.apple.com` or an apns-sim URL.
        public var url: String
        /// A CA file for the endpoint's certificate (apns-sim's dev CA).
        public var caFile: String?
        /// The `.p8` signing key.
        public var keyFile: String
        /// The key id.
        public var keyID: String
        /// The team id.
        public var teamID: String
        /// The app's bundle id (`apns-topic`).
        public var topic: String
        /// Which kind of signal to send.
        public var kind: Kind
        /// Cap payloads at 2048 bytes instead of 4096.
        public var legacyPayloadLimit: Bool
        /// Where the current provider token is kept, so a restart reuses it instead of signing a new one
        /// (APNs refuses a key's token replaced more than once in 20 minutes).
        public var tokenCacheFile: String?

        /// Creates a configuration.
        public init(
            url: String, caFile: String?, keyFile: String, keyID: String, teamID: String, topic: String, kind: Kind,
            legacyPayloadLimit: Bool, tokenCacheFile: String? = nil
        ) {
            self.tokenCacheFile = tokenCacheFile
            self.url = url
            self.caFile = caFile
            self.keyFile = keyFile
            self.keyID = keyID
            self.teamID = teamID
            self.topic = topic
            self.kind = kind
            self.legacyPayloadLimit = legacyPayloadLimit
        }
    }

    /// The collapse id of every signal: a newer signal replaces an older one still waiting for the device.
    static let collapseID = "sync"

    private let client: APNsClient
    private let topic: APNsTopic
    private let kind: Kind

    /// Loads the signing key and prepares the shared HTTP/2 connection.
    public init(configuration: Configuration) throws {
        let key = try APNsSigningKey(
            p8File: configuration.keyFile, keyID: configuration.keyID, teamID: configuration.teamID)
        topic = try APNsTopic(configuration.topic)
        kind = configuration.kind
        let tokens = ProviderTokenManager(signingKey: key)
        tokenSetup = Task { [cacheFile = configuration.tokenCacheFile] in
            guard let cacheFile else { return }
            if let saved = Self.readToken(cacheFile) { await tokens.adopt(saved) }
            await tokens.onTokenIssued { token in Self.writeToken(token, to: cacheFile) }
        }
        client = APNsClient(
            configuration: .init(
                endpoint: .custom(url: configuration.url, caFile: configuration.caFile),
                authentication: .token(tokens),
                payloadLimit: configuration.legacyPayloadLimit ? .legacy : .standard))
    }

    private let tokenSetup: Task<Void, Never>

    /// Reads a token saved by `writeToken`: the issue time (UNIX seconds) on the first line, the JWT on the second.
    static func readToken(_ path: String) -> ProviderToken? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        let lines = text.split(separator: "\n")
        guard lines.count == 2, let issued = Double(lines[0]) else { return nil }
        return ProviderToken(value: String(lines[1]), issuedAt: Date(timeIntervalSince1970: issued))
    }

    static func writeToken(_ token: ProviderToken, to path: String) {
        let text = "\(Int64(token.issuedAt.timeIntervalSince1970))\n\(token.value)\n"
        let temporary = path + ".tmp"
        guard
            FileManager.default.createFile(
                atPath: temporary, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
        else { return }
        rename(temporary, path)  // atomic: a reader sees the old token or the new one, never half of one
    }

    /// Whether signals are background-only.
    public func isBackgroundOnly(_ item: OutboxItem) -> Bool { kind == .background }

    /// Builds the signal for `item`, sends it once and classifies the result.
    public func send(_ item: OutboxItem) async -> SignalOutcome {
        await tokenSetup.value
        let notification: APNsNotification
        do {
            let signal = try ContentFreeSignal(
                badge: kind == .badge ? item.unread : nil, contentAvailable: true, alias: item.alias,
                state: item.state.description)
            notification = try APNsNotification(
                deviceToken: try DeviceToken(item.token), signal: signal, topic: topic,
                expiration: .after(.seconds(3600)), collapseID: try CollapseID(Self.collapseID))
        } catch {
            return .defect(reason: "invalidSignal")
        }
        let result: Result<APNsResponse, APNsClientError>
        do {
            result = .success(try await client.send(notification))
        } catch {
            result = .failure(error)
        }
        var policy = RetryPolicy()
        switch policy.next(after: result) {
        case .done:
            return .delivered
        case .dropRegistration(let reason, let timestamp):
            return .dropRegistration(reason: reason.rawValue, unregisteredAt: timestamp?.timeIntervalSince1970)
        case .refreshTokenAndRetry:
            return .retry(reason: "ExpiredProviderToken", retryAfter: 0)
        case .retry(let after):
            return .retry(reason: Self.reason(result), retryAfter: Self.seconds(after))
        case .giveUp(let error), .discard(let error):
            if case .payloadRejected = error { return .defect(reason: "payloadGuard") }
            if case .rejected(let refusal) = error, (400..<500).contains(refusal.status), refusal.status != 429 {
                return .defect(reason: refusal.reason.rawValue)
            }
            return .retry(reason: Self.reason(result), retryAfter: nil)
        }
    }

    /// Closes the HTTP/2 connection.
    public func shutdown() { client.shutdown() }

    static func reason(_ result: Result<APNsResponse, APNsClientError>) -> String {
        switch result {
        case .success: return "ok"
        case .failure(.rejected(let refusal)): return refusal.reason.rawValue
        case .failure(.transport): return "transport"
        case .failure(.payloadRejected): return "payloadGuard"
        case .failure(.providerToken): return "providerToken"
        case .failure(.cancelled): return "cancelled"
        }
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}

import Foundation
import HTTP2Client
import OpenSSLCrypto
import Push

/// How mailboxd sends Web Push, from `mailboxd serve`'s `--webpush-*` flags.
public struct WebPushConfiguration: Sendable {
    /// The VAPID key (RFC 8292): browsers subscribe with its public key, every push is signed with it.
    public var vapidKey: P256PrivateKey
    /// Keys used before `vapidKey` (`--webpush-vapid-previous-key`): subscriptions made for one of them are still
    /// signed with it, until their browsers subscribe again for the current key.
    public var previousVapidKeys: [P256PrivateKey] = []
    /// The VAPID `sub`: a `mailto:` or `https:` contact for push-service operators.
    public var subject: String
    /// A CA (PEM) to trust instead of the system store, for a local push service.
    public var caFile: String?
    /// The HTTP proxy push services are reached through (`nil`: direct; `--push-proxy`). A subscription's endpoint
    /// is resolved and checked here, and the tunnel asked for to the checked address (``HTTP2Client/Proxy``).
    public var proxy: HTTP2Client.Proxy?
    /// Which endpoints are sent to.
    public var endpointPolicy: WebPushEndpointPolicy
    /// What the web app's signals are: `badge` (with the unread count, for `navigator.setAppBadge`) or
    /// `background`.
    public var signalKind: PushSignal.Kind

    /// Creates a configuration; throws for a subject RFC 8292 does not accept.
    public init(
        vapidKey: P256PrivateKey, subject: String, caFile: String? = nil,
        endpointPolicy: WebPushEndpointPolicy = WebPushEndpointPolicy(), signalKind: PushSignal.Kind = .badge
    ) throws(WebPushConfigurationError) {
        guard VAPIDTokens.isValidSubject(subject) else {
            throw WebPushConfigurationError("the VAPID subject must be a mailto: address or an https: URL")
        }
        self.vapidKey = vapidKey
        self.subject = subject
        self.caFile = caFile
        self.endpointPolicy = endpointPolicy
        self.signalKind = signalKind
    }

    /// Reads the VAPID key from a PEM file (PKCS#8 or SEC1, P-256).
    public static func vapidKey(file path: String) throws(WebPushConfigurationError) -> P256PrivateKey {
        guard let pem = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw WebPushConfigurationError("cannot read the VAPID key \(path) (run `mailboxd dev-setup` first?)")
        }
        do {
            return try P256PrivateKey(pemRepresentation: pem)
        } catch {
            throw WebPushConfigurationError("\(path) is not a P-256 private key in PEM")
        }
    }
}

/// A Web Push configuration that cannot be used, with what is wrong.
public struct WebPushConfigurationError: Error, Sendable, CustomStringConvertible {
    /// What is wrong.
    public var message: String

    /// Creates an error.
    public init(_ message: String) { self.message = message }

    /// The message.
    public var description: String { message }
}

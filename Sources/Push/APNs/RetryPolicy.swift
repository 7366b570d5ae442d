import Durations
import Foundation
import HTTP2Client
import Push

/// Decides what to do after each attempt to send one notification: a value-type state machine.
///
/// Feed it every attempt's result with ``next(after:using:)``; it returns a ``RetryAction`` that the caller
/// performs (sleep and resend, drop the device registration, …). It does no I/O and takes its randomness as
/// a parameter, so every path can be tested.
///
/// - 200 → ``RetryAction/done``.
/// - 410 (`Unregistered`, `ExpiredToken`), `BadDeviceToken`, `DeviceTokenNotForTopic`, `TopicDisallowed` →
///   ``RetryAction/dropRegistration(reason:timestamp:)``.
/// - `ExpiredProviderToken` → ``RetryAction/refreshTokenAndRetry`` once; a second one in a row is treated
///   as retryable.
/// - 429, 500, 503, `IdleTimeout`, and transport failures (connection refused or reset, GOAWAY, timeout) →
///   ``RetryAction/retry(after:)`` with exponential backoff and full jitter, at least `Retry-After`; after
///   ``Configuration/maximumAttempts`` attempts → ``RetryAction/giveUp(_:)``.
/// - Any other refusal, a payload the guard refused, or a request that cannot be built →
///   ``RetryAction/discard(_:)``: a defect, not retried.
public struct RetryPolicy: Sendable {
    /// Limits of the policy.
    public struct Configuration: Sendable, Hashable {
        /// The most attempts in total, the first one included.
        public var maximumAttempts: Int
        /// The backoff ceiling of the first retry; it doubles on every retryable failure.
        public var baseDelay: Duration
        /// The largest backoff ceiling.
        public var maximumDelay: Duration

        /// Creates a configuration.
        public init(
            maximumAttempts: Int = 6, baseDelay: Duration = .milliseconds(500), maximumDelay: Duration = .seconds(60)
        ) {
            self.maximumAttempts = maximumAttempts
            self.baseDelay = baseDelay
            self.maximumDelay = maximumDelay
        }
    }

    /// The limits in use.
    public let configuration: Configuration
    /// Attempts reported so far.
    public private(set) var attempts = 0
    /// Retryable failures reported so far (the backoff exponent).
    public private(set) var retryableFailures = 0
    /// Whether the previous attempt ended with `ExpiredProviderToken`.
    public private(set) var previousWasExpiredProviderToken = false
    /// Whether the policy has returned a final action (anything but a retry).
    public private(set) var isFinished = false

    /// Creates a policy for one notification.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// Records the result of one attempt and returns what to do next.
    public mutating func next(
        after result: Result<APNsResponse, APNsClientError>, using random: inout some RandomNumberGenerator
    ) -> RetryAction {
        precondition(!isFinished, "RetryPolicy used after a final action")
        attempts += 1
        let wasExpired = previousWasExpiredProviderToken
        previousWasExpiredProviderToken = false
        let action: RetryAction
        switch Self.classify(result) {
        case .success:
            action = .done
        case .permanent(let reason, let timestamp):
            action = .dropRegistration(reason: reason, timestamp: timestamp)
        case .defect(let error):
            action = .discard(error)
        case .fatal(let error):
            action = .giveUp(error)
        case .expiredProviderToken(let error):
            previousWasExpiredProviderToken = true
            if !wasExpired {
                action = attempts < configuration.maximumAttempts ? .refreshTokenAndRetry : .giveUp(error)
            } else {
                action = backoff(error, retryAfter: nil, random: &random)
            }
        case .retryable(let error, let retryAfter):
            action = backoff(error, retryAfter: retryAfter, random: &random)
        }
        if case .retry = action {
        } else if case .refreshTokenAndRetry = action {
        } else {
            isFinished = true
        }
        return action
    }

    /// Records the result of one attempt, drawing jitter from the system generator.
    public mutating func next(after result: Result<APNsResponse, APNsClientError>) -> RetryAction {
        var generator = SystemRandomNumberGenerator()
        return next(after: result, using: &generator)
    }

    private mutating func backoff(
        _ error: APNsClientError, retryAfter: Duration?, random: inout some RandomNumberGenerator
    ) -> RetryAction {
        guard attempts < configuration.maximumAttempts else { return .giveUp(error) }
        retryableFailures += 1
        // The one backoff (full jitter, never sooner than Retry-After), its draw from the top 53 bits of one value
        // of `random`, so a fixed source gives a fixed delay.
        let schedule = Backoff(
            base: configuration.baseDelay.seconds, maximum: configuration.maximumDelay.seconds, minimum: 0)
        let unit = Double(random.next() >> 11) * 0x1p-53
        let delay = schedule.delay(attempt: retryableFailures, retryAfter: retryAfter?.seconds, unit: unit)
        return .retry(after: .milliseconds(Int64((delay * 1000).rounded())))
    }

    /// What one APNs answer means, before any retry schedule: the single classification of APNs's answers,
    /// used by this policy and by senders that keep their schedule elsewhere (mailboxd's dispatcher).
    public enum Classification: Sendable, Equatable {
        /// Accepted.
        case success
        /// The token is dead: drop the registration (for a 410, only when the timestamp is later than it).
        case permanent(APNsError.Reason, Date?)
        /// The provider token expired: the client has invalidated it; send again.
        case expiredProviderToken(APNsClientError)
        /// A transient failure: send again later, no sooner than the duration APNs gave.
        case retryable(APNsClientError, Duration?)
        /// The request is wrong and would fail again.
        case defect(APNsClientError)
        /// The client is shutting down or the send was cancelled.
        case fatal(APNsClientError)
    }

    /// Classifies one answer.
    public static func classify(_ result: Result<APNsResponse, APNsClientError>) -> Classification {
        switch result {
        case .success:
            return .success
        case .failure(let error):
            switch error {
            case .rejected(let refusal):
                switch refusal.reason {
                case .badDeviceToken, .deviceTokenNotForTopic, .topicDisallowed, .unregistered, .expiredToken:
                    return .permanent(refusal.reason, refusal.timestamp)
                case .expiredProviderToken:
                    return .expiredProviderToken(error)
                case .tooManyRequests, .tooManyProviderTokenUpdates, .internalServerError, .serviceUnavailable,
                    .shutdown, .idleTimeout:
                    return .retryable(error, refusal.retryAfter)
                case .unknown:
                    switch refusal.status {
                    case 410: return .permanent(refusal.reason, refusal.timestamp)
                    case 429, 500...599: return .retryable(error, refusal.retryAfter)
                    default: return .defect(error)
                    }
                default:
                    return .defect(error)
                }
            case .transport(let failure):
                switch failure {
                case .invalidRequest, .responseTooLarge: return .defect(error)
                case .shutdown, .cancelled: return .fatal(error)
                default: return .retryable(error, nil)
                }
            case .payloadRejected, .providerToken:
                return .defect(error)
            case .cancelled:
                return .fatal(error)
            }
        }
    }
}

/// What to do after an attempt; returned by ``RetryPolicy/next(after:using:)``.
public enum RetryAction: Sendable, Equatable {
    /// Delivered to APNs.
    case done
    /// The device token is no longer valid: delete the registration (for a 410, only when `timestamp` is later
    /// than the registration).
    case dropRegistration(reason: APNsError.Reason, timestamp: Date?)
    /// The provider token expired: the client has already invalidated it; send again at once.
    case refreshTokenAndRetry
    /// Send again after `after`.
    case retry(after: Duration)
    /// The request is wrong and would fail again: record it as a defect, do not retry.
    case discard(APNsClientError)
    /// Retries are used up (or the client is shutting down): stop, keeping the last error.
    case giveUp(APNsClientError)
}

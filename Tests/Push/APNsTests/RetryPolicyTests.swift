import Foundation
import HTTP2Client
import Testing

@testable import APNs

@Suite("Retry policy state machine")
struct RetryPolicyTests {
    typealias Outcome = Result<APNsResponse, APNsClientError>

    static func rejected(
        _ status: Int, _ reason: String, retryAfter: Duration? = nil, timestamp: Date? = nil
    )
        -> Outcome
    {
        .failure(
            .rejected(APNsError(status: status, reason: .init(reason), timestamp: timestamp, retryAfter: retryAfter)))
    }

    /// Apple's status for each documented reason.
    static let statusByReason: [String: Int] = [
        "BadCollapseId": 400, "BadDeviceToken": 400, "BadExpirationDate": 400, "BadMessageId": 400,
        "BadPriority": 400, "BadTopic": 400, "DeviceTokenNotForTopic": 400, "DuplicateHeaders": 400,
        "IdleTimeout": 400, "InvalidPushType": 400, "MissingDeviceToken": 400, "MissingTopic": 400,
        "PayloadEmpty": 400, "TopicDisallowed": 400, "BadCertificate": 403, "BadCertificateEnvironment": 403,
        "ExpiredProviderToken": 403, "Forbidden": 403, "InvalidProviderToken": 403, "MissingProviderToken": 403,
        "UnrelatedKeyIdInToken": 403, "BadEnvironmentKeyIdInToken": 403, "BadPath": 404, "MethodNotAllowed": 405,
        "ExpiredToken": 410, "Unregistered": 410, "PayloadTooLarge": 413, "TooManyProviderTokenUpdates": 429,
        "TooManyRequests": 429, "InternalServerError": 500, "ServiceUnavailable": 503, "Shutdown": 503,
    ]

    enum Kind: Equatable { case done, drop, refresh, retry, discard, giveUp }

    /// The expected first decision for each documented reason.
    static func expectedKind(_ reason: String) -> Kind {
        switch reason {
        case "BadDeviceToken", "DeviceTokenNotForTopic", "TopicDisallowed", "ExpiredToken", "Unregistered": .drop
        case "ExpiredProviderToken": .refresh
        case "IdleTimeout", "TooManyProviderTokenUpdates", "TooManyRequests", "InternalServerError",
            "ServiceUnavailable", "Shutdown":
            .retry
        default: .discard
        }
    }

    static func kind(_ action: RetryAction) -> Kind {
        switch action {
        case .done: .done
        case .dropRegistration: .drop
        case .refreshTokenAndRetry: .refresh
        case .retry: .retry
        case .discard: .discard
        case .giveUp: .giveUp
        }
    }

    @Test func coversEveryDocumentedReason() {
        #expect(Set(Self.statusByReason.keys) == Set(APNsError.Reason.documentedReasons))
        #expect(APNsError.Reason.documentedReasons.count == 32)
    }

    @Test(arguments: APNsError.Reason.documentedReasons)
    func firstDecisionPerReason(_ reason: String) {
        var policy = RetryPolicy()
        var random = SeededGenerator(seed: 1)
        let action = policy.next(after: Self.rejected(Self.statusByReason[reason]!, reason), using: &random)
        #expect(Self.kind(action) == Self.expectedKind(reason), "\(reason)")
        #expect(policy.isFinished == [.drop, .discard].contains(Self.expectedKind(reason)))
    }

    @Test func successIsDone() {
        var policy = RetryPolicy()
        #expect(policy.next(after: .success(APNsResponse(apnsID: "x"))) == .done)
        #expect(policy.isFinished)
        #expect(policy.attempts == 1)
    }

    @Test func unregisteredKeepsTheTimestamp() {
        var policy = RetryPolicy()
        let stamp = Date(timeIntervalSince1970: 1_700_000_123.456)
        let action = policy.next(after: Self.rejected(410, "Unregistered", timestamp: stamp))
        #expect(action == .dropRegistration(reason: .unregistered, timestamp: stamp))
    }

    @Test func unknownReasonsFollowTheStatus() {
        var random = SeededGenerator(seed: 2)
        for (status, expected) in [
            (400, Kind.discard), (403, .discard), (410, .drop), (429, .retry), (500, .retry),
            (502, .retry), (503, .retry),
        ] {
            var policy = RetryPolicy()
            #expect(Self.kind(policy.next(after: Self.rejected(status, "SomethingNew"), using: &random)) == expected)
        }
    }

    @Test func expiredProviderTokenRefreshesOnceThenBacksOff() {
        var policy = RetryPolicy()
        var random = ConstantGenerator(value: 0)
        #expect(policy.next(after: Self.rejected(403, "ExpiredProviderToken"), using: &random) == .refreshTokenAndRetry)
        #expect(policy.next(after: Self.rejected(403, "ExpiredProviderToken"), using: &random) == .retry(after: .zero))
        #expect(policy.next(after: Self.rejected(503, "ServiceUnavailable"), using: &random) == .retry(after: .zero))
        // Not in a row any more: refresh again.
        #expect(policy.next(after: Self.rejected(403, "ExpiredProviderToken"), using: &random) == .refreshTokenAndRetry)
        #expect(policy.next(after: .success(APNsResponse(apnsID: "x")), using: &random) == .done)
        #expect(policy.attempts == 5)
    }

    @Test func backoffDoublesUpToTheCapWithFullJitter() {
        let configuration = RetryPolicy.Configuration(
            maximumAttempts: 10, baseDelay: .milliseconds(100), maximumDelay: .seconds(1))
        var high = RetryPolicy(configuration: configuration)
        var top = ConstantGenerator(value: .max)
        var ceilings: [Duration] = []
        for _ in 0..<7 {
            guard case .retry(let delay) = high.next(after: Self.rejected(503, "Shutdown"), using: &top) else {
                Issue.record("expected a retry")
                return
            }
            ceilings.append(delay)
        }
        #expect(ceilings == [100, 200, 400, 800, 1000, 1000, 1000].map { Duration.milliseconds($0) })

        var low = RetryPolicy(configuration: configuration)
        var bottom = ConstantGenerator(value: 0)
        for _ in 0..<5 {
            #expect(
                low.next(after: .failure(.transport(.connectionLost("reset"))), using: &bottom) == .retry(after: .zero))
        }

        var seeded = RetryPolicy(configuration: configuration)
        var random = SeededGenerator(seed: 7)
        var delays: Set<Duration> = []
        for attempt in 1...9 {
            guard case .retry(let delay) = seeded.next(after: .failure(.transport(.timeout)), using: &random) else {
                Issue.record("expected a retry")
                return
            }
            let ceiling = min(Duration.seconds(1), .milliseconds(100) * (1 << (attempt - 1)))
            #expect(delay >= .zero && delay <= ceiling)
            delays.insert(delay)
        }
        #expect(delays.count > 1)
        #expect(seeded.next(after: .failure(.transport(.timeout)), using: &random) == .giveUp(.transport(.timeout)))
    }

    @Test func retryAfterIsHonoured() {
        var policy = RetryPolicy()
        var bottom = ConstantGenerator(value: 0)
        #expect(
            policy.next(after: Self.rejected(429, "TooManyRequests", retryAfter: .seconds(30)), using: &bottom)
                == .retry(after: .seconds(30)))
        var top = ConstantGenerator(value: .max)
        // Jitter above Retry-After wins.
        var other = RetryPolicy(configuration: .init(baseDelay: .seconds(10)))
        #expect(
            other.next(after: Self.rejected(503, "ServiceUnavailable", retryAfter: .seconds(2)), using: &top)
                == .retry(after: .seconds(10)))
    }

    @Test func givesUpAfterTheAttemptCap() {
        var policy = RetryPolicy(configuration: .init(maximumAttempts: 3))
        var random = SeededGenerator(seed: 3)
        let failure = Self.rejected(500, "InternalServerError")
        #expect(Self.kind(policy.next(after: failure, using: &random)) == .retry)
        #expect(Self.kind(policy.next(after: failure, using: &random)) == .retry)
        guard case .giveUp(.rejected(let error)) = policy.next(after: failure, using: &random) else {
            Issue.record("expected giveUp")
            return
        }
        #expect(error.reason == .internalServerError)
        #expect(policy.isFinished)

        var expiring = RetryPolicy(configuration: .init(maximumAttempts: 1))
        #expect(Self.kind(expiring.next(after: Self.rejected(403, "ExpiredProviderToken"), using: &random)) == .giveUp)
    }

    @Test(arguments: [
        (APNsClientError.transport(.connectionFailed("refused")), Kind.retry),
        (.transport(.connectionLost("reset by peer")), .retry),
        (.transport(.goAway(errorCode: 0)), .retry),
        (.transport(.timeout), .retry),
        (.transport(.streamReset(errorCode: 2)), .retry),
        (.transport(.pinMismatch), .retry),
        (.transport(.tlsFailure("handshake")), .retry),
        (.transport(.untrustedCertificate("unknown CA")), .retry),
        (.transport(.invalidRequest("bad url")), .discard),
        (.transport(.responseTooLarge(limit: 1)), .discard),
        (.transport(.shutdown), .giveUp),
        (.transport(.cancelled), .giveUp),
        (.payloadRejected(PayloadGuardViolation(.unexpectedKey)), .discard),
        (.providerToken("signing failed"), .discard),
        (.cancelled, .giveUp),
    ])
    func clientErrors(_ error: APNsClientError, _ expected: Kind) {
        var policy = RetryPolicy()
        var random = SeededGenerator(seed: 4)
        #expect(Self.kind(policy.next(after: .failure(error), using: &random)) == expected)
    }
}

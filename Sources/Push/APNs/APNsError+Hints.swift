extension APNsError.Reason {
    /// What usually causes this answer from a provider set up with token authentication, and what to do, in
    /// one line for operators (`mailboxd apns-check` prints it; docs/apns.md has the same table).
    public var likelyCause: String {
        switch self {
        case .badDeviceToken:
            return "the token belongs to the other environment (a development build's token sent to production, "
                + "or an App Store/TestFlight token sent to the sandbox), or is not a token: register the device "
                + "with the environment its build uses"
        case .deviceTokenNotForTopic:
            return "the token was issued to another app: the device's topic must be that app's bundle id"
        case .topicDisallowed, .badTopic, .missingTopic:
            return "the topic is not a bundle id this team may push to: check the app's bundle id and the key's team"
        case .invalidProviderToken:
            return "the JWT does not verify: the key file, key id and team id must be one key from the same "
                + "developer account, and the key must have APNs enabled"
        case .expiredProviderToken:
            return "the provider token is older than an hour, or the clock is wrong: check NTP on this host"
        case .tooManyProviderTokenUpdates:
            return "a new token was signed more than once in 20 minutes: all instances and tools sharing the key "
                + "must reuse one token (keep the data folder's apns/provider-token-KEYID)"
        case .missingProviderToken:
            return "no authorization header: token authentication is not configured"
        case .unrelatedKeyIdInToken, .badEnvironmentKeyIdInToken:
            return "the key id does not belong to this team or environment: check keyId and teamId"
        case .badCertificate, .badCertificateEnvironment, .forbidden:
            return "certificate authentication refused: use a .p8 key (token authentication) instead"
        case .unregistered, .expiredToken:
            return "the app was removed or the token was replaced: the registration is dropped; the device "
                + "registers again when the app runs"
        case .payloadTooLarge:
            return "the payload is over 4096 bytes (2048 on the legacy interface)"
        case .tooManyRequests:
            return "too many notifications to this device in a short time: back off (mailboxd retries later)"
        case .internalServerError, .serviceUnavailable, .shutdown:
            return "APNs is unavailable or closing the connection: retry with backoff (mailboxd does)"
        case .idleTimeout:
            return "the connection sat idle too long: it is reopened on the next send"
        case .badCollapseId, .badExpirationDate, .badMessageId, .badPriority, .duplicateHeaders, .invalidPushType,
            .missingDeviceToken, .payloadEmpty, .badPath, .methodNotAllowed:
            return "a malformed request: a defect in the provider, not in the configuration"
        case .unknown:
            return "a reason Apple does not document: see Apple's 'Handling notification responses from APNs'"
        }
    }
}

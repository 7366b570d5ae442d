import Foundation
import JSONText
import MailboxStore
import Push

/// `PushSubscription/get` and `/set` (RFC 8620 §7.2): no account id, no state; a subscription belongs to the
/// credentials that made it (the session of a bearer token, or the password) and is seen and changed only with
/// them. `url` and `keys` are never returned (they may be private to the device), and
/// a new subscription hears nothing but its PushVerification until the client sends the code back.
extension MethodContext {
    /// The properties `/get` returns by default: all but `url` and `keys`.
    static let pushSubscriptionProperties = ["id", "deviceClientId", "verificationCode", "expires", "types"]

    func pushSubscriptionGet(_ arguments: Arguments) async throws -> JSONValue {
        let properties =
            try properties(arguments) { Self.pushSubscriptionProperties.contains($0) || $0 == "url" || $0 == "keys" }
            ?? Self.pushSubscriptionProperties
        if properties.contains("url") || properties.contains("keys") {
            throw MethodError("forbidden", "'url' and 'keys' are never returned.")
        }
        let ids = try getIDs(arguments)
        let all = try await ownSubscriptions()
        let byID = Dictionary(all.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        let listed = ids.map { $0.compactMap { byID[$0] } } ?? all
        let notFound = ids?.filter { byID[$0] == nil } ?? []
        return [
            "list": .array(listed.map { Self.pushSubscriptionObject($0, properties: properties) }),
            "notFound": .strings(notFound),
        ]
    }

    /// The subscriptions made with this request's credentials.
    func ownSubscriptions() async throws -> [PushSubscriptionRecord] {
        try await storeCall { try await store.pushSubscriptions(accountID: account.id) }
            .filter { $0.sessionID == account.sessionID }
    }

    static func pushSubscriptionObject(_ record: PushSubscriptionRecord, properties: [String]) -> JSONValue {
        let all: [String: JSONValue] = [
            "id": .string(record.id), "deviceClientId": .string(record.deviceClientID),
            "verificationCode": record.isVerified ? .string(record.verificationCode) : .null,
            "expires": .string(JMAPDate.string(record.expiresAt)),
            "types": record.types.map(JSONValue.strings) ?? .null,
        ]
        var object = all.filter { properties.contains($0.key) }
        object["id"] = .string(record.id)
        return .object(object)
    }

    func pushSubscriptionSet(_ arguments: Arguments) async throws -> JSONValue {
        let (create, update, destroy) = try setCounts(arguments)
        var created: [String: JSONValue] = [:]
        var notCreated: [String: JSONValue] = [:]
        for (creationID, value) in create.sorted(by: { $0.key < $1.key }) {
            switch await createPushSubscription(value) {
            case .success(let record):
                created[creationID] = ["id": .string(record.id), "expires": .string(JMAPDate.string(record.expiresAt))]
            case .failure(let error):
                notCreated[creationID] = error.value
            }
        }
        var updated: [String: JSONValue] = [:]
        var notUpdated: [String: JSONValue] = [:]
        for (id, patch) in update.sorted(by: { $0.key < $1.key }) {
            switch await updatePushSubscription(id, patch) {
            case .success(let answer): updated[id] = answer
            case .failure(let error): notUpdated[id] = error.value
            }
        }
        var destroyed: [String] = []
        var notDestroyed: [String: JSONValue] = [:]
        let own = Set(try await ownSubscriptions().map(\.id))
        for id in destroy {
            if own.contains(id),
                try await storeCall({ try await store.deletePushSubscription(id: id, accountID: account.id) })
            {
                destroyed.append(id)
            } else {
                notDestroyed[id] = Self.setError("notFound", "No such push subscription.")
            }
        }
        server.push?.forget(accountID: account.id)
        func orNull(_ map: [String: JSONValue]) -> JSONValue { map.isEmpty ? .null : .object(map) }
        return [
            "created": orNull(created), "updated": orNull(updated),
            "destroyed": destroyed.isEmpty ? .null : .strings(destroyed),
            "notCreated": orNull(notCreated), "notUpdated": orNull(notUpdated), "notDestroyed": orNull(notDestroyed),
        ]
    }

    private func invalid(_ property: String, _ description: String) -> SetError {
        SetError(Self.setError("invalidProperties", description, properties: [property]))
    }

    private func createPushSubscription(_ value: JSONValue) async -> Result<PushSubscriptionRecord, SetError> {
        guard let push = server.push else {
            return .failure(
                SetError(
                    Self.setError(
                        "forbidden", "Push is not configured on this server (mailboxd sends pushes through Web Push).")
                ))
        }
        guard let object = value.object else {
            return .failure(SetError(Self.setError("invalidProperties", "A creation must be an object.")))
        }
        let known: Set<String> = ["deviceClientId", "url", "keys", "expires", "types", "verificationCode", "id"]
        if let unknown = object.keys.sorted().first(where: { !known.contains($0) }) {
            return .failure(invalid(unknown, "Unknown property '\(unknown)'."))
        }
        if let id = object["id"], !id.isNull { return .failure(invalid("id", "'id' is set by the server.")) }
        if let code = object["verificationCode"], !code.isNull {
            return .failure(invalid("verificationCode", "'verificationCode' must be null when creating."))
        }
        guard let deviceClientID = object["deviceClientId"]?.string, (1...255).contains(deviceClientID.utf8.count)
        else { return .failure(invalid("deviceClientId", "'deviceClientId' must be a string of 1 to 255 bytes.")) }
        guard let url = object["url"]?.string else { return .failure(invalid("url", "'url' must be a string.")) }
        var keys: (p256dh: String, auth: String)?
        if let given = object["keys"], !given.isNull {
            guard let members = given.object, Set(members.keys) == ["p256dh", "auth"],
                let p256dh = members["p256dh"]?.string, let auth = members["auth"]?.string
            else { return .failure(invalid("keys", "'keys' must be an object with 'p256dh' and 'auth'.")) }
            keys = (p256dh, auth)
        } else if !push.configuration.allowsUnencrypted {
            return .failure(
                invalid(
                    "keys",
                    "'keys' are required: without them a push is readable by whoever runs the URL's server "
                        + "(mailboxd --jmap-push-allow-unencrypted allows it)."))
        }
        let types: [String]?
        switch Self.pushTypes(object["types"]) {
        case .success(let parsed): types = parsed
        case .failure(let error): return .failure(error)
        }
        let expiresAt: Double
        switch pushExpiry(object["expires"], configuration: push.configuration) {
        case .success(let time): expiresAt = time
        case .failure(let error): return .failure(error)
        }
        guard let service = push.service() else {
            return .failure(invalid("url", "This server no longer sends Web Push."))
        }
        let storedKeys: String
        do {
            storedKeys = try service.checkSubscription(url: url, keys: keys)
        } catch {
            return .failure(invalid(error.code == "invalidKeys" ? "keys" : "url", error.message))
        }
        do {
            let record = try await store.createPushSubscription(
                accountID: account.id, sessionID: account.sessionID, deviceClientID: deviceClientID, url: url,
                keys: storedKeys, types: types,
                expiresAt: expiresAt)
            push.verify(record)
            return .success(record)
        } catch MailboxStoreError.tooManyDevices {
            return .failure(
                SetError(
                    Self.setError(
                        "overQuota",
                        "At most \(MailboxStore.maximumPushSubscriptionsPerAccount) push subscriptions per account.")))
        } catch {
            return .failure(SetError(MethodError.from(error).arguments))
        }
    }

    /// `types`: `null` for every type, else names this server has.
    static func pushTypes(_ value: JSONValue?) -> Result<[String]?, SetError> {
        guard let value, !value.isNull else { return .success(nil) }
        guard let elements = value.array, let names = Optional(elements.compactMap(\.string)),
            names.count == elements.count, names.allSatisfy(TypeStates.types.contains)
        else {
            return .failure(
                SetError(
                    setError(
                        "invalidProperties",
                        "'types' must be null or a list of \(TypeStates.types.joined(separator: ", ")).",
                        properties: ["types"])))
        }
        return .success(Array(Set(names)).sorted())
    }

    /// `expires`: absent or null for the longest lifetime; a later time is shortened to it; a past one is refused.
    func pushExpiry(_ value: JSONValue?, configuration: JMAPPushNotifier.Configuration) -> Result<Double, SetError> {
        let latest = store.currentTime + configuration.maximumLifetime
        guard let value, !value.isNull else { return .success(latest.rounded(.down)) }
        guard let text = value.string, let time = JMAPDate.parse(text) else {
            return .failure(invalid("expires", "'expires' must be a UTCDate."))
        }
        guard time > store.currentTime else {
            return .failure(invalid("expires", "'expires' is in the past."))
        }
        return .success(min(time, latest).rounded(.down))
    }

    /// An update: `verificationCode` (the code pushed to the URL), `expires`, `types`; `url`, `keys` and
    /// `deviceClientId` cannot change. Answers what the server changed beyond the patch (a shortened `expires`).
    private func updatePushSubscription(_ id: String, _ patch: JSONValue) async -> Result<JSONValue, SetError> {
        guard let push = server.push else {
            return .failure(SetError(Self.setError("notFound", "No such push subscription.")))
        }
        guard let members = patch.object else {
            return .failure(SetError(Self.setError("invalidPatch", "An update must be a PatchObject.")))
        }
        let existing: PushSubscriptionRecord?
        do {
            existing = try await ownSubscriptions().first { $0.id == id }
        } catch {
            return .failure(SetError(MethodError.from(error).arguments))
        }
        guard let existing else { return .failure(SetError(Self.setError("notFound", "No such push subscription."))) }
        var verified: Bool?
        var expiresAt: Double?
        var types: [String]??
        for (key, value) in members.sorted(by: { $0.key < $1.key }) {
            switch key {
            case "verificationCode":
                guard let code = value.string, code == existing.verificationCode else {
                    return .failure(invalid(key, "The verification code does not match the one pushed to the URL."))
                }
                verified = true
            case "expires":
                switch pushExpiry(value, configuration: push.configuration) {
                case .success(let time): expiresAt = time
                case .failure(let error): return .failure(error)
                }
            case "types":
                switch Self.pushTypes(value) {
                case .success(let parsed): types = .some(parsed)
                case .failure(let error): return .failure(error)
                }
            case "url", "keys", "deviceClientId", "id":
                return .failure(invalid(key, "'\(key)' cannot be changed; destroy the subscription and make another."))
            default:
                return .failure(invalid(key, "Unknown property '\(key)'."))
            }
        }
        do {
            guard
                let record = try await store.updatePushSubscription(
                    id: id, accountID: account.id, verified: verified, expiresAt: expiresAt, types: types)
            else { return .failure(SetError(Self.setError("notFound", "No such push subscription."))) }
            if let expiresAt, let asked = members["expires"]?.string, JMAPDate.parse(asked) != expiresAt {
                return .success(["expires": .string(JMAPDate.string(record.expiresAt))])
            }
            return .success(.null)
        } catch {
            return .failure(SetError(MethodError.from(error).arguments))
        }
    }
}

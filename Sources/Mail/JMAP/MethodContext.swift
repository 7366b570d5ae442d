import Foundation
import JSONText
import MailboxStore

/// One method call's arguments, read with the checks every method needs: a wrong type is `invalidArguments`
/// naming the argument.
struct Arguments {
    let values: [String: JSONValue]

    init(_ values: [String: JSONValue]) { self.values = values }

    subscript(key: String) -> JSONValue? {
        guard let value = values[key], !value.isNull else { return nil }
        return value
    }

    func string(_ key: String) throws -> String? {
        guard let value = self[key] else { return nil }
        guard let text = value.string else { throw MethodError.invalidArguments("'\(key)' must be a string.") }
        return text
    }

    func requiredString(_ key: String) throws -> String {
        guard let text = try string(key) else { throw MethodError.invalidArguments("'\(key)' is required.") }
        return text
    }

    func bool(_ key: String, default defaultValue: Bool) throws -> Bool {
        guard let value = self[key] else { return defaultValue }
        guard let flag = value.bool else { throw MethodError.invalidArguments("'\(key)' must be true or false.") }
        return flag
    }

    /// An integer argument within `range`.
    func int(_ key: String, in range: ClosedRange<Int64>) throws -> Int? {
        guard let value = self[key] else { return nil }
        guard let number = value.int, range.contains(number) else {
            throw MethodError.invalidArguments(
                "'\(key)' must be an integer from \(range.lowerBound) to \(range.upperBound).")
        }
        return Int(number)
    }

    /// A list of strings, or `nil` for null or absent.
    func strings(_ key: String) throws -> [String]? {
        guard let value = self[key] else { return nil }
        guard let elements = value.array, let texts = Optional(elements.compactMap(\.string)),
            texts.count == elements.count
        else { throw MethodError.invalidArguments("'\(key)' must be an array of strings.") }
        return texts
    }

    func object(_ key: String) throws -> [String: JSONValue]? {
        guard let value = self[key] else { return nil }
        guard let members = value.object else { throw MethodError.invalidArguments("'\(key)' must be an object.") }
        return members
    }
}

/// What a method runs with: the server, the account the request is authenticated as, and the capabilities the
/// request uses.
struct MethodContext {
    let server: JMAPServer
    let account: JMAPAccount
    let using: Set<String>

    var store: MailboxStore { server.store }
    var limits: JMAPLimits { server.limits }

    /// Every method the server has.
    static let methods: Set<String> = [
        "Core/echo", "Mailbox/get", "Mailbox/changes", "Mailbox/query", "Mailbox/queryChanges", "Mailbox/set",
        "Email/get", "Email/changes", "Email/query", "Email/queryChanges", "Email/set", "Thread/get",
        "Thread/changes", "PushSubscription/get", "PushSubscription/set",
    ]

    /// The responses one call makes (one, except where the RFC asks for an implicit second).
    func run(_ name: String, _ values: [String: JSONValue]) async throws -> [(String, JSONValue)] {
        // The method is known before its arguments are read (RFC 8620 section 3.6.2).
        guard Self.methods.contains(name) else {
            throw MethodError("unknownMethod", "The server has no method '\(name)'.")
        }
        let arguments = Arguments(values)
        // Core's methods act on no account: a push subscription belongs to the credentials that made it.
        let isCore = name == "Core/echo" || name.hasPrefix("PushSubscription/")
        let capability = isCore ? JMAPCapability.core : JMAPCapability.mail
        guard using.contains(capability) else {
            throw MethodError("unknownMethod", "'\(name)' needs '\(capability)' in 'using'.")
        }
        if !isCore {
            let accountID = try arguments.requiredString("accountId")
            guard accountID == account.jmapID else { throw MethodError("accountNotFound") }
        }
        let result: JSONValue
        switch name {
        case "Core/echo": result = .object(values)
        case "Mailbox/get": result = try await mailboxGet(arguments)
        case "Mailbox/changes": result = try await mailboxChanges(arguments)
        case "Mailbox/query": result = try await mailboxQuery(arguments)
        case "Mailbox/queryChanges", "Email/queryChanges":
            throw MethodError("cannotCalculateChanges", "Query changes are not kept; run the query again.")
        case "Mailbox/set": result = try await mailboxSet(arguments)
        case "Email/get": result = try await emailGet(arguments)
        case "Email/changes": result = try await emailChanges(arguments)
        case "Email/query": result = try await emailQuery(arguments)
        case "Email/set": result = try await emailSet(arguments)
        case "Thread/get": result = try await threadGet(arguments)
        case "Thread/changes": result = try await threadChanges(arguments)
        case "PushSubscription/get": result = try await pushSubscriptionGet(arguments)
        case "PushSubscription/set": result = try await pushSubscriptionSet(arguments)
        default: throw MethodError("unknownMethod", "The server has no method '\(name)'.")
        }
        return [(name, result)]
    }

    // MARK: States

    /// The Email and Mailbox state at `modseq`: every change to a message changes a mailbox's counts or not, but
    /// the state string is the account's change counter either way.
    func state(_ modseq: Int64) -> String { SyncState(epoch: store.epoch, modseq: modseq).description }

    /// A client's `sinceState`, as a modseq of this store; `cannotCalculateChanges` when it is not one.
    func sinceModseq(_ arguments: Arguments) throws -> SyncState {
        let text = try arguments.requiredString("sinceState")
        do { return try store.parseState(text) } catch { throw MethodError.from(error) }
    }

    /// The `maxChanges` argument, capped at the server's limit.
    func maxChanges(_ arguments: Arguments) throws -> Int {
        min(try arguments.int("maxChanges", in: 1...Int64(Int32.max)) ?? limits.maxChanges, limits.maxChanges)
    }

    /// The ids of a `/get`: `nil` for all, refused past `maxObjectsInGet`.
    func getIDs(_ arguments: Arguments) throws -> [String]? {
        guard let ids = try arguments.strings("ids") else { return nil }
        guard ids.count <= limits.maxObjectsInGet else {
            throw MethodError("requestTooLarge", "At most \(limits.maxObjectsInGet) ids per /get (maxObjectsInGet).")
        }
        var seen = Set<String>()
        return ids.filter { seen.insert($0).inserted }
    }

    /// The `properties` of a `/get`, checked against the type's known ones; `nil` for the default.
    func properties(_ arguments: Arguments, key: String = "properties", known: (String) -> Bool) throws -> [String]? {
        guard let properties = try arguments.strings(key) else { return nil }
        if let unknown = properties.first(where: { !known($0) }) {
            throw MethodError.invalidArguments("Unknown property '\(unknown)' in '\(key)'.")
        }
        return properties
    }

    /// `ifInState`, checked against the current state: `stateMismatch` when it differs.
    func checkIfInState(_ arguments: Arguments, current: String) throws {
        if let expected = try arguments.string("ifInState"), expected != current {
            throw MethodError("stateMismatch", "The state is no longer '\(expected)'.")
        }
    }

    /// The objects of a `/set`, counted against `maxObjectsInSet`.
    func setCounts(
        _ arguments: Arguments
    ) throws -> (
        create: [String: JSONValue], update: [String: JSONValue], destroy: [String]
    ) {
        let create = try arguments.object("create") ?? [:]
        let update = try arguments.object("update") ?? [:]
        let destroy = try arguments.strings("destroy") ?? []
        guard create.count + update.count + destroy.count <= limits.maxObjectsInSet else {
            throw MethodError(
                "requestTooLarge", "At most \(limits.maxObjectsInSet) objects per /set (maxObjectsInSet).")
        }
        return (create, update, destroy)
    }

    /// A SetError (RFC 8620 §5.3).
    static func setError(_ type: String, _ description: String, properties: [String]? = nil) -> JSONValue {
        var members: [String: JSONValue] = ["type": .string(type), "description": .string(description)]
        if let properties { members["properties"] = .strings(properties) }
        return .object(members)
    }

    /// Store calls in a method: a store error becomes its method error.
    func storeCall<T>(_ body: () async throws -> T) async throws -> T {
        do { return try await body() } catch let error as MethodError { throw error } catch {
            throw MethodError.from(error)
        }
    }
}

/// UTCDate and Date values (RFC 8620 §1.4): `2026-12-02T18:00:00Z`.
package enum JMAPDate {
    /// `seconds` since 1970 as a UTCDate, to the second.
    package static func string(_ seconds: Double) -> String {
        var time = time_t(seconds.rounded(.down))
        var parts = tm()
        gmtime_r(&time, &parts)
        let year = parts.tm_year + 1900
        if (0...9999).contains(year) {
            // `YYYY-MM-DDThh:mm:ssZ` written into its 20 bytes.
            return String(unsafeUninitializedCapacity: 20) { bytes in
                func put(_ value: Int32, digits: Int, at offset: Int, then separator: Unicode.Scalar) {
                    var rest = value
                    for position in (offset..<offset + digits).reversed() {
                        bytes[position] = UInt8(ascii: "0") + UInt8(rest % 10)
                        rest /= 10
                    }
                    bytes[offset + digits] = UInt8(ascii: separator)
                }
                put(year, digits: 4, at: 0, then: "-")
                put(parts.tm_mon + 1, digits: 2, at: 5, then: "-")
                put(parts.tm_mday, digits: 2, at: 8, then: "T")
                put(parts.tm_hour, digits: 2, at: 11, then: ":")
                put(parts.tm_min, digits: 2, at: 14, then: ":")
                put(parts.tm_sec, digits: 2, at: 17, then: "Z")
                return 20
            }
        }
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : String(value) }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T"
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))Z"
    }

    /// Seconds since 1970 from an RFC 3339 date-time (`Z` or an offset, optional fraction), `nil` when malformed.
    static func parse(_ text: String) -> Double? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        if let date = formatter.date(from: text) { return date.timeIntervalSince1970 }
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text)?.timeIntervalSince1970
    }
}

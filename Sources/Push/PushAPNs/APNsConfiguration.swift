import APNs
import Foundation
import HTTP2Client
import Push

/// The apps mailboxd signals and where APNs's two environments are: from `serve`'s flags (one app) or from
/// `--apns-config FILE` (several).
///
/// The file's shape (unknown fields are an error; relative paths are read from the file's folder):
/// ```json
/// {"endpoints": {"production": "https://api.push.apple.com", "sandbox": "https://api.sandbox.push.apple.com"},
///  "ca": "apns-ca.pem",
///  "apps": [{"topic": "com.example.mail", "keyFile": "AuthKey_ABC123DEFG.p8", "keyId": "ABC123DEFG",
///            "teamId": "TEAM123456", "signalKind": "badge"}]}
/// ```
public struct APNsConfiguration: Sendable, Equatable {
    /// One app: a bundle id, the key that signs its provider tokens, and the kind of signal it gets.
    public struct App: Sendable, Equatable {
        /// The bundle id (`apns-topic`).
        public var topic: String
        /// The `.p8` signing key.
        public var keyFile: String
        /// The key's id (10 characters, from Apple's developer account).
        public var keyID: String
        /// The team id the key belongs to.
        public var teamID: String
        /// Badge signals (push type `alert`) or background ones (`content-available` only).
        public var signalKind: PushSignal.Kind

        /// Creates an app.
        public init(
            topic: String, keyFile: String, keyID: String, teamID: String, signalKind: PushSignal.Kind = .badge
        ) {
            self.topic = topic
            self.keyFile = keyFile
            self.keyID = keyID
            self.teamID = teamID
            self.signalKind = signalKind
        }

        /// Names the signing key: apps with the same name share one key (and one provider token).
        var signingKeyName: String { teamID + "." + keyID }
    }

    /// Apple's production gateway.
    public static let appleProduction = "https://api.push.apple.com"
    /// Apple's development (sandbox) gateway.
    public static let appleSandbox = "https://api.sandbox.push.apple.com"

    /// The production endpoint's base URL.
    public var production: String
    /// The sandbox endpoint's base URL.
    public var sandbox: String
    /// A CA file to trust for both endpoints instead of the system store (a local gateway's CA).
    public var caFile: String?
    /// The HTTP proxy connections to the gateway are tunnelled through (`nil`: direct; `--push-proxy`).
    public var proxy: HTTP2Client.Proxy?
    /// The apps, each topic once.
    public var apps: [App]

    /// Checks and creates a configuration: at least one app, each topic once and a valid bundle id, `https://`
    /// (or `http://` for a cleartext local gateway) endpoints, and one key file per key id.
    public init(
        production: String = appleProduction, sandbox: String = appleSandbox, caFile: String? = nil, apps: [App]
    ) throws(APNsConfigurationError) {
        guard !apps.isEmpty else { throw APNsConfigurationError("no app is configured") }
        for (name, url) in [("production", production), ("sandbox", sandbox)] {
            guard let parsed = URLComponents(string: url), ["https", "http"].contains(parsed.scheme ?? ""),
                parsed.host?.isEmpty == false, parsed.path.isEmpty || parsed.path == "/", parsed.query == nil
            else {
                throw APNsConfigurationError(
                    "the \(name) endpoint must be an https:// URL (http:// for a cleartext local gateway) with a host and no path"
                )
            }
        }
        var topics: Set<String> = []
        var keyFiles: [String: String] = [:]
        for app in apps {
            guard (try? APNsTopic(app.topic)) != nil else {
                throw APNsConfigurationError("'\(app.topic.prefix(64))' is not a bundle id")
            }
            guard topics.insert(app.topic).inserted else {
                throw APNsConfigurationError("the topic \(app.topic) is configured twice")
            }
            let key = app.signingKeyName
            if let other = keyFiles[key], other != app.keyFile {
                throw APNsConfigurationError("key \(app.keyID) of team \(app.teamID) is given two key files")
            }
            keyFiles[key] = app.keyFile
        }
        self.production = production
        self.sandbox = sandbox
        self.caFile = caFile
        self.apps = apps
    }

    /// The endpoint for `environment`.
    public func endpoint(for environment: PushEnvironment) -> String {
        environment == .sandbox ? sandbox : production
    }

    /// The app that serves `topic`, if any.
    public func app(for topic: String) -> App? { apps.first { $0.topic == topic } }

    /// Reads and checks a `--apns-config` file. Every error names the file and the field.
    public init(file path: String) throws(APNsConfigurationError) {
        let folder = (path as NSString).deletingLastPathComponent
        func resolve(_ file: String) -> String {
            file.hasPrefix("/") || folder.isEmpty ? file : folder + "/" + file
        }
        func fail(_ message: String) -> APNsConfigurationError { APNsConfigurationError("\(path): \(message)") }
        guard let data = FileManager.default.contents(atPath: path) else { throw fail("cannot be read") }
        guard let root = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else {
            throw fail("is not a JSON object")
        }
        let object = JSONFields(root, path: "")
        try object.allow(["endpoints", "ca", "apps"], fail)
        var production = Self.appleProduction
        var sandbox = Self.appleSandbox
        if let endpoints = try object.object("endpoints", fail) {
            try endpoints.allow(["production", "sandbox"], fail)
            production = try endpoints.string("production", fail) ?? production
            sandbox = try endpoints.string("sandbox", fail) ?? sandbox
        }
        let caFile = try object.string("ca", fail).map(resolve)
        guard let appList = root["apps"] as? [Any] else { throw fail("'apps' must be a list of apps") }
        var apps: [App] = []
        for (index, element) in appList.enumerated() {
            guard let fields = element as? [String: Any] else { throw fail("apps[\(index)] must be an object") }
            let app = JSONFields(fields, path: "apps[\(index)].")
            try app.allow(["topic", "keyFile", "keyId", "teamId", "signalKind"], fail)
            guard let kind = PushSignal.Kind(rawValue: try app.string("signalKind", fail) ?? "badge") else {
                throw fail("apps[\(index)].signalKind must be \"badge\" or \"background\"")
            }
            apps.append(
                App(
                    topic: try app.required("topic", fail), keyFile: resolve(try app.required("keyFile", fail)),
                    keyID: try app.required("keyId", fail), teamID: try app.required("teamId", fail),
                    signalKind: kind))
        }
        do {
            try self.init(production: production, sandbox: sandbox, caFile: caFile, apps: apps)
        } catch {
            throw fail(error.message)
        }
        for app in self.apps where !FileManager.default.isReadableFile(atPath: app.keyFile) {
            throw fail("the key file \(app.keyFile) of \(app.topic) cannot be read")
        }
        if let caFile, !FileManager.default.isReadableFile(atPath: caFile) {
            throw fail("the CA file \(caFile) cannot be read")
        }
    }
}

/// Why an APNs configuration was refused: one line that names the file and field.
public struct APNsConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The explanation.
    public var message: String

    init(_ message: String) { self.message = message }

    /// The explanation.
    public var description: String { message }
}

/// Typed access to one JSON object of the configuration file, with its path for error messages.
private struct JSONFields {
    let fields: [String: Any]
    let path: String

    init(_ fields: [String: Any], path: String) {
        self.fields = fields
        self.path = path
    }

    typealias Fail = (String) -> APNsConfigurationError

    func allow(_ names: Set<String>, _ fail: Fail) throws(APNsConfigurationError) {
        if let unknown = fields.keys.filter({ !names.contains($0) }).sorted().first {
            throw fail(
                "unknown field '\(path)\(unknown.prefix(64))' (known: \(names.sorted().joined(separator: ", ")))")
        }
    }

    func string(_ name: String, _ fail: Fail) throws(APNsConfigurationError) -> String? {
        guard let value = fields[name] else { return nil }
        guard let text = value as? String, !text.isEmpty else {
            throw fail("'\(path)\(name)' must be a non-empty string")
        }
        return text
    }

    func required(_ name: String, _ fail: Fail) throws(APNsConfigurationError) -> String {
        guard let text = try string(name, fail) else { throw fail("'\(path)\(name)' is missing") }
        return text
    }

    func object(_ name: String, _ fail: Fail) throws(APNsConfigurationError) -> JSONFields? {
        guard let value = fields[name] else { return nil }
        guard let object = value as? [String: Any] else { throw fail("'\(path)\(name)' must be an object") }
        return JSONFields(object, path: path + name + ".")
    }
}

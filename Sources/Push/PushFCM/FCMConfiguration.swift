import Foundation
import HTTP2Client
import Push

/// The Android apps mailboxd signals through FCM, from `--fcm-config FILE`:
///
/// ```json
/// {"endpoint": "https://fcm.googleapis.com", "tokenURI": null, "ca": null,
///  "apps": [{"app": "com.example.mail", "serviceAccountFile": "fcm/service-account.json",
///            "signalKind": "background"}]}
/// ```
///
/// Unknown fields are an error; each service-account file is read and checked at start-up.
public struct FCMConfiguration: Sendable {
    /// One Android app.
    public struct App: Sendable {
        /// The package name devices register with (`app`).
        public var app: String
        /// The service account that sends for it.
        public var serviceAccount: GoogleServiceAccount
        /// What its signals are: `background` (data only, priority normal) or `badge` (data with the count,
        /// priority high, for an app that turns it into a visible notification).
        public var signalKind: PushSignal.Kind

        /// Creates an app.
        public init(app: String, serviceAccount: GoogleServiceAccount, signalKind: PushSignal.Kind = .background) {
            self.app = app
            self.serviceAccount = serviceAccount
            self.signalKind = signalKind
        }
    }

    /// Google's FCM endpoint.
    public static let googleEndpoint = "https://fcm.googleapis.com"

    /// The FCM origin: `https://fcm.googleapis.com` or a local fcm-sim.
    public var endpoint: String
    /// Replaces every service account's `token_uri` when set.
    public var tokenURI: String?
    /// A CA (PEM) to trust for the endpoint and token URI, for a local simulator.
    public var caFile: String?
    /// The HTTP proxy the FCM endpoint and the token endpoint are reached through (`nil`: direct; `--push-proxy`).
    public var proxy: HTTP2Client.Proxy?
    /// The apps.
    public var apps: [App]

    /// Creates a configuration.
    public init(endpoint: String = googleEndpoint, tokenURI: String? = nil, caFile: String? = nil, apps: [App]) {
        self.endpoint = endpoint
        self.tokenURI = tokenURI
        self.caFile = caFile
        self.apps = apps
    }

    /// Reads `--fcm-config FILE`; relative service-account paths are relative to the file's folder.
    public init(file path: String) throws(FCMConfigurationError) {
        guard let data = FileManager.default.contents(atPath: path),
            let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
        else { throw FCMConfigurationError("\(path) cannot be read as a JSON object") }
        let known: Set<String> = ["endpoint", "tokenURI", "ca", "apps"]
        if let unknown = object.keys.sorted().first(where: { !known.contains($0) }) {
            throw FCMConfigurationError("\(path): unknown field \"\(unknown)\"")
        }
        let folder = (path as NSString).deletingLastPathComponent
        func resolve(_ file: String) -> String {
            file.hasPrefix("/") || folder.isEmpty ? file : folder + "/" + file
        }
        func string(_ value: Any?, _ name: String) throws(FCMConfigurationError) -> String? {
            guard let value, !(value is NSNull) else { return nil }
            guard let text = value as? String, !text.isEmpty else {
                throw FCMConfigurationError("\(path): \"\(name)\" must be a non-empty string")
            }
            return text
        }
        endpoint = try string(object["endpoint"], "endpoint") ?? Self.googleEndpoint
        guard endpoint.hasPrefix("https://") || endpoint.hasPrefix("http://") else {
            throw FCMConfigurationError("\(path): \"endpoint\" must be an http(s) URL")
        }
        tokenURI = try string(object["tokenURI"], "tokenURI")
        caFile = try string(object["ca"], "ca").map(resolve)
        guard let list = object["apps"] as? [Any], !list.isEmpty else {
            throw FCMConfigurationError("\(path): \"apps\" must be a non-empty array")
        }
        var apps: [App] = []
        for (index, entry) in list.enumerated() {
            guard let app = entry as? [String: Any] else {
                throw FCMConfigurationError("\(path): apps[\(index)] must be an object")
            }
            let appKnown: Set<String> = ["app", "serviceAccountFile", "signalKind"]
            if let unknown = app.keys.sorted().first(where: { !appKnown.contains($0) }) {
                throw FCMConfigurationError("\(path): apps[\(index)]: unknown field \"\(unknown)\"")
            }
            guard let name = try string(app["app"], "apps[\(index)].app"), FCMPushService.isValidPackageName(name)
            else { throw FCMConfigurationError("\(path): apps[\(index)].app must be an Android package name") }
            guard let file = try string(app["serviceAccountFile"], "apps[\(index)].serviceAccountFile") else {
                throw FCMConfigurationError("\(path): apps[\(index)].serviceAccountFile is required")
            }
            let kindName = try string(app["signalKind"], "apps[\(index)].signalKind") ?? "background"
            guard let kind = PushSignal.Kind(rawValue: kindName) else {
                throw FCMConfigurationError("\(path): apps[\(index)].signalKind must be \"badge\" or \"background\"")
            }
            if apps.contains(where: { $0.app == name }) {
                throw FCMConfigurationError("\(path): apps[\(index)].app \(name) appears twice")
            }
            apps.append(App(app: name, serviceAccount: try GoogleServiceAccount(file: resolve(file)), signalKind: kind))
        }
        self.apps = apps
    }
}

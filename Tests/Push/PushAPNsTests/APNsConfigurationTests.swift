import Foundation
import OpenSSLCrypto
import PushAPNs
import TestSupport
import Testing

/// `--apns-config FILE`: the shape of the contract, relative paths, Apple's hosts by default, and a clear
/// start-up error for every mistake.
@Suite("APNs configuration file")
struct APNsConfigurationTests {
    /// A folder with two signing keys (`a.p8`, `b.p8`) and a CA file.
    final class Folder: Sendable {
        let directory: TemporaryDirectory

        init() throws {
            directory = try TemporaryDirectory(prefix: "apns-config")
            for name in ["a.p8", "b.p8"] {
                try P256PrivateKey().pemRepresentation.write(
                    toFile: directory.path(name), atomically: true, encoding: .utf8)
            }
            try "not checked here".write(toFile: directory.path("ca.pem"), atomically: true, encoding: .utf8)
        }

        func write(_ json: String) throws -> String {
            let path = directory.path("apns-\(UUID().uuidString).json")
            try json.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }

        func load(_ json: String) throws -> APNsConfiguration { try APNsConfiguration(file: write(json)) }

        func error(_ json: String) throws -> String {
            do {
                _ = try load(json)
                return "no error"
            } catch let error as APNsConfigurationError {
                return error.message
            }
        }
    }

    static let twoApps = """
        {"endpoints": {"production": "https://127.0.0.1:2197", "sandbox": "https://127.0.0.1:2199"}, "ca": "ca.pem",
         "apps": [{"topic": "com.example.mail", "keyFile": "a.p8", "keyId": "KEYAAAAAAA", "teamId": "TEAM123456"},
                  {"topic": "com.example.notes", "keyFile": "b.p8", "keyId": "KEYBBBBBBB", "teamId": "TEAM123456",
                   "signalKind": "background"}]}
        """

    @Test func readsAppsEndpointsAndRelativePaths() throws {
        let folder = try Folder()
        let configuration = try folder.load(Self.twoApps)
        #expect(configuration.production == "https://127.0.0.1:2197")
        #expect(configuration.sandbox == "https://127.0.0.1:2199")
        #expect(configuration.endpoint(for: .sandbox) == "https://127.0.0.1:2199")
        #expect(configuration.caFile == folder.directory.path("ca.pem"))
        #expect(configuration.apps.map(\.topic) == ["com.example.mail", "com.example.notes"])
        #expect(configuration.apps[0].keyFile == folder.directory.path("a.p8"))
        #expect(configuration.apps[0].signalKind == .badge)
        #expect(configuration.apps[1].signalKind == .background)
        #expect(configuration.app(for: "com.example.notes")?.keyID == "KEYBBBBBBB")
        #expect(configuration.app(for: "com.example.other") == nil)
    }

    @Test func endpointsDefaultToApplesHosts() throws {
        let folder = try Folder()
        let configuration = try folder.load(
            #"{"apps": [{"topic": "com.example.mail", "keyFile": "a.p8", "keyId": "K1", "teamId": "T1"}]}"#)
        #expect(configuration.production == "https://api.push.apple.com")
        #expect(configuration.sandbox == "https://api.sandbox.push.apple.com")
        #expect(configuration.caFile == nil)
    }

    @Test func everyMistakeIsAClearError() throws {
        let folder = try Folder()
        let app = #""topic": "com.example.mail", "keyFile": "a.p8", "keyId": "K1", "teamId": "T1""#
        let cases: [(String, String)] = [
            ("not json", "is not a JSON object"),
            (#"{"apps": [{\#(app)}], "endpoint": {}}"#, "unknown field 'endpoint'"),
            (#"{"apps": [{\#(app), "keyfile": "a.p8"}]}"#, "unknown field 'apps[0].keyfile'"),
            (#"{"apps": [{\#(app)}], "endpoints": {"prod": "https://x"}}"#, "unknown field 'endpoints.prod'"),
            (#"{"apps": []}"#, "no app is configured"),
            (#"{"apps": {}}"#, "'apps' must be a list"),
            (#"{"apps": [{\#(app)}, {\#(app)}]}"#, "the topic com.example.mail is configured twice"),
            (
                #"{"apps": [{"topic": "com.example.mail", "keyFile": "missing.p8", "keyId": "K1", "teamId": "T1"}]}"#,
                "missing.p8 of com.example.mail cannot be read"
            ),
            (
                #"{"apps": [{"topic": "com.example.mail", "keyFile": "a.p8", "keyId": "K1"}]}"#,
                "'apps[0].teamId' is missing"
            ),
            (#"{"apps": [{\#(app), "signalKind": "silent"}]}"#, "signalKind must be \"badge\" or \"background\""),
            (#"{"apps": [{\#(app)}], "endpoints": {"sandbox": "ftp://x"}}"#, "the sandbox endpoint must be"),
            (#"{"apps": [{\#(app)}], "endpoints": {"production": "https://x/3/device"}}"#, "the production endpoint"),
            (
                #"{"apps": [{"topic": "com example", "keyFile": "a.p8", "keyId": "K1", "teamId": "T1"}]}"#,
                "not a bundle id"
            ),
            (#"{"apps": [{\#(app)}], "ca": "nowhere.pem"}"#, "the CA file"),
            (#"{"apps": [{\#(app), "keyId": 7}]}"#, "'apps[0].keyId' must be a non-empty string"),
            (
                #"{"apps": [{\#(app)}, {"topic": "com.example.notes", "keyFile": "b.p8", "keyId": "K1", "teamId": "T1"}]}"#,
                "key K1 of team T1 is given two key files"
            ),
        ]
        for (json, expected) in cases {
            let message = try folder.error(json)
            #expect(message.contains(expected), "\(json) → \(message)")
            #expect(message.contains(".json:"), "the error names the file: \(message)")
        }
        let unreadable = folder.directory.path("absent.json")
        #expect(throws: APNsConfigurationError.self) { try APNsConfiguration(file: unreadable) }
    }

    @Test func appsSharingAKeyAreOneKey() throws {
        let folder = try Folder()
        let configuration = try folder.load(
            #"""
            {"apps": [{"topic": "com.example.mail", "keyFile": "a.p8", "keyId": "K1", "teamId": "T1"},
                      {"topic": "com.example.mail.widget", "keyFile": "a.p8", "keyId": "K1", "teamId": "T1"}]}
            """#)
        #expect(configuration.apps.count == 2)
    }
}

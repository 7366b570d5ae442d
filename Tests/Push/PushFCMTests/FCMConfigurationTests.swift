import Foundation
import OpenSSLCrypto
import Push
import TestSupport
import Testing

@testable import PushFCM

/// `--fcm-config` and Google's service-account files: what is accepted, and the error for each mistake.
@Suite("FCM configuration")
struct FCMConfigurationTests {
    final class Files: Sendable {
        let directory: TemporaryDirectory
        let key: RSAPrivateKey

        init() throws {
            directory = try TemporaryDirectory(prefix: "fcm-config")
            key = try RSAPrivateKey()
        }

        func account(_ changes: [String: Any?] = [:], name: String = "sa.json") throws -> String {
            var object: [String: Any] = [
                "type": "service_account", "project_id": "signalfetch-dev", "private_key_id": "abc123",
                "private_key": key.pemRepresentation,
                "client_email": "mailboxd@signalfetch-dev.iam.gserviceaccount.com",
                "token_uri": "https://oauth2.googleapis.com/token",
            ]
            for (field, value) in changes { object[field] = value ?? nil }
            try JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: directory.path(name)))
            return directory.path(name)
        }

        func config(_ text: String) throws -> String {
            try text.write(toFile: directory.path("fcm.json"), atomically: true, encoding: .utf8)
            return directory.path("fcm.json")
        }
    }

    @Test func aConfigurationWithRelativeServiceAccountFilesLoads() throws {
        let files = try Files()
        _ = try files.account()
        let configuration = try FCMConfiguration(
            file: try files.config(
                #"{"endpoint":"https://127.0.0.1:4443","tokenURI":"https://127.0.0.1:4443/token","#
                    + #""apps":[{"app":"com.example.mail","serviceAccountFile":"sa.json","signalKind":"badge"}]}"#))
        #expect(configuration.endpoint == "https://127.0.0.1:4443")
        #expect(configuration.apps.map(\.app) == ["com.example.mail"])
        #expect(configuration.apps[0].signalKind == .badge)
        #expect(configuration.apps[0].serviceAccount.projectID == "signalfetch-dev")
        let service = FCMPushService(configuration: configuration)
        defer { service.shutdown() }
        let token = "fMx7:APA91b" + String(repeating: "AbC_-", count: 20)
        let address = try service.address(
            for: DeviceRegistration(service: .fcm, fields: ["token": token, "app": "com.example.mail"]))
        #expect(address.token == token, "the token keeps its case")
        #expect(service.signalKind(for: address) == .badge)
        #expect(throws: RegistrationError("unknownApp", "No FCM app of this server has that package name.")) {
            try service.address(for: DeviceRegistration(service: .fcm, fields: ["token": token, "app": "com.other"]))
        }
        #expect(throws: RegistrationError.self) {
            try service.address(
                for: DeviceRegistration(service: .fcm, fields: ["token": "short", "app": "com.example.mail"]))
        }
        #expect(throws: RegistrationError.self) {
            try service.address(
                for: DeviceRegistration(
                    service: .fcm, fields: ["token": token + "<script>", "app": "com.example.mail"]))
        }
    }

    @Test func aServiceAccountFileThatIsNotOneNamesTheField() throws {
        let files = try Files()
        func error(_ changes: [String: Any?]) throws -> String {
            let path = try files.account(changes)
            do {
                _ = try GoogleServiceAccount(file: path)
                return "accepted"
            } catch {
                return error.message
            }
        }
        #expect(try error(["type": "authorized_user"]).contains("\"type\" must be \"service_account\""))
        #expect(try error(["client_email": nil]).contains("\"client_email\" is missing"))
        #expect(
            try error(["private_key": "-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n"])
                .contains("\"private_key\" is not an RSA private key"))
        #expect(try error(["token_uri": "ftp://example.com"]).contains("\"token_uri\" must be an http(s) URL"))
        let p256 = try P256PrivateKey().pemRepresentation
        #expect(try error(["private_key": p256]).contains("\"private_key\" is not an RSA private key"))
        #expect(!(try error(["private_key": "secret-material"])).contains("secret-material"))
        let notJSON = files.directory.path("not.json")
        try "hello".write(toFile: notJSON, atomically: true, encoding: .utf8)
        #expect(throws: FCMConfigurationError.self) { try GoogleServiceAccount(file: notJSON) }
    }

    @Test(arguments: [
        (#"{"apps":[]}"#, "\"apps\" must be a non-empty array"),
        (#"{"apps":[{"app":"com.example.mail","serviceAccountFile":"sa.json"}],"extra":1}"#, "unknown field \"extra\""),
        (#"{"apps":[{"app":"mail","serviceAccountFile":"sa.json"}]}"#, "must be an Android package name"),
        (
            #"{"apps":[{"app":"com.example.mail","serviceAccountFile":"sa.json","signalKind":"loud"}]}"#,
            "signalKind must be"
        ),
        (#"{"apps":[{"app":"com.example.mail","serviceAccountFile":"missing.json"}]}"#, "cannot read"),
        (
            #"{"endpoint":"fcm.googleapis.com","apps":[{"app":"com.example.mail","serviceAccountFile":"sa.json"}]}"#,
            "\"endpoint\" must be an http(s) URL"
        ),
    ])
    func mistakesInTheConfigurationAreNamed(_ text: String, _ expected: String) throws {
        let files = try Files()
        _ = try files.account()
        let path = try files.config(text)
        do {
            _ = try FCMConfiguration(file: path)
            Issue.record("accepted: \(text)")
        } catch {
            #expect(error.message.contains(expected), "\(error.message)")
        }
    }

    @Test func packageNamesAndRegistrationTokens() {
        for good in ["com.example.mail", "org.signal_fetch.app2", "a.b"] {
            #expect(FCMPushService.isValidPackageName(good), "\(good)")
        }
        for bad in ["mail", ".com.x", "com..x", "com.1x", "com.x-y", "com.x.", ""] {
            #expect(!FCMPushService.isValidPackageName(bad), "\(bad)")
        }
        #expect(FCMPushService.isValidRegistrationToken("eXaMpLe:APA91b" + String(repeating: "Q_-z", count: 30)))
        #expect(!FCMPushService.isValidRegistrationToken(String(repeating: "a", count: 31)))
        #expect(!FCMPushService.isValidRegistrationToken(String(repeating: "a b", count: 30)))
    }
}

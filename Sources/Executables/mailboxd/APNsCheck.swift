import APNs
import CommandLineSupport
import Foundation
import MailboxService
import MailboxStore
import Push
import PushAPNs

/// `mailboxd apns-check`: sends one background signal to a device token exactly as `serve` would signal it
/// (same apps, endpoints, keys and saved provider token), prints APNs's answer and, for a refusal, its likely
/// cause. Exits 0 when APNs accepted the signal, 1 otherwise.
enum APNsCheck {
    /// The flags only `apns-check` takes: which device to signal, and how.
    static let ownFlags = FlagTable(
        column: 28,
        [
            Flag("token", "HEX", help: "the device token to signal (hexadecimal, usually 64 characters)"),
            Flag("environment", "ENV", help: "sandbox or production: the environment the device registered in"),
            Flag("topic", "BUNDLE_ID", help: "the app to signal (default: the only app configured)"),
        ])

    /// Every flag `apns-check` takes: its own, and `serve`'s that describe the apps and endpoints.
    static let flags = FlagTable(
        column: 28,
        ownFlags.flags + [Serve.dataDirectoryFlag, Serve.apnsConfigFlag, Serve.legacyPayloadLimitFlag]
            + Serve.singleAppFlags.flags)

    static func run(_ args: Arguments, dataDir: String) async throws {
        try flags.rejectUnknownFlags(in: args)
        let configuration = try Serve.apnsConfiguration(args, dataDir: dataDir)
        let token = try args.required("token")
        guard let environment = PushEnvironment(rawValue: try args.required("environment")) else {
            throw UsageError("--environment must be sandbox or production")
        }
        let topics = configuration.apps.map(\.topic)
        guard let topic = args.string("topic") ?? (topics.count == 1 ? topics[0] : nil) else {
            throw UsageError("--topic is needed: the configuration has \(topics.count) apps")
        }
        guard configuration.app(for: topic) != nil else {
            throw UsageError("no configured app has the topic \(topic)")
        }
        guard (try? DeviceToken(token.lowercased())) != nil else {
            throw UsageError("--token must be hexadecimal, usually 64 characters")
        }
        // The saved provider token is reused, so a check never counts as a token update against a running serve.
        let sender = try APNsPushService(
            configuration: configuration, legacyPayloadLimit: args.flag("legacy-payload-limit"),
            tokenCacheDirectory: dataDir + "/apns", idleTimeout: .seconds(60))
        let check = try await sender.check(token: token, topic: topic, environment: environment)
        sender.shutdown()
        print("apns-check: \(environment.rawValue) \(check.endpoint), topic \(topic), key \(check.keyID)")
        switch check.result {
        case .success(let response):
            let unique = response.uniqueID.map { ", apns-unique-id \($0)" } ?? ""
            print("accepted: 200 (apns-id \(response.apnsID)\(unique))")
        case .failure(.rejected(let refusal)):
            print("refused: \(refusal.status) \(refusal.reason.rawValue)")
            print("likely cause: \(refusal.reason.likelyCause)")
            exit(1)
        case .failure(let error):
            print("no answer: \(error)")
            print("likely cause: the endpoint cannot be reached or its certificate is not trusted (check the URL, ")
            print("the network, and --apns-ca / \"ca\" for a local gateway)")
            exit(1)
        }
    }
}

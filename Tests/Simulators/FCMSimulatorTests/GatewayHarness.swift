import Durations
import FCMSimulator
import Foundation
import Locking
import SimulatorSupport
import TestSupport
import Testing

/// An in-process gateway with a manual clock and two trusted projects, driven through `handle(_:)`.
struct GatewayHarness {
    static let project = "signalfetch-dev"
    static let otherProject = "other-project"
    let clock = ManualClock(start: Date(timeIntervalSince1970: 1_800_000_000))
    let account = TestServiceAccount(project: GatewayHarness.project)
    let otherAccount = TestServiceAccount(project: GatewayHarness.otherProject, keyIndex: 1)
    let gateway: FCMGateway

    init(configure: (inout FCMGatewayConfiguration) -> Void = { _ in }) {
        var configuration = FCMGatewayConfiguration(serviceAccounts: [account.account, otherAccount.account])
        configure(&configuration)
        gateway = FCMGateway(configuration: configuration, clock: clock)
    }

    func tokenRequest(_ form: String) -> SimulatorProviderResponse {
        gateway.handle(
            SimulatorProviderRequest(
                method: "POST", path: "/token",
                headers: [("content-type", "application/x-www-form-urlencoded")], body: Data(form.utf8)))
    }

    func grant(_ assertion: String) -> SimulatorProviderResponse {
        let escaped = assertion.addingPercentEncoding(
            withAllowedCharacters: .alphanumerics.union(.init(charactersIn: "-._")))!
        return tokenRequest("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(escaped)")
    }

    /// A valid access token of `account` (the main one by default).
    func accessToken(for account: TestServiceAccount? = nil) throws -> String {
        let response = grant(try (account ?? self.account).assertion(issuedAt: clock.now()))
        guard response.status == 200, let token = response.json?["access_token"] as? String else {
            throw HarnessError("token request failed: \(response.status)")
        }
        return token
    }

    func send(
        _ body: String, project: String = GatewayHarness.project, accessToken: String?
    ) -> SimulatorProviderResponse {
        var headers: [(name: String, value: String)] = [("content-type", "application/json")]
        if let accessToken { headers.append(("authorization", "Bearer \(accessToken)")) }
        return gateway.handle(
            SimulatorProviderRequest(
                method: "POST", path: "/v1/projects/\(project)/messages:send", headers: headers, body: Data(body.utf8)))
    }

    func message(to token: String, data: String = #"{"acct":"a1"}"#, android: String? = nil) -> String {
        let androidPart = android.map { #","android":\#($0)"# } ?? ""
        return #"{"message":{"token":"\#(token)","data":\#(data)\#(androidPart)}}"#
    }

    func register(project: String = GatewayHarness.project) throws -> String {
        guard let token = gateway.registerDevice(app: "com.example.mail", project: project) else {
            throw HarnessError("registration failed")
        }
        return token
    }

    /// A message stream that records what it is sent.
    func connect(_ token: String) -> RecordingSink {
        let sink = RecordingSink()
        _ = gateway.connect(token, sink: sink.sink)
        return sink
    }
}

/// Collects the events a message stream was sent.
final class RecordingSink: Sendable {
    private let events = LockedValue<[String]>([])

    var sink: FCMMessageSink {
        FCMMessageSink(
            send: { [events] text in
                events.withLock { $0.append(text) }
                return true
            }, close: {})
    }

    var received: [[String: Any]] {
        events.withLock { $0 }.map { (try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) ?? [:] }
    }

    var data: [[String: String]] { received.compactMap { $0["data"] as? [String: String] } }
}

extension SimulatorProviderResponse {
    /// The `error` object of an FCM error body.
    var error: [String: Any]? { json?["error"] as? [String: Any] }
    /// The `errorCode` of the `FcmError` detail.
    var errorCode: String? {
        (error?["details"] as? [[String: Any]])?.first {
            $0["@type"] as? String == "type.googleapis.com/google.firebase.fcm.v1.FcmError"
        }?["errorCode"] as? String
    }
    /// The `errorCode` of the `ErrorInfo` detail.
    var errorInfoReason: String? {
        (error?["details"] as? [[String: Any]])?.first {
            $0["@type"] as? String == "type.googleapis.com/google.rpc.ErrorInfo"
        }?["reason"] as? String
    }
    func header(_ name: String) -> String? { headers.first { $0.name.lowercased() == name }?.value }
}

import Foundation
import OpenSSLCrypto
import PushFCM

/// The development FCM service account `mailboxd dev-setup` writes: `DIR/fcm/service-account.json`, Google's key
/// file format for project `signalfetch-dev`, with a fresh RSA key (kept if it exists).
enum DevServiceAccount {
    static let project = "signalfetch-dev"

    static func write(dataDirectory: String) throws -> [String] {
        let path = dataDirectory + "/fcm/service-account.json"
        guard !FileManager.default.fileExists(atPath: path) else { return [] }
        let account = GoogleServiceAccount(
            projectID: project, privateKeyID: SecureRandom.hex(20),
            clientEmail: "mailboxd@\(project).iam.gserviceaccount.com",
            tokenURI: "https://oauth2.googleapis.com/token", privateKey: try RSAPrivateKey())
        try FileManager.default.createDirectory(
            atPath: dataDirectory + "/fcm", withIntermediateDirectories: true)
        guard
            FileManager.default.createFile(
                atPath: path, contents: Data(account.json.utf8), attributes: [.posixPermissions: 0o600])
        else { throw CryptoError("writing \(path)", reason: "cannot create the file") }
        return [path]
    }
}

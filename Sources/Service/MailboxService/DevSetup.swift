import Foundation
import OpenSSLCrypto

/// `mailboxd dev-setup`: writes the development material a local deployment needs, keeping what exists.
///
/// - `tls/ca.pem`, `tls/ca.key`: a development CA;
/// - `tls/server.pem`, `tls/server.key`: a server certificate for the given hosts, signed by that CA;
/// - `apns/key.p8`, `apns/key.pub.pem`, `apns/key-id`, `apns/team-id`: an APNs-style signing key;
/// - `webpush/vapid.pem`, `webpush/vapid-public-key`: the VAPID key (RFC 8292) Web Push is signed with, and its
///   public point (base64url) that browsers subscribe with;
/// - `delivery-token`: the token senders use on `POST /v1/deliveries`;
/// - `console-token`: the token an operator signs in to `/console` with.
public enum DevSetup {
    /// The default hosts of the server certificate.
    public static let defaultHosts = ["localhost", "127.0.0.1", "mailboxd", "apns-sim", "fcm-sim", "webpush-sim"]

    /// Writes whatever is missing under `dataDirectory` and returns the paths it created.
    @discardableResult
    public static func run(dataDirectory: String, hosts: [String] = defaultHosts) throws -> [String] {
        let fm = FileManager.default
        var created: [String] = []
        func path(_ name: String) -> String { dataDirectory + "/" + name }
        // Every folder 0700 and every file 0600, public halves included: the data folder is the service's alone
        // (the process's umask makes them so from the first byte; the modes are set again for a caller without it).
        func write(_ name: String, _ text: String) throws {
            let target = path(name)
            try fm.createDirectory(
                atPath: (target as NSString).deletingLastPathComponent, withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
            try text.write(toFile: target, atomically: true, encoding: .utf8)
            try fm.setAttributes([.posixPermissions: 0o600], ofItemAtPath: target)
            created.append(target)
        }
        func exists(_ name: String) -> Bool { fm.fileExists(atPath: path(name)) }

        var authority: CertificateAndKey
        if exists("tls/ca.pem") && exists("tls/ca.key") {
            authority = CertificateAndKey(
                certificatePEM: try String(contentsOfFile: path("tls/ca.pem"), encoding: .utf8),
                privateKeyPEM: try String(contentsOfFile: path("tls/ca.key"), encoding: .utf8))
        } else {
            authority = try DevCertificates.makeCertificateAuthority(commonName: "SignalFetch Development CA")
            try write("tls/ca.pem", authority.certificatePEM)
            try write("tls/ca.key", authority.privateKeyPEM)
        }
        if !(exists("tls/server.pem") && exists("tls/server.key")) {
            let server = try DevCertificates.makeServerCertificate(hosts: hosts, signedBy: authority)
            try write("tls/server.pem", server.certificatePEM)
            try write("tls/server.key", server.privateKeyPEM)
        }
        if !exists("apns/key.p8") {
            let key = try P256PrivateKey()
            try write("apns/key.p8", try key.pemRepresentation)
            try write("apns/key.pub.pem", try key.publicKey.pemRepresentation)
        }
        if !exists("apns/key-id") { try write("apns/key-id", randomIdentifier() + "\n") }
        if !exists("apns/team-id") { try write("apns/team-id", randomIdentifier() + "\n") }
        if !exists("webpush/vapid.pem") {
            let key = try P256PrivateKey()
            try write("webpush/vapid.pem", try key.pemRepresentation)
            try write("webpush/vapid-public-key", Base64URL.encode(try key.publicKey.rawRepresentation) + "\n")
        }
        if !exists("delivery-token") { try write("delivery-token", SecureRandom.base64URL(32) + "\n") }
        if !exists("console-token") { try write("console-token", SecureRandom.base64URL(24) + "\n") }
        return created
    }

    /// Ten characters from A–Z and 0–9, like Apple's key and team identifiers.
    static func randomIdentifier() -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        return String(SecureRandom.bytes(10).map { alphabet[Int($0) % alphabet.count] })
    }
}

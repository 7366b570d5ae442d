import COpenSSL
import Foundation

/// A certificate and its private key, both PEM.
public struct CertificateAndKey: Sendable {
    /// The certificate, `-----BEGIN CERTIFICATE-----`.
    public var certificatePEM: String
    /// The private key, PKCS#8 `-----BEGIN PRIVATE KEY-----`.
    public var privateKeyPEM: String

    /// Pairs a certificate with its key.
    public init(certificatePEM: String, privateKeyPEM: String) {
        self.certificatePEM = certificatePEM
        self.privateKeyPEM = privateKeyPEM
    }
}

/// Development certificates: a self-signed CA and server certificates it signs, with subjectAltNames.
///
/// For local development and tests only; production deployments bring their own certificates.
public enum DevCertificates {
    /// Makes a self-signed P-256 CA certificate valid for `days` days.
    public static func makeCertificateAuthority(commonName: String, days: Int = 3650) throws -> CertificateAndKey {
        let key = try P256PrivateKey()
        let certificate = try makeCertificate(
            subjectName: commonName, subjectKey: key, issuer: nil, days: days,
            extensions: [
                (NID_basic_constraints, "critical,CA:TRUE"),
                (NID_key_usage, "critical,keyCertSign,cRLSign"),
                (NID_subject_key_identifier, "hash"),
            ])
        defer { X509_free(certificate) }
        return CertificateAndKey(certificatePEM: try pem(of: certificate), privateKeyPEM: try key.pemRepresentation)
    }

    /// Makes a P-256 server certificate for `hosts` (DNS names and IP addresses), signed by `authority`.
    public static func makeServerCertificate(
        hosts: [String], signedBy authority: CertificateAndKey, days: Int = 825
    ) throws -> CertificateAndKey {
        guard !hosts.isEmpty else { throw CryptoError("making a certificate", reason: "no host names") }
        let key = try P256PrivateKey()
        let caKey = try P256PrivateKey(pemRepresentation: authority.privateKeyPEM)
        guard let caCertificate = readCertificate(authority.certificatePEM) else {
            throw CryptoError.openSSL("reading the CA certificate")
        }
        defer { X509_free(caCertificate) }
        let altNames = hosts.map { isIPAddress($0) ? "IP:\($0)" : "DNS:\($0)" }.joined(separator: ",")
        let certificate = try makeCertificate(
            subjectName: hosts[0], subjectKey: key, issuer: (caCertificate, caKey), days: days,
            extensions: [
                (NID_basic_constraints, "critical,CA:FALSE"),
                (NID_key_usage, "critical,digitalSignature,keyEncipherment"),
                (NID_ext_key_usage, "serverAuth,clientAuth"),
                (NID_subject_alt_name, altNames),
                (NID_subject_key_identifier, "hash"),
                (NID_authority_key_identifier, "keyid:always"),
            ])
        defer { X509_free(certificate) }
        return CertificateAndKey(certificatePEM: try pem(of: certificate), privateKeyPEM: try key.pemRepresentation)
    }

    /// The base64 SHA-256 of the certificate's SubjectPublicKeyInfo, for `sha256//…` pinning.
    public static func spkiSHA256Base64(certificatePEM: String) throws -> String {
        guard let certificate = readCertificate(certificatePEM) else {
            throw CryptoError.openSSL("reading a certificate")
        }
        defer { X509_free(certificate) }
        guard let pkey = X509_get0_pubkey(certificate) else { throw CryptoError.openSSL("reading a certificate") }
        let length = i2d_PUBKEY(pkey, nil)
        guard length > 0 else { throw CryptoError.openSSL("encoding a public key") }
        var der = [UInt8](repeating: 0, count: Int(length))
        der.withUnsafeMutableBufferPointer { buffer in
            var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
            _ = i2d_PUBKEY(pkey, &cursor)
        }
        return Data(SHA256.hash(der)).base64EncodedString()
    }

    private static func isIPAddress(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }

    private static func readCertificate(_ pem: String) -> OpaquePointer? {
        MemoryBIO.read(pem) { PEM_read_bio_X509($0, nil, nil, nil) }
    }

    private static func pem(of certificate: OpaquePointer) throws -> String {
        try MemoryBIO.write("writing a certificate") { PEM_write_bio_X509($0, certificate) }
    }

    private static func makeCertificate(
        subjectName: String, subjectKey: P256PrivateKey, issuer: (certificate: OpaquePointer, key: P256PrivateKey)?,
        days: Int, extensions: [(Int32, String)]
    ) throws -> OpaquePointer {
        guard let certificate = X509_new() else { throw CryptoError.openSSL("making a certificate") }
        do {
            guard X509_set_version(certificate, 2) == 1 else { throw CryptoError.openSSL("making a certificate") }
            var serialBytes = SecureRandom.bytes(16)
            serialBytes[0] &= 0x7f
            guard let serial = BN_bin2bn(serialBytes, 16, nil) else {
                throw CryptoError.openSSL("making a certificate")
            }
            defer { BN_free(serial) }
            guard BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(certificate)) != nil,
                X509_gmtime_adj(X509_getm_notBefore(certificate), -3600) != nil,
                X509_gmtime_adj(X509_getm_notAfter(certificate), days * 86_400) != nil
            else { throw CryptoError.openSSL("making a certificate") }

            let name = X509_get_subject_name(certificate)
            let added = subjectName.withCString { cn in
                cn.withMemoryRebound(to: UInt8.self, capacity: subjectName.utf8.count) {
                    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, $0, -1, -1, 0)
                }
            }
            guard added == 1 else { throw CryptoError.openSSL("making a certificate") }
            let issuerName = issuer.map { X509_get_subject_name($0.certificate) } ?? name
            guard X509_set_issuer_name(certificate, issuerName) == 1,
                X509_set_pubkey(certificate, subjectKey.key.pointer) == 1
            else { throw CryptoError.openSSL("making a certificate") }

            var context = X509V3_CTX()
            X509V3_set_ctx(&context, issuer?.certificate ?? certificate, certificate, nil, nil, 0)
            for (nid, value) in extensions {
                guard let ext = X509V3_EXT_conf_nid(nil, &context, nid, value) else {
                    throw CryptoError.openSSL("adding certificate extension \(nid)")
                }
                defer { X509_EXTENSION_free(ext) }
                guard X509_add_ext(certificate, ext, -1) == 1 else {
                    throw CryptoError.openSSL("adding certificate extension \(nid)")
                }
            }
            let signingKey = issuer?.key ?? subjectKey
            guard X509_sign(certificate, signingKey.key.pointer, EVP_sha256()) > 0 else {
                throw CryptoError.openSSL("signing a certificate")
            }
            return certificate
        } catch {
            X509_free(certificate)
            throw error
        }
    }
}

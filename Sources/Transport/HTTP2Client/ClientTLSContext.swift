import COpenSSL
import ConnectionLoop
import Foundation
import HTTP2Support

/// An OpenSSL client context: trust store, optional client certificate, TLS 1.2+ and ALPN `h2`.
/// Created and used only on the client's I/O thread.
final class ClientTLSContext {
    let context: OpaquePointer
    private let pins: Set<String>

    init(_ tls: HTTP2Client.TLS) throws(HTTPClientError) {
        ERR_clear_error()
        guard let context = SSL_CTX_new(TLS_client_method()) else {
            throw .tlsFailure("SSL_CTX_new: \(OpenSSLErrors.drain())")
        }
        do {
            try ClientTLSContext.configure(context, tls)
        } catch {
            SSL_CTX_free(context)
            throw error
        }
        self.context = context
        pins = Set(tls.pinnedPublicKeys.map { $0.hasPrefix("sha256//") ? String($0.dropFirst(8)) : $0 })
    }

    deinit { SSL_CTX_free(context) }

    private static func configure(_ context: OpaquePointer, _ tls: HTTP2Client.TLS) throws(HTTPClientError) {
        // HTTP/2 requires TLS 1.2 or later (RFC 9113 §9.2).
        _ = SSL_CTX_ctrl(context, SSL_CTRL_SET_MIN_PROTO_VERSION, Int(TLS1_2_VERSION), nil)
        let alpn: [UInt8] = [2, UInt8(ascii: "h"), UInt8(ascii: "2")]
        // SSL_CTX_set_alpn_protos returns 0 on success.
        guard SSL_CTX_set_alpn_protos(context, alpn, UInt32(alpn.count)) == 0 else {
            throw .tlsFailure("cannot offer ALPN h2: \(OpenSSLErrors.drain())")
        }
        if let caFile = tls.caFile {
            guard FileManager.default.isReadableFile(atPath: caFile) else {
                throw .tlsFailure("CA file \(caFile) is missing or unreadable")
            }
            guard SSL_CTX_load_verify_locations(context, caFile, nil) == 1 else {
                throw .tlsFailure("CA file \(caFile) holds no usable certificate: \(OpenSSLErrors.drain())")
            }
        } else if SSL_CTX_set_default_verify_paths(context) != 1 {
            throw .tlsFailure("cannot load the system trust store: \(OpenSSLErrors.drain())")
        }
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
        if let certificateFile = tls.certificateFile {
            let keyFile = tls.keyFile ?? certificateFile
            guard SSL_CTX_use_certificate_chain_file(context, certificateFile) == 1 else {
                throw .tlsFailure("client certificate \(certificateFile) unusable: \(OpenSSLErrors.drain())")
            }
            guard SSL_CTX_use_PrivateKey_file(context, keyFile, SSL_FILETYPE_PEM) == 1,
                SSL_CTX_check_private_key(context) == 1
            else {
                throw .tlsFailure("client key \(keyFile) unusable or not matching: \(OpenSSLErrors.drain())")
            }
        }
    }

    /// A client-side engine that verifies the server's certificate for `host` (a DNS name or an IP address)
    /// and sends `host` as SNI when it is a name.
    func makeEngine(host: String) throws(HTTPClientError) -> TLSEngine {
        guard let engine = TLSEngine(context: context, role: .client) else {
            throw .tlsFailure("SSL_new failed (out of memory)")
        }
        let isAddress = ClientTLSContext.isIPAddress(host)
        let accepted: Int32
        if isAddress {
            accepted = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(engine.ssl), host)
        } else {
            accepted = SSL_set1_host(engine.ssl, host)
            host.withCString { name in
                _ = SSL_ctrl(
                    engine.ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, Int(TLSEXT_NAMETYPE_host_name),
                    UnsafeMutableRawPointer(mutating: name))
            }
        }
        guard accepted == 1 else { throw .tlsFailure("cannot verify against host \(host)") }
        return engine
    }

    /// Why the finished or failed handshake of `engine` is unacceptable, or `nil` when it is fine.
    func check(_ engine: TLSEngine, handshakeFailed: Bool) -> HTTPClientError? {
        let verification = SSL_get_verify_result(engine.ssl)
        if verification != Int(X509_V_OK) {
            return .untrustedCertificate(String(cString: X509_verify_cert_error_string(verification)))
        }
        if handshakeFailed { return .tlsFailure("handshake failed") }
        guard engine.selectedALPN == "h2" else { return .http2NotOffered }
        if !pins.isEmpty {
            guard let key = serverKeyDigest(engine), pins.contains(key) else { return .pinMismatch }
        }
        return nil
    }

    /// The base64 SHA-256 of the server certificate's DER `SubjectPublicKeyInfo`.
    private func serverKeyDigest(_ engine: TLSEngine) -> String? {
        guard let certificate = SSL_get1_peer_certificate(engine.ssl) else { return nil }
        defer { X509_free(certificate) }
        guard let publicKey = X509_get_X509_PUBKEY(certificate) else { return nil }
        let length = i2d_X509_PUBKEY(publicKey, nil)
        guard length > 0 else { return nil }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
            return i2d_X509_PUBKEY(publicKey, &cursor)
        }
        guard written == length else { return nil }
        var digest = [UInt8](repeating: 0, count: 32)
        var digestLength: UInt32 = 0
        guard EVP_Digest(der, der.count, &digest, &digestLength, EVP_sha256(), nil) == 1 else { return nil }
        return Data(digest.prefix(Int(digestLength))).base64EncodedString()
    }

    static func isIPAddress(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }
}

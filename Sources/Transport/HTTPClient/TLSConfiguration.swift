/// How an ``HTTPClient`` trusts servers and identifies itself over TLS.
public struct TLSConfiguration: Sendable, Equatable {
    /// A PEM file of CA certificates to trust *instead of* the system trust store; `nil` uses the system store.
    public var caFile: String?
    /// A PEM client certificate to present, or `nil`.
    public var clientCertificateFile: String?
    /// The PEM private key of ``clientCertificateFile``, or `nil` when the certificate file holds it.
    public var clientKeyFile: String?
    /// Accepted server public keys: each entry is the base64 SHA-256 of a DER `SubjectPublicKeyInfo`
    /// (a leading `sha256//` is allowed). When non-empty, a server whose key matches none fails with
    /// ``HTTPClientError/pinMismatch``. Pinning applies in addition to certificate verification.
    public var pinnedPublicKeys: [String]

    /// Creates a TLS configuration; the defaults trust the system store, send no client certificate and pin nothing.
    public init(
        caFile: String? = nil, clientCertificateFile: String? = nil, clientKeyFile: String? = nil,
        pinnedPublicKeys: [String] = []
    ) {
        self.caFile = caFile
        self.clientCertificateFile = clientCertificateFile
        self.clientKeyFile = clientKeyFile
        self.pinnedPublicKeys = pinnedPublicKeys
    }

    /// The value for `CURLOPT_PINNEDPUBLICKEY`, or `nil` when nothing is pinned.
    var curlPinnedPublicKey: String? {
        guard !pinnedPublicKeys.isEmpty else { return nil }
        return pinnedPublicKeys.map { $0.hasPrefix("sha256//") ? $0 : "sha256//" + $0 }.joined(separator: ";")
    }
}

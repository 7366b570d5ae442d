import HTTP2Server

/// The PEM files a simulator's provider listener serves TLS with.
public struct SimulatorTLSFiles: Sendable, Hashable {
    /// The certificate chain.
    public var certificatePath: String
    /// The private key.
    public var privateKeyPath: String

    /// Creates the pair.
    public init(certificatePath: String, privateKeyPath: String) {
        self.certificatePath = certificatePath
        self.privateKeyPath = privateKeyPath
    }

    /// The pair as an HTTP/2 listener takes it.
    package var http2: HTTP2ServerConfiguration.TLS {
        HTTP2ServerConfiguration.TLS(certificateChainPath: certificatePath, privateKeyPath: privateKeyPath)
    }
}

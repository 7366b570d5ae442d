import COpenSSL
import ConnectionLoop
import Foundation
import OpenSSLCrypto
import TestSupport
import Testing

/// What a TLS connection of ours keeps once its handshake is over: not the handshake's buffers. The memory BIOs
/// that carried the certificate chain are swapped for fresh ones, and an emptied output buffer gives back what a
/// large write grew it to; records still flow both ways afterwards.
@Suite struct TLSEngineMemoryTests {
    @Test func afterTheHandshakeTheEnginesHoldNoHandshakeBuffersAndStillCarryData() throws {
        let directory = try TemporaryDirectory(prefix: "tls-engine")
        let authority = try DevCertificates.makeCertificateAuthority(commonName: "test CA")
        let server = try DevCertificates.makeServerCertificate(hosts: ["localhost"], signedBy: authority)
        try server.certificatePEM.write(toFile: directory.path("server.pem"), atomically: true, encoding: .utf8)
        try server.privateKeyPEM.write(toFile: directory.path("server.key"), atomically: true, encoding: .utf8)
        let serverContext = try ServerTLSContext(
            certificate: directory.path("server.pem"), privateKey: directory.path("server.key"))
        let clientContext = try #require(SSL_CTX_new(TLS_client_method()))
        defer { SSL_CTX_free(clientContext) }
        let client = try #require(TLSEngine(context: clientContext, role: .client))
        let serverEngine = try #require(serverContext.withContext { TLSEngine(context: $0, role: .server) })

        // Each side's ciphertext handed to the other until both finish the handshake.
        var toServer = OutputBuffer()
        var toClient = OutputBuffer()
        func pump() {
            client.drainCiphertext(into: &toServer)
            _ = toServer.drain { bytes in
                serverEngine.receiveCiphertext(bytes)
                return bytes.count
            }
            _ = serverEngine.continueHandshake()
            serverEngine.drainCiphertext(into: &toClient)
            _ = toClient.drain { bytes in
                client.receiveCiphertext(bytes)
                return bytes.count
            }
            _ = client.continueHandshake()
        }
        _ = client.continueHandshake()
        for _ in 0..<10 where !(client.handshakeComplete && serverEngine.handshakeComplete) { pump() }
        #expect(client.handshakeComplete && serverEngine.handshakeComplete)
        pump()
        #expect(serverEngine.handshakeBuffersReleased && client.handshakeBuffersReleased)
        #expect(toServer.capacity <= 512 && toClient.capacity <= 512, "\(toServer.capacity), \(toClient.capacity)")

        // Application data after the swap, a large record first (the buffer grows, then gives it back).
        let large = [UInt8](repeating: 0x61, count: 40_000)
        #expect(large.withUnsafeBytes { serverEngine.writePlaintext($0) })
        serverEngine.drainCiphertext(into: &toClient)
        #expect(toClient.capacity > 40_000)
        var received: [UInt8] = []
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16 * 1024, alignment: 1)
        defer { buffer.deallocate() }
        _ = toClient.drain { bytes in
            client.receiveCiphertext(bytes)
            return bytes.count
        }
        #expect(toClient.capacity <= 512, "an emptied buffer keeps \(toClient.capacity) bytes")
        _ = client.readPlaintext(into: buffer) { chunk in
            received += chunk
            return true
        }
        #expect(received == large)
    }
}

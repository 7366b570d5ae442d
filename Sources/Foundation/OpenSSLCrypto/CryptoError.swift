import COpenSSL

/// A failure in a cryptographic operation, with OpenSSL's reason when it gave one.
public struct CryptoError: Error, CustomStringConvertible, Sendable, Equatable {
    /// What was being done, e.g. "signing" or "reading a private key".
    public let operation: String
    /// OpenSSL's error text, or a description of the problem.
    public let reason: String

    /// Creates an error from an operation and a reason.
    public init(_ operation: String, reason: String) {
        self.operation = operation
        self.reason = reason
    }

    /// Builds an error from OpenSSL's thread-local error queue (and clears it).
    static func openSSL(_ operation: String) -> CryptoError {
        var reasons: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            reasons.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return CryptoError(
            operation, reason: reasons.isEmpty ? "unknown OpenSSL failure" : reasons.joined(separator: "; "))
    }

    /// "operation failed: reason".
    public var description: String { "\(operation) failed: \(reason)" }
}

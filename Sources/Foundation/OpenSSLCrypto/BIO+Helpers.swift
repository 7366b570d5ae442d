import COpenSSL

/// Small helpers for OpenSSL memory BIOs.
enum MemoryBIO {
    /// Runs `body` with a fresh writable memory BIO and returns what it wrote.
    static func write(_ operation: String, _ body: (OpaquePointer) -> Int32) throws -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { throw CryptoError.openSSL(operation) }
        defer { BIO_free(bio) }
        guard body(bio) == 1 else { throw CryptoError.openSSL(operation) }
        var output = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = BIO_read(bio, &buffer, Int32(buffer.count))
            if count <= 0 { break }
            output.append(contentsOf: buffer[0..<Int(count)])
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// Runs `body` with a read-only memory BIO over `text`.
    static func read<T>(_ text: String, _ body: (OpaquePointer) -> T?) -> T? {
        let bytes = Array(text.utf8)
        return bytes.withUnsafeBytes { raw -> T? in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return nil }
            defer { BIO_free(bio) }
            return body(bio)
        }
    }
}

import Foundation

/// A blocking TCP client for line protocols (LMTP, SMTP) on loopback: send bytes, read CRLF-terminated reply
/// lines with a deadline. Run it off the cooperative pool (``offPool(_:)``).
public final class LineClient: @unchecked Sendable {  // used from one thread at a time
    private let fd: Int32
    private var buffer: [UInt8] = []

    /// Connects to `127.0.0.1:port`.
    public init(port: UInt16) throws {
        // Stored only once connected: deinit (which closes it) runs when an init throws with every property set.
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EMFILE) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard connected else {
            close(fd)
            throw POSIXError(.ECONNREFUSED)
        }
        self.fd = fd
    }

    deinit { close(fd) }

    /// Sends `text` as UTF-8.
    public func send(_ text: String) { send(Array(text.utf8)) }

    /// Sends `bytes`.
    public func send(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            guard sent > 0 else { return }
            offset += sent
        }
    }

    /// The next reply line without its CRLF, or `nil` when the connection closed or `timeout` passed.
    public func line(timeout: Double = 10) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let end = buffer.indices.dropLast().first(where: { buffer[$0] == 0x0D && buffer[$0 + 1] == 0x0A }) {
                let line = String(decoding: buffer[..<end], as: UTF8.self)
                buffer.removeFirst(end + 2)
                return line
            }
            let remaining = deadline.timeIntervalSinceNow
            guard remaining > 0 else { return nil }
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, Int32(remaining * 1000) + 1) > 0 else { return nil }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard count > 0 else { return nil }
            buffer += chunk[..<count]
        }
    }

    /// The next `count` reply lines (fewer when the connection closed or `timeout` passed).
    public func lines(_ count: Int, timeout: Double = 10) -> [String] {
        var result: [String] = []
        while result.count < count, let line = line(timeout: timeout) { result.append(line) }
        return result
    }

    /// Reads one whole reply (continuation lines `250-…` up to the last `250 …`) and returns its lines.
    public func reply(timeout: Double = 10) -> [String] {
        var result: [String] = []
        while let line = line(timeout: timeout) {
            result.append(line)
            if line.count < 4 || line[line.index(line.startIndex, offsetBy: 3)] != "-" { break }
        }
        return result
    }
}

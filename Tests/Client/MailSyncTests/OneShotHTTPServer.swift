import Foundation
import Locking

#if canImport(Glibc)
    import Glibc
#endif

/// A listener on 127.0.0.1 (port 0, read back) that takes one connection, reads its request head, writes `response`
/// as given, and closes: for answers no real server gives, such as a body cut short.
final class OneShotHTTPServer: Sendable {
    /// The port it listens on.
    let port: UInt16
    private let request = LockedValue<String?>(nil)
    private let done = DispatchSemaphore(value: 0)

    init(response: String) throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard listener >= 0 else { throw POSIXError(.EMFILE) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                bind(listener, socketAddress, length) == 0 && listen(listener, 1) == 0
                    && getsockname(listener, socketAddress, &length) == 0
            }
        }
        guard bound else {
            close(listener)
            throw POSIXError(.EADDRNOTAVAIL)
        }
        port = UInt16(bigEndian: address.sin_port)
        let (request, done) = (request, done)
        Thread.detachNewThread {
            defer {
                close(listener)
                done.signal()
            }
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { return }
            defer { close(connection) }
            var head = [UInt8]()
            var buffer = [UInt8](repeating: 0, count: 4096)
            while !head.suffix(4).elementsEqual([13, 10, 13, 10]) {
                let count = read(connection, &buffer, buffer.count)
                guard count > 0 else { break }
                head += buffer[..<count]
            }
            request.withLock { $0 = String(decoding: head, as: UTF8.self) }
            let bytes = Array(response.utf8)
            _ = bytes.withUnsafeBytes { write(connection, $0.baseAddress, $0.count) }
        }
    }

    /// The request head it read, once it has answered and closed.
    func waitForRequest() -> String {
        done.wait()
        done.signal()
        return request.withLock { $0 } ?? ""
    }
}

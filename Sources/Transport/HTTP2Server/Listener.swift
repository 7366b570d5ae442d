import ConnectionLoop
import Foundation

/// A bound, listening, non-blocking TCP socket (``ListeningSocket``, the project's one binder).
struct Listener {
    let fd: Int32
    let port: Int

    /// Resolves `host`, binds `host:port` (IPv4 addresses first) and listens.
    static func open(host: String, port: Int, backlog: Int32 = 1024) throws(HTTP2ServerError) -> Listener {
        guard let asked = UInt16(exactly: port) else {
            throw .invalidAddress(host: host, reason: "port \(port) is out of range")
        }
        do {
            let (fd, bound) = try ListeningSocket.bind(host: host, port: asked, backlog: backlog, nonBlocking: true)
            return Listener(fd: fd, port: Int(bound))
        } catch {
            switch error.reason {
            case .unresolved(let why): throw .invalidAddress(host: host, reason: why)
            case .addressInUse: throw .addressInUse(host: host, port: port)
            case .failed(let operation, let code):
                throw .socketFailure(
                    operation: operation, host: host, port: port, errno: code, reason: String(cString: strerror(code)))
            }
        }
    }
}

/// Helpers for `sockaddr_storage` values.
enum SocketAddress {
    static func port(of storage: sockaddr_storage) -> Int {
        var copy = storage
        return withUnsafePointer(to: &copy) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address -> Int in
                switch Int32(address.pointee.sa_family) {
                case AF_INET:
                    return address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                        Int(UInt16(bigEndian: $0.pointee.sin_port))
                    }
                case AF_INET6:
                    return address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                        Int(UInt16(bigEndian: $0.pointee.sin6_port))
                    }
                default: return 0
                }
            }
        }
    }

    /// The IP address alone, as text (`unknown` for another family); an IPv4 peer of a dual-stack listener
    /// (`::ffff:127.0.0.2`) as its IPv4 address.
    static func host(of storage: sockaddr_storage) -> String {
        let ip = address(of: storage)
        let mapped = "::ffff:"
        return ip.lowercased().hasPrefix(mapped) && ip.contains(".") ? String(ip.dropFirst(mapped.count)) : ip
    }

    /// `ip:port` (IPv6 as `[ip]:port`).
    static func describe(_ storage: sockaddr_storage) -> String {
        let ip = address(of: storage)
        guard ip != "unknown" else { return ip }
        let port = self.port(of: storage)
        return Int32(storage.ss_family) == AF_INET6 ? "[\(ip)]:\(port)" : "\(ip):\(port)"
    }

    /// The IP address as `inet_ntop` writes it (`unknown` for another family).
    private static func address(of storage: sockaddr_storage) -> String {
        var copy = storage
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        let family = Int32(copy.ss_family)
        let ok = withUnsafePointer(to: &copy) { pointer -> Bool in
            switch family {
            case AF_INET:
                return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { address in
                    var raw = address.pointee.sin_addr
                    return inet_ntop(AF_INET, &raw, &text, socklen_t(text.count)) != nil
                }
            case AF_INET6:
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { address in
                    var raw = address.pointee.sin6_addr
                    return inet_ntop(AF_INET6, &raw, &text, socklen_t(text.count)) != nil
                }
            default: return false
            }
        }
        guard ok else { return "unknown" }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

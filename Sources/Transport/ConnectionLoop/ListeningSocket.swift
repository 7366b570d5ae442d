import Foundation

/// A bound, listening TCP socket, as every loop's listener starts.
package enum ListeningSocket {
    /// Why the address could not be bound.
    package struct BindError: Error, CustomStringConvertible {
        /// What failed, with the address.
        package let description: String
    }

    /// Binds `host:port` (0 picks a free port) and listens; returns the descriptor and the bound port.
    package static func bind(host: String, port: UInt16, backlog: Int32 = 511) throws(BindError) -> (Int32, UInt16) {
        var hints = addrinfo()
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let first = list else {
            throw BindError(description: "cannot resolve \(host): \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(list) }
        let address = first.pointee
        let fd = socket(address.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw BindError(description: "socket: \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        guard Glibc.bind(fd, address.ai_addr, address.ai_addrlen) == 0, Glibc.listen(fd, backlog) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw BindError(description: "cannot listen on \(host):\(port): \(reason)")
        }
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        let family = storage.ss_family
        let bound: UInt16 = withUnsafePointer(to: &storage) { pointer in
            if family == sa_family_t(AF_INET6) {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                    UInt16(bigEndian: $0.pointee.sin6_port)
                }
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                UInt16(bigEndian: $0.pointee.sin_port)
            }
        }
        return (fd, bound)
    }
}

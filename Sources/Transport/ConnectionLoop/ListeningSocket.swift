import Foundation

/// A bound, listening TCP socket, as every listener of the project starts (the connection loops', HTTP/2's).
package enum ListeningSocket {
    /// Why the address could not be bound.
    package struct BindError: Error, CustomStringConvertible {
        /// What went wrong.
        package enum Reason: Error, Sendable, Equatable {
            /// The host did not resolve (`getaddrinfo`'s reason).
            case unresolved(String)
            /// Another socket listens on the address.
            case addressInUse
            /// A call failed (`socket`, `bind`, `listen`, `getsockname`) with `errno`.
            case failed(operation: String, errno: Int32)
        }

        /// The address asked for.
        package let host: String
        /// The port asked for.
        package let port: UInt16
        /// What went wrong.
        package let reason: Reason

        /// What failed, with the address.
        package var description: String {
            switch reason {
            case .unresolved(let why): return "cannot resolve \(host): \(why)"
            case .addressInUse: return "cannot listen on \(host):\(port): \(String(cString: strerror(EADDRINUSE)))"
            case .failed("socket", let code): return "socket: \(String(cString: strerror(code)))"
            case .failed(_, let code): return "cannot listen on \(host):\(port): \(String(cString: strerror(code)))"
            }
        }
    }

    /// Binds `host:port` (0 picks a free port; of a name's addresses, IPv4 first) and listens, non-blocking when
    /// asked; returns the descriptor and the bound port. An address in use is not tried on the name's other addresses.
    package static func bind(
        host: String, port: UInt16, backlog: Int32 = 511, nonBlocking: Bool = false
    ) throws(BindError) -> (Int32, UInt16) {
        var hints = addrinfo()
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let list else {
            throw BindError(host: host, port: port, reason: .unresolved(String(cString: gai_strerror(status))))
        }
        defer { freeaddrinfo(list) }
        var candidates: [addrinfo] = []
        var cursor: UnsafeMutablePointer<addrinfo>? = list
        while let entry = cursor {
            candidates.append(entry.pointee)
            cursor = entry.pointee.ai_next
        }
        candidates.sort { ($0.ai_family == AF_INET ? 0 : 1) < ($1.ai_family == AF_INET ? 0 : 1) }
        var last = BindError(host: host, port: port, reason: .unresolved("no usable address"))
        for address in candidates {
            do {
                return try bind(address, nonBlocking: nonBlocking, backlog: backlog)
            } catch let reason {
                last = BindError(host: host, port: port, reason: reason)
                if reason == .addressInUse { break }
            }
        }
        throw last
    }

    private static func bind(
        _ address: addrinfo, nonBlocking: Bool, backlog: Int32
    ) throws(BindError.Reason) -> (Int32, UInt16) {
        func failure(_ operation: String, _ code: Int32) -> BindError.Reason {
            code == EADDRINUSE ? .addressInUse : .failed(operation: operation, errno: code)
        }
        var type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        if nonBlocking { type |= Int32(SOCK_NONBLOCK.rawValue) }
        let fd = socket(address.ai_family, type, 0)
        guard fd >= 0 else { throw failure("socket", errno) }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        let operation =
            Glibc.bind(fd, address.ai_addr, address.ai_addrlen) != 0
            ? "bind" : Glibc.listen(fd, backlog) != 0 ? "listen" : nil
        if let operation {
            let code = errno
            close(fd)
            throw failure(operation, code)
        }
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else {
            let code = errno
            close(fd)
            throw failure("getsockname", code)
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

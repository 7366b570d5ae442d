import Foundation

/// A bound, listening, non-blocking TCP socket.
struct Listener {
    let fd: Int32
    let port: Int

    /// Resolves `host`, binds `host:port` (IPv4 addresses first) and listens.
    static func open(host: String, port: Int, backlog: Int32 = 1024) throws(HTTP2ServerError) -> Listener {
        var hints = addrinfo()
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let list else {
            throw .invalidAddress(host: host, reason: String(cString: gai_strerror(status)))
        }
        defer { freeaddrinfo(list) }
        var candidates: [UnsafeMutablePointer<addrinfo>] = []
        var cursor: UnsafeMutablePointer<addrinfo>? = list
        while let entry = cursor {
            candidates.append(entry)
            cursor = entry.pointee.ai_next
        }
        candidates.sort { ($0.pointee.ai_family == AF_INET ? 0 : 1) < ($1.pointee.ai_family == AF_INET ? 0 : 1) }
        var lastError: HTTP2ServerError = .invalidAddress(host: host, reason: "no usable address")
        for entry in candidates {
            do {
                return try bind(entry.pointee, host: host, port: port, backlog: backlog)
            } catch {
                lastError = error
                if case .addressInUse = error { throw error }
            }
        }
        throw lastError
    }

    private static func bind(
        _ address: addrinfo, host: String, port: Int, backlog: Int32
    ) throws(HTTP2ServerError)
        -> Listener
    {
        func failure(_ operation: String, _ code: Int32) -> HTTP2ServerError {
            if code == EADDRINUSE { return .addressInUse(host: host, port: port) }
            return .socketFailure(
                operation: operation, host: host, port: port, errno: code, reason: String(cString: strerror(code)))
        }
        let fd = socket(
            address.ai_family,
            Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
                | Int32(SOCK_CLOEXEC.rawValue), 0)
        if fd < 0 { throw failure("socket", errno) }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        if Glibc.bind(fd, address.ai_addr, address.ai_addrlen) != 0 {
            let code = errno
            close(fd)
            throw failure("bind", code)
        }
        if listen(fd, backlog) != 0 {
            let code = errno
            close(fd)
            throw failure("listen", code)
        }
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        if named != 0 {
            let code = errno
            close(fd)
            throw failure("getsockname", code)
        }
        return Listener(fd: fd, port: SocketAddress.port(of: storage))
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

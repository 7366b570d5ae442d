import Foundation

extension HTTP2Client {
    /// One address a name resolved to: the socket address to connect to, and its numeric text (what an address check
    /// reads and a proxy's `CONNECT` names).
    public struct ResolvedAddress {
        /// The socket address.
        public var storage: sockaddr_storage
        /// Its length.
        public var length: socklen_t
        /// The address as text (`203.0.113.7`, `2001:db8::1`).
        public var numeric: String
    }

    /// What `host` resolves to for a TCP connection to `port`, in the resolver's order, keeping only the addresses
    /// `permits` allows (every one, when it is `nil`). An unresolvable name, or one with no permitted address, is
    /// `connectionFailed` saying which.
    public static func resolve(
        _ host: String, port: Int, permits: (@Sendable (String) -> Bool)?
    ) throws(HTTPClientError) -> [ResolvedAddress] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_NUMERICSERV
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let list else {
            throw .connectionFailed("cannot resolve \(host): \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(list) }
        var found: [ResolvedAddress] = []
        var entry: UnsafeMutablePointer<addrinfo>? = list
        while let current = entry {
            if let address = current.pointee.ai_addr {
                let numeric = numericHost(address, current.pointee.ai_addrlen)
                if permits.map({ $0(numeric) }) ?? true {
                    var storage = sockaddr_storage()
                    withUnsafeMutableBytes(of: &storage) { target in
                        target.copyMemory(
                            from: UnsafeRawBufferPointer(start: address, count: Int(current.pointee.ai_addrlen)))
                    }
                    found.append(
                        ResolvedAddress(storage: storage, length: current.pointee.ai_addrlen, numeric: numeric))
                }
            }
            entry = current.pointee.ai_next
        }
        guard !found.isEmpty else { throw .connectionFailed("no address of \(host) is permitted") }
        return found
    }

    /// The numeric form of a resolved address.
    private static func numericHost(_ address: UnsafeMutablePointer<sockaddr>, _ length: socklen_t) -> String {
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        guard getnameinfo(address, length, &host, socklen_t(host.count), nil, 0, NI_NUMERICHOST) == 0 else {
            return ""
        }
        return String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

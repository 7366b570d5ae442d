import CEpoll  // epoll, which Glibc does not expose
import CommandLineSupport
import Foundation
import Synchronization

/// Simulated apns-sim devices for the apns-sim benchmark: registers devices through the device API, holds each
/// one's notification stream (Server-Sent Events over HTTP/1.1) and counts every event.
///
/// One thread reads every stream with one epoll loop and large reads, so the devices cost little CPU next to the
/// gateway they measure (the machine has two cores). Each stream's chunked body is decoded and every `data:`
/// line is counted.
///
/// Output, one JSON line each: `{"ready": N, "seconds": S}` once every stream is connected (tokens written to
/// `--tokens-out`), and `{"events": N, "connected": N}` on SIGTERM or SIGINT.
enum DeviceBenchmarks {
    static func run(sim: String, count: Int, topic: String, tokensOut: String?) throws {
        guard let colon = sim.lastIndex(of: ":"), let port = UInt16(sim[sim.index(after: colon)...]) else {
            throw UsageError("--sim must be host:port")
        }
        let host = String(sim[..<colon])
        raiseFileLimit()
        let stop = StopFlag()
        let sources = TerminationSignals.install { _ in stop.set() }
        defer { for source in sources { source.cancel() } }

        let start = ContinuousClock.now
        let tokens = try register(host: host, port: port, count: count, topic: topic)
        if let tokensOut {
            try (tokens.joined(separator: "\n") + "\n").write(toFile: tokensOut, atomically: true, encoding: .utf8)
        }

        let streams = try StreamReader()
        var pending = tokens[...]
        while (!pending.isEmpty || streams.connecting > 0) && !stop.isSet {
            while let token = pending.first, streams.connecting < 200 {  // listen backlogs are finite
                pending = pending.dropFirst()
                try streams.open(host: host, port: port, path: "/sim/devices/\(token)/notifications")
            }
            try streams.poll(timeoutMilliseconds: 50)
        }
        let elapsed = String(format: "%.2f", seconds(since: start))
        TransportBenchmarks.emit(#"{"ready":\#(streams.connected),"seconds":\#(elapsed)}"#)
        while !stop.isSet { try streams.poll(timeoutMilliseconds: 200) }
        TransportBenchmarks.emit(#"{"events":\#(streams.events),"connected":\#(streams.connected)}"#)
        streams.resetAll()
    }

    static func raiseFileLimit() {
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 {
            limit.rlim_cur = limit.rlim_max
            _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
    }

    /// Registers `count` devices over one keep-alive connection; returns their tokens.
    private static func register(host: String, port: UInt16, count: Int, topic: String) throws -> [String] {
        let fd = try connectSocket(host: host, port: port)
        defer { close(fd) }
        let body = #"{"topic":"\#(topic)","environment":"sandbox"}"#
        let request = Array(
            ("POST /sim/devices HTTP/1.1\r\nHost: \(host)\r\nContent-Type: application/json\r\n"
                + "Content-Length: \(body.utf8.count)\r\n\r\n" + body).utf8)
        var tokens: [String] = []
        tokens.reserveCapacity(count)
        var received = ReadBuffer()
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        let fill = { (bytes: inout [UInt8]) throws in
            let got = recv(fd, &chunk, chunk.count, 0)
            guard got > 0 else { throw BenchError("device API closed the connection during registration") }
            bytes += chunk[0..<got]
        }
        for _ in 0..<count {
            try sendAll(fd, request)
            received.compact()
            let (head, payload) = try received.answer(fill: fill)
            guard head.hasPrefix("HTTP/1.1 201") else {
                throw BenchError("device registration answered \(head.prefix(40))")
            }
            let json = try JSONSerialization.jsonObject(with: Data(payload))
            guard let token = (json as? [String: Any])?["deviceToken"] as? String else {
                throw BenchError("device registration answer has no deviceToken")
            }
            tokens.append(token)
        }
        return tokens
    }

    static func connectSocket(host: String, port: UInt16) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw BenchError("socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        guard inet_pton(AF_INET, host == "localhost" ? "127.0.0.1" : host, &address.sin_addr) == 1 else {
            close(fd)
            throw BenchError("--sim host must be an IPv4 address")
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw BenchError("connect to \(host):\(port): \(reason)")
        }
        return fd
    }

    static func sendAll(_ fd: Int32, _ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { throw BenchError("send: \(String(cString: strerror(errno)))") }
            offset += sent
        }
    }

    /// Where `needle` (not empty) first starts in `haystack`, as an index of `haystack`'s base.
    static func find(_ haystack: ArraySlice<UInt8>, _ needle: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for start in haystack.startIndex...(haystack.endIndex - needle.count)
        where haystack[start] == needle[0] && haystack[start..<(start + needle.count)].elementsEqual(needle) {
            return start
        }
        return nil
    }
}

/// A flag set from the signal handler's queue and read by the reading loop.
private final class StopFlag: Sendable {
    private let flag = Atomic<Bool>(false)
    func set() { flag.store(true, ordering: .relaxed) }
    var isSet: Bool { flag.load(ordering: .relaxed) }
}

/// Reads many Server-Sent Events streams with one epoll loop. Single-threaded.
private final class StreamReader {
    /// One notification stream: the response head, then its chunked body, decoded as it arrives.
    private struct Stream {
        var inHead = true
        var pending: [UInt8] = []  // head bytes, or a chunk-size line, not complete yet
        var remaining = 0  // bytes left in the current chunk
        var crlfDue = 0  // CRLF bytes still to skip after a chunk's data
        var matched = 0  // bytes of `data:` matched at the end of the data so far (a marker may span reads)
    }

    private let epollFD: Int32
    private var streams: [Int32: Stream] = [:]
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 256 * 1024, alignment: 16)
    private(set) var events = 0
    private(set) var connected = 0
    private(set) var connecting = 0

    init() throws {
        epollFD = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epollFD >= 0 else { throw BenchError("epoll_create1: \(String(cString: strerror(errno)))") }
    }

    deinit {
        close(epollFD)
        buffer.deallocate()
    }

    func open(host: String, port: UInt16, path: String) throws {
        let fd = try DeviceBenchmarks.connectSocket(host: host, port: port)
        try DeviceBenchmarks.sendAll(
            fd, Array("GET \(path) HTTP/1.1\r\nHost: \(host)\r\nAccept: text/event-stream\r\n\r\n".utf8))
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK)
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.fd = fd
        guard epoll_ctl(epollFD, EPOLL_CTL_ADD, fd, &event) == 0 else {
            close(fd)
            throw BenchError("epoll_ctl: \(String(cString: strerror(errno)))")
        }
        streams[fd] = Stream()
        connecting += 1
    }

    func poll(timeoutMilliseconds: Int32) throws {
        var ready = [epoll_event](repeating: epoll_event(), count: 1024)
        let count = ready.withUnsafeMutableBufferPointer {
            epoll_wait(epollFD, $0.baseAddress, Int32($0.count), timeoutMilliseconds)
        }
        for index in 0..<max(0, Int(count)) {
            let fd = ready[index].data.fd
            guard streams[fd] != nil else { continue }
            let got = recv(fd, buffer.baseAddress, buffer.count, 0)
            if got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) { continue }
            if got <= 0 {
                try closeStream(fd)
                continue
            }
            try feed(fd, UnsafeRawBufferPointer(rebasing: buffer[0..<got]))
        }
    }

    /// Closes every stream with a reset (SO_LINGER 0), as a device that vanishes.
    func resetAll() {
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        for fd in streams.keys {
            _ = setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
            close(fd)
        }
        streams = [:]
    }

    private func closeStream(_ fd: Int32) throws {
        _ = epoll_ctl(epollFD, EPOLL_CTL_DEL, fd, nil)
        close(fd)
        let stream = streams.removeValue(forKey: fd)
        if stream?.inHead == true { throw BenchError("notification stream closed before its response") }
        connected -= 1
    }

    private func feed(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws {
        guard var stream = streams[fd] else { return }
        defer { streams[fd] = stream }
        if stream.inHead {
            stream.pending.append(contentsOf: bytes)
            guard let end = DeviceBenchmarks.find(stream.pending[...], Array("\r\n\r\n".utf8)) else { return }
            guard stream.pending.starts(with: "HTTP/1.1 200".utf8) else {
                throw BenchError("notification stream refused")
            }
            stream.inHead = false
            connecting -= 1
            connected += 1
            let rest = Array(stream.pending[(end + 4)...])
            stream.pending = []
            try rest.withUnsafeBytes { try decode(&stream, $0, from: 0) }
            return
        }
        try decode(&stream, bytes, from: 0)
    }

    /// Decodes chunked-encoding bytes from `position`, counting `data:` lines in chunk data.
    private func decode(_ stream: inout Stream, _ bytes: UnsafeRawBufferPointer, from start: Int) throws {
        var position = start
        while position < bytes.count {
            if stream.remaining > 0 {
                let take = min(stream.remaining, bytes.count - position)
                count(&stream, UnsafeRawBufferPointer(rebasing: bytes[position..<(position + take)]))
                position += take
                stream.remaining -= take
                if stream.remaining == 0 { stream.crlfDue = 2 }
            } else if stream.crlfDue > 0 {
                let skip = min(stream.crlfDue, bytes.count - position)
                position += skip
                stream.crlfDue -= skip
            } else {
                // A chunk-size line, possibly split across reads.
                guard let lineEnd = (position..<bytes.count).first(where: { bytes[$0] == 0x0A }) else {
                    stream.pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[position...]))
                    return
                }
                stream.pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[position..<lineEnd]))
                // The size is the hex digits before any extension (`;…`) and the line's CR.
                let digits = stream.pending.prefix { $0 != UInt8(ascii: ";") && $0 != 0x0D && $0 != 0x20 }
                stream.pending = []
                position = lineEnd + 1
                guard !digits.isEmpty, let size = Int(String(decoding: digits, as: UTF8.self), radix: 16) else {
                    throw BenchError("bad chunk size line in a notification stream")
                }
                if size == 0 { return }  // the stream ended; the socket closes next
                stream.remaining = size
            }
        }
    }

    /// Counts `data:` in `bytes`, including one that began in the previous piece. The marker has no prefix that
    /// is also its suffix, so on a mismatch matching restarts at the current byte.
    private func count(_ stream: inout Stream, _ bytes: UnsafeRawBufferPointer) {
        let marker: StaticString = "data:"
        let first = marker.utf8Start[0]
        var matched = stream.matched
        for byte in bytes {
            if byte == marker.utf8Start[matched] {
                matched += 1
                if matched == marker.utf8CodeUnitCount {
                    events += 1
                    matched = 0
                }
            } else {
                matched = byte == first ? 1 : 0
            }
        }
        stream.matched = matched
    }
}

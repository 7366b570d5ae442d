import Foundation
import HTTPServer
import Locking
import TestSupport
import Testing

/// Runs the `curl` CLI and returns its result.
func curl(_ arguments: [String]) async throws -> ProcessResult {
    let path = try #require(Subprocess.which("curl"), "curl is not installed")
    return try await offPool { try Subprocess.run(path, ["--silent", "--show-error"] + arguments) }
}

/// Runs the httpx peer (`Tests/Peers/http1_httpx_client.py`) with the test venv's interpreter; returns the JSON
/// object it prints.
func httpxClient(_ arguments: [String]) async throws -> [String: Any] {
    let interpreter = TestEnvironment.python
    try #require(
        FileManager.default.isExecutableFile(atPath: interpreter),
        "Python not found at \(interpreter); set SIGNALFETCH_PYTHON to a venv with httpx")
    let result = try await offPool {
        try Subprocess.run(interpreter, [TestEnvironment.peer("http1_httpx_client.py")] + arguments)
    }
    try #require(result.status == 0, "\(result.stderr)")
    return try #require(
        try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(result.stdout)")
}

/// Splits curl `-i` output into status, headers and body.
struct CurlResponse {
    var status: Int
    var headers: [String: String]
    var body: String

    init(_ output: String) throws {
        var text = output
        // Skip interim responses such as `100 Continue`.
        while text.hasPrefix("HTTP/1.1 100") || text.hasPrefix("HTTP/1.0 100") {
            guard let end = text.range(of: "\r\n\r\n") else { break }
            text = String(text[end.upperBound...])
        }
        let parts = text.components(separatedBy: "\r\n\r\n")
        let head = parts[0].components(separatedBy: "\r\n")
        let statusLine = head[0].split(separator: " ")
        status = try #require(statusLine.count >= 2 ? Int(statusLine[1]) : nil, "no status in: \(output.prefix(200))")
        var headers: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                in: .whitespaces)
        }
        self.headers = headers
        body = parts.dropFirst().joined(separator: "\r\n\r\n")
    }

    func json() throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any], "not JSON: \(body)")
    }
}

/// Runs `curl -i` and parses the response.
func curlResponse(_ arguments: [String]) async throws -> CurlResponse {
    let result = try await curl(["-i"] + arguments)
    #expect(result.status == 0, "curl failed: \(result.stderr)")
    return try CurlResponse(result.stdout)
}

/// A blocking TCP client socket for speaking raw HTTP.
final class RawSocket: @unchecked Sendable {  // used by one test at a time, from one thread at a time
    let fd: Int32

    init(port: UInt16, receiveTimeout: Int = 10) throws {
        // Connect on a local descriptor and store it only once connected: a class whose properties are all set
        // runs deinit when its init throws, and a second close(fd) could close another thread's new descriptor.
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EMFILE) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            let code = errno
            close(fd)
            throw POSIXError(POSIXErrorCode(rawValue: code) ?? .ECONNREFUSED)
        }
        self.fd = fd
        var timeout = timeval(tv_sec: receiveTimeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(fd) }

    func send(_ text: String) {
        let bytes = Array(text.utf8)
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return }
            sent += n
        }
    }

    enum ReadEnd: Equatable {
        case data
        case eof
        case timeout
        case error(Int32)
    }

    /// Reads until `done` says so, the peer closes, or the receive timeout passes.
    func read(until done: (String) -> Bool = { _ in false }) -> (text: String, end: ReadEnd) {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n > 0 {
                received.append(contentsOf: buffer[0..<n])
                if done(String(decoding: received, as: UTF8.self)) {
                    return (String(decoding: received, as: UTF8.self), .data)
                }
            } else if n == 0 {
                return (String(decoding: received, as: UTF8.self), .eof)
            } else {
                let code = errno
                if code == EINTR { continue }
                let end: ReadEnd = (code == EAGAIN || code == EWOULDBLOCK) ? .timeout : .error(code)
                return (String(decoding: received, as: UTF8.self), end)
            }
        }
    }

    /// Closes the socket abruptly (RST instead of FIN).
    func abort() {
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        shutdown(fd, Int32(SHUT_RDWR))
    }
}

/// A thread-safe list, for collecting log lines and events in tests.
final class Collector<Element: Sendable>: Sendable {
    private let items = LockedValue<[Element]>([])
    func append(_ item: Element) { items.withLock { $0.append(item) } }
    var all: [Element] { items.withLock { $0 } }
    var count: Int { items.withLock { $0.count } }
}

/// A registry of open event streams, as an application would keep one.
final class StreamRegistry: Sendable {
    private let streams = LockedValue<[ObjectIdentifier: EventStream]>([:])
    let terminated = Collector<String>()

    func add(_ stream: EventStream, name: String) {
        streams.withLock { $0[ObjectIdentifier(stream)] = stream }
        stream.onTermination { [weak self] in
            guard let self else { return }
            _ = self.streams.withLock { $0.removeValue(forKey: ObjectIdentifier(stream)) }
            self.terminated.append(name)
        }
    }

    var count: Int { streams.withLock { $0.count } }

    /// The open streams, in no particular order.
    var all: [EventStream] { streams.withLock { Array($0.values) } }

    func broadcast(event: String, data: String) {
        for stream in streams.withLock({ Array($0.values) }) { stream.send(event: event, data: data) }
    }
}

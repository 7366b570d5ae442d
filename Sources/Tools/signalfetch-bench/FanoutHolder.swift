import CEpoll  // epoll's flags, which Glibc does not expose
import ConnectionLoop
import Foundation

/// `signalfetch-bench wsholder`: the sockets of the JMAP WebSocket fan-out bench (`Scripts/signalfetch/bench/
/// jmap_ws.py`), held by one compiled process on one epoll loop, so that reading 1,000 StateChanges costs the two
/// cores it shares with mailboxd little next to what mailboxd spends writing them.
///
/// Its first standard-input line is `{"port", "ca", "token"}`; then one command a line, one JSON answer each:
///
///     {"open": N}                 N more sockets, each ready (push enabled for Email, then a Request answered on
///                                 it); {"opened", "failed", "errors", "held", "seconds"}
///     {"wait": STATE, "timeout"}  until every held socket has heard STATE, or the timeout (seconds); {"heard",
///                                 "held", "closed"}
///     {"hold": true}              stops reading the sockets (what arrives waits in the kernel, its receive time
///                                 noted there); {"held"}
///     {"release": true}           reads them again; {"held"}
///     {"report": [STATES]}        per socket and state, [kernel receive time, monotonic time when handled] or
///                                 null; {"arrivals", "others"}
///
/// A StateChange's arrival is the kernel's receive time of its bytes (`SO_TIMESTAMPNS`, CLOCK_REALTIME: the holder
/// reads each socket with `recvmsg` and hands the bytes to OpenSSL), so it leaves out how long the loop took to reach one socket among many; when the loop handled it
/// (CLOCK_MONOTONIC, the clock of Python's `time.monotonic()`) is kept beside it. A StateChange is matched by the
/// Email state it names, found in the frame's bytes.
enum FanoutHolder {
    static func run() throws {
        DeviceBenchmarks.raiseFileLimit()
        var commands = CommandReader()
        guard let first = try commands.next(waiting: true),
            let config = try JSONSerialization.jsonObject(with: Data(first)) as? [String: Any],
            let port = (config["port"] as? NSNumber).flatMap({ UInt16(exactly: $0.intValue) }),
            let caFile = config["ca"] as? String, let token = config["token"] as? String
        else { throw BenchError("wsholder: the first line must be {\"port\", \"ca\", \"token\"}") }
        try Holder(port: port, caFile: caFile, token: token, commands: commands).serve()
    }

    /// Lines from standard input, read as they come (standard input is watched by the loop's poller).
    struct CommandReader {
        private var buffer: [UInt8] = []
        private(set) var ended = false

        /// The next whole line, if one is there; with `waiting`, reads until one is (nil: input ended).
        mutating func next(waiting: Bool = false) throws -> [UInt8]? {
            while true {
                if let newline = buffer.firstIndex(of: 0x0A) {
                    let line = Array(buffer[..<newline])
                    buffer.removeFirst(newline + 1)
                    return line
                }
                if ended || !waiting { return nil }
                try fill()
            }
        }

        /// Reads what standard input has (it is readable); notes its end.
        mutating func fill() throws {
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = read(0, &chunk, chunk.count)
            if count < 0 && errno != EINTR { throw BenchError("wsholder: reading standard input failed") }
            if count == 0 { ended = true }
            if count > 0 { buffer += chunk[..<count] }
        }
    }

    /// One held socket: its TLS connection (non-blocking once ready), the plaintext not yet framed, and when each
    /// state arrived.
    final class HeldSocket {
        let socket: TLSClientSocket
        var input = ReadBuffer()
        /// Fragments of a text message still being received.
        var fragments: [UInt8] = []
        /// The kernel receive time of the last bytes read.
        var lastTime = 0.0
        var arrivals: [String: (kernel: Double, handled: Double)] = [:]
        var closed = false

        init(socket: TLSClientSocket, unread: ArraySlice<UInt8>) {
            self.socket = socket
            unread.withUnsafeBytes { input.append($0) }
        }
    }

    final class Holder {
        private static let stdinTag = UInt64.max - 1
        private static let gatherMicroseconds: UInt32 = 1000
        private static let readyRequest =
            #"{"@type":"Request","id":"ready","using":["urn:ietf:params:jmap:core"],"#
            + #""methodCalls":[["Core/echo",{},"e"]]}"#
        private static let pushEnable = Array(#"{"@type":"WebSocketPushEnable","dataTypes":["Email"]}"#.utf8)

        private let port: UInt16
        private let caFile: String
        private let token: String
        private var commands: CommandReader
        private let poller: Poller
        private var sockets: [HeldSocket] = []
        private var heard: [String: Int] = [:]
        private var others: [String: Int] = [:]
        private var holding = false
        /// A wait not answered yet: the state, its deadline, and how many sockets must hear it.
        private var waiting: (state: String, deadline: ContinuousClock.Instant, needed: Int)?
        /// What one read takes from a socket, and what it decrypts to.
        private let raw = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
        private let plain = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)

        init(port: UInt16, caFile: String, token: String, commands: CommandReader) throws {
            self.port = port
            self.caFile = caFile
            self.token = token
            self.commands = commands
            poller = try Poller(capacity: 256)
            guard poller.add(0, tag: Self.stdinTag, events: EPOLLIN.rawValue) else {
                throw BenchError("wsholder: cannot watch standard input")
            }
        }

        deinit {
            raw.deallocate()
            plain.deallocate()
        }

        private var held: Int { sockets.count { !$0.closed } }

        func serve() throws {
            while true {
                while waiting == nil, let line = try commands.next() { try answer(line) }
                if let waiting,
                    heard[waiting.state, default: 0] >= waiting.needed || ContinuousClock.now >= waiting.deadline
                {
                    self.waiting = nil
                    reply(["heard": heard[waiting.state, default: 0], "held": held, "closed": sockets.count - held])
                    continue
                }
                if commands.ended && waiting == nil { break }
                var timeout: Int32 = -1
                if let waiting {
                    let left = waiting.deadline - ContinuousClock.now
                    timeout = Int32(max(0, min(60_000, left.seconds * 1000 + 1)))
                }
                guard let count = poller.wait(timeoutMilliseconds: timeout) else {
                    throw BenchError("wsholder: epoll_wait failed")
                }
                for index in 0..<count {
                    let tag = poller.ready(index).tag
                    if tag == Self.stdinTag {
                        try commands.fill()
                    } else {
                        readable(sockets[Int(tag)])
                    }
                }
                // A millisecond for more to arrive before the next wait, so that the loop does not wake for each of
                // mailboxd's 1,000 sends (each wake-up is CPU taken from the two cores mailboxd runs on). The kernel's
                // receive times, the samples, are the same either way.
                if count > 0 { usleep(Self.gatherMicroseconds) }
            }
        }

        private func answer(_ line: [UInt8]) throws {
            guard let command = try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any] else {
                throw BenchError("wsholder: a command must be a JSON object")
            }
            if let count = command["open"] as? Int {
                open(count)
            } else if let state = command["wait"] as? String {
                let timeout = (command["timeout"] as? NSNumber)?.doubleValue ?? 10
                waiting = (state, ContinuousClock.now + .milliseconds(Int(timeout * 1000)), held)
                // Answered by the loop, at once when every socket has heard it already.
            } else if command["hold"] != nil || command["release"] != nil {
                reading(command["release"] != nil)
                reply(["held": held])
            } else if let states = command["report"] as? [String] {
                report(states)
            } else {
                throw BenchError("wsholder: an unknown command: \(String(decoding: line, as: UTF8.self))")
            }
        }

        private func reply(_ object: [String: Any]) {
            guard let data = try? JSONSerialization.data(withJSONObject: object) else { return }
            TransportBenchmarks.emit(String(decoding: data, as: UTF8.self))
        }

        /// Opens `count` sockets one after another (each a blocking handshake), then watches them.
        private func open(_ count: Int) {
            let start = ContinuousClock.now
            var errors: [String: Int] = [:]
            for _ in 0..<count {
                do {
                    let side = try RoundTripClient.Side(
                        .init(
                            name: "held", kind: "ws", port: port, token: token, request: Self.readyRequest,
                            expect: #""ready""#), caFile: caFile)
                    try side.send(text: Self.pushEnable)
                    try side.once()
                    let (socket, unread) = side.handOver()
                    let fd = socket.descriptor
                    _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
                    var on: Int32 = 1
                    setsockopt(fd, SOL_SOCKET, Self.timestampType, &on, socklen_t(MemoryLayout<Int32>.size))
                    try socket.readFromMemory()
                    sockets.append(HeldSocket(socket: socket, unread: unread))
                    if !holding { poller.add(fd, tag: UInt64(sockets.count - 1), events: EPOLLIN.rawValue) }
                } catch {
                    errors[String(String(describing: error).prefix(120)), default: 0] += 1
                }
            }
            let failed = errors.values.reduce(0, +)
            reply([
                "opened": count - failed, "failed": failed, "errors": errors, "held": held,
                "seconds": (ContinuousClock.now - start).seconds,
            ])
        }

        private func reading(_ on: Bool) {
            holding = !on
            for (index, held) in sockets.enumerated() where !held.closed {
                if on {
                    poller.add(held.socket.descriptor, tag: UInt64(index), events: EPOLLIN.rawValue)
                } else {
                    poller.remove(held.socket.descriptor)
                }
            }
        }

        /// Reads what the socket has, in one `recvmsg` that also gives its kernel receive time, and decrypts it;
        /// then takes its whole frames. What is left in the kernel makes the socket ready again.
        private func readable(_ held: HeldSocket) {
            guard let (count, time) = Self.receive(held.socket.descriptor, into: raw) else { return }
            guard count > 0 else { return close(held, "closed by the server") }
            if time > 0 { held.lastTime = time }
            held.socket.supply(UnsafeRawBufferPointer(rebasing: raw[0..<count]))
            do {
                while let count = try held.socket.readAvailable(into: plain) {
                    guard count > 0 else { return close(held, "closed by the server") }
                    held.input.append(UnsafeRawBufferPointer(rebasing: plain[0..<count]))
                }
            } catch {
                return close(held, "a read failed")
            }
            frames(held)
        }

        /// `SO_TIMESTAMPNS` (also the control message's type), which Glibc's module leaves out (a macro of macros).
        private static let timestampType: Int32 = 35

        /// One `recvmsg` into `buffer`: how many bytes (0 at the peer's end) and their kernel receive time (0 when
        /// none is given); nil when nothing is there; a failed read counts as the end.
        private static func receive(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) -> (Int, Double)? {
            var control = (UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0))
            return withUnsafeMutableBytes(of: &control) { controlBytes in
                var vector = iovec(iov_base: buffer.baseAddress, iov_len: buffer.count)
                return withUnsafeMutablePointer(to: &vector) { vectorPointer in
                    var message = msghdr()
                    message.msg_iov = vectorPointer
                    message.msg_iovlen = 1
                    message.msg_control = controlBytes.baseAddress
                    message.msg_controllen = controlBytes.count
                    let got = recvmsg(fd, &message, Int32(MSG_DONTWAIT))
                    if got < 0 { return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? nil : (0, 0) }
                    // One cmsghdr after another (cmsg_len, cmsg_level, cmsg_type, then the data at 8-byte
                    // alignment): the receive time is SCM_TIMESTAMPNS's timespec.
                    var offset = 0
                    while offset + 32 <= message.msg_controllen {
                        let length = controlBytes.load(fromByteOffset: offset, as: Int.self)
                        let level = controlBytes.load(fromByteOffset: offset + 8, as: Int32.self)
                        let type = controlBytes.load(fromByteOffset: offset + 12, as: Int32.self)
                        if level == SOL_SOCKET && type == timestampType {
                            let seconds = controlBytes.load(fromByteOffset: offset + 16, as: Int.self)
                            let nanoseconds = controlBytes.load(fromByteOffset: offset + 24, as: Int.self)
                            return (got, Double(seconds) + Double(nanoseconds) / 1e9)
                        }
                        guard length >= 16 else { break }
                        offset += (length + 7) & ~7
                    }
                    return (got, 0)
                }
            }
        }

        /// Takes the socket's whole frames: StateChanges noted by their Email state, pings answered.
        private func frames(_ held: HeldSocket) {
            while let (first, body) = held.input.frame() {
                switch first & 0x0f {
                case 0x1, 0x0:
                    held.fragments += body
                    if first & 0x80 != 0 {
                        message(held.fragments[...], held)
                        held.fragments.removeAll(keepingCapacity: true)
                    }
                case 0x9:
                    do {
                        try held.socket.write(RoundTripClient.Side.frame(opcode: 0xA, Array(body)))
                    } catch {
                        close(held, "a pong could not be sent")
                    }
                case 0x8: others["close", default: 0] += 1
                default: others["opcode \(first & 0x0f)", default: 0] += 1
                }
            }
            held.input.compact()
        }

        private static let stateChange = Array(#""StateChange""#.utf8)
        private static let emailState = Array(#""Email":""#.utf8)

        private func message(_ text: ArraySlice<UInt8>, _ held: HeldSocket) {
            guard DeviceBenchmarks.find(text, Self.stateChange) != nil,
                let key = DeviceBenchmarks.find(text, Self.emailState),
                let end = text[(key + Self.emailState.count)...].firstIndex(of: 0x22)
            else {
                others["not a StateChange with an Email state", default: 0] += 1
                return
            }
            let state = String(decoding: text[(key + Self.emailState.count)..<end], as: UTF8.self)
            guard held.arrivals[state] == nil else { return }
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            held.arrivals[state] = (held.lastTime, Double(now.tv_sec) + Double(now.tv_nsec) / 1e9)
            heard[state, default: 0] += 1
        }

        private func close(_ held: HeldSocket, _ why: String) {
            guard !held.closed else { return }
            held.closed = true
            poller.remove(held.socket.descriptor)
            others[why, default: 0] += 1
        }

        private func report(_ states: [String]) {
            var out = #"{"arrivals":["#
            for (index, held) in sockets.enumerated() {
                if index > 0 { out += "," }
                out += "["
                out += states.map { state in
                    held.arrivals[state].map { "[\($0.kernel),\($0.handled)]" } ?? "null"
                }.joined(separator: ",")
                out += "]"
            }
            let othersJSON =
                (try? JSONSerialization.data(withJSONObject: others)).map {
                    String(decoding: $0, as: UTF8.self)
                } ?? "{}"
            TransportBenchmarks.emit(out + #"],"others":"# + othersJSON + "}")
        }
    }
}

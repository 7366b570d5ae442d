import ConnectionLoop
import Foundation
import WebSocket

/// `signalfetch-bench roundtrips --ca PEM --sides FILE`: the compiled client of the JMAP round-trip bench
/// (`Scripts/signalfetch/bench/jmap_ws.py`). Each side is one connection held open: a JMAP WebSocket (RFC 8887,
/// frames written out here, masked as a client's must be) or a keep-alive HTTPS connection that POSTs a request
/// made once. Both are blocking TLS sockets read into one buffer, so neither side's client costs more than the
/// other's, and what the client costs is a small part of a round trip.
///
/// The sides come from a JSON file: `[{"name", "kind": "ws"|"http", "port", "token", "request", "expect"}]`; a
/// WebSocket's `request` is a template whose `%d` becomes each request's number, an HTTP side's is the whole
/// request. Once they are open it prints `ready`; then each standard-input line `NAME COUNT` makes COUNT round trips
/// on that side and prints `{"seconds", "client_cpu_s"}` (this process's CPU over them). Every answer must hold
/// `expect` and be as long as the first answer of its side, give or take 8 bytes (a number's digits).
enum RoundTripClient {
    struct Specification: Decodable {
        var name: String
        var kind: String
        var port: UInt16
        var token: String?
        var request: String
        var expect: String
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    static func run(caFile: String, sidesFile: String) throws {
        let specifications = try JSONDecoder().decode(
            [Specification].self, from: Data(contentsOf: URL(fileURLWithPath: sidesFile)))
        var sides: [String: Side] = [:]
        for specification in specifications {
            sides[specification.name] = try Side(specification, caFile: caFile)
        }
        TransportBenchmarks.emit("ready")
        while let line = readLine() {
            let parts = line.split(separator: " ")
            guard parts.count == 2, let side = sides[String(parts[0])], let count = Int(parts[1]), count > 0 else {
                throw Failure(description: "roundtrips: expected NAME COUNT, got \(line)")
            }
            let cpu = cpuSeconds()
            let start = ContinuousClock.now
            for _ in 0..<count { try side.once() }
            let elapsed = ContinuousClock.now - start
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            TransportBenchmarks.emit("{\"seconds\":\(seconds),\"client_cpu_s\":\(cpuSeconds() - cpu)}")
        }
    }

    private static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(Int32(RUSAGE_SELF.rawValue), &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
            + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }

    /// One connection and its request (the fan-out holder's sockets are opened as sides too, then handed over).
    final class Side {
        private let specification: Specification
        private let socket: TLSClientSocket
        private let isWebSocket: Bool
        /// What was read and not yet taken.
        private var input = ReadBuffer()
        private let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: 256 * 1024, alignment: 16)
        private let expect: [UInt8]
        private let request: [UInt8]
        private var sequence = 0
        private var length: Int?

        init(_ specification: Specification, caFile: String) throws {
            self.specification = specification
            isWebSocket = specification.kind == "ws"
            expect = Array(specification.expect.utf8)
            guard !expect.isEmpty else { throw Failure(description: "\(specification.name): no \"expect\" given") }
            request = Array(specification.request.utf8)
            socket = try TLSClientSocket(host: "127.0.0.1", port: specification.port, caFile: caFile)
            if isWebSocket { try open() }
        }

        deinit { chunk.deallocate() }

        /// One request and its answer, checked.
        func once() throws {
            input.compact()
            sequence += 1
            let answer: ArraySlice<UInt8>
            if isWebSocket {
                try socket.write(Self.frame(opcode: 0x1, numbered(request, sequence)))
                answer = try message()
            } else {
                try socket.write(request)
                answer = try response()
            }
            let known = length ?? answer.count
            length = known
            guard abs(answer.count - known) <= 8, DeviceBenchmarks.find(answer, expect) != nil else {
                throw Failure(
                    description:
                        "\(specification.name): an answer unlike the first: \(String(decoding: answer.prefix(300), as: UTF8.self))"
                )
            }
        }

        /// Sends `text` in one text frame.
        func send(text: [UInt8]) throws { try socket.write(Self.frame(opcode: 0x1, text)) }

        /// The socket, and what was read on it and not yet taken: the side is not used after.
        func handOver() -> (socket: TLSClientSocket, unread: ArraySlice<UInt8>) {
            (socket, input.bytes[input.start...])
        }

        /// The opening handshake (RFC 6455 §4.1): a `101` with the `jmap` subprotocol and the accept value of the key
        /// sent.
        private func open() throws {
            var key = [UInt8](repeating: 0, count: 16)
            for index in key.indices { key[index] = UInt8.random(in: 0...255) }
            let encodedKey = Data(key).base64EncodedString()
            let head =
                "GET /jmap/ws HTTP/1.1\r\nHost: localhost:\(specification.port)\r\nUpgrade: websocket\r\n"
                + "Connection: Upgrade\r\nSec-WebSocket-Key: \(encodedKey)\r\n"
                + "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: jmap\r\n"
                + "Authorization: Bearer \(specification.token ?? "")\r\n\r\n"
            try socket.write(Array(head.utf8))
            let end = try input.headEnd(fill: fill)
            let answer = String(decoding: input.bytes[input.start..<end], as: UTF8.self)
            input.start = end + 4
            let accept = "sec-websocket-accept: " + WebSocketHandshake.acceptValue(forKey: encodedKey).lowercased()
            let lowered = answer.lowercased()
            guard lowered.hasPrefix("http/1.1 101"), lowered.contains("sec-websocket-protocol: jmap"),
                lowered.contains(accept)
            else {
                throw Failure(description: "\(specification.name): the opening handshake failed: \(answer.prefix(200))")
            }
        }

        /// The next text message (pings answered on the way).
        func message() throws -> ArraySlice<UInt8> {
            var text: [UInt8] = []
            while true {
                guard let (first, payload) = input.frame() else {
                    try input.more(fill: fill)
                    continue
                }
                switch first & 0x0f {
                case 0x9: try socket.write(Self.frame(opcode: 0xA, Array(payload)))
                case 0x8: throw Failure(description: "\(specification.name): the server closed the WebSocket")
                case 0x1, 0x0:
                    if first & 0x80 != 0 && text.isEmpty { return payload }
                    text += payload
                    if first & 0x80 != 0 { return text[...] }
                default: break
                }
            }
        }

        /// The next HTTP answer's body: a `200` read to its Content-Length.
        private func response() throws -> ArraySlice<UInt8> {
            let (head, body) = try input.answer(fill: fill)
            guard head.hasPrefix("HTTP/1.1 200") else {
                throw Failure(description: "\(specification.name): an answer that is not a 200: \(head.prefix(200))")
            }
            return body
        }

        /// Reads more from the socket onto `bytes` (what was taken stays until the next request, so positions found
        /// meanwhile hold).
        private func fill(_ bytes: inout [UInt8]) throws {
            let count = try socket.read(into: chunk)
            guard count > 0 else {
                throw Failure(description: "\(specification.name): the server closed the connection")
            }
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: chunk[0..<count]))
        }

        /// One final client frame, masked (RFC 6455 §5.3).
        static func frame(opcode: UInt8, _ payload: [UInt8]) -> [UInt8] {
            var bytes: [UInt8] = [0x80 | opcode]
            bytes.reserveCapacity(payload.count + 14)
            if payload.count < 126 {
                bytes.append(0x80 | UInt8(payload.count))
            } else if payload.count < 65_536 {
                bytes += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xff)]
            } else {
                bytes.append(0x80 | 127)
                for shift in stride(from: 56, through: 0, by: -8) {
                    bytes.append(UInt8((payload.count >> shift) & 0xff))
                }
            }
            let mask = (0..<4).map { _ in UInt8.random(in: 0...255) }
            bytes += mask
            for (index, byte) in payload.enumerated() { bytes.append(byte ^ mask[index & 3]) }
            return bytes
        }

        /// `template` with its first `%d` replaced by `number`.
        private func numbered(_ template: [UInt8], _ number: Int) -> [UInt8] {
            guard
                let at = template.indices.dropLast().first(where: { template[$0] == 0x25 && template[$0 + 1] == 0x64 })
            else { return template }
            return Array(template[..<at]) + Array(String(number).utf8) + Array(template[(at + 2)...])
        }
    }
}

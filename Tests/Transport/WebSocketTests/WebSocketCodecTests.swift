import Testing

@testable import WebSocket

/// The server's framing over wslay, fed frames as a client sends them (RFC 6455 §5: masked) and read back as a client
/// reads them.
@Suite struct WebSocketCodecTests {
    /// A client frame: FIN, `opcode`, masked with a fixed key.
    static func clientFrame(opcode: UInt8, _ payload: [UInt8], fin: Bool = true, masked: Bool = true) -> [UInt8] {
        var frame: [UInt8] = [(fin ? 0x80 : 0) | opcode]
        let mask: UInt8 = masked ? 0x80 : 0
        if payload.count < 126 {
            frame.append(mask | UInt8(payload.count))
        } else if payload.count <= 0xFFFF {
            frame.append(mask | 126)
            frame += [UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        } else {
            frame.append(mask | 127)
            frame += (0..<8).reversed().map { UInt8((payload.count >> ($0 * 8)) & 0xFF) }
        }
        guard masked else { return frame + payload }
        let key: [UInt8] = [0x12, 0x34, 0x56, 0x78]
        frame += key
        frame += payload.enumerated().map { $0.element ^ key[$0.offset % 4] }
        return frame
    }

    /// The frames a server wrote, as (opcode, payload) pairs (unmasked, as RFC 6455 §5.1 requires of a server).
    static func serverFrames(_ bytes: [UInt8]) -> [(opcode: UInt8, payload: [UInt8])] {
        var frames: [(UInt8, [UInt8])] = []
        var index = 0
        while index + 2 <= bytes.count {
            let opcode = bytes[index] & 0x0F
            #expect(bytes[index + 1] & 0x80 == 0, "a server frame must not be masked")
            var length = Int(bytes[index + 1] & 0x7F)
            index += 2
            if length == 126 {
                length = Int(bytes[index]) << 8 | Int(bytes[index + 1])
                index += 2
            } else if length == 127 {
                length = (0..<8).reduce(0) { $0 << 8 | Int(bytes[index + $1]) }
                index += 8
            }
            frames.append((opcode, Array(bytes[index..<min(bytes.count, index + length)])))
            index += length
        }
        return frames
    }

    func feed(_ codec: WebSocketCodec, _ bytes: [UInt8]) -> [WebSocketMessage] {
        bytes.withUnsafeBytes { codec.receive($0) }
    }

    @Test func aTextMessageSplitAcrossReadsAndFramesArrivesWhole() {
        let codec = WebSocketCodec(maxMessageBytes: 1024)
        let bytes =
            Self.clientFrame(opcode: 0x1, Array("{\"@type\":".utf8), fin: false)
            + Self.clientFrame(opcode: 0x0, Array("\"Request\"}".utf8))
        var messages: [WebSocketMessage] = []
        for chunk in stride(from: 0, to: bytes.count, by: 3) {
            messages += feed(codec, Array(bytes[chunk..<min(bytes.count, chunk + 3)]))
        }
        #expect(messages == [.text(Array("{\"@type\":\"Request\"}".utf8))])
        #expect(codec.takeOutput().isEmpty)
    }

    @Test func aPingIsAnsweredWithItsPayloadAndATextGoesOutUnmasked() {
        let codec = WebSocketCodec(maxMessageBytes: 1024)
        #expect(feed(codec, Self.clientFrame(opcode: 0x9, Array("are you there".utf8))).isEmpty)
        #expect(codec.send(text: Array("{}".utf8)))
        let frames = Self.serverFrames(codec.takeOutput())
        #expect(frames.map(\.opcode) == [0xA, 0x1])
        #expect(frames.first?.payload == Array("are you there".utf8))
        #expect(frames.last?.payload == Array("{}".utf8))
    }

    @Test func theClosingHandshakeIsAnsweredAndFinishes() {
        let codec = WebSocketCodec(maxMessageBytes: 1024)
        #expect(feed(codec, Self.clientFrame(opcode: 0x8, [0x03, 0xE8])) == [.close(code: 1000)])
        let frames = Self.serverFrames(codec.takeOutput())
        #expect(frames.map(\.opcode) == [0x8])
        #expect(frames.first?.payload.prefix(2) == [0x03, 0xE8])
        #expect(codec.isFinished)
        #expect(!codec.send(text: Array("late".utf8)), "nothing is sent after the Close")
    }

    @Test func theServersCloseCarriesItsCodeAndFinishesOnlyWhenAnswered() {
        let codec = WebSocketCodec(maxMessageBytes: 1024)
        codec.close(code: 1003, reason: "JMAP messages are text frames.")
        let frames = Self.serverFrames(codec.takeOutput())
        #expect(frames.map(\.opcode) == [0x8])
        #expect(frames.first?.payload.prefix(2) == [0x03, 0xEB])
        #expect(codec.closeSent)
        #expect(!codec.isFinished)
        _ = feed(codec, Self.clientFrame(opcode: 0x8, [0x03, 0xEB]))
        #expect(codec.isFinished)
    }

    /// Client frames RFC 6455 §7.4.1 refuses, and the close code each earns.
    enum Broken: String, CaseIterable, CustomTestStringConvertible {
        case unmasked, notUTF8, overLimit

        var testDescription: String { rawValue }

        var frame: [UInt8] {
            switch self {
            case .unmasked: clientFrame(opcode: 0x1, Array("hi".utf8), masked: false)
            case .notUTF8: clientFrame(opcode: 0x1, [0xC3, 0x28])
            case .overLimit: clientFrame(opcode: 0x1, Array(repeating: 0x61, count: 2000))
            }
        }

        var code: UInt16 {
            switch self {
            case .unmasked: 1002
            case .notUTF8: 1007
            case .overLimit: 1009
            }
        }
    }

    @Test(arguments: Broken.allCases)
    func aBrokenOrOversizedMessageIsRefusedWithItsCloseCode(_ broken: Broken) {
        let codec = WebSocketCodec(maxMessageBytes: 1024)
        #expect(feed(codec, broken.frame).isEmpty)
        let frames = Self.serverFrames(codec.takeOutput())
        #expect(frames.map(\.opcode) == [0x8])
        let sent = frames.first.map { UInt16($0.payload[0]) << 8 | UInt16($0.payload[1]) }
        #expect(sent == broken.code)
    }
}

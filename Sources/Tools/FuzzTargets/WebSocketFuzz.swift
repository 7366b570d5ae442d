import Foundation
import JMAP
import JSONText
import WebSocket

/// A client on the JMAP WebSocket listener: an opening handshake's head, then frames.
enum WebSocketFuzz {
    /// Read whole and cut in pieces, http-parser reaches the same head at the same byte; the frames after it, fed to
    /// wslay whole and cut, deliver the same text and binary messages (how a broken or closing stream ends, the
    /// Close's code and whether a pong went before it, may differ as the pieces fall); every text message is a JMAP
    /// message or a RequestError that is an object.
    static func session(_ bytes: Data) {
        let input = Array(bytes)
        let whole = head(input, chunk: max(1, input.count))
        let cut = head(input, chunk: 7)
        switch (whole, cut) {
        case (.tooLarge, _), (_, .tooLarge): return  // where the limit falls depends on the pieces
        case (.complete(let a, let start), .complete(let b, let other)):
            guard a == b, start == other else { violated("a head read whole and in pieces differs") }
            frames(Array(input[start...]))
        case (.incomplete, .incomplete), (.invalid, .invalid): return
        default: violated("a head read whole and in pieces ends differently: \(whole) / \(cut)")
        }
    }

    enum Head: Equatable {
        case incomplete, invalid, tooLarge
        case complete(RequestHead, framesStart: Int)
    }

    static func head(_ input: [UInt8], chunk: Int) -> Head {
        let reader = RequestHeadReader()
        var offset = 0
        while offset < input.count {
            let end = min(input.count, offset + chunk)
            let outcome = input[offset..<end].withUnsafeBytes { reader.feed($0) }
            switch outcome {
            case .incomplete: offset = end
            case .invalid: return .invalid
            case .tooLarge: return .tooLarge
            case .complete(let head, let rest): return .complete(head, framesStart: end - rest.count)
            }
        }
        return .incomplete
    }

    static func frames(_ input: [UInt8]) {
        let messages = decode(input, chunk: max(1, input.count))
        guard data(messages) == data(decode(input, chunk: 5)) else {
            violated("frames read whole and in pieces carry different messages")
        }
        for case .text(let text) in messages {
            if case .failure(let error) = JMAPWebSocketMessage.parse(text), error.message.object == nil {
                violated("a RequestError that is not an object")
            }
        }
    }

    /// The text and binary messages among `messages`.
    static func data(_ messages: [WebSocketMessage]) -> [WebSocketMessage] {
        messages.filter { if case .close = $0 { false } else { true } }
    }

    static func decode(_ input: [UInt8], chunk: Int) -> [WebSocketMessage] {
        let codec = WebSocketCodec(maxMessageBytes: 64 * 1024)
        var messages: [WebSocketMessage] = []
        var offset = 0
        while offset < input.count, !codec.isFinished {
            let end = min(input.count, offset + chunk)
            messages += input[offset..<end].withUnsafeBytes { codec.receive($0) }
            _ = codec.takeOutput()
            offset = end
        }
        return messages
    }
}

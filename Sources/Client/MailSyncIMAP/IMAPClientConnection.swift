import ConnectionLoop
import Foundation
import IMAP
import MailSync

/// One IMAP client connection over TLS (blocking; used from the transport's queue only): commands with their tags,
/// responses framed with their literals by the same reader the server uses.
final class IMAPClientConnection {
    /// A command's answer: its untagged responses in order, and the tagged line.
    struct Answer {
        var untagged: [[UInt8]]
        var tagged: String
    }

    private let socket: TLSClientSocket
    private var reader = IMAPCommandReader(maxLineBytes: 1 << 20, maxLiteralBytes: 256 << 20)
    private var framed: [[UInt8]] = []
    private var nextTag = 1

    /// Connects, reads the greeting and logs in.
    init(host: String, port: UInt16, caFile: String, username: String, password: String) throws(MailSyncError) {
        do {
            socket = try TLSClientSocket(host: host, port: port, caFile: caFile)
        } catch {
            throw .network("imap: \(error.description)")
        }
        let greeting = String(decoding: try response(), as: UTF8.self)
        guard greeting.hasPrefix("* OK") || greeting.hasPrefix("* PREAUTH") else {
            throw .invalidResponse("imap: unexpected greeting")
        }
        let login = try run("LOGIN \(Self.quoted(username)) \(Self.quoted(password))", allowNo: true)
        guard Self.status(of: login.tagged) == "OK" else { throw .unauthorized }
        _ = try run("ENABLE QRESYNC")
    }

    /// Sends `command` and collects its answer; a NO is an error unless `allowNo`, a BAD always.
    func run(_ command: String, allowNo: Bool = false) throws(MailSyncError) -> Answer {
        let tag = "c\(nextTag)"
        nextTag += 1
        do {
            try socket.write(Array("\(tag) \(command)\r\n".utf8))
        } catch {
            throw .network("imap: \(error.description)")
        }
        var untagged: [[UInt8]] = []
        while true {
            let line = try response()
            if line.starts(with: Array("\(tag) ".utf8)) {
                let text = String(decoding: line, as: UTF8.self).trimmingTrailingNewline
                let status = Self.status(of: text)
                if status == "BAD" || (status == "NO" && !allowNo) {
                    throw .server(status: 0, code: "imap:\(status)", retryAfter: nil)
                }
                return Answer(untagged: untagged, tagged: text)
            }
            if line.starts(with: Array("* BYE".utf8)) { throw .network("imap: the server closed the session") }
            untagged.append(line)
        }
    }

    func logout() {
        _ = try? run("LOGOUT")
    }

    /// The next response, literals included.
    private func response() throws(MailSyncError) -> [UInt8] {
        while framed.isEmpty {
            let bytes: [UInt8]
            do {
                bytes = try socket.read()
            } catch {
                throw .network("imap: \(error.description)")
            }
            guard !bytes.isEmpty else { throw .network("imap: the server closed the connection") }
            var events: [IMAPCommandReader.Event] = []
            bytes.withUnsafeBytes { reader.feed($0) { events.append($0) } }
            for event in events {
                switch event {
                case .command(let line): framed.append(line)
                case .literalAnnounced: continue  // a server's literal follows at once
                case .lineTooLong, .literalTooLarge: throw .invalidResponse("imap: a response over the limits")
                }
            }
        }
        return framed.removeFirst()
    }

    /// `OK`, `NO` or `BAD` of a tagged line.
    static func status(of line: String) -> String {
        let words = line.split(separator: " ", maxSplits: 2)
        return words.count >= 2 ? words[1].uppercased() : ""
    }

    /// A string as an IMAP quoted string.
    static func quoted(_ text: String) -> String {
        "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }
}

extension String {
    var trimmingTrailingNewline: String {
        var text = Substring(self)
        while let last = text.last, last == "\n" || last == "\r" { text = text.dropLast() }
        return String(text)
    }
}

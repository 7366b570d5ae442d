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
        let answer = try pipeline([command])[0]
        let status = Self.status(of: answer.tagged)
        if status == "BAD" || (status == "NO" && !allowNo) {
            throw .server(status: 0, code: "imap:\(status)", retryAfter: nil)
        }
        return answer
    }

    /// Sends `commands` in one write and collects each one's answer, in order (RFC 9051 §5.5: a server answers
    /// pipelined commands in order, so a command's untagged responses are those after the previous tagged line).
    /// Every answer is read, whatever its status, so the connection stays in step; the caller judges them.
    func pipeline(_ commands: [String]) throws(MailSyncError) -> [Answer] {
        var tags: [String] = []
        var text = ""
        for command in commands {
            let tag = "c\(nextTag)"
            nextTag += 1
            tags.append(tag)
            text += "\(tag) \(command)\r\n"
        }
        do {
            try socket.write(Array(text.utf8))
        } catch {
            throw .network("imap: \(error.description)")
        }
        var answers: [Answer] = []
        var untagged: [[UInt8]] = []
        while answers.count < tags.count {
            let line = try response()
            if line.starts(with: Array("\(tags[answers.count]) ".utf8)) {
                answers.append(
                    Answer(untagged: untagged, tagged: String(decoding: line, as: UTF8.self).trimmingTrailingNewline))
                untagged = []
                continue
            }
            if line.starts(with: Array("* BYE".utf8)) { throw .network("imap: the server closed the session") }
            untagged.append(line)
        }
        return answers
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

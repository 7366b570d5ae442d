import ConnectionLoop
import Foundation
import IMAP

/// IMAP sessions over an in-memory mailbox: whatever a client sends, the session never traps, and it answers the
/// same and asks the store the same whether the input comes whole or cut into pieces (TCP may cut it anywhere).
enum IMAPFuzz {
    static func session(_ bytes: Data) {
        let input = [UInt8](bytes)
        let whole = transcript(input, chunk: max(1, input.count))
        let pieces = transcript(input, chunk: input.count % 7 + 1)
        guard whole == pieces else { violated("the session's answers depend on how the input was cut") }
    }

    /// Runs the session over `input` in `chunk`-byte pieces, answering every question at once from `Mailbox`;
    /// returns what it sent, in order.
    static func transcript(_ input: [UInt8], chunk: Int) -> [UInt8] {
        var configuration = IMAPSession.Configuration()
        configuration.maxLineBytes = 512
        configuration.maxLiteralBytes = 2048
        var session = IMAPSession(configuration: configuration, backend: Mailbox())
        var output: [UInt8] = []
        var closed = false
        func run(_ actions: [LoopAction<IMAPAnswer>]) {
            var pending = actions[...]
            while let action = pending.popFirst(), !closed {
                switch action {
                case .send(let bytes): output += bytes
                case .close: closed = true
                case .ask(let question):
                    let answer = LockedAnswer()
                    question(1) { answer.value = $0 }
                    guard let value = answer.value else { violated("the in-memory backend did not answer") }
                    run(session.answered(value))
                }
            }
        }
        run(session.opened())
        var index = 0
        while index < input.count, !closed {
            let end = min(input.count, index + chunk)
            input[index..<end].withUnsafeBytes { run(session.received($0)) }
            index = end
        }
        return output
    }

    /// Holds the in-memory backend's answer: it answers before `question` returns.
    final class LockedAnswer: @unchecked Sendable {  // written and read on the fuzzing thread only
        var value: IMAPAnswer?
    }

    /// Three mailboxes, two messages (one multipart), answering synchronously. Writes change nothing, so every
    /// run starts from the same mailbox.
    struct Mailbox: IMAPBackend {
        static let plain = Array("Subject: hello\r\nFrom: A <a@example.com>\r\n\r\nbody\r\n".utf8)
        static let multipart = Array(
            ("Subject: parts\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\none\r\n--b\r\n"
                + "Content-Type: text/html\r\n\r\n<p>two</p>\r\n--b--\r\n").utf8)
        static let states = [
            IMAPMessageState(uid: 3, id: "m3", seen: false, flagged: true, modseq: 3),
            IMAPMessageState(uid: 7, id: "m7", seen: true, flagged: false, modseq: 9),
        ]

        func login(
            username: String, password: String, address: String,
            completion: @escaping @Sendable (IMAPLoginResult) -> Void
        ) {
            completion(password == "pw" ? .accepted(account: 1) : .rejected)
        }

        func mailboxes(
            account: Int64, completion: @escaping @Sendable (Result<[IMAPMailboxInfo], IMAPBackendError>) -> Void
        ) {
            completion(
                .success([
                    IMAPMailboxInfo(name: "INBOX", specialUse: nil, messages: 2, unseen: 1),
                    IMAPMailboxInfo(name: "Archive", specialUse: "\\Archive", messages: 0, unseen: 0),
                ]))
        }

        func snapshot(
            account: Int64, mailbox: String,
            completion: @escaping @Sendable (Result<IMAPMailboxSnapshot, IMAPBackendError>) -> Void
        ) {
            guard mailbox.uppercased() == "INBOX" || mailbox == "Archive" else {
                return completion(.failure(.noMailbox))
            }
            let messages = mailbox == "Archive" ? [] : Self.states
            completion(
                .success(
                    IMAPMailboxSnapshot(
                        info: IMAPMailboxInfo(name: mailbox, specialUse: nil, messages: messages.count, unseen: 1),
                        uidValidity: 42, uidNext: 10, highestModseq: 9, messages: messages)))
        }

        /// A delta that takes m7 away, flags m3 and brings m12: every branch of the session's delta path.
        func delta(
            account: Int64, mailbox: String, since highestModseq: Int64,
            completion: @escaping @Sendable (Result<IMAPMailboxDelta?, IMAPBackendError>) -> Void
        ) {
            guard mailbox.uppercased() == "INBOX" else { return completion(.success(nil)) }
            completion(
                .success(
                    IMAPMailboxDelta(
                        changed: [
                            IMAPMessageState(uid: 3, id: "m3", seen: true, flagged: true, modseq: 11),
                            IMAPMessageState(uid: 12, id: "m12", seen: false, flagged: false, modseq: 12),
                        ], movedIn: [], left: ["m7"], uidNext: 13, highestModseq: 12)))
        }

        func contents(
            account: Int64, ids: [String],
            completion: @escaping @Sendable (Result<[String: IMAPMessageContent], IMAPBackendError>) -> Void
        ) {
            let envelope = IMAPEnvelope(
                date: nil, subject: "s", from: [MailAddress(name: "A", address: "a@example.com")], to: [], cc: [],
                inReplyTo: nil, messageID: "<m@x>")
            var found: [String: IMAPMessageContent] = [:]
            for id in ids {
                found[id] = IMAPMessageContent(
                    raw: id == "m3" ? Self.plain : Self.multipart, receivedAt: 1_700_000_000, envelope: envelope)
            }
            completion(.success(found))
        }

        func setFlags(
            account: Int64, changes: [IMAPFlagChange],
            completion: @escaping @Sendable (Result<[IMAPMessageState], IMAPBackendError>) -> Void
        ) {
            completion(
                .success(
                    changes.compactMap { change in
                        guard var state = Self.states.first(where: { $0.id == change.id }) else { return nil }
                        state.seen = change.seen ?? state.seen
                        state.flagged = change.flagged ?? state.flagged
                        state.modseq = 10
                        return state
                    }))
        }

        func move(
            account: Int64, ids: [String], to mailbox: String,
            completion: @escaping @Sendable (Result<IMAPMoveResult, IMAPBackendError>) -> Void
        ) {
            guard mailbox == "Archive" else { return completion(.failure(.noMailbox)) }
            let moved = Self.states.filter { ids.contains($0.id) }.map {
                IMAPMessageState(uid: 20, id: $0.id, seen: $0.seen, flagged: $0.flagged, modseq: 20)
            }
            completion(.success(IMAPMoveResult(uidValidity: 43, states: moved)))
        }

        func append(
            account: Int64, mailbox: String, message: IMAPNewMessage,
            completion: @escaping @Sendable (Result<IMAPMoveResult, IMAPBackendError>) -> Void
        ) {
            guard mailbox.uppercased() == "INBOX" || mailbox == "Archive" else {
                return completion(.failure(.noMailbox))
            }
            let state = IMAPMessageState(uid: 21, id: "m21", seen: message.seen, flagged: message.flagged, modseq: 21)
            completion(.success(IMAPMoveResult(uidValidity: 43, states: [state])))
        }

        func copy(
            account: Int64, ids: [String], to mailbox: String,
            completion: @escaping @Sendable (Result<IMAPMoveResult, IMAPBackendError>) -> Void
        ) {
            move(account: account, ids: ids, to: mailbox, completion: completion)
        }

        func expunge(
            account: Int64, ids: [String], completion: @escaping @Sendable (Result<Void, IMAPBackendError>) -> Void
        ) {
            completion(.success(()))
        }

        func createMailbox(
            account: Int64, name: String, completion: @escaping @Sendable (Result<Void, IMAPBackendError>) -> Void
        ) { completion(name.count.isMultiple(of: 2) ? .success(()) : .failure(.mailboxExists)) }

        func deleteMailbox(
            account: Int64, name: String, completion: @escaping @Sendable (Result<Void, IMAPBackendError>) -> Void
        ) { completion(name == "INBOX" ? .failure(.roleMailbox) : .success(())) }

        func renameMailbox(
            account: Int64, from name: String, to newName: String,
            completion: @escaping @Sendable (Result<Void, IMAPBackendError>) -> Void
        ) { completion(newName.isEmpty ? .failure(.invalid("mailbox name")) : .success(())) }

        func watch(account: Int64, connection: UInt64) {}
        func unwatch(connection: UInt64) {}
    }
}

import ConnectionLoop
import Locking
import Testing

@testable import IMAP

/// The session as a machine, without sockets: a backend that answers at once from fixed data, bytes in, lines out.
@Suite struct IMAPSessionTests {
    /// Answers from fixed data; a refresh gets `delta`.
    struct Backend: IMAPBackend {
        var messages: [IMAPMessageState]
        var delta: IMAPMailboxDelta?
        /// What `contents` answers, by message id.
        var bodies: [String: IMAPMessageContent] = [:]
        /// Where `contents` notes the ids it was asked for.
        var asked: AskedIDs?

        func login(
            username: String, password: String, address: String,
            completion: @escaping @Sendable (IMAPLoginResult) -> Void
        ) {
            completion(password == "pw" ? .accepted(account: 1) : password == "pw2" ? .accepted(account: 2) : .rejected)
        }

        func mailboxes(
            account: Int64, completion: @escaping @Sendable (Result<[IMAPMailboxInfo], IMAPBackendError>) -> Void
        ) {
            completion(
                .success([
                    IMAPMailboxInfo(name: "INBOX", specialUse: nil, messages: 0, unseen: 0),
                    IMAPMailboxInfo(name: "Archive", specialUse: "\\Archive", messages: 0, unseen: 0),
                ]))
        }

        func snapshot(
            account: Int64, mailbox: String,
            completion: @escaping @Sendable (Result<IMAPMailboxSnapshot, IMAPBackendError>) -> Void
        ) {
            completion(
                .success(
                    IMAPMailboxSnapshot(
                        info: IMAPMailboxInfo(name: "INBOX", specialUse: nil, messages: messages.count, unseen: 0),
                        uidValidity: 7, uidNext: (messages.last?.uid ?? 0) + 1, highestModseq: 10, messages: messages)))
        }

        func delta(
            account: Int64, mailbox: String, since highestModseq: Int64,
            completion: @escaping @Sendable (Result<IMAPMailboxDelta?, IMAPBackendError>) -> Void
        ) { completion(.success(delta)) }

        func contents(
            account: Int64, ids: [String],
            completion: @escaping @Sendable (Result<[String: IMAPMessageContent], IMAPBackendError>) -> Void
        ) {
            asked?.ids.withLock { $0 += ids }
            completion(.success(bodies.filter { ids.contains($0.key) }))
        }

        func setFlags(
            account: Int64, changes: [IMAPFlagChange],
            completion: @escaping @Sendable (Result<[IMAPMessageState], IMAPBackendError>) -> Void
        ) {
            flagChanges.withLock { $0 += changes }
            completion(.success([]))
        }

        /// The changes `setFlags` was asked for, in order.
        let flagChanges = LockedValue<[IMAPFlagChange]>([])

        func move(
            account: Int64, ids: [String], to mailbox: String,
            completion: @escaping @Sendable (Result<IMAPMoveResult, IMAPBackendError>) -> Void
        ) { completion(.failure(.noMailbox)) }

        func expunge(
            account: Int64, ids: [String], completion: @escaping @Sendable (Result<Void, IMAPBackendError>) -> Void
        ) { completion(.success(())) }

        func append(
            account: Int64, mailbox: String, message: IMAPNewMessage,
            completion: @escaping @Sendable (Result<IMAPMoveResult, IMAPBackendError>) -> Void
        ) { completion(.failure(.noMailbox)) }

        func copy(
            account: Int64, ids: [String], to mailbox: String,
            completion: @escaping @Sendable (Result<IMAPMoveResult, IMAPBackendError>) -> Void
        ) { completion(.failure(.noMailbox)) }

        /// Made by CREATE, in order; a second of the same name exists already.
        let created = LockedValue<[String]>([])

        func createMailbox(
            account: Int64, name: String, completion: @escaping @Sendable (Result<Void, IMAPBackendError>) -> Void
        ) {
            let exists = created.withLock { names in
                defer { names.append(name) }
                return names.contains(name)
            }
            completion(exists ? .failure(.mailboxExists) : .success(()))
        }

        func deleteMailbox(
            account: Int64, name: String, completion: @escaping @Sendable (Result<Void, IMAPBackendError>) -> Void
        ) { completion(name == "INBOX" ? .failure(.roleMailbox) : .failure(.noMailbox)) }

        func renameMailbox(
            account: Int64, from name: String, to newName: String,
            completion: @escaping @Sendable (Result<Void, IMAPBackendError>) -> Void
        ) { completion(.success(())) }

        func watch(account: Int64, connection: UInt64) {}
        func unwatch(connection: UInt64) {}
    }

    /// Runs the session's actions, answering questions at once; returns the lines it sent.
    static func run(_ session: inout IMAPSession, _ actions: [LoopAction<IMAPAnswer>]) -> [String] {
        var lines: [String] = []
        var pending = actions[...]
        while let action = pending.popFirst() {
            switch action {
            case .send(let bytes):
                lines += String(decoding: bytes, as: UTF8.self).split(separator: "\r\n").map(String.init)
            case .close: return lines
            case .ask(let question):
                let box = Box()
                question(1) { box.answer = $0 }
                guard let answer = box.answer else { return lines }
                lines += run(&session, session.answered(answer))
            }
        }
        return lines
    }

    /// The message ids a backend's `contents` was asked for, in order.
    final class AskedIDs: Sendable {
        let ids = LockedValue<[String]>([])
    }

    final class Box: @unchecked Sendable {  // set and read on the test's thread only
        var answer: IMAPAnswer?
    }

    static func send(_ session: inout IMAPSession, _ text: String) -> [String] {
        let actions = Array(text.utf8).withUnsafeBytes { session.received($0) }
        return run(&session, actions)
    }

    static let inbox = [
        IMAPMessageState(uid: 3, id: "a", seen: false, flagged: false, modseq: 4),
        IMAPMessageState(uid: 5, id: "b", seen: false, flagged: false, modseq: 6),
        IMAPMessageState(uid: 8, id: "c", seen: true, flagged: false, modseq: 9),
    ]

    /// LIST as Thunderbird sends it (RFC 5258 selection and return options before and after the pattern), several
    /// patterns, SPECIAL-USE as a selection (RFC 6154), and the empty pattern.
    @Test func listTakesTheExtendedFormsThunderbirdSends() {
        var session = IMAPSession(configuration: IMAPSession.Configuration(), backend: Backend(messages: []))
        _ = Self.run(&session, session.opened())
        #expect(Self.send(&session, "1 LOGIN u pw\r\n").last?.hasPrefix("1 OK") == true)
        #expect(
            Self.send(&session, "2 list (subscribed) \"\" \"*\" return (special-use)\r\n") == [
                "* LIST (\\HasNoChildren \\Subscribed) \"/\" \"INBOX\"",
                "* LIST (\\HasNoChildren \\Subscribed \\Archive) \"/\" \"Archive\"", "2 OK LIST completed",
            ])
        #expect(
            Self.send(&session, "3 LIST (SPECIAL-USE) \"\" \"*\"\r\n") == [
                "* LIST (\\HasNoChildren \\Archive) \"/\" \"Archive\"", "3 OK LIST completed",
            ])
        #expect(
            Self.send(&session, "4 LIST \"\" (\"inbox\" \"Nothing\")\r\n").first
                == "* LIST (\\HasNoChildren) \"/\" \"INBOX\"")
        #expect(Self.send(&session, "5 LIST \"\" \"\"\r\n").first == "* LIST (\\Noselect) \"/\" \"\"")
        #expect(Self.send(&session, "6 LSUB \"\" \"*\"\r\n").first == "* LSUB (\\HasNoChildren) \"/\" \"INBOX\"")
    }

    /// CREATE, DELETE and RENAME asked of the backend with the names as given (a trailing delimiter dropped), its
    /// refusals answered with their response codes, a malformed command with BAD; the connection kept throughout.
    @Test func mailboxesAreCreatedDeletedAndRenamedThroughTheBackend() {
        let backend = Backend(messages: [])
        var session = IMAPSession(configuration: IMAPSession.Configuration(), backend: backend)
        _ = Self.run(&session, session.opened())
        #expect(Self.send(&session, "1 LOGIN u pw\r\n").last?.hasPrefix("1 OK") == true)
        let exchanges: [(String, String)] = [
            ("2 CREATE Projects/\r\n", "2 OK CREATE completed"),
            ("3 CREATE \"Projects\"\r\n", "3 NO [ALREADYEXISTS]"),
            ("4 DELETE INBOX\r\n", "4 NO [CANNOT]"),
            ("5 DELETE Nowhere\r\n", "5 NO [NONEXISTENT]"),
            ("6 RENAME Projects Done\r\n", "6 OK RENAME completed"),
            ("7 CREATE\r\n", "7 BAD CREATE needs a mailbox name"),
            ("8 RENAME Projects\r\n", "8 BAD RENAME needs two mailbox names"),
            ("9 DELETE (Projects)\r\n", "9 BAD DELETE needs a mailbox name"),
        ]
        for (command, answer) in exchanges {
            #expect(Self.send(&session, command).last?.hasPrefix(answer) == true, "\(command)")
        }
        #expect(backend.created.withLock { $0 } == ["Projects", "Projects"])
        #expect(Self.send(&session, "10 NOOP\r\n").last?.hasPrefix("10 OK") == true)
    }

    /// \Answered, \Draft and keywords asked of the backend as the store keeps them (lowercased, `$answered`,
    /// `$draft`): +FLAGS adds, -FLAGS removes, FLAGS replaces; \Deleted stays the session's.
    @Test func storeAsksForKeywordsAsTheStoreKeepsThem() {
        let messages = [
            IMAPMessageState(uid: 3, id: "a", seen: false, flagged: false, modseq: 4, keywords: ["$draft", "old"])
        ]
        let backend = Backend(messages: messages)
        var session = IMAPSession(configuration: IMAPSession.Configuration(), backend: backend)
        _ = Self.run(&session, session.opened())
        #expect(Self.send(&session, "1 LOGIN u pw\r\n").last?.hasPrefix("1 OK") == true)
        let selected = Self.send(&session, "2 SELECT INBOX\r\n")
        #expect(
            selected.contains(
                "* OK [PERMANENTFLAGS (\\Seen \\Flagged \\Answered \\Draft \\*)] \\Deleted lasts until the session ends"
            ))
        let fetched = Self.send(&session, "3 FETCH 1 (FLAGS)\r\n")
        #expect(fetched.first == "* 1 FETCH (FLAGS (\\Draft old))")
        _ = Self.send(&session, "4 STORE 1 +FLAGS (\\Answered $Forwarded \\Deleted \\Recent)\r\n")
        _ = Self.send(&session, "5 STORE 1 -FLAGS (\\Draft Missing)\r\n")
        _ = Self.send(&session, "6 STORE 1 FLAGS (\\Seen New)\r\n")
        let asked = backend.flagChanges.withLock { $0 }
        #expect(asked.map(\.addingKeywords) == [["$answered", "$forwarded"], [], ["new"]])
        #expect(asked.map(\.removingKeywords) == [[], ["$draft"], ["$draft", "old"]])
        #expect(asked.last?.seen == true)
    }

    /// Every refusal of APPEND, COPY, SEARCH and FETCH's VANISHED that the session gives itself, each answered with
    /// its reason and the connection kept.
    @Test func badAppendCopySearchAndVanishedAreRefusedWithAReason() {
        var session = IMAPSession(
            configuration: IMAPSession.Configuration(), backend: Backend(messages: Self.inbox))
        _ = Self.run(&session, session.opened())
        #expect(Self.send(&session, "1 LOGIN u pw\r\n").last?.hasPrefix("1 OK") == true)
        let refusals: [(String, String)] = [
            ("2 APPEND INBOX (\\Seen) \"31-Foo-2026 10:00:00 +0000\" {1+}\r\nx\r\n", "2 BAD Invalid date-time"),
            ("3 APPEND INBOX Seen {1+}\r\nx\r\n", "3 BAD APPEND takes flags in parentheses"),
            ("4 APPEND INBOX {0+}\r\n\r\n", "4 NO An empty message cannot be filed"),
            ("5 APPEND INBOX\r\n", "5 BAD APPEND needs a mailbox"),
            ("6 APPEND Nowhere {1+}\r\nx\r\n", "6 NO [TRYCREATE]"),
        ]
        for (command, answer) in refusals {
            #expect(Self.send(&session, command).last?.hasPrefix(answer) == true, "\(command)")
        }
        #expect(Self.send(&session, "7 SELECT INBOX\r\n").last?.hasPrefix("7 OK") == true)
        let selected: [(String, String)] = [
            ("8 COPY 1 Nowhere\r\n", "8 NO [TRYCREATE]"),
            ("9 COPY 9 Archive\r\n", "9 BAD Invalid message sequence number"),
            ("10 SEARCH CHARSET KOI8-R ALL\r\n", "10 NO [BADCHARSET (UTF-8 US-ASCII)]"),
            ("11 SEARCH RETURN (SAVE) ALL\r\n", "11 BAD RETURN takes MIN, MAX, COUNT and ALL"),
            ("12 UID FETCH 1:* (FLAGS) (CHANGEDSINCE 1 VANISHED)\r\n", "12 BAD VANISHED needs"),
        ]
        for (command, answer) in selected {
            #expect(Self.send(&session, command).last?.hasPrefix(answer) == true, "\(command)")
        }
        #expect(Self.send(&session, "13 NOOP\r\n").last?.hasPrefix("13 OK") == true)
    }

    @Test func anIdleSessionToldOfAChangeSendsWhatTheDeltaHolds() {
        // b left (moved away), c was flagged, d arrived, and a came back by a move under a new UID.
        let delta = IMAPMailboxDelta(
            changed: [
                IMAPMessageState(uid: 8, id: "c", seen: true, flagged: true, modseq: 11),
                IMAPMessageState(uid: 12, id: "d", seen: false, flagged: false, modseq: 12),
                IMAPMessageState(uid: 13, id: "a", seen: false, flagged: false, modseq: 13),
            ], movedIn: ["a"], left: ["b"], uidNext: 14, highestModseq: 13)
        var session = IMAPSession(
            configuration: IMAPSession.Configuration(), backend: Backend(messages: Self.inbox, delta: delta))
        _ = Self.run(&session, session.opened())
        #expect(Self.send(&session, "1 LOGIN u pw\r\n").last?.hasPrefix("1 OK") == true)
        #expect(Self.send(&session, "2 SELECT INBOX\r\n").contains("* 3 EXISTS"))
        #expect(Self.send(&session, "3 IDLE\r\n") == ["+ idling"])
        let told = Self.run(&session, session.notified(.accountChanged))
        // Expunged from the highest sequence number down: b (2), then a's old place (1).
        #expect(told == ["* 2 EXPUNGE", "* 1 EXPUNGE", "* 3 EXISTS", "* 1 FETCH (UID 8 FLAGS (\\Seen \\Flagged))"])
        #expect(Self.send(&session, "DONE\r\n") == ["3 OK IDLE terminated"])
        #expect(Self.send(&session, "4 UID SEARCH ALL\r\n").first == "* SEARCH 8 12 13")
    }

    @Test func aDeltaTheStoreCannotGiveFallsBackToTheWholeMailbox() {
        var session = IMAPSession(
            configuration: IMAPSession.Configuration(), backend: Backend(messages: Self.inbox, delta: nil))
        _ = Self.run(&session, session.opened())
        _ = Self.send(&session, "1 LOGIN u pw\r\n")
        _ = Self.send(&session, "2 SELECT INBOX\r\n")
        #expect(Self.send(&session, "3 NOOP\r\n") == ["3 OK NOOP completed"])
    }
}

import CommandLineSupport
import Foundation
import MailSync
import MailSyncHTTP
import MailSyncSQLite

enum SendCommand {
    /// Every flag `send` takes, in the order its help lists them.
    static let flags =
        ServerOptions.flags
        + FlagTable(
            column: 26,
            [
                Flag("delivery-token-file", "F", help: "file holding the delivery token (from mailboxd dev-setup)"),
                Flag("to", "USERNAME", help: "recipient account"),
                Flag("from", "ADDRESS", help: "sender address"),
                Flag("subject", "TEXT", help: "subject"),
                Flag("body", "TEXT", help: "body (--body-file FILE reads it from a file instead)"),
                Flag("body-file", "FILE", help: "file holding the body (instead of --body)"),
            ])

    static let usage = """
        usage: mail-client send --server URL [--ca PEM] --delivery-token-file FILE --to USERNAME --from ADDRESS
                                --subject TEXT --body TEXT

        Delivers one message with POST /v1/deliveries and prints {"id","state"}.

        \(flags.help)
        Every flag may also come from MAIL_CLIENT_<FLAG> (e.g. MAIL_CLIENT_DELIVERY_TOKEN_FILE).
        """

    static func main(_ argv: [String]) async throws {
        let arguments = try parse(argv, usage: usage, flags: flags)
        let server = try ServerOptions(arguments)
        let tokenFile = try arguments.required("delivery-token-file")
        guard let token = try? String(contentsOfFile: tokenFile, encoding: .utf8) else {
            throw UsageError("cannot read --delivery-token-file \(tokenFile)")
        }
        let body: String
        if let bodyFile = arguments.string("body-file") {
            guard let text = try? String(contentsOfFile: bodyFile, encoding: .utf8) else {
                throw UsageError("cannot read --body-file \(bodyFile)")
            }
            body = text
        } else {
            body = try arguments.required("body")
        }
        let message = OutgoingMessage(
            to: try arguments.required("to"), from: try arguments.required("from"),
            subject: try arguments.required("subject"), body: body)
        let transport = try server.makeTransport()
        do {
            let receipt = try await transport.deliver(
                message, deliveryToken: token.trimmingCharacters(in: .whitespacesAndNewlines))
            EventOutput.writeLine(
                "{\"id\":\(EventField.quote(receipt.id)),\"state\":\(EventField.quote(receipt.state))}")
        } catch {
            fail(error, context: "delivery failed")
        }
    }
}

enum UpdateCommand {
    /// The flags `mark-read`, `update` and `delete` take: the server, the account and the message.
    static let messageFlags =
        ServerOptions.flags
        + FlagTable(
            column: 26,
            [
                Flag("username", "U", help: "account to log in as"),
                Flag("message-id", "ID", help: "the message"),
                Flag("device-name", "N", help: "session name (default: mail-client)"),
            ])

    /// What `update` changes.
    static let changeFlags = FlagTable(
        column: 26,
        [
            Flag("seen", "BOOL", help: "set or clear the read flag"),
            Flag("flagged", "BOOL", help: "set or clear the flag"),
            Flag("mailbox", "NAME", help: "move to inbox, archive or trash"),
        ])

    /// The flags of the command `name`, in the order its help lists them.
    static func flags(_ name: String) -> FlagTable {
        name == "update" ? messageFlags + changeFlags : messageFlags
    }

    static func usage(_ name: String) -> String {
        """
        usage: mail-client \(name) --server URL [--ca PEM] --username U --message-id ID\
        \(name == "update" ? " [--seen true|false] [--flagged true|false] [--mailbox inbox|archive|trash]" : "")

        \(summary(name)) The password is read from standard input.

        \(flags(name).help)
        Prints {"id","mailbox","seen","flagged"} (\(name == "delete" ? "{\"id\",\"deleted\":true}" : "never content")).
        Every flag may also come from MAIL_CLIENT_<FLAG>.
        """
    }

    static func summary(_ name: String) -> String {
        switch name {
        case "mark-read": "Marks a message as read (PATCH /v1/messages/{id} {\"seen\":true})."
        case "delete": "Destroys a message (DELETE /v1/messages/{id})."
        default: "Changes a message's flags or mailbox (PATCH /v1/messages/{id})."
        }
    }

    static func main(_ name: String, _ argv: [String]) async throws {
        let arguments = try parse(argv, usage: usage(name), flags: flags(name))
        let server = try ServerOptions(arguments)
        let username = try arguments.required("username")
        let id = try arguments.required("message-id")
        var update = MessageUpdate()
        switch name {
        case "mark-read":
            update.seen = true
        case "update":
            update.seen = try bool(arguments, "seen")
            update.flagged = try bool(arguments, "flagged")
            update.mailbox = arguments.string("mailbox").map(MailboxID.init(rawValue:))
            guard update != MessageUpdate() else { throw UsageError("give --seen, --flagged or --mailbox") }
        default:
            break
        }
        let password = try readPassword()
        let transport = try server.makeTransport()
        do {
            try await transport.login(
                username: username, password: password,
                deviceName: arguments.string("device-name", default: "mail-client"))
        } catch {
            fail(error, context: "login failed")
        }
        do {
            if name == "delete" {
                try await transport.deleteMessage(id: id)
                EventOutput.writeLine("{\"id\":\(EventField.quote(id)),\"deleted\":true}")
            } else {
                let message = try await transport.updateMessage(id: id, update)
                EventOutput.writeLine(
                    "{\"id\":\(EventField.quote(message.id)),\"mailbox\":\(EventField.quote(message.mailbox.rawValue)),"
                        + "\"seen\":\(message.seen),\"flagged\":\(message.flagged)}")
            }
        } catch {
            try? await transport.logout()
            fail(error, context: "\(name) failed")
        }
        try? await transport.logout()
    }

    private static func bool(_ arguments: Arguments, _ name: String) throws -> Bool? {
        guard let text = arguments.string(name)?.lowercased() else { return nil }
        switch text {
        case "true", "1", "yes": return true
        case "false", "0", "no": return false
        default: throw UsageError("--\(name) must be true or false")
        }
    }
}

enum DumpCommand {
    /// Every flag `dump` takes, in the order its help lists them.
    static let flags = FlagTable(
        column: 26,
        [
            Flag("state-dir", "DIR", help: "the folder given to `mail-client run`"),
            Flag("mailbox", "NAME", help: "only messages in this mailbox"),
        ])

    static let usage = """
        usage: mail-client dump --state-dir DIR [--mailbox NAME]

        Prints the local cache as one JSON object:
        {"account","state","messageCount","messages":[{"id","mailbox","from","to","cc","subject","preview",
        "size","receivedAt","sentAt"?,"messageId"?,"inReplyTo"?,"seen","flagged","hasAttachment","attachments",
        "body"?,"htmlBody"?}]} with messages newest first ("to" and "cc" as [{"name","address"}], "attachments"
        as [{"partId","filename","type","size"}]).

        \(flags.help)
        Every flag may also come from MAIL_CLIENT_<FLAG>.
        """

    static func main(_ argv: [String]) throws {
        let arguments = try parse(argv, usage: usage, flags: flags)
        let directory = try arguments.required("state-dir")
        let path = RunCommand.cachePath(directory)
        guard FileManager.default.fileExists(atPath: path) else { throw UsageError("no cache in \(directory)") }
        let cache = try SQLiteMailCache(path: path)
        let messages = try cache.messages(in: arguments.string("mailbox").map(MailboxID.init(rawValue:)))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let messagesJSON = String(decoding: try encoder.encode(messages), as: UTF8.self)
        let account = try cache.accountID().map(EventField.string) ?? .null
        let state = try cache.state().map(EventField.string) ?? .null
        EventOutput.writeLine(
            "{\"account\":\(account.serialized),\"state\":\(state.serialized),"
                + "\"messageCount\":\(try cache.messageCount()),\"messages\":\(messagesJSON)}")
    }
}

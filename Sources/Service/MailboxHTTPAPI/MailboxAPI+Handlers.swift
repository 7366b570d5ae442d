import Foundation
import HTTPServer
import JMAP
import Locking
import LoopEvents
import MailMIME
import MailboxStore
import OpenSSLCrypto
import Push
import ServiceMetrics
import SignalDispatch

extension MailboxAPI {
    func createSession(_ request: HTTPRequest) async throws -> HTTPResponse {
        let body = try decode(SessionRequest.self, from: request, allowed: ["username", "password", "deviceName"])
        guard body.username.utf8.count <= 254, body.password.utf8.count <= 1024 else {
            throw HTTPError(.badRequest, code: "invalidArgument", message: "Username or password too long.")
        }
        let accountID = try await signIn(username: body.username, password: body.password, request: request)
        let token = SecureRandom.base64URL(32)
        _ = try await store.createSession(
            accountID: accountID, tokenHash: SHA256.hash(token), deviceName: body.deviceName ?? "unnamed device")
        // The answer holds the token: no cache (a browser's, a proxy's) may keep it.
        var response = try HTTPResponse.json(
            SessionResponse(accessToken: token, accountId: String(accountID)), status: .created)
        response.headers.replaceOrAdd(name: "Cache-Control", value: "no-store")
        return response
    }

    /// Checks a username and password through the sign-in throttle: the account id, or the 401 or 429 to answer.
    func signIn(username: String, password: String, request: HTTPRequest) async throws -> Int64 {
        switch try await throttle.decide(username: username, address: request.remoteAddress) {
        case .refuse(let wait):
            metrics.increment(
                "mailboxd_login_throttled_total", labels: "outcome=\"refused\"",
                help: "Sign-ins the login throttle refused or delayed.")
            throw HTTPError(
                .tooManyRequests, code: "tooManyAttempts", message: "Too many failed logins; try again later.",
                headers: ["Retry-After": String(wait)])
        case .proceed(let delay) where delay > 0:
            metrics.increment(
                "mailboxd_login_throttled_total", labels: "outcome=\"delayed\"",
                help: "Sign-ins the login throttle refused or delayed.")
            try await Task.sleep(for: .seconds(delay))
        case .proceed:
            break
        }
        guard let accountID = try await store.authenticate(username: username, password: password) else {
            try await throttle.recordFailure(username: username, address: request.remoteAddress)
            throw HTTPError(.unauthorized, code: "invalidCredentials", message: "Unknown username or wrong password.")
        }
        try await throttle.recordSuccess(username: username, address: request.remoteAddress)
        return accountID
    }

    func deleteSession(_ request: HTTPRequest, _ session: SessionRecord) async throws -> HTTPResponse {
        try await store.revokeSession(id: session.id, accountID: session.accountID)
        sessionsEnded(accountID: session.accountID, sessionID: session.id)
        return .empty()
    }

    /// Signs out everywhere: every session of the account ends, and every device is removed.
    func deleteAllSessions(_ request: HTTPRequest, _ session: SessionRecord) async throws -> HTTPResponse {
        try await store.revokeAllSessions(accountID: session.accountID)
        sessionsEnded(accountID: session.accountID, sessionID: nil)
        return .empty()
    }

    func listMailboxes(_ request: HTTPRequest, _ session: SessionRecord) async throws -> HTTPResponse {
        let mailboxes = try await store.mailboxes(accountID: session.accountID)
        let state = try await store.currentState(accountID: session.accountID)
        return try .json(MailboxesResponse(mailboxes: mailboxes, state: state.description))
    }

    func listMessages(_ request: HTTPRequest, _ session: SessionRecord) async throws -> HTTPResponse {
        let startedAt = store.currentTime
        var mailbox: MailboxID?
        if let id = request.query("mailbox") {
            let wanted = MailboxID(rawValue: id)
            do {
                _ = try await store.mailboxRowID(accountID: session.accountID, mailbox: wanted)
            } catch MailboxStoreError.notFound {
                throw Self.noSuchMailbox
            }
            mailbox = wanted
        }
        let limit = try limit(request, "limit", default: 100, range: 1...1000)
        let page = try await store.listMessages(
            accountID: session.accountID, mailbox: mailbox, cursor: request.query("cursor"), limit: limit)
        if request.query("cursor") == nil {
            fetched(session, since: nil, modseq: page.state.modseq, startedAt: startedAt)
        }
        metrics.increment("mailboxd_sync_requests_total", labels: "kind=\"full\"", help: "Sync requests by kind.")
        return .json(
            text: MessageListResponse(
                messages: page.messages.map(messageJSON), state: page.state.description, nextCursor: page.nextCursor
            ).json)
    }

    func getMessage(_ request: HTTPRequest, _ session: SessionRecord) async throws -> HTTPResponse {
        guard let id = request.parameter("id"),
            let message = try await store.message(id: id, accountID: session.accountID)
        else { throw HTTPError.notFound("No such message.") }
        return .json(text: MessageJSON(message, includeBody: true, includeHTML: true).json)
    }

    /// `GET /v1/messages/{id}/raw`: the message byte for byte as it arrived.
    func getRawMessage(_ request: HTTPRequest, _ session: SessionRecord) async throws -> HTTPResponse {
        guard let id = request.parameter("id"),
            let source = try await store.messageSource(id: id, accountID: session.accountID)
        else { throw HTTPError.notFound("No such message, or it has no raw form.") }
        let raw = source.rfc5322
        var response = HTTPResponse(body: Data(raw))
        response.headers.replaceOrAdd(name: "Content-Type", value: "message/rfc822")
        // A download, never a page: some browsers render message/rfc822 (MHTML) in the mailbox's origin.
        response.headers.replaceOrAdd(name: "Content-Disposition", value: "attachment; filename=\"message.eml\"")
        response.headers.replaceOrAdd(name: "X-Content-Type-Options", value: "nosniff")
        return response
    }

    /// `GET /v1/messages/{id}/parts/{partId}`: one part's decoded bytes, as a download.
    func getMessagePart(_ request: HTTPRequest, _ session: SessionRecord) async throws -> HTTPResponse {
        let partID = request.parameter("partId") ?? ""
        guard MessageParts.isValidPartID(partID) else {
            throw HTTPError(
                .badRequest, code: "invalidArgument", message: "A part id is dot-separated numbers, such as 2 or 1.2.")
        }
        guard let id = request.parameter("id"),
            let source = try await store.messageSource(id: id, accountID: session.accountID)
        else { throw HTTPError.notFound("No such message or part.") }
        // Parsing a large message takes a while: on a thread of its own, not the cooperative pool's.
        let found = await withCheckedContinuation { (done: CheckedContinuation<MIMEPartContent?, Never>) in
            Thread.start(named: "mime-part", stackSize: 8 << 20) {
                done.resume(returning: MessageParts.part(partID, of: source.rfc5322))
            }
        }
        guard let part = found else { throw HTTPError.notFound("No such message or part.") }
        var response = HTTPResponse(body: Data(part.bytes))
        response.headers.replaceOrAdd(name: "Content-Type", value: part.contentType)
        response.headers.replaceOrAdd(
            name: "Content-Disposition", value: MessageParts.contentDisposition(filename: part.filename, partID: partID)
        )
        response.headers.replaceOrAdd(name: "X-Content-Type-Options", value: "nosniff")
        return response
    }

    /// A mailbox id, well formed, that the account does not have (another account's included).
    static let noSuchMailbox = HTTPError(
        .notFound, code: "mailboxNotFound", message: "This account has no mailbox with that id (GET /v1/mailboxes).")

    func patchMessage(_ request: HTTPRequest, _ session: SessionRecord) async throws -> HTTPResponse {
        let patch = try decode(MessagePatch.self, from: request, allowed: ["seen", "flagged", "mailbox"])
        let mailbox = patch.mailbox.map(MailboxID.init(rawValue:))
        guard patch.seen != nil || patch.flagged != nil || mailbox != nil else {
            throw HTTPError(.badRequest, code: "invalidRequest", message: "Nothing to change.")
        }
        let updated: MessageRecord
        do {
            updated = try await store.updateMessage(
                id: request.parameter("id") ?? "", accountID: session.accountID, seen: patch.seen,
                flagged: patch.flagged, mailbox: mailbox)
        } catch MailboxStoreError.invalidArgument("mailbox") {
            throw Self.noSuchMailbox  // nothing changed
        }
        return .json(text: MessageJSON(updated, includeBody: false).json)
    }

    func deleteMessage(_ request: HTTPRequest, _ session: SessionRecord) async throws -> HTTPResponse {
        try await store.destroyMessage(id: request.parameter("id") ?? "", accountID: session.accountID)
        return .empty()
    }

    func changes(_ request: HTTPRequest, _ session: SessionRecord) async throws -> HTTPResponse {
        let startedAt = store.currentTime
        guard let since = request.query("since"), !since.isEmpty else {
            throw HTTPError(.badRequest, code: "invalidState", message: "'since' is required.")
        }
        let state = try store.parseState(String(since.prefix(64)))
        let max = try limit(request, "max", default: 500, range: 1...5000)
        let page = try await store.changes(accountID: session.accountID, since: state, maxChanges: max)
        fetched(session, since: state.modseq, modseq: page.newState.modseq, startedAt: startedAt)
        metrics.increment("mailboxd_sync_requests_total", labels: "kind=\"delta\"", help: "Sync requests by kind.")
        return .json(
            text: ChangesResponse(
                oldState: page.oldState.description, newState: page.newState.description, hasMore: page.hasMore,
                created: page.created.map(messageJSON), updated: page.updated.map(messageJSON),
                destroyed: page.destroyed
            ).json)
    }

    func registerDevice(_ request: HTTPRequest, _ session: SessionRecord) async throws -> HTTPResponse {
        let registration = try deviceRegistration(request)
        let address: PushAddress
        do {
            address = try push.address(for: registration)
        } catch {
            throw HTTPError(.badRequest, code: error.code, message: error.message)
        }
        // Registrations per account and hour, counted in the store (so across instances): a client in a loop, or
        // one cycling tokens, is told to wait rather than churning the devices table and the push services.
        let key = "device-registrations:\(session.accountID)"
        if let wait = try await store.waitBeforeEvent(
            key, limit: configuration.deviceRegistrationsPerHour, within: 3600)
        {
            throw HTTPError(
                .tooManyRequests, code: "tooManyRegistrations",
                message: "Too many device registrations for this account; try again later.",
                headers: ["Retry-After": String(retryAfterSeconds(wait))])
        }
        let device = try await store.registerDevice(
            address: address, accountID: session.accountID, sessionID: session.id)
        try await store.recordEvent(key, keep: 3600)
        feed?.registered(sessionID: session.id)
        let fields = push.service(address.service)?.registrationFields(of: device.address) ?? [:]
        return try .json(DeviceResponse(device, serviceFields: fields), status: .created)
    }

    /// The registration a `POST /v1/devices` body holds: `service` (absent: `apns`) and that service's fields,
    /// each a string, or an object of them (named by path: `subscription.keys.auth`); `null` is an absent field and
    /// a number its decimal text (a Web Push subscription's `expirationTime`). A field the service does not take is
    /// refused.
    func deviceRegistration(_ request: HTTPRequest) throws -> DeviceRegistration {
        guard let parsed = try? JSONSerialization.jsonObject(with: request.body, options: [.fragmentsAllowed]) else {
            throw HTTPError(.badRequest, code: "invalidJSON", message: "The request body is not valid JSON.")
        }
        guard let object = parsed as? [String: Any] else {
            throw HTTPError(.badRequest, code: "invalidRequest", message: "The request body must be a JSON object.")
        }
        let name = object["service"] ?? PushServiceName.apns.rawValue
        guard let name = name as? String, let service = PushServiceName(rawValue: name) else {
            throw HTTPError(
                .badRequest, code: "invalidArgument", message: "'service' must be 'apns', 'fcm' or 'webpush'.")
        }
        guard let pushService = push.service(service) else {
            throw HTTPError(
                .badRequest, code: "unknownService", message: "This server does not send through \(name).")
        }
        var fields: [String: String] = [:]
        try Self.collectFields(
            object.filter { $0.key != "service" }, prefix: "", allowed: pushService.registrationFields, into: &fields)
        for required in pushService.requiredRegistrationFields.sorted() where fields[required] == nil {
            throw HTTPError.invalidRequest("Missing required field '\(required)'.")
        }
        return DeviceRegistration(service: service, fields: fields)
    }

    /// Adds the string fields of `object` to `fields` under their paths; objects nest (up to `allowed`'s paths).
    private static func collectFields(
        _ object: [String: Any], prefix: String, allowed: Set<String>, into fields: inout [String: String]
    ) throws {
        for (key, value) in object {
            let path = prefix + key
            if let nested = value as? [String: Any] {
                guard allowed.contains(where: { $0.hasPrefix(path + ".") }) else {
                    throw HTTPError(.badRequest, code: "unknownField", message: "Unknown field '\(path.prefix(64))'.")
                }
                try collectFields(nested, prefix: path + ".", allowed: allowed, into: &fields)
                continue
            }
            guard allowed.contains(path) else {
                throw HTTPError(.badRequest, code: "unknownField", message: "Unknown field '\(path.prefix(64))'.")
            }
            switch value {
            case let text as String:
                fields[path] = text
            case is NSNull:
                continue
            case let number as NSNumber where String(cString: number.objCType) != "c":  // "c": a JSON true/false
                fields[path] = number.stringValue
            default:
                throw HTTPError.invalidRequest("Field '\(path)' has the wrong type (expected String).")
            }
        }
    }

    /// The key browsers pass to `pushManager.subscribe` as `applicationServerKey` (no authentication: it is public,
    /// and a page needs it before it can register).
    func vapidPublicKey(_ request: HTTPRequest) async throws -> HTTPResponse {
        // One owner of the key, which a reload replaces: JMAP's Session advertises the same.
        guard let key = jmap.applicationServerKey else {
            throw HTTPError(.notFound, code: "webPushDisabled", message: "This server does not send Web Push.")
        }
        return try .json(VAPIDPublicKeyResponse(publicKey: key))
    }

    func deleteDevice(_ request: HTTPRequest, _ session: SessionRecord) async throws -> HTTPResponse {
        let handle = request.parameter("id") ?? ""
        guard !handle.isEmpty, try await store.deleteDevice(handle: handle, accountID: session.accountID) else {
            throw HTTPError.notFound("No such device.")
        }
        return .empty()
    }

    /// `POST /v1/deliveries`, inline (on SQLite): the request is checked and its message composed on the server's
    /// thread, and the store answers from its writer's thread once the message is committed, with no hop through the
    /// cooperative pool. A large body is composed in a task instead, so the server's thread is never held for long.
    func deliver(_ request: HTTPRequest, respond: @escaping HTTPResponder) {
        guard request.body.count <= Self.inlineDeliveryBytes else {
            Router.answerInTask(request, respond: respond, with: deliver)
            return
        }
        let startedAt = feed?.isObserved == true ? store.currentTime : 0
        let message: NewMessage
        do {
            message = try deliveryMessage(request)
        } catch {
            return respond(.failure(error))
        }
        store.deliver(message) { [self] result in
            respond(
                result.map { receipt in
                    metrics.increment("mailboxd_deliveries_total", help: "Messages delivered.")
                    arrived(receipt, request, startedAt: startedAt)
                    return Self.deliveryResponse(receipt)
                }.mapError(Self.deliveryError))
        }
    }

    /// The largest `POST /v1/deliveries` body composed on the server's thread.
    static let inlineDeliveryBytes = 64 << 10

    func deliver(_ request: HTTPRequest) async throws -> HTTPResponse {
        let startedAt = feed?.isObserved == true ? store.currentTime : 0
        let message = try deliveryMessage(request)
        let receipt: DeliveryReceipt
        do {
            receipt = try await store.deliver(message)
        } catch {
            throw Self.deliveryError(error)
        }
        metrics.increment("mailboxd_deliveries_total", help: "Messages delivered.")
        arrived(receipt, request, startedAt: startedAt)
        return Self.deliveryResponse(receipt)
    }

    /// Tells the loop's feed of a delivery committed (not of one the account already had), with the caller's
    /// `traceparent`.
    private func arrived(_ receipt: DeliveryReceipt, _ request: HTTPRequest, startedAt: Double) {
        guard let feed, feed.isObserved, !receipt.duplicate else { return }
        feed.arrived(
            Arrival(
                kind: .api, accountID: receipt.accountID, modseq: receipt.state.modseq, startedAt: startedAt,
                endedAt: store.currentTime, traceparent: request.headers["traceparent"]))
    }

    /// Tells the loop's feed of a fetch answered.
    func fetched(_ session: SessionRecord, since: Int64?, modseq: Int64, startedAt: Double) {
        feed?.fetched(
            Fetch(
                sessionID: session.id, accountID: session.accountID, since: since, modseq: modseq,
                startedAt: startedAt, at: store.currentTime))
    }

    /// The message a `POST /v1/deliveries` asks to deliver, once its token and fields are checked.
    private func deliveryMessage(_ request: HTTPRequest) throws -> NewMessage {
        guard let token = request.bearerToken,
            ConstantTime.equals(SHA256.hash(token), deliveryTokenHash.withLock { $0 })
        else { throw HTTPError.unauthorized("A valid delivery token is required.") }
        let body = try decode(DeliveryRequest.self, from: request, allowed: ["to", "from", "subject", "body"])
        // CR, LF and NUL have no place in a header: refused, so the RFC 5322 message built from these fields says
        // what they say.
        let headerSafe = { (text: String) in !text.utf8.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0x00 } }
        guard !body.to.isEmpty, body.from.utf8.count <= 998, body.subject.utf8.count <= 998,
            headerSafe(body.to), headerSafe(body.from), headerSafe(body.subject)
        else {
            throw HTTPError(
                .badRequest, code: "invalidArgument",
                message: "Recipient, sender or subject is invalid (too long, or a line break or NUL in it).")
        }
        return MessageParts.composed(to: body.to, from: body.from, subject: body.subject, body: body.body)
    }

    private static func deliveryResponse(_ receipt: DeliveryReceipt) -> HTTPResponse {
        .json(text: DeliveryResponse(id: receipt.id, state: receipt.state.description).json, status: .created)
    }

    /// A delivery's store error as its answer: an unknown recipient is a 404 of its own.
    private static func deliveryError(_ error: any Error) -> any Error {
        guard case MailboxStoreError.notFound = error else { return error }
        return HTTPError(.notFound, code: "unknownRecipient", message: "No account has that address.")
    }

    func health(_ request: HTTPRequest) async throws -> HTTPResponse {
        let stats = try await store.outboxStats()
        return try .json(HealthResponse(status: "ok", outboxDepth: stats.depth))
    }

    func metricsPage(_ request: HTTPRequest) async throws -> HTTPResponse {
        if let stats = try? await store.outboxStats() {
            metrics.set("mailboxd_outbox_depth", to: Double(stats.depth), help: "Signals waiting in the outbox.")
            metrics.set(
                "mailboxd_outbox_retrying", to: Double(stats.retrying), help: "Outbox rows waiting after a failure.")
        }
        let writer = store.writerStatistics
        metrics.setTotal(
            "mailboxd_store_transactions_total", to: Double(writer.batches),
            help: "Write transactions committed (group commit: each holds one or more writes).")
        metrics.setTotal(
            "mailboxd_store_writes_total", to: Double(writer.writes), help: "Writes those transactions held.")
        metrics.setTotal(
            "mailboxd_store_commit_seconds_total", to: writer.commitSeconds,
            help: "Time spent committing them (at synchronous=FULL, mostly fsync).")
        var response = HTTPResponse.text(metrics.render())
        response.headers.replaceOrAdd(name: "Content-Type", value: "text/plain; version=0.0.4")
        return response
    }
}

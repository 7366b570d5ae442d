import Durations
import Foundation
import JMAP
import JSONText
import MailboxStore
import TestSupport
import Testing

/// The JMAP API (RFC 8620, RFC 8621) on raw requests, on each store engine: result references, request-level and
/// method-level errors, limits, `/changes` paging and its horizon, `/set` states and patches, an email's MIME
/// structure, and hostile input.
@Suite struct JMAPProtocolTests {
    static func reference(_ callID: String, _ name: String, _ path: String) -> JSONValue {
        ["resultOf": .string(callID), "name": .string(name), "path": .string(path)]
    }

    // MARK: Result references (RFC 8620 §3.7)

    @Test(arguments: JMAPEngine.allCases)
    func queryIDsFeedEmailGetAndItsThreadIDsFeedThreadGet(engine: JMAPEngine) async throws {
        let f = try await JMAPFixture(engine)
        var delivered: [String] = []
        for subject in ["one", "two", "three"] {
            delivered.append(try await f.deliver(to: f.alice, subject: subject))
            f.clock.advance(by: 1)
        }
        let account = JSONValue.string(f.alice.jmapID)
        let responses = try await f.request([
            [
                "Email/query", ["accountId": account, "sort": [["property": "receivedAt", "isAscending": true]]],
                "q",
            ],
            [
                "Email/get",
                [
                    "accountId": account, "#ids": Self.reference("q", "Email/query", "/ids"),
                    "properties": ["threadId", "subject"],
                ],
                "g",
            ],
            [
                "Thread/get", ["accountId": account, "#ids": Self.reference("g", "Email/get", "/list/*/threadId")],
                "t",
            ],
        ])
        #expect(responses.map(\.name) == ["Email/query", "Email/get", "Thread/get"])
        #expect(responses.map(\.callID) == ["q", "g", "t"])
        #expect(responses[0].strings("ids") == delivered)
        #expect(responses[1].listIDs == delivered)
        #expect(responses[1].arguments["list"]?.array?.compactMap { $0["subject"]?.string } == ["one", "two", "three"])
        let threadIDs = responses[1].arguments["list"]?.array?.compactMap { $0["threadId"]?.string } ?? []
        #expect(threadIDs.count == 3)
        #expect(responses[2].listIDs == threadIDs)
        #expect(responses[2].strings("notFound").isEmpty)
        #expect(
            responses[2].arguments["list"]?.array?.compactMap { $0["emailIds"] }
                == delivered.map { JSONValue.array([.string($0)]) })
    }

    @Test(arguments: JMAPEngine.allCases)
    func aStarFlattensArraysOfResultsAndPointerEscapesAreDecoded(engine: JMAPEngine) async throws {
        let f = try await JMAPFixture(engine)
        let responses = try await f.request([
            ["Core/echo", ["a": [["b": [1, 2]], ["b": [3]], ["b": 4]], "x/y": ["z~w": "escaped"]], "e"],
            [
                "Core/echo",
                [
                    "#flat": Self.reference("e", "Core/echo", "/a/*/b"),
                    "#escaped": Self.reference("e", "Core/echo", "/x~1y/z~0w"),
                    "#second": Self.reference("e", "Core/echo", "/a/1/b/0"),
                ],
                "r",
            ],
        ])
        #expect(responses[1].name == "Core/echo")
        #expect(responses[1].arguments == ["flat": [1, 2, 3, 4], "escaped": "escaped", "second": 3])
    }

    @Test(arguments: JMAPEngine.allCases)
    func referencesThatResolveToNothingAreInvalidResultReferencesOfTheirCallOnly(engine: JMAPEngine) async throws {
        let f = try await JMAPFixture(engine)
        let id = try await f.deliver(to: f.alice)
        let account = JSONValue.string(f.alice.jmapID)
        func get(_ reference: JSONValue, _ callID: String) -> JSONValue {
            ["Email/get", ["accountId": account, "#ids": reference, "properties": ["id"]], .string(callID)]
        }
        let responses = try await f.request([
            ["Email/query", ["accountId": account], "q"],
            get(Self.reference("q", "Email/query", "/nothing"), "badPath"),
            get(Self.reference("q", "Email/query", "/ids/7"), "pastTheEnd"),
            get(Self.reference("q", "Email/query", "/ids/01"), "leadingZero"),
            get(Self.reference("missing", "Email/query", "/ids"), "noSuchCall"),
            get(Self.reference("q", "Email/get", "/ids"), "wrongName"),
            get(Self.reference("later", "Email/get", "/list/*/id"), "forward"),
            get(["resultOf": "q", "name": "Email/query"], "noPath"),
            [
                "Email/get", ["accountId": account, "ids": [], "#ids": Self.reference("q", "Email/query", "/ids")],
                "both",
            ],
            get(Self.reference("q", "Email/query", "/ids"), "later"),
        ])
        let byCall = Dictionary(responses.map { ($0.callID, $0) }, uniquingKeysWith: { first, _ in first })
        for callID in ["badPath", "pastTheEnd", "leadingZero", "noSuchCall", "wrongName", "forward", "noPath"] {
            #expect(byCall[callID]?.errorType == "invalidResultReference", "\(callID)")
        }
        #expect(byCall["both"]?.errorType == "invalidArguments")
        // The failed calls do not stop the request: the last call still runs with its reference resolved.
        #expect(byCall["later"]?.name == "Email/get")
        #expect(byCall["later"]?.listIDs == [id])
        #expect(responses.count == 10)
    }

    // MARK: Request-level and method-level errors, limits

    @Test(arguments: JMAPEngine.allCases)
    func unknownMethodsAndCapabilitiesAreRefusedAtTheirLevel(engine: JMAPEngine) async throws {
        let f = try await JMAPFixture(engine)
        let account = JSONValue.string(f.alice.jmapID)
        let responses = try await f.request([
            ["Email/frobnicate", ["accountId": account], "a"], ["Core/echo", ["still": true], "b"],
            // Without any arguments an unknown method is still unknown, not a call missing its accountId.
            ["Email/frobnicate", [:], "a2"], ["Calendar/get", ["ids": .null], "a3"],
        ])
        #expect(responses.map(\.callID) == ["a", "b", "a2", "a3"])
        #expect(responses[0].errorType == "unknownMethod")
        #expect(responses[1].arguments == ["still": true])
        #expect(responses[2].errorType == "unknownMethod")
        #expect(responses[3].errorType == "unknownMethod")

        // A mail method in a request that does not use the mail capability is as unknown.
        let coreOnly = try await f.request(
            [["Email/get", ["accountId": account, "ids": []], "c"]], using: [.string(JMAPCapability.core)])
        #expect(coreOnly[0].errorType == "unknownMethod")

        let unknown: JSONValue = [
            "using": [.string(JMAPCapability.core), "urn:example:not-a-capability"],
            "methodCalls": [["Core/echo", [:], "c"]],
        ]
        let refused = try #require(requestError(await f.send(Data(unknown.json.utf8))))
        #expect(refused.type == "unknownCapability")
        #expect(refused.body["type"] == "urn:ietf:params:jmap:error:unknownCapability")
        #expect(refused.body["status"] == 400)
        #expect(refused.detail.contains("urn:example:not-a-capability"))
    }

    @Test(arguments: JMAPEngine.allCases)
    func maxCallsInRequestAndMaxObjectsInGetAreEnforced(engine: JMAPEngine) async throws {
        var limits = JMAPLimits()
        limits.maxCallsInRequest = 3
        limits.maxObjectsInGet = 5
        let f = try await JMAPFixture(engine, limits: limits)
        let echo: JSONValue = ["Core/echo", [:], "e"]
        #expect(try await f.request(Array(repeating: echo, count: 3)).count == 3)
        let body: JSONValue = ["using": JMAPFixture.using, "methodCalls": .array(Array(repeating: echo, count: 4))]
        let refused = try #require(requestError(await f.send(Data(body.json.utf8))))
        #expect(refused.type == "limit")
        #expect(refused.limit == "maxCallsInRequest")
        #expect(refused.body["type"] == "urn:ietf:params:jmap:error:limit")
        #expect(refused.body["limit"] == "maxCallsInRequest")

        let five = (1...5).map { "missing\($0)" }
        let atLimit = try await f.call("Email/get", ["ids": .array(five.map(JSONValue.string))])
        #expect(atLimit.name == "Email/get")
        #expect(atLimit.strings("notFound") == five)
        let over = try await f.call("Email/get", ["ids": .array((five + ["missing6"]).map(JSONValue.string))])
        #expect(over.errorType == "requestTooLarge")
        let mailboxesOver = try await f.call(
            "Mailbox/get", ["ids": ["inbox", "archive", "trash", "a", "b", "c"]])
        #expect(mailboxesOver.errorType == "requestTooLarge")
    }

    @Test(arguments: JMAPEngine.allCases)
    func idsThatAreAbsentOrAnotherAccountsAreNotFound(engine: JMAPEngine) async throws {
        let f = try await JMAPFixture(engine)
        let mine = try await f.deliver(to: f.alice)
        let bobs = try await f.deliver(to: f.bob)
        let emails = try await f.call("Email/get", ["ids": [.string(mine), .string(bobs), "nope", .string(mine)]])
        #expect(emails.listIDs == [mine])
        #expect(emails.strings("notFound") == [bobs, "nope"])

        let mailboxes = try await f.call("Mailbox/get", ["ids": ["inbox", "no-such-mailbox"]])
        #expect(mailboxes.listIDs == ["inbox"])
        #expect(mailboxes.strings("notFound") == ["no-such-mailbox"])
        #expect(mailboxes.list.first?["totalEmails"] == 1)

        // Another account's id in accountId is not this request's account.
        let foreign = try await f.call("Email/get", ["accountId": .string(f.bob.jmapID), "ids": [.string(bobs)]])
        #expect(foreign.errorType == "accountNotFound")
    }

    // MARK: Mailbox/set

    /// The user's mailboxes through Mailbox/set: made, renamed, filled by Email/set, refused where a name is taken or
    /// a role's mailbox is touched, destroyed (its emails only when asked); Mailbox/changes reports each.
    @Test(arguments: JMAPEngine.allCases)
    func mailboxesAreCreatedRenamedFilledAndDestroyed(engine: JMAPEngine) async throws {
        let f = try await JMAPFixture(engine)
        let email = try await f.deliver(to: f.alice)
        let start = try #require(try await f.call("Mailbox/get", ["ids": []]).string("state"))
        let made = try await f.call(
            "Mailbox/set",
            [
                "create": [
                    "a": ["name": "Receipts", "parentId": .null, "isSubscribed": true],
                    "b": ["name": "Inbox"], "c": ["name": "Nested", "parentId": "inbox"], "d": ["role": .null],
                    "e": ["name": "Sorted", "role": "inbox"],
                ]
            ])
        let receipts = try #require(made.arguments["created"]?["a"]?["id"]?.string)
        #expect(made.arguments["created"]?["a"]?["role"] == .null)
        #expect(made.arguments["notCreated"]?["b"]?["type"]?.string == "invalidProperties")
        #expect(made.arguments["notCreated"]?["c"]?["properties"] == ["parentId"])
        #expect(made.arguments["notCreated"]?["d"]?["properties"] == ["name"])
        #expect(made.arguments["notCreated"]?["e"]?["properties"] == ["role"])
        #expect(made.string("newState") != start)

        let changes = try await f.call("Mailbox/changes", ["sinceState": .string(start)])
        #expect(changes.strings("created") == [receipts])
        #expect(Set(changes.strings("updated")) == ["inbox", "archive", "trash"])

        // Filed there by Email/set; Email/query finds it there.
        let moved = try await f.call(
            "Email/set", ["update": .object([email: .object(["mailboxIds": .object([receipts: true])])])])
        #expect(moved.arguments["updated"]?[email] == JSONValue.null && moved.arguments["notUpdated"] == JSONValue.null)
        let query = try await f.call("Email/query", ["filter": ["inMailbox": .string(receipts)]])
        #expect(query.strings("ids") == [email])
        let nowhere = try await f.call(
            "Email/set", ["update": .object([email: ["mailboxIds": ["no-such-mailbox": true]]])])
        #expect(nowhere.arguments["notUpdated"]?[email]?["properties"] == ["mailboxIds"])

        // A rename; the roles' mailboxes are not the user's to rename or destroy.
        let renamed = try await f.call(
            "Mailbox/set", ["update": .object([receipts: ["name": "Paid"], "archive": ["name": "Old"]])])
        #expect(renamed.arguments["updated"]?[receipts] == JSONValue.null)
        #expect(renamed.arguments["notUpdated"]?["archive"]?["type"]?.string == "forbidden")
        let got = try await f.call("Mailbox/get", ["ids": [.string(receipts)]])
        #expect(got.list.first?["name"]?.string == "Paid" && got.list.first?["totalEmails"] == 1)
        #expect(got.list.first?["myRights"]?["mayDelete"] == true)

        // Destroyed only with its emails when asked.
        let before = try #require(renamed.string("newState"))
        let kept = try await f.call("Mailbox/set", ["destroy": [.string(receipts), "trash"]])
        #expect(kept.arguments["notDestroyed"]?[receipts]?["type"]?.string == "mailboxHasEmail")
        #expect(kept.arguments["notDestroyed"]?["trash"]?["type"]?.string == "forbidden")
        let gone = try await f.call(
            "Mailbox/set", ["destroy": [.string(receipts)], "onDestroyRemoveEmails": true])
        #expect(gone.strings("destroyed") == [receipts])
        let after = try await f.call("Mailbox/changes", ["sinceState": .string(before)])
        #expect(after.strings("destroyed") == [receipts] && after.strings("created").isEmpty)
        let emails = try await f.call("Email/get", ["ids": [.string(email)]])
        #expect(emails.strings("notFound") == [email])
    }

    // MARK: Keywords

    /// Keywords beyond `$seen` and `$flagged`: set by Email/set (whole or one by one, any case, kept lowercased), read
    /// by Email/get, found by Email/query's hasKeyword and notKeyword; one that is not a keyword is refused.
    @Test(arguments: JMAPEngine.allCases)
    func keywordsAreKeptReadAndQueried(engine: JMAPEngine) async throws {
        let f = try await JMAPFixture(engine)
        let replied = try await f.deliver(to: f.alice, subject: "replied")
        let other = try await f.deliver(to: f.alice, subject: "other")
        let set = try await f.call(
            "Email/set",
            [
                "update": .object([
                    replied: ["keywords/$Answered": true, "keywords/$seen": true, "keywords/project-x": true],
                    other: ["keywords": ["$Forwarded": true, "$flagged": true]],
                ])
            ])
        #expect(set.arguments["notUpdated"] == JSONValue.null)
        let got = try await f.call(
            "Email/get", ["ids": [.string(replied), .string(other)], "properties": ["keywords"]])
        #expect(
            got.list.map { $0["keywords"] } == [
                ["$answered": true, "$seen": true, "project-x": true], ["$forwarded": true, "$flagged": true],
            ])
        let has = try await f.call("Email/query", ["filter": ["hasKeyword": "$ANSWERED"]])
        #expect(has.strings("ids") == [replied])
        let not = try await f.call("Email/query", ["filter": ["notKeyword": "project-x"]])
        #expect(not.strings("ids") == [other])

        // Replacing the whole set drops what it does not name; a keyword that is not one is refused.
        let replaced = try await f.call(
            "Email/set", ["update": .object([replied: ["keywords": ["$seen": true]], other: ["keywords/a b": true]])])
        #expect(replaced.arguments["updated"]?[replied] == JSONValue.null)
        #expect(replaced.arguments["notUpdated"]?[other]?["type"]?.string == "invalidProperties")
        let after = try await f.call("Email/get", ["ids": [.string(replied)], "properties": ["keywords"]])
        #expect(after.list.first?["keywords"] == ["$seen": true])
    }

    // MARK: Email/changes

    @Test(arguments: JMAPEngine.allCases)
    func emailChangesPagesThroughADestroyAndChainsItsStates(engine: JMAPEngine) async throws {
        let f = try await JMAPFixture(engine)
        let kept = try await f.deliver(to: f.alice, subject: "kept")
        let doomed = try await f.deliver(to: f.alice, subject: "doomed")
        let since = try await f.emailState()
        let early = try await f.deliver(to: f.alice, subject: "early")
        try await f.store.updateMessage(id: kept, accountID: f.alice.id, seen: true)
        try await f.store.updateMessage(id: doomed, accountID: f.alice.id, flagged: true)
        try await f.store.destroyMessage(id: doomed, accountID: f.alice.id)
        let ephemeral = try await f.deliver(to: f.alice, subject: "ephemeral")
        try await f.store.destroyMessage(id: ephemeral, accountID: f.alice.id)
        let late = try await f.deliver(to: f.alice, subject: "late")
        let current = try await f.emailState()

        // One page: what the client must apply, an email created and destroyed since not among it.
        let whole = try await f.call("Email/changes", ["sinceState": .string(since)])
        #expect(whole.string("oldState") == since)
        #expect(whole.string("newState") == current)
        #expect(whole.arguments["hasMoreChanges"] == false)
        #expect(Set(whole.strings("created")) == [early, late])
        #expect(whole.strings("updated") == [kept])
        #expect(whole.strings("destroyed") == [doomed])

        // Pages of two: each page starts where the last ended, and applying them all gives the same mailbox.
        var replica: Set<String> = [kept, doomed]
        var state = since
        var pages = 0
        while true {
            let page = try await f.call("Email/changes", ["sinceState": .string(state), "maxChanges": 2])
            try #require(page.name == "Email/changes", "\(page.arguments.json)")
            pages += 1
            #expect(page.string("oldState") == state)
            let listed = page.strings("created") + page.strings("updated") + page.strings("destroyed")
            #expect(listed.count <= 2)
            #expect(!listed.contains(ephemeral) || page.strings("destroyed").contains(ephemeral))
            replica.formUnion(page.strings("created"))
            replica.subtract(page.strings("destroyed"))
            let next = try #require(page.string("newState"))
            if page.arguments["hasMoreChanges"] == false {
                #expect(next == current)
                break
            }
            #expect(next != state && next != current)
            state = next
            try #require(pages < 10)
        }
        #expect(pages >= 3)
        #expect(replica == [kept, early, late])

        let none = try await f.call("Email/changes", ["sinceState": .string(current)])
        #expect(none.strings("created").isEmpty && none.strings("updated").isEmpty)
        #expect(none.strings("destroyed").isEmpty && none.string("newState") == current)
        let zero = try await f.call("Email/changes", ["sinceState": .string(since), "maxChanges": 0])
        #expect(zero.errorType == "invalidArguments")
    }

    @Test(arguments: JMAPEngine.allCases)
    func statesPastTheTombstoneHorizonOrFromElsewhereCannotCalculateChanges(engine: JMAPEngine) async throws {
        let f = try await JMAPFixture(engine, tombstoneRetention: 60)
        let old = try await f.emailState()
        let id = try await f.deliver(to: f.alice)
        try await f.store.destroyMessage(id: id, accountID: f.alice.id)
        // Within the retention period the old state still works.
        #expect(try await f.call("Email/changes", ["sinceState": .string(old)]).name == "Email/changes")
        f.clock.advance(by: 61)
        #expect(try await f.store.purgeTombstones() == 1)
        let current = try await f.emailState()
        for method in ["Email/changes", "Thread/changes"] {
            #expect(try await f.call(method, ["sinceState": .string(old)]).errorType == "cannotCalculateChanges")
            #expect(try await f.call(method, ["sinceState": .string(current)]).name == method)
            for foreign in ["0123456789abcdef-1", "garbage", "", "\(f.store.epoch)-999999", "\(f.store.epoch)-01"] {
                let answer = try await f.call(method, ["sinceState": .string(foreign)])
                #expect(answer.errorType == "cannotCalculateChanges", "\(method) since '\(foreign)'")
            }
        }
    }

    // MARK: Email/set

    @Test(arguments: JMAPEngine.allCases)
    func emailSetChecksIfInStateAndASeenPatchMovesTheState(engine: JMAPEngine) async throws {
        let f = try await JMAPFixture(engine)
        let id = try await f.deliver(to: f.alice)
        let before = try await f.emailState()
        let seen: JSONValue = [id: ["keywords/$seen": true]]

        let mismatch = try await f.call("Email/set", ["ifInState": .string("\(f.store.epoch)-424242"), "update": seen])
        #expect(mismatch.errorType == "stateMismatch")
        #expect(try await f.emailState() == before)

        let set = try await f.call("Email/set", ["ifInState": .string(before), "update": seen])
        #expect(set.string("oldState") == before)
        #expect(set.arguments["updated"] == [id: nil])
        let after = try #require(set.string("newState"))
        #expect(after != before)
        let got = try await f.call("Email/get", ["ids": [.string(id)], "properties": ["keywords"]])
        #expect(got.string("state") == after)
        #expect(got.list.first?["keywords"] == ["$seen": true])
        let changes = try await f.call("Email/changes", ["sinceState": .string(before)])
        #expect(changes.strings("updated") == [id])
        let inbox = try await f.call("Mailbox/get", ["ids": ["inbox"], "properties": ["unreadEmails"]])
        #expect(inbox.list.first?["unreadEmails"] == 0)

        // The same ifInState again is stale now.
        let stale = try await f.call("Email/set", ["ifInState": .string(before), "update": seen])
        #expect(stale.errorType == "stateMismatch")
    }

    @Test(arguments: JMAPEngine.allCases)
    func patchPathsAreJSONPointersWithTheirEscapesDecoded(engine: JMAPEngine) async throws {
        let f = try await JMAPFixture(engine)
        let id = try await f.deliver(to: f.alice)
        func update(_ patch: JSONValue) async throws -> MethodResponse {
            try await f.call("Email/set", ["update": [id: patch]])
        }
        func email() async throws -> JSONValue? {
            try await f.call("Email/get", ["ids": [.string(id)], "properties": ["keywords", "mailboxIds"]]).list.first
        }

        let moved = try await update(["mailboxIds/archive": true, "mailboxIds/inbox": nil, "keywords/$Flagged": true])
        #expect(moved.arguments["updated"] == [id: nil])
        #expect(try await email()?["mailboxIds"] == ["archive": true])
        #expect(try await email()?["keywords"] == ["$flagged": true])

        // `~1` inside the first token makes one property named "keywords/$seen", which an email does not have.
        let whole = try await update(["keywords~1$seen": true])
        #expect(whole.arguments["notUpdated"]?[id]?["type"] == "invalidProperties")
        #expect(whole.arguments["notUpdated"]?[id]?["properties"] == ["keywords~1$seen"])
        // A keyword with a slash is written `~1` in the path, and a refused one named back the same way.
        let slashed = try await update(["keywords/work~1(urgent": true])
        #expect(slashed.arguments["notUpdated"]?[id]?["type"] == "invalidProperties")
        #expect(slashed.arguments["notUpdated"]?[id]?["properties"] == ["keywords/work~1(urgent"])
        let tilde = try await update(["keywords/a~0b*": true])
        #expect(tilde.arguments["notUpdated"]?[id]?["properties"] == ["keywords/a~0b*"])
        #expect(try await email()?["keywords"] == ["$flagged": true])
        let kept = try await update(["keywords/work~1urgent": true, "keywords/a~0b": true])
        #expect(kept.arguments["updated"] == [id: nil])
        #expect(try await email()?["keywords"] == ["$flagged": true, "work/urgent": true, "a~b": true])
        _ = try await update(["keywords/work~1urgent": nil, "keywords/a~0b": nil])
        #expect(try await email()?["keywords"] == ["$flagged": true])
        #expect(try await email()?["mailboxIds"] == ["archive": true])

        let unknownMailbox = try await update(["mailboxIds/in~1box": true, "mailboxIds/archive": nil])
        #expect(unknownMailbox.arguments["notUpdated"]?[id]?["type"] == "invalidProperties")
    }

    // MARK: MIME

    static let bodyParts: JSONValue = ["partId", "blobId", "type", "name", "disposition", "size"]

    static func parts(_ value: JSONValue?) -> [String] {
        value?.array?.compactMap { $0["partId"]?.string } ?? []
    }

    @Test(arguments: JMAPEngine.allCases)
    func encodedHeadersAndNestedMultipartMapToTheEmailsBodyProperties(engine: JMAPEngine) async throws {
        let f = try await JMAPFixture(engine)
        let id = try await f.ingest(SampleMail.multipartWithAttachment, to: f.alice)
        let got = try await f.call(
            "Email/get",
            [
                "ids": [.string(id)],
                "properties": [
                    "subject", "from", "header:Subject:asText", "bodyStructure", "textBody", "htmlBody",
                    "attachments", "hasAttachment", "bodyValues",
                ],
                "bodyProperties": Self.bodyParts, "fetchTextBodyValues": true,
            ])
        let email = try #require(got.list.first)
        #expect(email["subject"] == "Grüße aus Köln with a file")
        #expect(email["header:Subject:asText"] == "Grüße aus Köln with a file")
        #expect(email["from"] == [["name": "Rémi Doe, Jr.", "email": "remi@example.test"]])
        #expect(email["hasAttachment"] == true)

        let pdf = try #require(Data(base64Encoded: "JVBERi0xLjQKJcfsj6IKdGVzdAo="))
        let attachment: JSONValue = [
            "partId": "2", "blobId": .string("P\(id)_2"), "type": "application/pdf", "name": "report.pdf",
            "disposition": "attachment", "size": .int(Int64(pdf.count)),
        ]
        let structure = try #require(email["bodyStructure"])
        #expect(structure["type"] == "multipart/mixed")
        #expect(structure["partId"] == .null && structure["blobId"] == .null)
        let children = try #require(structure["subParts"]?.array)
        #expect(children.count == 2)
        #expect(children[0]["type"] == "multipart/alternative")
        #expect(children[0]["subParts"]?.array?.compactMap { $0["type"]?.string } == ["text/plain", "text/html"])
        #expect(Self.parts(children[0]["subParts"]) == ["1.1", "1.2"])
        #expect(children[1] == attachment)

        #expect(Self.parts(email["textBody"]) == ["1.1"])
        #expect(Self.parts(email["htmlBody"]) == ["1.2"])
        #expect(email["attachments"] == [attachment])
        #expect(email["bodyValues"]?["1.1"]?["value"]?.string?.hasPrefix("Plain text body") == true)
        #expect(email["bodyValues"]?.object?.keys.sorted() == ["1.1"])

        // The attachment's blob is its decoded bytes, for its own account only.
        let blob = try #require(try await f.server.blob("P\(id)_2", accountID: f.alice.id))
        #expect(Data(blob.bytes) == pdf)
        #expect(try await f.server.blob("P\(id)_2", accountID: f.bob.id) == nil)
        #expect(try await f.server.blob("M\(id)", accountID: f.bob.id) == nil)
    }

    /// Where RFC 8621 §4.1.4's algorithm decides by position and kind: an HTML alternative that is a
    /// multipart/related (its image an attachment, not a body), an inline image between bodies (in both lists), and
    /// a named text part after the first (an attachment).
    static let relatedMessage = """
        From: sender@example.test\r
        To: alice@example.test\r
        Subject: related\r
        MIME-Version: 1.0\r
        Content-Type: multipart/mixed; boundary="m"\r
        \r
        --m\r
        Content-Type: multipart/alternative; boundary="a"\r
        \r
        --a\r
        Content-Type: text/plain\r
        \r
        Plain\r
        --a\r
        Content-Type: multipart/related; boundary="r"\r
        \r
        --r\r
        Content-Type: text/html\r
        \r
        <p>HTML <img src="cid:logo@x"></p>\r
        --r\r
        Content-Type: image/png\r
        Content-ID: <logo@x>\r
        Content-Transfer-Encoding: base64\r
        \r
        iVBORw0KGgo=\r
        --r--\r
        --a--\r
        --m\r
        Content-Type: image/jpeg\r
        Content-Transfer-Encoding: base64\r
        \r
        /9j/4AAQ\r
        --m\r
        Content-Type: text/plain\r
        Content-Disposition: inline; filename="notes.txt"\r
        \r
        Notes\r
        --m--\r

        """

    @Test(arguments: JMAPEngine.allCases)
    func relatedPartsInlineImagesAndNamedTextFollowParseStructure(engine: JMAPEngine) async throws {
        let f = try await JMAPFixture(engine)
        let id = try await f.ingest(Self.relatedMessage, to: f.alice)
        let got = try await f.call(
            "Email/get",
            [
                "ids": [.string(id)], "properties": ["textBody", "htmlBody", "attachments"],
                "bodyProperties": ["partId"],
            ])
        let email = try #require(got.list.first)
        #expect(Self.parts(email["textBody"]) == ["1.1", "2"])
        #expect(Self.parts(email["htmlBody"]) == ["1.2.1", "2"])
        #expect(Self.parts(email["attachments"]) == ["1.2.2", "3"])
    }

    // MARK: Hostile input

    @Test(arguments: JMAPEngine.allCases)
    func malformedBodiesAreNotJSONOrNotRequestAndTooLargeIsALimit(engine: JMAPEngine) async throws {
        var limits = JMAPLimits()
        limits.maxSizeRequest = 4096
        let f = try await JMAPFixture(engine, limits: limits)
        func refusal(_ text: String) async -> JMAPRequestError? { requestError(await f.send(Data(text.utf8))) }

        let using = JMAPFixture.using.json
        func echo(_ argument: String) -> String {
            "{\"using\":\(using),\"methodCalls\":[[\"Core/echo\",{\"v\":\(argument)},\"c\"]]}"
        }
        for text in [
            "", " ", "{", "{\"using\":", "not json", "{\"using\":[],\"methodCalls\":[]}}", "{\"using\":[],}",
            echo("01"), echo("1."), echo("-"), echo("1e400"), echo("[1,]"), echo("tru"), echo("\"\\ud83d\""),
            echo("\"\\x\""), echo("\"tab\there\""), echo("'single'"),
        ] {
            #expect(await refusal(text)?.type == "notJSON", "\(text)")
        }
        let invalidUTF8 = Data(echo("\"x\"").utf8).map { $0 == UInt8(ascii: "x") ? 0xFF : $0 }
        #expect(requestError(await f.send(Data(invalidUTF8)))?.type == "notJSON")
        // What JSON allows reads back as the same values.
        let valid = echo(#"["\ud83d\ude00 \u00e9\/\n", -0.5e+2, 9223372036854775807, true, null, {"k":{}}]"#)
        let echoed = try await f.send(Data(valid.utf8)).get()
        #expect(
            echoed["methodResponses"]?.array?.first?.array?[1]
                == ["v": ["😀 é/\n", .double(-50), 9_223_372_036_854_775_807, true, nil, ["k": [:]]]])
        for text in [
            "[]", "42", "{}", "{\"methodCalls\":[]}", "{\"using\":\(using)}", "{\"using\":\"x\",\"methodCalls\":[]}",
            "{\"using\":\(using),\"methodCalls\":[[\"Core/echo\",{},5]]}",
            "{\"using\":\(using),\"methodCalls\":[[\"Core/echo\",[],\"c\"]]}",
            "{\"using\":\(using),\"methodCalls\":[[\"Core/echo\",{}]]}",
            "{\"using\":\(using),\"methodCalls\":[],\"createdIds\":{\"k\":1}}",
        ] {
            let error = await refusal(text)
            #expect(error?.type == "notRequest", "\(text)")
            #expect(error?.body["type"] == "urn:ietf:params:jmap:error:notRequest")
        }

        let padding = String(repeating: "x", count: 4096)
        let large = try #require(await refusal("{\"using\":\(using),\"methodCalls\":[],\"pad\":\"\(padding)\"}"))
        #expect(large.type == "limit")
        #expect(large.limit == "maxSizeRequest")
        #expect(large.body["limit"] == "maxSizeRequest")
        // Just under the limit is a request.
        let fits = "{\"using\":\(using),\"methodCalls\":[],\"pad\":\"\(padding.prefix(4000))\"}"
        #expect(requestError(await f.send(Data(fits.utf8))) == nil)
    }

    @Test(arguments: JMAPEngine.allCases)
    func deepNestingIsRefusedCleanlyAndBracketsInStringsDoNotCount(engine: JMAPEngine) async throws {
        let f = try await JMAPFixture(engine)
        let using = JMAPFixture.using.json
        for depth in [200, 100_000] {
            let nested = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
            let body = "{\"using\":\(using),\"methodCalls\":[[\"Core/echo\",{\"deep\":\(nested)},\"c\"]]}"
            #expect(requestError(await f.send(Data(body.utf8)))?.type == "notJSON", "depth \(depth)")
            let objects = String(repeating: "{\"a\":", count: depth) + "1" + String(repeating: "}", count: depth)
            let objectBody = "{\"using\":\(using),\"methodCalls\":[[\"Core/echo\",{\"deep\":\(objects)},\"c\"]]}"
            #expect(requestError(await f.send(Data(objectBody.utf8)))?.type == "notJSON", "depth \(depth)")
        }
        let brackets = String(repeating: "[{", count: 300)
        let echoed = try await f.request([["Core/echo", ["text": .string(brackets)], "c"]])
        #expect(echoed[0].arguments == ["text": .string(brackets)])
        // Nesting a real client uses is fine.
        let shallow: JSONValue = ["a": [["b": [["c": [1]]]]]]
        #expect(try await f.request([["Core/echo", shallow, "c"]])[0].arguments == shallow)
    }

    @Test(arguments: JMAPEngine.allCases)
    func hugeIDListsAreRefusedAsTooLargeWithoutWork(engine: JMAPEngine) async throws {
        let f = try await JMAPFixture(engine)
        let id = try await f.deliver(to: f.alice)
        let huge = JSONValue.array((0..<100_000).map { .string("E\($0)") })
        for method in ["Email/get", "Thread/get", "Mailbox/get"] {
            #expect(try await f.call(method, ["ids": huge]).errorType == "requestTooLarge", "\(method)")
        }
        #expect(try await f.call("Email/set", ["destroy": huge]).errorType == "requestTooLarge")
        // The most a /get takes is answered in full.
        let most = (0..<499).map { JSONValue.string("E\($0)") } + [.string(id)]
        let answered = try await f.call("Email/get", ["ids": .array(most), "properties": ["id"]])
        #expect(answered.listIDs == [id])
        #expect(answered.strings("notFound").count == 499)
        #expect(try await f.store.message(id: id, accountID: f.alice.id) != nil)

        // Many small values are read whole (what they cost is measured by the benchmarks, not here).
        let empties = JSONValue.array(Array(repeating: [:], count: 100_000))
        let echoed = try await f.request([["Core/echo", ["v": empties], "c"]])
        #expect(echoed[0].arguments["v"]?.array?.count == 100_000)
    }
}

@Suite("JMAP dates")
struct JMAPDateTests {
    @Test(arguments: [0, 1_733_000_000.75, 951_782_400, 4_102_444_799, 253_402_300_799, -1])
    func aUTCDateIsWhatAnRFC3339FormatterWrites(seconds: Double) {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        let expected = formatter.string(from: Date(timeIntervalSince1970: seconds.rounded(.down)))
        #expect(JMAPDate.string(seconds) == expected)
    }
}

import JMAP
import Locking
import Testing

@testable import MailboxHTTPAPI

/// The tickets a browser opens a JMAP WebSocket with: single use, valid for 60 seconds on the clock they are given,
/// bounded per account, and kept only as their hash.
@Suite("WebSocket tickets")
struct WebSocketTicketTests {
    /// A monotonic clock the test moves by hand.
    final class Clock: Sendable {
        let now = LockedValue<UInt64>(1_000_000_000)
        func advance(seconds: UInt64) { now.withLock { $0 += seconds * 1_000_000_000 } }
    }

    let alice = JMAPAccount(id: 1, username: "alice", sessionID: 7)
    let bob = JMAPAccount(id: 2, username: "bob", sessionID: 8)

    @Test func aTicketOpensOnceAndOnlyForItsAccount() throws {
        let tickets = WebSocketTickets()
        let ticket = try #require(tickets.issue(for: alice))
        #expect(ticket.utf8.count >= 40, "32 random bytes, base64url")
        #expect(tickets.redeem(ticket) == alice)
        #expect(tickets.redeem(ticket) == nil, "a used ticket opens nothing")
        #expect(tickets.redeem("not-a-ticket") == nil)
        #expect(tickets.redeem(String(repeating: "x", count: 4096)) == nil)
    }

    @Test func aTicketExpiresAfterSixtySeconds() throws {
        let clock = Clock()
        let tickets = WebSocketTickets(now: { clock.now.withLock { $0 } })
        let late = try #require(tickets.issue(for: alice))
        let inTime = try #require(tickets.issue(for: alice))
        clock.advance(seconds: 59)
        #expect(tickets.redeem(inTime) == alice, "valid for 60 seconds")
        clock.advance(seconds: 1)
        #expect(tickets.redeem(late) == nil, "expired at 60 seconds")
    }

    @Test func anAccountHoldsAtMostSixteenUnusedTicketsAndExpiredOnesMakeRoom() throws {
        let clock = Clock()
        let tickets = WebSocketTickets(now: { clock.now.withLock { $0 } })
        for _ in 0..<WebSocketTickets.maxPerAccount { #expect(tickets.issue(for: alice) != nil) }
        #expect(tickets.issue(for: alice) == nil, "one more is refused")
        #expect(tickets.issue(for: bob) != nil, "another account has its own allowance")
        clock.advance(seconds: 61)
        #expect(tickets.issue(for: alice) != nil, "expired tickets no longer count")
    }
}

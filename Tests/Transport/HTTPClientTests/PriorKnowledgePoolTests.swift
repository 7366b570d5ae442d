import Testing

@testable import HTTPClient

@Suite struct PriorKnowledgePoolTests {
    final class Item {}
    let origin = "http://127.0.0.1:8080"

    @Test func firstTransferOpensOthersWaitThenReuse() {
        var pool = PriorKnowledgePool<Item>()
        let (pioneer, second, third) = (Item(), Item(), Item())
        let decisions = [
            pool.admit(pioneer, origin: origin), pool.admit(second, origin: origin), pool.admit(third, origin: origin),
            pool.admit(Item(), origin: "http://other:80"),
        ]
        #expect(decisions == [.openWithPriorKnowledge, .hold, .hold, .openWithPriorKnowledge])
        #expect(pool.pioneers.contains { $0.transfer === pioneer })
        let released = pool.connected(origin: origin)
        #expect(released.count == 2 && released[0] === second && released[1] === third)
        let later = pool.admit(Item(), origin: origin)
        #expect(later == .reuse)
    }

    @Test func failedPioneerPromotesTheNextWaitingTransfer() {
        var pool = PriorKnowledgePool<Item>()
        let (pioneer, second, third) = (Item(), Item(), Item())
        _ = pool.admit(pioneer, origin: origin)
        _ = pool.admit(second, origin: origin)
        _ = pool.admit(third, origin: origin)
        let followup = pool.ended(pioneer, origin: origin, receivedHTTP2: false, openedConnection: true, mayRetry: true)
        #expect(!followup.readmit)
        #expect(followup.add.count == 1 && followup.add[0].0 === second)
        #expect(followup.add.first?.1 == .openWithPriorKnowledge)
        let removedOnce = pool.removeWaiting(third)
        let removedTwice = pool.removeWaiting(third)
        #expect(removedOnce && !removedTwice)
    }

    @Test func pioneerThatGotAnAnswerEstablishesTheOrigin() {
        var pool = PriorKnowledgePool<Item>()
        let (pioneer, second) = (Item(), Item())
        _ = pool.admit(pioneer, origin: origin)
        _ = pool.admit(second, origin: origin)
        let followup = pool.ended(pioneer, origin: origin, receivedHTTP2: true, openedConnection: true, mayRetry: false)
        #expect(followup.add.count == 1 && followup.add[0].0 === second && followup.add[0].1 == .reuse)
    }

    @Test func reuseThatFoundTheConnectionGoneIsReadmittedAsPioneer() {
        var pool = PriorKnowledgePool<Item>()
        let (pioneer, late) = (Item(), Item())
        _ = pool.admit(pioneer, origin: origin)
        _ = pool.connected(origin: origin)
        let first = pool.admit(late, origin: origin)
        #expect(first == .reuse)
        let followup = pool.ended(late, origin: origin, receivedHTTP2: false, openedConnection: true, mayRetry: true)
        #expect(followup.readmit)
        let second = pool.admit(late, origin: origin)
        #expect(second == .openWithPriorKnowledge)
    }

    @Test func ordinaryFailuresAreNotRetried() {
        var pool = PriorKnowledgePool<Item>()
        let (pioneer, reused) = (Item(), Item())
        _ = pool.admit(pioneer, origin: origin)
        _ = pool.connected(origin: origin)
        _ = pool.admit(reused, origin: origin)
        let reusedFailure = pool.ended(
            reused, origin: origin, receivedHTTP2: false, openedConnection: false, mayRetry: true)
        #expect(!reusedFailure.readmit)
        let cancelled = pool.ended(
            reused, origin: origin, receivedHTTP2: false, openedConnection: true, mayRetry: false)
        #expect(!cancelled.readmit)
        let leftover = pool.removeAllWaiting()
        #expect(leftover.isEmpty)
    }
}

import Foundation
import ServerSentEvents
import Testing

@testable import HTTPClient

@Suite struct ServerSentEventParserTests {
    private func parse(_ chunks: [String]) -> [ServerSentEvent] {
        var parser = ServerSentEventParser()
        return chunks.flatMap { parser.feed(Data($0.utf8)) }
    }

    @Test func parsesEventTypeIdAndData() {
        let events = parse(["event: signal\nid: 7\ndata: {\"badge\":1}\n\n"])
        #expect(events == [ServerSentEvent(event: "signal", data: "{\"badge\":1}", id: "7")])
    }

    @Test func joinsMultiLineData() {
        let events = parse(["data: first\ndata: second\ndata:third\n\n"])
        #expect(events.map(\.data) == ["first\nsecond\nthird"])
        #expect(events.first?.event == "message")
    }

    @Test func ignoresCommentsAndUnknownFields() {
        let events = parse([": heartbeat\n\n", ":another\nfoo: bar\ndata: x\n\n"])
        #expect(events == [ServerSentEvent(data: "x")])
    }

    @Test func handlesEveryLineEndingAndChunkBoundary() {
        let events = parse(["data: a\r", "\ndata: b\r\n\r", "\n", "data: c\r\rdata: d\n", "\n"])
        #expect(events.map(\.data) == ["a\nb", "c", "d"])
    }

    @Test func splitsAnywhereIncludingInsideUTF8() {
        let text = "event: ünï\ndata: héllo wörld\n\n"
        let bytes = Array(text.utf8)
        var parser = ServerSentEventParser()
        var events: [ServerSentEvent] = []
        for byte in bytes { events += parser.feed(Data([byte])) }
        #expect(events == [ServerSentEvent(event: "ünï", data: "héllo wörld")])
    }

    @Test func idCarriesOverAndEventTypeResets() {
        let events = parse(["id: 1\nevent: a\ndata: x\n\ndata: y\n\nid\ndata: z\n\n"])
        #expect(events.map(\.id) == ["1", "1", ""])
        #expect(events.map(\.event) == ["a", "message", "message"])
    }

    @Test func eventWithoutDataIsNotDispatched() {
        var parser = ServerSentEventParser()
        #expect(parser.feed(Data("event: lonely\nid: 4\n\n".utf8)).isEmpty)
        #expect(parser.lastEventID == "4")
        #expect(parser.feed(Data("data\n\n".utf8)) == [ServerSentEvent(data: "", id: "4")])
    }

    @Test func readsRetryAndSkipsInvalidRetry() {
        let events = parse(["retry: 1500\ndata: a\n\nretry: soon\ndata: b\n\n"])
        #expect(events.map(\.retry) == [1500, nil])
    }

    @Test func stripsLeadingByteOrderMarkAndOnlyOneSpace() {
        var bytes: [UInt8] = [0xEF, 0xBB, 0xBF]
        bytes += Array("data:  two spaces\n\n".utf8)
        var parser = ServerSentEventParser()
        #expect(parser.feed(Data(bytes)).map(\.data) == [" two spaces"])
    }

    @Test func incompleteEventIsHeldUntilBlankLine() {
        var parser = ServerSentEventParser()
        #expect(parser.feed(Data("data: partial".utf8)).isEmpty)
        #expect(parser.feed(Data("\n".utf8)).isEmpty)
        #expect(parser.feed(Data("\n".utf8)).map(\.data) == ["partial"])
    }
}

import Foundation
import HTTPServer
import TestSupport
import Testing

/// A router whose `/batched/:name` streams defer their wake-ups to `batch`.
private func batchedRouter(_ batch: EventStreamBatch, streams: StreamRegistry) -> Router {
    var router = Router()
    router.get("/batched/:name") { request in
        let stream = EventStream(batch: batch)
        streams.add(stream, name: request.parameter("name") ?? "")
        return .eventStream(stream)
    }
    return router
}

/// Reads each socket's response head and the stream's opening comment, so the streams have sent all they had.
private func readOpenings(_ sockets: [RawSocket]) async throws {
    let opened = try await offPool { sockets.map { $0.read { $0.contains(": stream opened") }.text } }
    for text in opened { #expect(text.contains(": stream opened"), "\(text.debugDescription)") }
}

extension HTTPServerTests {
    @Suite("Event-stream batches")
    struct EventStreamBatchTests {
        @Test("a burst sent inside a batch arrives complete and in order on every stream")
        func burstArrivesInOrder() async throws {
            let batch = EventStreamBatch()
            let streams = StreamRegistry()
            let server = try startServer(router: batchedRouter(batch, streams: streams))
            let names = (0..<20).map { "b\($0)" }
            var sockets: [RawSocket] = []
            for name in names {
                let socket = try RawSocket(port: server.port)
                socket.send("GET /batched/\(name) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                sockets.append(socket)
            }
            #expect(await eventually { streams.count == names.count })
            // Every stream has drained its opening comment (and waits, suspended, for events).
            try await readOpenings(sockets)
            let perStream = 150
            let all = streams.all
            // Several rounds, each a batch; within a round every stream gets several events.
            for round in 0..<(perStream / 5) {
                batch.run {
                    #expect(batch.isOpen)
                    for offset in 0..<5 {
                        for stream in all { stream.send(data: "event-\(round * 5 + offset)") }
                    }
                }
            }
            #expect(!batch.isOpen)
            let expected = (0..<perStream).map { "event-\($0)" }
            let socketsCopy = sockets
            let received = try await offPool {
                socketsCopy.map { socket in eventData(in: socket.read { eventData(in: $0).count >= perStream }.text) }
            }
            for events in received { #expect(events == expected) }
            await server.shutdown()
            #expect(streams.terminated.count == names.count)
        }

        @Test("sends from several threads inside overlapping batches all arrive, in each sender's order")
        func concurrentBatches() async throws {
            let batch = EventStreamBatch()
            let streams = StreamRegistry()
            let server = try startServer(router: batchedRouter(batch, streams: streams))
            let socket = try RawSocket(port: server.port)
            socket.send("GET /batched/shared HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            #expect(await eventually { streams.count == 1 })
            let stream = try #require(streams.all.first)
            let senders = 4
            let perSender = 100
            await withTaskGroup(of: Void.self) { group in
                for sender in 0..<senders {
                    group.addTask {
                        for index in 0..<perSender {
                            batch.begin()
                            stream.send(data: "s\(sender)-\(index)")
                            batch.end()
                        }
                    }
                }
            }
            let (text, _) = try await offPool { socket.read { eventData(in: $0).count >= senders * perSender } }
            let events = eventData(in: text)
            #expect(events.count == senders * perSender)
            for sender in 0..<senders {
                let mine = events.filter { $0.hasPrefix("s\(sender)-") }
                #expect(mine == (0..<perSender).map { "s\(sender)-\($0)" })
            }
            await server.shutdown()
        }

        @Test("closing streams and shutting down while a batch is still open ends every stream")
        func shutdownWithOpenBatch() async throws {
            let batch = EventStreamBatch()
            let streams = StreamRegistry()
            let server = try startServer(router: batchedRouter(batch, streams: streams))
            var sockets: [RawSocket] = []
            for index in 0..<10 {
                let socket = try RawSocket(port: server.port)
                socket.send("GET /batched/open\(index) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                sockets.append(socket)
            }
            #expect(await eventually { streams.count == 10 })
            try await readOpenings(sockets)
            batch.begin()
            for stream in streams.all { stream.send(data: "held") }
            let first = try #require(streams.all.first)
            first.close()
            await server.shutdown()
            #expect(streams.terminated.count == 10)
            batch.end()
            let socketsCopy = sockets
            let texts = try await offPool { socketsCopy.map { $0.read { $0.hasSuffix("0\r\n\r\n") }.text } }
            for text in texts { #expect(eventData(in: text) == ["held"], "\(text.debugDescription)") }
        }
    }
}

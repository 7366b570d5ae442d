import Foundation
import HTTPServer
import TestSupport
import Testing

/// Parses `data:` payloads of complete events out of an SSE byte stream (chunk-size lines are ignored;
/// `\r\n` is normalized first because Swift treats it as one character).
func eventData(in text: String) -> [String] {
    text.replacingOccurrences(of: "\r\n", with: "\n").components(separatedBy: "\n\n").compactMap { block in
        let lines = block.split(separator: "\n").filter { $0.hasPrefix("data: ") }
        return lines.isEmpty ? nil : lines.map { String($0.dropFirst(6)) }.joined(separator: "\n")
    }
}

func subscribeRequest(_ name: String) -> String {
    "GET /events/\(name) HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n"
}

extension HTTPServerTests {
    @Suite("Server-Sent Events")
    struct EventStreamTests {
        @Test("a subscriber receives three events in order")
        func threeEventsInOrder() async throws {
            let streams = StreamRegistry()
            let server = try startServer(router: makeTestRouter(streams: streams))
            let socket = try RawSocket(port: server.port)
            socket.send(subscribeRequest("one"))
            #expect(await eventually { streams.count == 1 })
            streams.broadcast(event: "note", data: "first")
            streams.broadcast(event: "note", data: "second\nline")
            streams.broadcast(event: "note", data: #"{"n":3}"#)
            let (text, _) = try await offPool { socket.read { eventData(in: $0).count >= 3 } }
            #expect(text.hasPrefix("HTTP/1.1 200"))
            #expect(text.lowercased().contains("content-type: text/event-stream"))
            #expect(text.contains("event: note\n"))
            #expect(eventData(in: text) == ["first", "second\nline", #"{"n":3}"#])
            await server.shutdown()
            #expect(streams.terminated.all == ["one"])
        }

        @Test("curl receives events and sees the stream end when the server closes it")
        func curlSubscriber() async throws {
            let streams = StreamRegistry()
            let server = try startServer(router: makeTestRouter(streams: streams))
            let logs = try TemporaryDirectory(prefix: "sse-curl")
            let subscriber = try ChildProcess(
                try #require(Subprocess.which("curl"), "curl is not installed"),
                ["--silent", "--show-error", "-N", "--max-time", "20", "http://127.0.0.1:\(server.port)/events/curl"],
                logDirectory: logs.url.path)
            #expect(await eventually { streams.count == 1 })
            for n in 1...3 { streams.broadcast(event: "n", data: "event \(n)") }
            #expect(await eventually { eventData(in: subscriber.output).count == 3 })
            await server.shutdown()
            let status = try await offPool { subscriber.waitForExit() }
            #expect(status == 0, "curl ended with wait status \(status): \(subscriber.errorOutput)")
            #expect(eventData(in: subscriber.output) == ["event 1", "event 2", "event 3"])
        }

        @Test("an abrupt disconnect runs onTermination (via heartbeats) and the server keeps serving")
        func disconnectRunsTermination() async throws {
            let streams = StreamRegistry()
            let server = try startServer(router: makeTestRouter(streams: streams)) {
                $0.eventStreamHeartbeat = .milliseconds(100)
            }
            let socket = try RawSocket(port: server.port)
            socket.send(subscribeRequest("gone"))
            #expect(await eventually { streams.count == 1 })
            let (text, _) = try await offPool { socket.read { $0.contains(": keep-alive") } }
            #expect(text.contains(": keep-alive"))
            socket.abort()
            #expect(await eventually { streams.terminated.all == ["gone"] })
            #expect(streams.count == 0)
            #expect(await eventually { server.eventStreamCount == 0 })
            let ok = try await curlResponse(["http://127.0.0.1:\(server.port)/hello"])
            #expect(ok.status == 200)
            await server.shutdown()
        }

        @Test("closing a stream from the server ends the response and keeps the connection usable")
        func serverSideClose() async throws {
            let streams = StreamRegistry()
            let holder = Collector<EventStream>()
            var router = makeTestRouter(streams: streams)
            router.get("/short") { _ in
                let stream = EventStream()
                holder.append(stream)
                stream.send(data: "only")
                return .eventStream(stream)
            }
            let server = try startServer(router: router)
            let socket = try RawSocket(port: server.port)
            socket.send("GET /short HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(await eventually { holder.count == 1 })
            let closed = Flag()
            holder.all[0].onTermination { closed.set() }
            holder.all[0].close()
            let (text, _) = try await offPool { socket.read { $0.hasSuffix("0\r\n\r\n") } }
            #expect(eventData(in: text) == ["only"], "\(text.debugDescription)")
            #expect(await eventually { closed.isSet })
            #expect(holder.all[0].send(data: "late") == false)
            socket.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            let (again, _) = try await offPool { socket.read { $0.hasSuffix("hello") } }
            #expect(again.hasPrefix("HTTP/1.1 200"))
            await server.shutdown()
        }

        @Test("200 subscribers all receive a broadcast event")
        func manySubscribers() async throws {
            let streams = StreamRegistry()
            let server = try startServer(router: makeTestRouter(streams: streams))
            let count = 200
            var sockets: [RawSocket] = []
            for index in 0..<count {
                let socket = try RawSocket(port: server.port)
                socket.send(subscribeRequest("s\(index)"))
                sockets.append(socket)
            }
            #expect(await eventually { streams.count == count })
            streams.broadcast(event: "all", data: "broadcast-1")
            let all = sockets
            let received = try await offPool {
                all.filter { socket in socket.read { eventData(in: $0).contains("broadcast-1") }.end == .data }.count
            }
            #expect(received == count)
            #expect(server.eventStreamCount == count)
            await server.shutdown()
            #expect(streams.terminated.count == count)
        }
    }
}

import Foundation
import HTTPServer
import Locking

struct Greeting: Codable, Equatable {
    var name: String
    var count: Int
}

struct ProbeError: Error {}

/// Flags a test can wait on.
final class Flag: Sendable {
    private let value = LockedValue(false)
    func set() { value.withLock { $0 = true } }
    var isSet: Bool { value.withLock { $0 } }
}

/// The routes the tests exercise.
func makeTestRouter(streams: StreamRegistry = StreamRegistry(), slowStarted: Flag = Flag()) -> Router {
    var router = Router()
    router.get("/v1/messages/:id") { request in
        try .json([
            "id": request.parameter("id") ?? "",
            "q": request.query("q") ?? "",
            "name": request.query("name") ?? "",
            "route": "param",
        ])
    }
    router.get("/v1/messages/special") { _ in try .json(["route": "literal"]) }
    router.patch("/v1/messages/:id") { request in try .json(["patched": request.parameter("id") ?? ""]) }
    router.post("/echo") { request in
        let greeting = try request.decodeJSON(Greeting.self)
        return try .json(Greeting(name: greeting.name.uppercased(), count: greeting.count + 1), status: .created)
    }
    router.get("/hello") { _ in .text("hello") }
    router.get("/headers") { request in
        try .json([
            "userAgent": request.headers["user-agent"] ?? "",
            "custom": request.headers["X-CUSTOM-header"] ?? "",
            "remote": request.remoteAddress,
        ])
    }
    router.get("/fail") { _ in throw ProbeError() }
    router.get("/forbidden") { _ in throw HTTPError.forbidden("No access to this mailbox.") }
    router.get("/slow") { _ in
        slowStarted.set()
        try await Task.sleep(for: .seconds(1))
        return .text("slow done")
    }
    router.get("/hang") { _ in
        try? await Task.sleep(for: .seconds(30))
        return .text("late")
    }
    router.get("/events/:name") { request in
        let stream = EventStream()
        streams.add(stream, name: request.parameter("name") ?? "")
        return .eventStream(stream)
    }
    return router
}

/// Starts a server on 127.0.0.1, port 0, with test-friendly settings.
func startServer(
    router: Router = makeTestRouter(), _ configure: (inout HTTPServer.Configuration) -> Void = { _ in }
) throws -> HTTPServer {
    var configuration = HTTPServer.Configuration(host: "127.0.0.1", port: 0, threadCount: 2)
    configure(&configuration)
    return try HTTPServer(configuration: configuration, router: router)
}

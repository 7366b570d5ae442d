import Foundation
import HTTPServer
import Locking
import Testing

/// Counts the requests it sees, in its async and its inline form.
private struct Counting: RouterMiddleware {
    let seen: LockedValue<[String]>

    func respond(to request: HTTPRequest, route: MatchedRoute, next: HTTPHandler) async throws -> HTTPResponse {
        seen.withLock { $0.append("async \(route.label)") }
        return try await next(request)
    }

    func respond(
        to request: HTTPRequest, route: MatchedRoute, inline next: @escaping HTTPInlineHandler,
        respond: @escaping HTTPResponder
    ) {
        seen.withLock { $0.append("inline \(route.label)") }
        next(request) { result in
            respond(result.map { response in .text("counted(" + String(decoding: response.body, as: UTF8.self) + ")") })
        }
    }
}

/// Wraps the answer, with no inline form: an inline route runs through it in a task.
private struct Wrapping: RouterMiddleware {
    func respond(to request: HTTPRequest, route: MatchedRoute, next: HTTPHandler) async throws -> HTTPResponse {
        let inner = try await next(request)
        return .text("wrapped(" + String(decoding: inner.body, as: UTF8.self) + ")")
    }
}

/// Whether the caller runs in a task (an inline handler must not: it runs on the server's thread).
private func inTask() -> Bool { withUnsafeCurrentTask { $0 != nil } }

/// Routes answered inline: at once, later from another thread, with an `HTTPError`, with another error, never.
private func inlineRouter(seen: LockedValue<[String]>) -> Router {
    var router = Router()
    router.add(.get, "/now", inline: { _, respond in respond(.success(.text(inTask() ? "in a task" : "now"))) })
    router.add(
        .post, "/later/:id",
        inline: { request, respond in
            let id = request.parameter("id") ?? ""
            Thread.start(named: "test-later") {
                usleep(50_000)
                respond(.success(.text("later \(id), \(request.body.count) bytes")))
            }
        })
    router.add(.get, "/refused", inline: { _, respond in respond(.failure(HTTPError.forbidden("Not for you."))) })
    router.add(.get, "/broken", inline: { _, respond in respond(.failure(ProbeError())) })
    router.add(.get, "/silent", inline: { _, _ in })
    router.get("/async") { _ in .text(inTask() ? "async" : "not in a task") }
    router.use(Counting(seen: seen))
    return router
}

extension HTTPServerTests {
    @Test("inline routes answer from the server's thread, at once or later from another, through inline middleware")
    func inlineRoutes() async throws {
        let seen = LockedValue<[String]>([])
        let server = try startServer(router: inlineRouter(seen: seen)) { $0.requestTimeout = .milliseconds(300) }
        let base = "http://127.0.0.1:\(server.port)"

        let now = try await curlResponse(["\(base)/now"])
        #expect(now.status == 200)
        #expect(now.body == "counted(now)")
        let later = try await curlResponse(["-X", "POST", "\(base)/later/7", "--data-binary", "12345"])
        #expect(later.body == "counted(later 7, 5 bytes)")
        // An async route still runs in a task, through the middleware's async form.
        let async = try await curlResponse(["\(base)/async"])
        #expect(async.body == "async")

        let refused = try await curlResponse(["\(base)/refused"])
        #expect(refused.status == 403)
        #expect(try refused.json()["error"] as? String == "forbidden")
        let broken = try await curlResponse(["\(base)/broken"])
        #expect(broken.status == 500)
        #expect(try broken.json()["error"] as? String == "internalError")
        // A handler that never answers is answered by the request timeout, like an async one.
        let silent = try await curlResponse(["\(base)/silent"])
        #expect(silent.status == 503)
        #expect(try silent.json()["error"] as? String == "timeout")

        #expect(
            seen.withLock { $0 } == [
                "inline /now", "inline /later/{id}", "async /async", "inline /refused", "inline /broken",
                "inline /silent",
            ])
        #expect(server.inFlightCount == 0)
        await server.shutdown()
    }

    @Test("an inline route runs through middleware without an inline form, and Router.handle awaits it")
    func inlineRouteThroughAsyncMiddleware() async throws {
        var router = Router()
        router.add(.get, "/now", inline: { _, respond in respond(.success(.text("now"))) })
        router.use(Wrapping())
        let handled = try await router.handle(HTTPRequest(method: .get, path: "/now"))
        #expect(String(decoding: handled.body, as: UTF8.self) == "wrapped(now)")

        let server = try startServer(router: router)
        let served = try await curlResponse(["http://127.0.0.1:\(server.port)/now"])
        #expect(served.body == "wrapped(now)")
        await server.shutdown()
    }

    @Test("dispatch answers an inline route at once with no task, an async route in a task, and a miss with 404")
    func dispatchOfEachKind() async throws {
        var router = Router()
        router.add(.get, "/now", inline: { _, respond in respond(.success(.text("now"))) })
        router.get("/async") { _ in .text("async") }
        let answers = LockedValue<[String]>([])
        let record: HTTPResponder = { result in
            let text =
                switch result {
                case .success(let response): String(decoding: response.body, as: UTF8.self)
                case .failure(let error as HTTPError): "\(error.status.rawValue)"
                case .failure: "error"
                }
            answers.withLock { $0.append(text) }
        }
        #expect(router.dispatch(HTTPRequest(method: .get, path: "/now"), respond: record) == nil)
        #expect(answers.withLock { $0 } == ["now"])
        #expect(router.dispatch(HTTPRequest(method: .get, path: "/nowhere"), respond: record) == nil)
        #expect(answers.withLock { $0 } == ["now", "404"])
        let task = try #require(router.dispatch(HTTPRequest(method: .get, path: "/async"), respond: record))
        await task.value
        #expect(answers.withLock { $0 } == ["now", "404", "async"])
    }
}

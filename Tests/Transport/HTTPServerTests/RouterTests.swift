import Foundation
import HTTPServer
import Locking
import Testing

extension HTTPServerTests {
    @Suite("Router and values")
    struct RouterTests {
        @Test("router matches without a server; HEAD falls back to GET; trailing capture")
        func routerDirect() async throws {
            var router = Router()
            router.get("/files/*rest") { request in .text(request.parameter("rest") ?? "") }
            router.get("/a/:x/b/:y") { request in .text("\(request.parameter("x")!)-\(request.parameter("y")!)") }
            let files = try await router.handle(HTTPRequest(method: .get, path: "/files/x/y%2Fz"))
            #expect(String(decoding: files.body, as: UTF8.self) == "x/y/z")
            let pair = try await router.handle(HTTPRequest(method: .head, path: "/a/1/b/2/"))
            #expect(String(decoding: pair.body, as: UTF8.self) == "1-2")
            await #expect(throws: HTTPError.notFound("No resource at this path.")) {
                _ = try await router.handle(HTTPRequest(method: .get, path: "/a/1/b"))
            }
        }

        /// Records each request's matched route and wraps the answer, to show the order layers run in.
        struct Tagging: RouterMiddleware {
            let tag: String
            let seen: LockedValue<[String]>

            func respond(
                to request: HTTPRequest, route: MatchedRoute, next: HTTPHandler
            ) async throws
                -> HTTPResponse
            {
                seen.withLock { $0.append("\(tag) \(route.method.rawValue) \(route.label)") }
                let inner = try await next(request)
                return .text("\(tag)(" + String(decoding: inner.body, as: UTF8.self) + ")")
            }
        }

        @Test("middleware runs outermost first around every route and sees its pattern, never the path")
        func middlewareSeesTheMatchedRoute() async throws {
            let seen = LockedValue<[String]>([])
            var router = Router()
            router.get("/v1/messages/:id") { request in .text(request.parameter("id") ?? "") }
            router.get("/files/*rest") { _ in .text("file") }
            router.use(Tagging(tag: "outer", seen: seen))
            router.use(Tagging(tag: "inner", seen: seen))
            let message = try await router.handle(HTTPRequest(method: .get, path: "/v1/messages/m-42"))
            #expect(String(decoding: message.body, as: UTF8.self) == "outer(inner(m-42))")
            _ = try await router.handle(HTTPRequest(method: .head, path: "/files/a/b"))
            #expect(
                seen.withLock { $0 } == [
                    "outer GET /v1/messages/{id}", "inner GET /v1/messages/{id}", "outer GET /files/{rest}",
                    "inner GET /files/{rest}",
                ])
            // A request no route matches reaches no middleware.
            await #expect(throws: HTTPError.self) {
                _ = try await router.handle(HTTPRequest(method: .get, path: "/nowhere"))
            }
            #expect(seen.withLock { $0.count } == 4)
        }

        @Test("headers are case-insensitive and keep order")
        func headers() {
            var headers: HTTPHeaders = ["Content-Type": "application/json"]
            headers.add(name: "Set-Cookie", value: "a=1")
            headers.add(name: "set-cookie", value: "b=2")
            #expect(headers["content-type"] == "application/json")
            #expect(headers.values(for: "SET-COOKIE") == ["a=1", "b=2"])
            headers["CONTENT-TYPE"] = "text/plain"
            #expect(headers.values(for: "Content-Type") == ["text/plain"])
            headers["set-cookie"] = nil
            #expect(headers.count == 1)
        }

        @Test("query strings decode percent escapes and plus signs")
        func queryParsing() {
            let request = HTTPRequest(method: .get, path: "/", queryString: "a=1&b=x+y&c=%E2%9C%93&a=2&flag&bad=%zz")
            #expect(request.query("a") == "1")
            #expect(request.queryValues("a") == ["1", "2"])
            #expect(request.query("b") == "x y")
            #expect(request.query("c") == "✓")
            #expect(request.query("flag") == "")
            #expect(request.query("bad") == "%zz")
            #expect(request.queryParameters["a"] == "1")
        }

        @Test("bearer tokens and HTTPError JSON bodies")
        func bearerAndErrorBody() throws {
            let request = HTTPRequest(method: .get, path: "/", headers: ["authorization": "Bearer abc.def"])
            #expect(request.bearerToken == "abc.def")
            let response = HTTPError(.conflict, code: "conflict", message: "Already there.").response
            #expect(response.status == .conflict)
            #expect(response.headers["Content-Type"] == "application/json")
            let object = try JSONSerialization.jsonObject(with: response.body) as? [String: String]
            #expect(object == ["error": "conflict", "message": "Already there."])
        }
    }
}

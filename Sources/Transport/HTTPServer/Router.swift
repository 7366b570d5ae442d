/// A request handler: turns a request into a response or throws (`HTTPError` for a chosen status,
/// anything else for a 500).
public typealias HTTPHandler = @Sendable (HTTPRequest) async throws -> HTTPResponse

/// How an inline handler answers: once, from any thread, with a response or an error (`HTTPError` for a chosen
/// status, anything else for a 500).
public typealias HTTPResponder = @Sendable (Result<HTTPResponse, any Error>) -> Void

/// A handler that runs on the server's own thread as the request arrives, and answers through its responder: at once,
/// or later from the thread its work was handed to. For an endpoint whose work happens on a thread of its own (the
/// store's writer, a PostgreSQL connection's thread): it saves the two hops through Swift's cooperative pool an async
/// handler costs, there and back. It must not block or compute for long, since the thread serves other connections.
public typealias HTTPInlineHandler = @Sendable (HTTPRequest, @escaping HTTPResponder) -> Void

/// The route a request matched, as middleware sees it.
public struct MatchedRoute: Sendable, Equatable {
    /// The route's method (`GET` for a `HEAD` answered by a `GET` route).
    public let method: HTTPMethod
    /// The pattern as registered: `/v1/messages/:id`.
    public let pattern: String

    /// The pattern with each capture written `{name}` (`/v1/messages/{id}`): a label for metrics and logs that
    /// holds nothing of the request's own path.
    public var label: String {
        "/"
            + pattern.split(separator: "/", omittingEmptySubsequences: true).map { segment in
                segment.hasPrefix(":") || segment.hasPrefix("*") ? "{\(segment.dropFirst())}" : String(segment)
            }.joined(separator: "/")
    }
}

/// Code that runs around the handler of every routed request, told which route it matched: metrics labelled by
/// the route's pattern, error mapping, limits. A request that matches no route (404, 405) reaches none.
public protocol RouterMiddleware: Sendable {
    /// Answers `request` for `route`, calling `next` (the inner middleware, then the route's handler) or not.
    func respond(to request: HTTPRequest, route: MatchedRoute, next: HTTPHandler) async throws -> HTTPResponse

    /// The same around an inline route (``Router/add(_:_:inline:)``), on the server's thread: answers through
    /// `respond`, calling `next` or not. Without it, the middleware's async form runs in a task, and the route loses
    /// what being inline saves.
    func respond(
        to request: HTTPRequest, route: MatchedRoute, inline next: @escaping HTTPInlineHandler,
        respond: @escaping HTTPResponder)
}

extension RouterMiddleware {
    /// Runs the middleware's async form in a task, around `next` awaited.
    public func respond(
        to request: HTTPRequest, route: MatchedRoute, inline next: @escaping HTTPInlineHandler,
        respond: @escaping HTTPResponder
    ) {
        Router.answerInTask(request, respond: respond) { request in
            try await self.respond(to: request, route: route, next: Router.awaiting(next))
        }
    }
}

/// Dispatches requests by method and path pattern, through the middleware added with ``use(_:)``.
///
/// Patterns are `/`-separated; a segment `:name` captures one path segment into
/// `HTTPRequest.pathParameters["name"]` (percent-decoded) and a final `*name` captures the rest.
/// Literal segments win over captures. An unknown path answers 404 `notFound`; a known path with
/// another method answers 405 `methodNotAllowed` with an `Allow` header. `HEAD` falls back to `GET`.
public struct Router: Sendable {
    private enum Segment: Sendable, Equatable {
        case literal(String)
        case parameter(String)
        case rest(String)
    }

    private enum Handler: Sendable {
        case async(HTTPHandler)
        case inline(HTTPInlineHandler)
    }

    private struct Route: Sendable {
        let method: HTTPMethod
        let pattern: String
        let segments: [Segment]
        let handler: Handler
    }

    private var routes: [Route] = []
    /// Outermost first.
    private var middleware: [any RouterMiddleware] = []

    /// Creates an empty router.
    public init() {}

    /// Adds middleware around every route's handler, inside the middleware added before it.
    public mutating func use(_ middleware: any RouterMiddleware) { self.middleware.append(middleware) }

    /// Adds a route for `method` and `pattern`.
    public mutating func add(_ method: HTTPMethod, _ pattern: String, handler: @escaping HTTPHandler) {
        add(method, pattern, .async(handler))
    }

    /// Adds a route whose handler runs inline, on the server's thread (see ``HTTPInlineHandler``).
    public mutating func add(_ method: HTTPMethod, _ pattern: String, inline handler: @escaping HTTPInlineHandler) {
        add(method, pattern, .inline(handler))
    }

    private mutating func add(_ method: HTTPMethod, _ pattern: String, _ handler: Handler) {
        let segments = Self.split(pattern).map { part -> Segment in
            if part.hasPrefix(":") { return .parameter(String(part.dropFirst())) }
            if part.hasPrefix("*") { return .rest(String(part.dropFirst())) }
            return .literal(part)
        }
        routes.append(Route(method: method, pattern: pattern, segments: segments, handler: handler))
    }

    /// Adds a `GET` route.
    public mutating func get(_ pattern: String, handler: @escaping HTTPHandler) { add(.get, pattern, handler: handler) }
    /// Adds a `POST` route.
    public mutating func post(_ pattern: String, handler: @escaping HTTPHandler) {
        add(.post, pattern, handler: handler)
    }
    /// Adds a `PUT` route.
    public mutating func put(_ pattern: String, handler: @escaping HTTPHandler) { add(.put, pattern, handler: handler) }
    /// Adds a `PATCH` route.
    public mutating func patch(_ pattern: String, handler: @escaping HTTPHandler) {
        add(.patch, pattern, handler: handler)
    }
    /// Adds a `DELETE` route.
    public mutating func delete(_ pattern: String, handler: @escaping HTTPHandler) {
        add(.delete, pattern, handler: handler)
    }

    /// Runs the handler of the route matching `request`, or throws the 404/405 `HTTPError`.
    public func handle(_ request: HTTPRequest) async throws -> HTTPResponse {
        let (route, routed) = try self.route(request)
        switch route.handler {
        case .async(let handler): return try await chain(handler, route: route)(routed)
        case .inline(let handler): return try await Self.awaiting(chain(handler, route: route))(routed)
        }
    }

    /// Answers `request` through `respond`: an inline route's handler (and its middleware) at once, on the calling
    /// thread; any other route's in a task, which is returned (for cancelling it when the request times out).
    /// A request that matches no route gets the 404/405 `HTTPError` at once.
    public func dispatch(_ request: HTTPRequest, respond: @escaping HTTPResponder) -> Task<Void, Never>? {
        let route: Route
        let routed: HTTPRequest
        do {
            (route, routed) = try self.route(request)
        } catch {
            respond(.failure(error))
            return nil
        }
        switch route.handler {
        case .async(let handler):
            return Self.answerInTask(routed, respond: respond, with: chain(handler, route: route))
        case .inline(let handler):
            chain(handler, route: route)(routed, respond)
            return nil
        }
    }

    /// Runs `handler` for `request` in a task and answers through `respond` with its response or its error: an async
    /// handler where an inline one is expected (the server's plain handler, a large body, middleware without an
    /// inline form). Returns the task, for cancelling it.
    @discardableResult
    public static func answerInTask(
        _ request: HTTPRequest, respond: @escaping HTTPResponder, with handler: @escaping HTTPHandler
    ) -> Task<Void, Never> {
        Task {
            do {
                respond(.success(try await handler(request)))
            } catch {
                respond(.failure(error))
            }
        }
    }

    /// An inline handler as an async one, for callers that await (``handle(_:)``, middleware without an inline form).
    static func awaiting(_ handler: @escaping HTTPInlineHandler) -> HTTPHandler {
        { request in
            try await withCheckedThrowingContinuation { continuation in
                handler(request) { continuation.resume(with: $0) }
            }
        }
    }

    /// `handler` inside the middleware, outermost first.
    private func chain(_ handler: @escaping HTTPHandler, route: Route) -> HTTPHandler {
        wrap(handler, route: route) { layer, matched, inner in
            { @Sendable request in try await layer.respond(to: request, route: matched, next: inner) }
        }
    }

    /// ``chain(_:route:)`` for an inline handler, through each middleware's inline form.
    private func chain(_ handler: @escaping HTTPInlineHandler, route: Route) -> HTTPInlineHandler {
        wrap(handler, route: route) { layer, matched, inner in
            { @Sendable request, respond in
                layer.respond(to: request, route: matched, inline: inner, respond: respond)
            }
        }
    }

    /// `handler` wrapped in each middleware layer by `layer`, innermost first, so the first added runs first.
    private func wrap<Handler>(
        _ handler: Handler, route: Route, _ layer: (any RouterMiddleware, MatchedRoute, Handler) -> Handler
    ) -> Handler {
        let matched = MatchedRoute(method: route.method, pattern: route.pattern)
        return middleware.reversed().reduce(handler) { inner, middleware in layer(middleware, matched, inner) }
    }

    /// The route matching `request` and the request with its path parameters, or the 404/405 `HTTPError`.
    private func route(_ request: HTTPRequest) throws -> (Route, HTTPRequest) {
        // Each segment decoded once, then compared with every route's.
        let path = Self.split(request.path).map { HTTPRequest.percentDecode($0, plusAsSpace: false) }
        var best: (route: Route, parameters: [String: String], score: Int)?
        var allowed: Set<String> = []
        for route in routes {
            guard let (parameters, score) = Self.match(route.segments, path) else { continue }
            allowed.insert(route.method.rawValue)
            let methodMatches =
                route.method == request.method || (request.method == .head && route.method == .get)
            guard methodMatches else { continue }
            // Prefer literal segments, then an exact method over the HEAD→GET fallback.
            let rank = score * 2 + (route.method == request.method ? 1 : 0)
            if best == nil || rank > best!.score { best = (route, parameters, rank) }
        }
        guard let best else {
            if allowed.isEmpty { throw HTTPError.notFound("No resource at this path.") }
            if allowed.contains("GET") { allowed.insert("HEAD") }
            let allow = allowed.sorted().joined(separator: ", ")
            throw HTTPError(
                .methodNotAllowed, code: "methodNotAllowed",
                message: "\(Self.describe(request.method)) is not allowed here; allowed: \(allow).",
                headers: ["Allow": allow])
        }
        var routed = request
        routed.pathParameters = best.parameters
        return (best.route, routed)
    }

    /// The router as a handler value, for `HTTPServer(configuration:handler:)`.
    public var handler: HTTPHandler { { request in try await handle(request) } }

    private static func split(_ path: String) -> [String] {
        path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
    }

    /// `path` holds the request's segments, percent-decoded.
    private static func match(_ segments: [Segment], _ path: [String]) -> ([String: String], Int)? {
        var parameters: [String: String] = [:]
        var score = 0
        for (index, segment) in segments.enumerated() {
            switch segment {
            case .rest(let name):
                parameters[name] = path[min(index, path.count)...].joined(separator: "/")
                return (parameters, score)
            case .literal(let literal):
                guard index < path.count, path[index] == literal else { return nil }
                score += 1
            case .parameter(let name):
                guard index < path.count else { return nil }
                parameters[name] = path[index]
            }
        }
        return segments.count == path.count ? (parameters, score) : nil
    }

    /// A request's method for an error message: a standard method by name, anything else (which could be bytes of
    /// another request's body) not repeated.
    static func describe(_ method: HTTPMethod) -> String {
        let standard: Set = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT"]
        return standard.contains(method.rawValue) ? "Method \(method.rawValue)" : "This method"
    }
}

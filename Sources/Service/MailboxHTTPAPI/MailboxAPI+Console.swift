import Console
import Foundation
import HTTPServer
import WebClient

extension MailboxAPI {
    /// The console's headers: its own files only (no inline script or style, no other origin), no framing, no
    /// sniffing, no referrer, nothing cached.
    static let consoleHeaders: [(String, String)] = [
        (
            "Content-Security-Policy",
            "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
                + "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
        ),
        ("X-Content-Type-Options", "nosniff"),
        ("Referrer-Policy", "no-referrer"),
        ("Cache-Control", "no-store"),
    ]

    /// The console's routes, on when a console token is configured.
    func addConsoleRoutes(to router: inout Router) {
        router.get("/console", handler: consolePage)
        router.post("/console/session", handler: consoleSignIn)
        router.get("/console/snapshot", handler: consoleOperator(consoleSnapshot))
        router.get("/console/events", handler: consoleOperator(consoleEvents))
        router.get("/console/files/:file", handler: consoleFile)
    }

    /// The console's feed and access, or 404 when it is off.
    func consoleParts() throws -> (ConsoleFeed, ConsoleAccess) {
        guard let feed = console, let access = consoleAccess else {
            throw HTTPError(.notFound, code: "consoleDisabled", message: "This server has no console.")
        }
        return (feed, access)
    }

    /// A request from another site's page (a form, a script) is refused: by `Sec-Fetch-Site` where the browser
    /// sends it, by `Origin` (which must be this host) where it is given.
    func refuseCrossSite(_ request: HTTPRequest) throws {
        if let site = request.headers["Sec-Fetch-Site"], site != "same-origin", site != "none" {
            throw HTTPError(.forbidden, code: "crossOrigin", message: "The console answers its own pages only.")
        }
        if let origin = request.headers["Origin"] {
            let host = request.headers["Host"] ?? ""
            guard origin == "https://" + host || origin == "http://" + host else {
                throw HTTPError(.forbidden, code: "crossOrigin", message: "The console answers its own pages only.")
            }
        }
    }

    func consoleResponse(_ name: String) throws -> HTTPResponse {
        guard let file = ConsoleFiles.files[name] else { throw HTTPError.notFound("No such file.") }
        var response = HTTPResponse(status: .ok, body: Data(file.bytes))
        response.headers.replaceOrAdd(name: "Content-Type", value: file.contentType)
        for (header, value) in Self.consoleHeaders { response.headers.replaceOrAdd(name: header, value: value) }
        return response
    }

    /// `GET /console`: the console for a signed-in operator, else the sign-in form.
    func consolePage(_ request: HTTPRequest) async throws -> HTTPResponse {
        let (_, access) = try consoleParts()
        let signedIn = request.cookie(ConsoleAccess.cookieName).map {
            access.verifies(cookie: $0, now: store.currentTime)
        }
        return try consoleResponse(signedIn == true ? "console.html" : "console-signin.html")
    }

    /// `GET /console/files/{file}`: the console's script and style (public: they hold no data).
    func consoleFile(_ request: HTTPRequest) async throws -> HTTPResponse {
        _ = try consoleParts()
        let name = request.parameter("file") ?? ""
        guard name != "console.html", name != "console-signin.html" else { throw HTTPError.notFound("No such file.") }
        return try consoleResponse(name)
    }

    /// `POST /console/session` with the form field `token`: 303 to `/console` with the console cookie. A wrong
    /// token is 401 and counted like a failed sign-in (per address, throttled the same way).
    func consoleSignIn(_ request: HTTPRequest) async throws -> HTTPResponse {
        let (_, access) = try consoleParts()
        try refuseCrossSite(request)
        let token = request.formFields.first { $0.name == "token" }?.value ?? ""
        guard token.utf8.count <= 256 else { throw HTTPError.invalidRequest("The token is too long.") }
        let username = "\u{1}console"
        switch try await throttle.decide(username: username, address: request.remoteAddress) {
        case .refuse(let wait):
            throw HTTPError(
                .tooManyRequests, code: "tooManyAttempts", message: "Too many wrong console tokens; try again later.",
                headers: ["Retry-After": String(wait)])
        case .proceed(let delay) where delay > 0:
            try await Task.sleep(for: .seconds(delay))
        case .proceed:
            break
        }
        guard access.accepts(token: token) else {
            try await throttle.recordFailure(username: username, address: request.remoteAddress)
            throw HTTPError(.unauthorized, code: "invalidToken", message: "That is not the console token.")
        }
        try await throttle.recordSuccess(username: username, address: request.remoteAddress)
        var response = HTTPResponse(status: .seeOther)
        response.headers.replaceOrAdd(name: "Location", value: "/console")
        response.headers.replaceOrAdd(
            name: "Set-Cookie",
            value: "\(ConsoleAccess.cookieName)=\(access.cookie(now: store.currentTime)); Path=/console; "
                + "Max-Age=\(Int(ConsoleAccess.lifetime)); Secure; HttpOnly; SameSite=Strict")
        response.headers.replaceOrAdd(name: "Cache-Control", value: "no-store")
        return response
    }

    /// A console handler for a signed-in operator only: the cookie, from this site.
    func consoleOperator(_ handler: @escaping HTTPHandler) -> HTTPHandler {
        { request in
            let (_, access) = try consoleParts()
            try refuseCrossSite(request)
            guard let cookie = request.cookie(ConsoleAccess.cookieName),
                access.verifies(cookie: cookie, now: store.currentTime)
            else { throw HTTPError.unauthorized("Sign in to the console first (POST /console/session).") }
            var response = try await handler(request)
            response.headers.replaceOrAdd(name: "Cache-Control", value: "no-store")
            return response
        }
    }

    /// `GET /console/snapshot`: what the console paints first.
    func consoleSnapshot(_ request: HTTPRequest) async throws -> HTTPResponse {
        let (feed, _) = try consoleParts()
        var response = HTTPResponse(status: .ok, body: try await feed.snapshotJSON())
        response.headers.replaceOrAdd(name: "Content-Type", value: "application/json")
        return response
    }

    /// `GET /console/events`: every event after `Last-Event-ID` (a reconnect) or `?after=N` (after a snapshot),
    /// then each new one; `event: reset` when some of those are no longer kept.
    func consoleEvents(_ request: HTTPRequest) async throws -> HTTPResponse {
        let (feed, _) = try consoleParts()
        let given = request.headers["Last-Event-ID"] ?? request.query("after") ?? "0"
        guard given.utf8.count <= 18, let after = Int(given), after >= 0 else {
            throw HTTPError(.badRequest, code: "invalidArgument", message: "'after' must be an event id.")
        }
        guard let stream = feed.openStream(after: after) else {
            throw HTTPError(
                .serviceUnavailable, code: "tooManyConsoles", message: "Too many consoles are open.",
                headers: ["Retry-After": "10"])
        }
        return .eventStream(stream)
    }
}

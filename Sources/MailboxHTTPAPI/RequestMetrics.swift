import Durations
import HTTPServer
import MailboxStore
import ServiceMetrics

/// Counts and times every routed request by its route's pattern (`/v1/messages/{id}`, never the path itself) and
/// its status: `mailboxd_http_requests_total` and `mailboxd_http_request_duration_seconds`.
struct RequestMetrics: RouterMiddleware {
    let metrics: Metrics

    func respond(to request: HTTPRequest, route: MatchedRoute, next: HTTPHandler) async throws -> HTTPResponse {
        let start = ContinuousClock.now
        var status = 500
        defer {
            let label = route.label
            metrics.increment(
                "mailboxd_http_requests_total", labels: "route=\"\(label)\",status=\"\(status)\"",
                help: "HTTP requests by route and status.")
            metrics.observe(
                "mailboxd_http_request_duration_seconds", labels: "route=\"\(label)\"",
                seconds: (ContinuousClock.now - start).seconds, help: "HTTP request latency by route.")
        }
        do {
            let response = try await next(request)
            status = response.status.rawValue
            return response
        } catch let error as HTTPError {
            status = error.status.rawValue
            throw error
        }
    }
}

/// Turns a store error a handler let through into its HTTP answer (``MailboxAPI/httpError(for:)``): a missing
/// message is a 404, storage that cannot be reached a 503, and so on; anything else stays a 500.
struct StoreErrors: RouterMiddleware {
    func respond(to request: HTTPRequest, route: MatchedRoute, next: HTTPHandler) async throws -> HTTPResponse {
        do {
            return try await next(request)
        } catch let error as MailboxStoreError {
            throw MailboxAPI.httpError(for: error)
        }
    }
}

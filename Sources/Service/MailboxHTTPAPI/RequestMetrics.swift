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
        let result: Result<HTTPResponse, any Error>
        do {
            result = .success(try await next(request))
        } catch {
            result = .failure(error)
        }
        record(result, route: route, since: start)
        return try result.get()
    }

    func respond(
        to request: HTTPRequest, route: MatchedRoute, inline next: @escaping HTTPInlineHandler,
        respond: @escaping HTTPResponder
    ) {
        let start = ContinuousClock.now
        next(request) { result in
            record(result, route: route, since: start)
            respond(result)
        }
    }

    /// Counts the request by route and status (a 500 for an error that is no `HTTPError`) and observes its latency.
    private func record(
        _ result: Result<HTTPResponse, any Error>, route: MatchedRoute, since start: ContinuousClock.Instant
    ) {
        let status =
            switch result {
            case .success(let response): response.status.rawValue
            case .failure(let error as HTTPError): error.status.rawValue
            case .failure: 500
            }
        let label = route.label
        metrics.increment(
            "mailboxd_http_requests_total", labels: "route=\"\(label)\",status=\"\(status)\"",
            help: "HTTP requests by route and status.")
        metrics.observe(
            "mailboxd_http_request_duration_seconds", labels: "route=\"\(label)\"",
            seconds: (ContinuousClock.now - start).seconds, help: "HTTP request latency by route.")
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

    func respond(
        to request: HTTPRequest, route: MatchedRoute, inline next: @escaping HTTPInlineHandler,
        respond: @escaping HTTPResponder
    ) {
        next(request) { result in
            respond(result.mapError { error in (error as? MailboxStoreError).map(MailboxAPI.httpError(for:)) ?? error })
        }
    }
}

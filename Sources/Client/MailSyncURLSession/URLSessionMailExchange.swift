import Foundation
import Locking
import MailSync

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// ``MailHTTPExchange`` over `URLSession`: the HTTP stack an app ships. The same source builds with Foundation on
/// Apple platforms and with FoundationNetworking (libcurl underneath) on Linux.
///
/// ```swift
/// let api = MailAPIClient(exchange: try URLSessionMailExchange(baseURL: "https://mail.example.com"))
/// try await api.login(username: "alice", password: password, deviceName: "iPhone")
/// let outcome = try await SyncEngine(transport: api, cache: cache).sync()
/// ```
///
/// **Trust.** The server's certificate is checked against the system's trust store. A development CA is trusted the
/// way each platform allows: on Apple platforms, pass its DER bytes as `pinnedCA` (the delegate evaluates the
/// server's chain against that anchor alone); on Linux, FoundationNetworking cannot be given an anchor from code,
/// so the CA goes into the system store the process sees (`/etc/ssl/certs/ca-certificates.crt`; the tests do
/// that in a private mount namespace, never for the whole machine).
///
/// Redirects are not followed (the API never redirects; a redirect is answered as its own status), each request
/// has `timeout` seconds (the event stream none: it is held open), cookies and caches are off, and cancelling the
/// calling task cancels the request.
public final class URLSessionMailExchange: MailHTTPExchange {
    /// The server's base URL without a trailing slash.
    public let baseURL: String
    private let session: URLSession
    private let router: TaskRouter
    private let timeout: TimeInterval

    /// An exchange with the server at `baseURL` (`http://` or `https://`). `pinnedCA` (DER) is used on Apple
    /// platforms only, see the type's documentation.
    public init(baseURL: String, timeout: TimeInterval = 30, pinnedCA: Data? = nil) throws {
        self.baseURL = try Self.normalizedBaseURL(baseURL)
        self.timeout = timeout
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpCookieStorage = nil
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.timeoutIntervalForRequest = timeout
        configuration.httpShouldSetCookies = false
        router = TaskRouter(pinnedCA: pinnedCA)
        session = URLSession(configuration: configuration, delegate: router, delegateQueue: nil)
    }

    deinit { session.invalidateAndCancel() }

    /// Sends the request as a data task and returns the whole response.
    public func send(_ request: MailHTTPRequest) async throws -> MailHTTPResponse {
        let task = session.dataTask(with: try urlRequest(request, streaming: false))
        let (head, body) = try await start(task)
        var data = Data()
        do {
            for try await chunk in body { data.append(chunk) }
        } catch {
            task.cancel()
            throw error
        }
        return MailHTTPResponse(status: head.status, headers: head.headers, body: data)
    }

    /// Sends the request as a data task and returns once the head arrived; the body follows as the delegate hears
    /// it.
    public func openStream(_ request: MailHTTPRequest) async throws -> MailHTTPStream {
        let task = session.dataTask(with: try urlRequest(request, streaming: true))
        let (head, body) = try await start(task)
        return MailHTTPStream(status: head.status, headers: head.headers, body: body, cancel: { task.cancel() })
    }

    /// Starts the task and returns once its response's head arrived; the body follows in the stream. Cancelling the
    /// calling task cancels the request, while waiting for the head and while reading the body.
    private func start(_ task: URLSessionDataTask) async throws -> (Head, AsyncThrowingStream<Data, any Error>) {
        let (body, sink) = AsyncThrowingStream.makeStream(of: Data.self)
        sink.onTermination = { termination in
            if case .cancelled = termination { task.cancel() }
        }
        let taskBox = UncheckedTask(task)
        return try await withTaskCancellationHandler {
            let head = try await withCheckedThrowingContinuation {
                (continuation: CheckedContinuation<Head, any Error>) in
                router.register(taskBox.task.taskIdentifier, TaskRouter.Handler(head: continuation, body: sink))
                taskBox.task.resume()
            }
            return (head, body)
        } onCancel: {
            taskBox.task.cancel()
        }
    }

    private func urlRequest(_ request: MailHTTPRequest, streaming: Bool) throws -> URLRequest {
        guard let url = URL(string: baseURL + request.path) else {
            throw MailSyncError.invalidResponse("not a URL: the server URL and a path")
        }
        var urlRequest = URLRequest(url: url)
        urlRequest.httpMethod = request.method
        urlRequest.httpBody = request.body
        // A held stream has no deadline of its own: it ends when the server or the caller ends it.
        urlRequest.timeoutInterval = streaming ? 7 * 24 * 3600 : timeout
        for field in request.headers { urlRequest.addValue(field.value, forHTTPHeaderField: field.name) }
        return urlRequest
    }

    /// A response's status and header fields by lowercased name.
    struct Head: Sendable {
        var status: Int
        var headers: [String: String]
    }
}

/// `URLSessionDataTask` is not `Sendable` on every platform; this one is only resumed and cancelled, which the
/// class allows from any thread.
private struct UncheckedTask: @unchecked Sendable {
    let task: URLSessionDataTask
    init(_ task: URLSessionDataTask) { self.task = task }
}

/// The session's delegate: hands each task's response head, body chunks and end to whoever started it, refuses
/// redirects, and on Apple platforms evaluates the server's chain against a pinned CA when one is given.
private final class TaskRouter: NSObject, URLSessionDataDelegate, Sendable {
    struct Handler: Sendable {
        var head: CheckedContinuation<URLSessionMailExchange.Head, any Error>?
        var body: AsyncThrowingStream<Data, any Error>.Continuation
    }

    private let handlers = LockedValue<[Int: Handler]>([:])
    private let pinnedCA: Data?

    init(pinnedCA: Data?) {
        self.pinnedCA = pinnedCA
    }

    func register(_ identifier: Int, _ handler: Handler) {
        handlers.withLock { $0[identifier] = handler }
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
    ) {
        let head = handlers.withLock { handlers -> CheckedContinuation<URLSessionMailExchange.Head, any Error>? in
            let head = handlers[dataTask.taskIdentifier]?.head
            handlers[dataTask.taskIdentifier]?.head = nil
            return head
        }
        guard let http = response as? HTTPURLResponse else {
            head?.resume(throwing: MailSyncError.invalidResponse("not an HTTP response"))
            completionHandler(.cancel)
            return
        }
        var fields: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            if let name = name as? String, let value = value as? String { fields[name.lowercased()] = value }
        }
        head?.resume(returning: URLSessionMailExchange.Head(status: http.statusCode, headers: fields))
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        _ = handlers.withLock { $0[dataTask.taskIdentifier] }?.body.yield(data)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        guard let handler = handlers.withLock({ $0.removeValue(forKey: task.taskIdentifier) }) else { return }
        let failure = error.map(Self.mailSyncError)
        if let failure {
            handler.head?.resume(throwing: failure)
            handler.body.finish(throwing: failure)
        } else {
            // A response with no head cannot complete without an error; finish the waiter all the same.
            handler.head?.resume(throwing: MailSyncError.invalidResponse("the response ended before its head"))
            handler.body.finish()
        }
    }

    /// Redirects are answered as they are, never followed.
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }

    /// A 401 with a `Basic` challenge (JMAP's answers carry one beside `Bearer`) is answered as the response it is:
    /// this client signs in with its bearer token only, never with a password URLSession would send by itself.
    func urlSession(
        _ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        #if canImport(Security)
            if challenge.protectionSpace.authenticationMethod == NSURLAuthenticationMethodServerTrust {
                return evaluateServerTrust(challenge, completionHandler)
            }
        #endif
        completionHandler(.rejectProtectionSpace, nil)
    }

    #if canImport(Security)
        /// With a pinned CA, the server's chain must lead to that anchor (and no other); without one, the system's
        /// evaluation applies.
        func urlSession(
            _ session: URLSession, didReceive challenge: URLAuthenticationChallenge,
            completionHandler: @escaping (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
        ) {
            evaluateServerTrust(challenge, completionHandler)
        }

        private func evaluateServerTrust(
            _ challenge: URLAuthenticationChallenge,
            _ completionHandler: @escaping (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
        ) {
            guard challenge.protectionSpace.authenticationMethod == NSURLAuthenticationMethodServerTrust,
                let trust = challenge.protectionSpace.serverTrust, let pinnedCA,
                let anchor = SecCertificateCreateWithData(nil, pinnedCA as CFData)
            else { return completionHandler(.performDefaultHandling, nil) }
            SecTrustSetAnchorCertificates(trust, [anchor] as CFArray)
            SecTrustSetAnchorCertificatesOnly(trust, true)
            guard SecTrustEvaluateWithError(trust, nil) else {
                return completionHandler(.cancelAuthenticationChallenge, nil)
            }
            completionHandler(.useCredential, URLCredential(trust: trust))
        }
    #endif

    /// A cancelled request is the caller's cancellation; any other failure is the network's, named without the URL.
    static func mailSyncError(_ error: any Error) -> any Error {
        let nsError = error as NSError
        if nsError.domain == NSURLErrorDomain, nsError.code == NSURLErrorCancelled { return CancellationError() }
        let reason: String
        switch nsError.code {
        case NSURLErrorTimedOut: reason = "the request timed out"
        case NSURLErrorCannotConnectToHost, NSURLErrorCannotFindHost: reason = "cannot connect to the server"
        case NSURLErrorNetworkConnectionLost: reason = "the connection was lost"
        case NSURLErrorServerCertificateUntrusted, NSURLErrorServerCertificateHasUnknownRoot,
            NSURLErrorServerCertificateHasBadDate, NSURLErrorServerCertificateNotYetValid,
            NSURLErrorSecureConnectionFailed:
            reason = "the server's certificate is not trusted (TLS)"
        default: reason = "URLSession error \(nsError.code)"
        }
        return MailSyncError.network(reason)
    }
}

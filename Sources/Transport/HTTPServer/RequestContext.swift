import CMicroHTTPD
import Foundation
import Locking

/// Per-request state, created when libmicrohttpd parses the request line (`con_cls`) and released in
/// the request-completed callback.
final class RequestContext: Sendable {
    enum Phase: Sendable {
        /// Headers parsed, access handler not called yet.
        case new
        /// Collecting the body.
        case receiving
        /// The handler runs; the connection is suspended until `complete(with:)` resumes it.
        case dispatched
        /// A response was queued.
        case responded
    }

    struct State: ~Copyable {
        var phase = Phase.new
        var body = Data()
        var bodyTooLarge = false
        /// Body bytes received so far, kept or not.
        var received = 0
        var method = ""
        var remoteAddress = ""
        var connection: MHDConnection?
        /// The handler's result, waiting for the resumed connection to queue it.
        var response: HTTPResponse?
        /// A result was delivered (or the connection ended): no more resumes.
        var completed = false
        /// The connection is finished; MHD no longer knows this request.
        var finished = false
        var status = 0
        /// The task running the handler, cancelled when the request times out.
        var handlerTask: Task<Void, Never>?
    }

    /// The path as sent (percent-encoded, no query string).
    let path: String
    /// The raw query string.
    let query: String
    /// When the request line arrived.
    let started = ContinuousClock.now
    // All mutable fields are guarded by this mutex. `MHD_resume_connection` is called while it is
    // held, so a resume never races the request-completed callback (which takes it too).
    let state = LockedValue(State())

    init(rawURI: String) {
        let target = rawURI.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        if let mark = target.firstIndex(of: "?") {
            path = String(target[..<mark])
            query = String(target[target.index(after: mark)...])
        } else {
            path = String(target)
            query = ""
        }
    }

    /// Delivers the handler's result and resumes the suspended connection, once.
    /// Returns `false` if a result was already delivered or the connection is gone.
    @discardableResult
    func complete(with response: HTTPResponse) -> Bool {
        state.withLock { state -> Bool in
            guard state.phase == .dispatched, !state.completed, !state.finished else { return false }
            state.completed = true
            state.response = response
            if let connection = state.connection { MHD_resume_connection(connection.pointer) }
            return true
        }
    }

    /// Marks the request finished; returns what the access log needs.
    func finish() -> (method: String, status: Int, remoteAddress: String) {
        state.withLock { state in
            state.finished = true
            state.completed = true
            state.connection = nil
            state.body = Data()
            state.handlerTask = nil
            return (state.method, state.status, state.remoteAddress)
        }
    }
}

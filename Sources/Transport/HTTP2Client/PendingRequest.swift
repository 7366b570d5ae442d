import ConnectionLoop
import Durations
import Foundation
import HTTP2Support
import Synchronization

/// One request on its way through the I/O thread, and the response being assembled for it.
///
/// Created by the calling task, which sets `continuation` before handing the request to the loop through the
/// loop's inbox mutex; from then on every stored property is touched only by the I/O thread. `cancelled` is
/// the one field other threads write (atomically).
final class PendingRequest: @unchecked Sendable {  // see above: caller -> inbox mutex -> I/O thread confinement
    typealias Outcome = Result<HTTP2Client.Response, HTTPClientError>

    let request: HTTP2Client.Request
    let timeoutNanoseconds: UInt64
    /// Set by the cancellation handler; the loop checks it when the request arrives.
    let cancelled = Atomic<Bool>(false)
    var continuation: UnsafeContinuation<Outcome, Never>?
    /// Monotonic deadline, set when the loop admits the request.
    var deadline: UInt64 = 0
    /// Attempts so far (a request refused unprocessed by GOAWAY gets a second one).
    var attempts = 0
    var streamID: Int32 = -1
    /// Request body bytes already handed to nghttp2.
    var bodyOffset = 0
    var status = 0
    var headers: [HTTPField] = []
    var headerBytes = 0
    var body: [UInt8] = []
    /// Set when the stream must end in an error whatever the server does next.
    var failure: HTTPClientError?

    init(request: HTTP2Client.Request, timeout: Duration) {
        self.request = request
        timeoutNanoseconds = timeout.nanosecondsClamped
    }

    /// Whether the caller is still waiting.
    var isFinished: Bool { continuation == nil }

    /// Resumes the caller once; later calls do nothing.
    func finish(_ outcome: Outcome) {
        guard let continuation else { return }
        self.continuation = nil
        continuation.resume(returning: outcome)
    }

    /// Forgets the previous attempt's response so the request can be sent again.
    func resetForRetry() {
        streamID = -1
        bodyOffset = 0
        status = 0
        headers = []
        headerBytes = 0
        body = []
        failure = nil
    }
}

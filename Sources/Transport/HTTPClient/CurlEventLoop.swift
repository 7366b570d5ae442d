import CCurl
import Foundation
import Locking
import Synchronization

/// The I/O thread of one ``HTTPClient``: owns the libcurl multi handle and drives every transfer.
///
/// Other threads talk to it only through `inbox` (a `LockedValue`) followed by `curl_multi_wakeup`, which libcurl
/// documents as callable from any thread. `active` and the easy handles in it are touched only by the I/O
/// thread (as is `priorKnowledge`), and `multi` is cleaned up in `deinit`, after the thread has ended.
final class CurlEventLoop: @unchecked Sendable {
    private struct Inbox {
        var added: [Transfer] = []
        var cancelled: [Transfer] = []
        var isShutDown = false
    }

    private let multi: UnsafeMutableRawPointer
    private let inbox = LockedValue(Inbox())
    private let ioThread = LockedValue<pthread_t?>(nil)
    private let exited = DispatchGroup()
    private var active: [UnsafeMutableRawPointer: Transfer] = [:]
    private var priorKnowledge = PriorKnowledgePool<Transfer>()
    /// The number of connections opened so far by finished or cancelled transfers.
    let connectionsOpened = Atomic<Int>(0)

    init(configuration: HTTPClient.Configuration) {
        CurlGlobal.initialize()
        guard let multi = curl_multi_init() else { fatalError("curl_multi_init failed (out of memory)") }
        self.multi = multi
        let multiplex = configuration.httpVersion == .http1 ? 0 : Int(CURLPIPE_MULTIPLEX)
        _ = sfcurl_multi_setopt_long(multi, CURLMOPT_PIPELINING, multiplex)
        _ = sfcurl_multi_setopt_long(
            multi, CURLMOPT_MAX_HOST_CONNECTIONS, configuration.effectiveMaximumConnectionsPerHost)
        if let streams = configuration.maximumConcurrentStreams {
            _ = sfcurl_multi_setopt_long(multi, CURLMOPT_MAX_CONCURRENT_STREAMS, max(1, streams))
        }
    }

    deinit {
        curl_multi_cleanup(multi)
    }

    /// Starts the I/O thread. The thread keeps the loop alive until it ends.
    func start() {
        exited.enter()
        Thread.start(named: "HTTPClient I/O") { [self] in
            ioThread.withLock { $0 = pthread_self() }
            run()
            exited.leave()
        }
    }

    // MARK: - Any thread

    /// Hands `transfer` to the I/O thread, or fails it at once when it was cancelled or the loop is shut down.
    func submit(_ transfer: Transfer) {
        let outcome: (any Error)? = transfer.phase.withLock { phase in
            if phase == .cancelledBeforeSubmission { return CancellationError() }
            phase = .submitted
            // Enqueued while `phase` is held, so a cancellation is always queued after its transfer.
            return enqueue(adding: transfer) ? nil : HTTPClientError.shutdown
        }
        if let outcome { transfer.fail(outcome) }
    }

    /// Asks the I/O thread to abort `transfer`; its caller gets `CancellationError`.
    func cancel(_ transfer: Transfer) {
        transfer.phase.withLock { phase in
            switch phase {
            case .created:
                phase = .cancelledBeforeSubmission
            case .submitted:
                inbox.withLock { inbox in
                    guard !inbox.isShutDown else { return }
                    inbox.cancelled.append(transfer)
                    curl_multi_wakeup(multi)
                }
            case .cancelledBeforeSubmission:
                break
            }
        }
    }

    /// Stops the I/O thread, failing every pending transfer with ``HTTPClientError/shutdown``, and waits for
    /// the thread to end (unless called from the I/O thread itself).
    func shutdown() {
        inbox.withLock { inbox in
            guard !inbox.isShutDown else { return }
            inbox.isShutDown = true
            curl_multi_wakeup(multi)
        }
        let onIOThread = ioThread.withLock { thread in thread.map { pthread_equal($0, pthread_self()) != 0 } }
        if onIOThread != true { exited.wait() }
    }

    private func enqueue(adding transfer: Transfer) -> Bool {
        inbox.withLock { inbox in
            guard !inbox.isShutDown else { return false }
            inbox.added.append(transfer)
            curl_multi_wakeup(multi)
            return true
        }
    }

    // MARK: - I/O thread

    private func run() {
        while true {
            let (added, cancelled, isShutDown) = inbox.withLock { inbox in
                defer {
                    inbox.added.removeAll()
                    inbox.cancelled.removeAll()
                }
                return (inbox.added, inbox.cancelled, inbox.isShutDown)
            }
            for transfer in added { admit(transfer) }
            for transfer in cancelled {
                if active[transfer.easy] === transfer {
                    remove(transfer, code: nil)
                    transfer.fail(CancellationError())
                } else if priorKnowledge.removeWaiting(transfer) {
                    transfer.fail(CancellationError())
                }
            }
            if isShutDown {
                for transfer in Array(active.values) {
                    remove(transfer, code: nil)
                    transfer.fail(HTTPClientError.shutdown)
                }
                for transfer in priorKnowledge.removeAllWaiting() { transfer.fail(HTTPClientError.shutdown) }
                return
            }
            var running: Int32 = 0
            _ = curl_multi_perform(multi, &running)
            collectFinishedTransfers()
            releaseConnectedOrigins()
            _ = curl_multi_poll(multi, nil, 0, 1000, nil)
        }
    }

    private func admit(_ transfer: Transfer) {
        transfer.attempts += 1
        guard let origin = transfer.priorKnowledgeOrigin else {
            addToMulti(transfer)
            return
        }
        let decision = priorKnowledge.admit(transfer, origin: origin)
        if decision != .hold { add(transfer, decision) }
    }

    private func add(_ transfer: Transfer, _ decision: PriorKnowledgePool<Transfer>.Decision) {
        transfer.usePriorKnowledge(decision == .openWithPriorKnowledge)
        addToMulti(transfer)
    }

    private func addToMulti(_ transfer: Transfer) {
        let code = curl_multi_add_handle(multi, transfer.easy)
        guard code == CURLM_OK else {
            transfer.fail(
                HTTPClientError.curl(code: Int(code.rawValue), message: String(cString: curl_multi_strerror(code))))
            if let origin = transfer.priorKnowledgeOrigin {
                let followup = priorKnowledge.ended(
                    transfer, origin: origin, receivedHTTP2: false, openedConnection: false, mayRetry: false)
                for (next, decision) in followup.add { add(next, decision) }
            }
            return
        }
        active[transfer.easy] = transfer
    }

    private func collectFinishedTransfers() {
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(multi, &remaining) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle,
                let transfer = active[easy]
            else { continue }
            let code = message.pointee.data.result
            if remove(transfer, code: code) { continue }
            transfer.complete(with: code)
        }
    }

    /// Lets the transfers waiting for a prior-knowledge connection go once their pioneer got an HTTP/2 response.
    private func releaseConnectedOrigins() {
        for (origin, pioneer) in priorKnowledge.pioneers where pioneer.receivedHTTP2Response {
            for transfer in priorKnowledge.connected(origin: origin) { add(transfer, .reuse) }
        }
    }

    /// Takes `transfer` out of libcurl. `code` is its result when it finished, `nil` when it is aborted.
    /// Returns `true` when the transfer was admitted again for another attempt instead of being finished.
    @discardableResult
    private func remove(_ transfer: Transfer, code: CURLcode?) -> Bool {
        active[transfer.easy] = nil
        curl_multi_remove_handle(multi, transfer.easy)
        let opened = transfer.connectionsOpened()
        connectionsOpened.add(opened, ordering: .relaxed)
        guard let origin = transfer.priorKnowledgeOrigin else { return false }
        let failed = code.map { $0 != CURLE_OK } ?? false
        let followup = priorKnowledge.ended(
            transfer, origin: origin, receivedHTTP2: transfer.receivedHTTP2Response, openedConnection: opened > 0,
            mayRetry: failed && transfer.canRetry && transfer.attempts < 2)
        for (next, decision) in followup.add { add(next, decision) }
        if followup.readmit {
            transfer.resetForRetry()
            admit(transfer)
        }
        return followup.readmit
    }
}

/// Process-wide libcurl initialization, done once before the first handle is created.
enum CurlGlobal {
    private static let initialized: Bool = {
        curl_global_init(Int(CURL_GLOBAL_ALL)) == CURLE_OK
    }()

    static func initialize() {
        precondition(initialized, "curl_global_init failed")
    }
}

/// Decides, per origin, how cleartext prior-knowledge HTTP/2 transfers reach libcurl.
///
/// It works around a defect of libcurl 7.88 (Debian 12's version; curl issue 10634, fixed in 8.0): a transfer
/// that asks for HTTP/2 *with prior knowledge* and reuses an existing cleartext HTTP/2 connection fails with
/// "Error in the HTTP2 framing layer". So one transfer per origin, the pioneer, opens the connection with prior
/// knowledge; the others wait until it is known to speak HTTP/2 and then ask for plain HTTP/2, which reuses and
/// multiplexes over that connection. A reusing transfer that found the connection gone (it had to open a new one
/// and got no HTTP/2 answer) is admitted once more, as a pioneer or waiting for one.
///
/// A value type with no I/O, driven by ``CurlEventLoop`` on its I/O thread.
struct PriorKnowledgePool<Transfer: AnyObject> {
    /// How to hand a transfer to libcurl.
    enum Decision: Equatable {
        /// Add it now, asking for prior knowledge (it will open the connection).
        case openWithPriorKnowledge
        /// Add it now, asking for plain HTTP/2 (it will reuse the connection).
        case reuse
        /// Keep it until the origin's connection is known to speak HTTP/2.
        case hold
    }

    /// What to do after a transfer ended.
    struct Followup {
        /// Transfers to add now, with how.
        var add: [(Transfer, Decision)] = []
        /// Whether the ended transfer should be reset and admitted again.
        var readmit = false
    }

    private enum OriginState {
        case connecting(pioneer: Transfer)
        case established
    }

    private var origins: [String: OriginState] = [:]
    private var waiting: [String: [Transfer]] = [:]

    /// Decides how to add `transfer`, bound for `origin`.
    mutating func admit(_ transfer: Transfer, origin: String) -> Decision {
        switch origins[origin] {
        case nil:
            origins[origin] = .connecting(pioneer: transfer)
            return .openWithPriorKnowledge
        case .connecting:
            waiting[origin, default: []].append(transfer)
            return .hold
        case .established:
            return .reuse
        }
    }

    /// The pioneers still connecting, with their origins.
    var pioneers: [(origin: String, transfer: Transfer)] {
        origins.compactMap { origin, state in
            if case .connecting(let pioneer) = state { return (origin, pioneer) }
            return nil
        }
    }

    /// Records that the pioneer of `origin` received an HTTP/2 response; returns the transfers to add, reusing.
    mutating func connected(origin: String) -> [Transfer] {
        origins[origin] = .established
        return waiting.removeValue(forKey: origin) ?? []
    }

    /// Records that `transfer` left libcurl.
    ///
    /// - Parameters:
    ///   - receivedHTTP2: whether it got an HTTP/2 response head;
    ///   - openedConnection: whether it opened a connection of its own rather than reusing one;
    ///   - mayRetry: whether it failed in a way worth one more attempt (not cancelled, nothing delivered yet).
    mutating func ended(
        _ transfer: Transfer, origin: String, receivedHTTP2: Bool, openedConnection: Bool, mayRetry: Bool
    ) -> Followup {
        var followup = Followup()
        switch origins[origin] {
        case .connecting(let pioneer) where pioneer === transfer:
            if receivedHTTP2 {
                followup.add = connected(origin: origin).map { ($0, .reuse) }
            } else {
                origins[origin] = nil
                followup.add = promoteNextPioneer(origin: origin)
            }
        case .established where mayRetry && openedConnection && !receivedHTTP2:
            // The connection it was meant to reuse had gone away.
            origins[origin] = nil
            followup.readmit = true
        case .connecting where mayRetry && openedConnection && !receivedHTTP2:
            followup.readmit = true
        default:
            break
        }
        return followup
    }

    /// Removes `transfer` if it is waiting; returns whether it was.
    mutating func removeWaiting(_ transfer: Transfer) -> Bool {
        for (origin, transfers) in waiting {
            if let index = transfers.firstIndex(where: { $0 === transfer }) {
                waiting[origin]?.remove(at: index)
                return true
            }
        }
        return false
    }

    /// Removes and returns every waiting transfer.
    mutating func removeAllWaiting() -> [Transfer] {
        defer { waiting.removeAll() }
        return waiting.values.flatMap { $0 }
    }

    private mutating func promoteNextPioneer(origin: String) -> [(Transfer, Decision)] {
        guard var queue = waiting[origin], !queue.isEmpty else { return [] }
        let next = queue.removeFirst()
        waiting[origin] = queue.isEmpty ? nil : queue
        origins[origin] = .connecting(pioneer: next)
        return [(next, .openWithPriorKnowledge)]
    }
}

import CEpoll
import Durations
import Foundation
import Locking

/// Gives the heap's free pages back to the kernel once a burst of new connections is over.
///
/// Each TLS handshake allocates and frees tens of KiB (records, the certificate chain going out, the key exchange).
/// In a burst, those frees leave whole pages free inside malloc's arenas, between the few hundred bytes each
/// connection keeps; glibc returns only the top of an arena by itself, so the pages stay resident for as long as the
/// connections idle: about 2.7 KiB a held IMAP connection, measured (17.0 → 14.4 KiB resident a connection after one
/// `malloc_trim`). So the listeners count the connections they accept here, and once at least ``burst`` came and
/// none for ``quiet``, one thread of its own calls `malloc_trim(0)`, which releases the free pages of every arena.
/// An odd connection now and then costs nothing: the burst is never reached.
package final class HeapTrim: @unchecked Sendable {  // `condition` guards every stored var
    /// The one the listeners of this process report to.
    package static let shared = HeapTrim()

    /// How many connections make a burst worth trimming after.
    package let burst: Int
    /// How long no connection must arrive before the trim (nanoseconds).
    package let quiet: UInt64
    private let condition = NSCondition()
    private var opened = 0
    private var lastOpened: UInt64 = 0
    private var started = false
    private var trimCount = 0

    /// A trimmer acting after `burst` connections and `quietMilliseconds` without one.
    package init(burst: Int = 64, quietMilliseconds: Int = 500) {
        self.burst = max(1, burst)
        quiet = UInt64(max(1, quietMilliseconds)) * 1_000_000
    }

    /// How many trims ran.
    package var trims: Int {
        condition.lock()
        defer { condition.unlock() }
        return trimCount
    }

    /// Counts `count` connections just accepted (any thread; a lock and two stores).
    package func connectionsOpened(_ count: Int = 1) {
        condition.lock()
        defer { condition.unlock() }
        opened += count
        lastOpened = MonotonicTime.nanoseconds()
        guard opened >= burst else { return }
        if !started {
            started = true
            Thread.start(named: "heap-trim", stackSize: 256 << 10) { [self] in run() }
        }
        condition.signal()
    }

    private func run() {
        condition.lock()
        while true {
            while opened < burst { condition.wait() }
            let due = lastOpened &+ quiet
            let now = MonotonicTime.nanoseconds()
            if now < due {
                _ = condition.wait(until: Date(timeIntervalSinceNow: Double(due - now) / 1e9))
                continue
            }
            opened = 0
            condition.unlock()
            _ = malloc_trim(0)
            condition.lock()
            trimCount += 1
        }
    }
}

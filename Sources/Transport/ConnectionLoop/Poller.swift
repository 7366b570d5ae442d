import CEpoll
import Foundation

/// Why a ``Poller`` could not be made.
package struct PollerSetupError: Error, Sendable {
    /// The failed call and its `strerror`.
    package var reason: String
}

/// One epoll set and the eventfd that wakes it (`sys/epoll.h` comes through CEpoll): the readiness core under every event loop (`ConnectionLoop`, HTTP/2's
/// `EventLoop` and `ClientLoop`). The loop registers each descriptor with a 64-bit tag of its own choice
/// and after ``wait(timeoutMilliseconds:)`` ``ready(_:)`` hands back the tags that are ready, with their events;
/// the eventfd is registered under ``wakeTag``.
///
/// Thread-safety: ``wake()`` may be called from any thread that holds the poller: both descriptors are closed only
/// when it goes, so a wake never writes to a closed (or reused) descriptor, and a loop's posters need not wake it
/// under their inbox's lock (where the woken loop would wait for them). Everything else is called on the loop's thread
/// only.
package final class Poller: @unchecked Sendable {  // see above: the descriptors live as long as the poller
    /// The tag the wake-up eventfd is registered under.
    package static let wakeTag = UInt64.max

    private let epollFD: Int32
    private let wakeFD: Int32
    private var events: [epoll_event]

    /// Makes the epoll set and its eventfd; `capacity` is the most events one ``wait(timeoutMilliseconds:)``
    /// reports.
    package init(capacity: Int) throws(PollerSetupError) {
        let epollFD = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epollFD >= 0 else { throw PollerSetupError(reason: "epoll_create1: \(String(cString: strerror(errno)))") }
        let wakeFD = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard wakeFD >= 0 else {
            let reason = String(cString: strerror(errno))
            close(epollFD)
            throw PollerSetupError(reason: "eventfd: \(reason)")
        }
        self.epollFD = epollFD
        self.wakeFD = wakeFD
        events = [epoll_event](repeating: epoll_event(), count: capacity)
        guard add(wakeFD, tag: Self.wakeTag, events: EPOLLIN.rawValue) else {
            let reason = String(cString: strerror(errno))
            // Both are closed by deinit, which runs because every property is set.
            throw PollerSetupError(reason: "epoll_ctl: \(reason)")
        }
    }

    deinit {
        close(wakeFD)
        close(epollFD)
    }

    /// Watches `fd` for `events` (`EPOLLIN`, `EPOLLOUT`, …), reported under `tag`; false when epoll refuses.
    @discardableResult
    package func add(_ fd: Int32, tag: UInt64, events: UInt32) -> Bool { control(EPOLL_CTL_ADD, fd, tag, events) }

    /// Changes what `fd` is watched for; false when epoll refuses.
    @discardableResult
    package func modify(_ fd: Int32, tag: UInt64, events: UInt32) -> Bool {
        control(EPOLL_CTL_MOD, fd, tag, events)
    }

    /// Stops watching `fd` (before it is closed).
    package func remove(_ fd: Int32) { _ = epoll_ctl(epollFD, EPOLL_CTL_DEL, fd, nil) }

    private func control(_ operation: Int32, _ fd: Int32, _ tag: UInt64, _ events: UInt32) -> Bool {
        var event = epoll_event()
        event.events = events
        event.data.u64 = tag
        return epoll_ctl(epollFD, operation, fd, &event) == 0
    }

    /// Waits up to `timeoutMilliseconds` (-1: until something is ready); returns how many descriptors are ready
    /// (0 after an interrupted wait), or `nil` when epoll fails.
    package func wait(timeoutMilliseconds: Int32) -> Int? {
        let count = events.withUnsafeMutableBufferPointer {
            epoll_wait(epollFD, $0.baseAddress, Int32($0.count), timeoutMilliseconds)
        }
        if count < 0 { return errno == EINTR ? 0 : nil }
        return Int(count)
    }

    /// The `index`th ready descriptor of the last wait: its tag and its events.
    package func ready(_ index: Int) -> (tag: UInt64, events: UInt32) { (events[index].data.u64, events[index].events) }

    /// Makes the next (or current) wait return with ``wakeTag`` ready. Any thread.
    package func wake() {
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    /// Resets the wake-up after ``wakeTag`` was reported.
    package func consumeWake() {
        var value: UInt64 = 0
        _ = read(wakeFD, &value, 8)
    }
}

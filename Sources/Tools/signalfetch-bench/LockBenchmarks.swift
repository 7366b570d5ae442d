import Foundation
import Locking
import Synchronization

/// The project's lock (`LockedValue`, on `pthread_mutex_t`) against `Synchronization.Mutex`, which it replaced
/// so the sanitizers can see the code: the same critical section (a counter and a small array), uncontended
/// and with two threads, the two locks taking turns in rounds so both see the same moments of the machine.
enum LockBenchmarks {
    struct Counters {
        var count = 0
        var recent: [Int] = [0, 0, 0, 0]
    }

    /// Critical sections per second, best of `rounds`, for each lock and thread count.
    static func run(operations: Int, rounds: Int) -> [String] {
        var records: [String] = []
        for threads in [1, 2] {
            var ours = 0.0
            var theirs = 0.0
            for _ in 0..<rounds {
                ours = max(ours, rate(threads: threads, operations: operations, lockedValue()))
                theirs = max(theirs, rate(threads: threads, operations: operations, mutex()))
            }
            let ratio = ours / theirs
            let title =
                threads == 1
                ? "Lock: LockedValue (pthread_mutex_t) vs Synchronization.Mutex, uncontended"
                : "Lock: LockedValue vs Synchronization.Mutex, two threads contending"
            records.append(
                #"{"benchmark":"lock-\#(threads)-thread","title":"\#(title)","unit":"sections/s","#
                    + #""ours_label":"LockedValue","ours":\#(Int(ours)),"baseline_label":"Mutex","#
                    + #""baseline":\#(Int(theirs)),"ratio":\#(Double(Int(ratio * 1000)) / 1000),"goal":0.8,"#
                    + #""goal_op":">=","met":\#(ratio >= 0.8),"threads":\#(threads),"chart":false"#
                    + (ratio < 0.8 ? #","finding":"\#(finding(ours: ours, theirs: theirs, threads: threads))"}"# : "}"))
        }
        return records
    }

    /// Why a lock that is slower here need not make anything slower: what one section costs on each side.
    static func finding(ours: Double, theirs: Double, threads: Int) -> String {
        let oursNs = Int((1e9 / ours).rounded())
        let theirsNs = Int((1e9 / theirs).rounded())
        return "locks (\(threads) thread\(threads == 1 ? "" : "s")): a LockedValue section costs \(oursNs) ns against "
            + "\(theirsNs) ns for Mutex (pthread_mutex_lock and unlock are calls into glibc, Mutex an inlined atomic); "
            + "whole programs take a few such sections per request of tens of microseconds (docs/hardening.md "
            + "measures apns-sim with each lock)."
    }

    typealias Section = @Sendable () -> Void

    static func lockedValue() -> Section {
        let state = LockedValue(Counters())
        return {
            state.withLock { counters in
                counters.count += 1
                counters.recent[counters.count & 3] = counters.count
            }
        }
    }

    static func mutex() -> Section {
        final class Box: Sendable { let state = Mutex(Counters()) }
        let box = Box()
        return {
            box.state.withLock { counters in
                counters.count += 1
                counters.recent[counters.count & 3] = counters.count
            }
        }
    }

    /// Runs `section` `operations` times on each of `threads` threads; returns sections per second.
    static func rate(threads: Int, operations: Int, _ section: Section) -> Double {
        let start = DispatchTime.now().uptimeNanoseconds
        DispatchQueue.concurrentPerform(iterations: threads) { _ in
            for _ in 0..<operations { section() }
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        return Double(threads * operations) / seconds
    }
}

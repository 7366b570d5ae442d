import ConnectionLoop
import TestSupport
import Testing

/// The trimmer the listeners report accepted connections to: one `malloc_trim` once a burst is over, again after the
/// next burst, none for connections that never make a burst.
@Suite struct HeapTrimTests {
    @Test func aBurstOfConnectionsIsFollowedByATrimOnceTheyStop() async {
        let trim = HeapTrim(burst: 8, quietMilliseconds: 20)
        trim.connectionsOpened(7)
        // Below the burst no trimming thread exists yet, so nothing can have trimmed.
        #expect(trim.trims == 0)
        trim.connectionsOpened(1)
        #expect(await eventually { trim.trims == 1 })
        // The count starts again: the next burst is trimmed after too.
        trim.connectionsOpened(8)
        #expect(await eventually { trim.trims == 2 })
    }
}

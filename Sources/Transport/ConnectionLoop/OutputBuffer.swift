/// A growable byte queue for bytes waiting to be written to a socket.
package struct OutputBuffer {
    private var storage: [UInt8] = []
    private var readIndex = 0

    /// The most capacity an emptied buffer keeps.
    static var keptCapacity: Int { 512 }

    /// Creates an empty buffer.
    package init() {}

    /// The bytes of storage it holds (for tests of what an idle connection costs).
    package var capacity: Int { storage.capacity }

    /// Bytes waiting to be sent.
    package var count: Int { storage.count - readIndex }
    /// Whether nothing waits to be sent.
    package var isEmpty: Bool { readIndex == storage.count }

    /// Appends `bytes` at the end.
    package mutating func append(_ bytes: UnsafeRawBufferPointer) {
        compactIfUseful()
        storage.append(contentsOf: bytes)
    }

    /// Lets `fill` write up to `maximumCount` bytes at the end; it returns how many it wrote.
    @discardableResult
    package mutating func appendWith(maximumCount: Int, _ fill: (UnsafeMutableRawPointer) -> Int) -> Int {
        compactIfUseful()
        let oldCount = storage.count
        storage.append(contentsOf: repeatElement(0, count: maximumCount))
        let written = storage.withUnsafeMutableBytes { fill($0.baseAddress! + oldCount) }
        storage.removeLast(maximumCount - max(0, min(written, maximumCount)))
        return written
    }

    /// Offers the pending bytes to `send`, which returns how many it took (or a negative value).
    package mutating func drain(_ send: (UnsafeRawBufferPointer) -> Int) -> Int {
        if isEmpty { return 0 }
        let sent = storage.withUnsafeBytes { send(UnsafeRawBufferPointer(rebasing: $0[readIndex...])) }
        if sent > 0 {
            readIndex += sent
            if readIndex == storage.count {
                // Emptied: a small buffer is kept for the next write; a larger one (a TLS handshake's flight, a long
                // FETCH) is given back, so an idle connection holds no output memory.
                storage.removeAll(keepingCapacity: storage.capacity <= Self.keptCapacity)
                readIndex = 0
            }
        }
        return sent
    }

    private mutating func compactIfUseful() {
        if readIndex > 0 && readIndex >= storage.count / 2 {
            storage.removeFirst(readIndex)
            readIndex = 0
        }
    }
}

import Foundation

/// The byte paths every event loop shares: socket reads and writes (through TLS when there is a TLS engine). Each
/// caller keeps its own state machine; these functions only move bytes and say how that ended.
package enum SocketIO {
    /// How a socket read ended.
    package enum ReadEnd: Equatable {
        /// Nothing more to read for now (`EAGAIN`), or the byte budget was used up.
        case drained
        /// The consumer asked to stop.
        case stopped
        /// The peer closed its side of the connection.
        case peerClosed
        /// `recv` failed with this `errno`.
        case failed(Int32)
    }

    /// How a socket write ended.
    package enum WriteEnd: Equatable {
        /// Everything queued was sent.
        case drained
        /// The socket is full (`EAGAIN`); the rest waits for writability.
        case blocked
        /// `send` failed with this `errno`.
        case failed(Int32)
    }

    /// Reads from the non-blocking `fd` into `buffer` until `EAGAIN` or `budget` bytes (the event loops are
    /// level-triggered, so one connection cannot starve the others), handing each chunk to `consume`, which
    /// returns `false` to stop.
    package static func read(
        _ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, budget: Int,
        _ consume: (UnsafeRawBufferPointer) -> Bool
    ) -> ReadEnd {
        var total = 0
        while total < budget {
            let count = recv(fd, buffer.baseAddress, buffer.count, 0)
            if count > 0 {
                total += count
                if !consume(UnsafeRawBufferPointer(rebasing: buffer[0..<count])) { return .stopped }
                continue
            }
            if count == 0 { return .peerClosed }
            switch errno {
            case EAGAIN, EWOULDBLOCK: return .drained
            case EINTR: continue
            case let failure: return .failed(failure)
            }
        }
        return .drained
    }

    /// Writes what `output` holds to the non-blocking `fd`.
    package static func write(_ fd: Int32, from output: inout OutputBuffer) -> WriteEnd {
        while !output.isEmpty {
            var failure: Int32 = 0
            let sent = output.drain { bytes in
                let result = send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL))
                if result < 0 { failure = errno }
                return result
            }
            if sent > 0 { continue }
            switch failure {
            case EAGAIN, EWOULDBLOCK: return .blocked
            case EINTR: continue
            default: return .failed(failure)
            }
        }
        return .drained
    }
}

extension TLSEngine {
    /// Takes ciphertext read from the socket: advances the handshake (calling `handshakeDone` once, when it
    /// completes; returning `false` stops), then decrypts application data into `feed` (returning `false`
    /// stops). Records to send back (handshake, alerts) are appended to `output`. `.failed` before
    /// ``handshakeComplete`` means the handshake failed.
    package func receive(
        _ bytes: UnsafeRawBufferPointer, output: inout OutputBuffer, scratch: UnsafeMutableRawBufferPointer,
        handshakeDone: () -> Bool, feed: (UnsafeRawBufferPointer) -> Bool
    ) -> Outcome {
        receiveCiphertext(bytes)
        if !handshakeComplete {
            let outcome = continueHandshake()
            drainCiphertext(into: &output)
            if outcome == .failed { return .failed }
            guard handshakeComplete else { return .ok }
            guard handshakeDone() else { return .failed }
        }
        let outcome = readPlaintext(into: scratch, feed)
        drainCiphertext(into: &output)
        return outcome
    }
}

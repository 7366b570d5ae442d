import CNGHTTP2
import Foundation

/// The byte paths shared by both ends of an HTTP/2 connection: socket reads and writes, and moving nghttp2's
/// frames into the output buffer (through TLS when there is a TLS engine). Each caller keeps its own state
/// machine; these functions only move bytes and say how that ended.
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

    /// Why ``generateFrames(_:tls:staging:output:highWater:)`` stopped early.
    package enum FrameFailure: Error, Equatable {
        /// `nghttp2_session_mem_send` failed with this nghttp2 error code.
        case nghttp2(Int32)
        /// TLS refused to encrypt.
        case tls
    }

    /// Moves frames from `session` into `output` until nghttp2 has nothing more or `output` holds `highWater`
    /// bytes. With `tls`, frames are gathered in `staging` first, so many small frames leave as one TLS record.
    /// Returns the number of frame bytes nghttp2 produced.
    package static func generateFrames(
        _ session: OpaquePointer, tls: TLSEngine?, staging: UnsafeMutableRawBufferPointer,
        output: inout OutputBuffer, highWater: Int
    ) -> Result<Int, FrameFailure> {
        var produced = 0
        var staged = 0
        func encryptStaged() -> Bool {
            guard let tls, staged > 0 else { return true }
            defer { staged = 0 }
            let encrypted = tls.writePlaintext(UnsafeRawBufferPointer(rebasing: staging[0..<staged]))
            tls.drainCiphertext(into: &output)
            return encrypted
        }
        while output.count + staged < highWater {
            var chunk: UnsafePointer<UInt8>?
            let count = nghttp2_session_mem_send(session, &chunk)
            if count < 0 {
                _ = encryptStaged()
                return .failure(.nghttp2(Int32(count)))
            }
            guard count > 0, let chunk else { break }
            produced += count
            guard tls != nil else {
                output.append(UnsafeRawBufferPointer(start: chunk, count: count))
                continue
            }
            var offset = 0
            while offset < count {
                let take = min(count - offset, staging.count - staged)
                (staging.baseAddress! + staged).copyMemory(from: chunk + offset, byteCount: take)
                staged += take
                offset += take
                if staged == staging.count, !encryptStaged() { return .failure(.tls) }
            }
        }
        return encryptStaged() ? .success(produced) : .failure(.tls)
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

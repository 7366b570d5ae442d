import CNGHTTP2
import ConnectionLoop

extension SocketIO {
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

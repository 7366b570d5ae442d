import CNGHTTP2

/// Header fields that belong to HTTP/1.1 connections and must not appear in an HTTP/2 message (RFC 9113
/// §8.2.2): the server leaves them out of its responses, the client refuses requests that carry them.
package let connectionSpecificHeaders: Set<String> = [
    "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade",
]

/// Builds an nghttp2 header array over one temporary buffer and passes it to `body` (nghttp2 copies the
/// names and values when a frame is submitted, so the buffer only lives for the call).
package func withHeaderBlock(
    _ fields: [(String, String)], _ body: (UnsafePointer<nghttp2_nv>, Int) -> Int32
) -> Int32 {
    var total = 0
    for (name, value) in fields { total += name.utf8.count + value.utf8.count }
    let storage = UnsafeMutablePointer<UInt8>.allocate(capacity: max(total, 1))
    defer { storage.deallocate() }
    var nva: [nghttp2_nv] = []
    nva.reserveCapacity(fields.count)
    var offset = 0
    func copy(_ text: String) -> UnsafeMutablePointer<UInt8> {
        let start = storage + offset
        var text = text
        text.withUTF8 { bytes in
            if let base = bytes.baseAddress { start.update(from: base, count: bytes.count) }
            offset += bytes.count
        }
        return start
    }
    for (name, value) in fields {
        let namePointer = copy(name)
        let valuePointer = copy(value)
        nva.append(
            nghttp2_nv(
                name: namePointer, value: valuePointer, namelen: name.utf8.count, valuelen: value.utf8.count,
                flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)))
    }
    return nva.withUnsafeBufferPointer { body($0.baseAddress!, $0.count) }
}

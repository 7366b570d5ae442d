import HTTPServer

/// Where a simulator's gateway writes one simulated device's messages: the device's open event stream on the device
/// API (`GET /sim/devices/{token}/…`), or a test's recorder. The same for the three simulators.
public struct DeviceStreamSink: Sendable {
    /// Sends one event's data (single-line JSON); returns `false` when the stream is gone.
    public var send: @Sendable (String) -> Bool
    /// Ends the stream (the device was deleted or uninstalled, or the simulator is stopping).
    public var close: @Sendable () -> Void

    /// Creates a sink from its two operations.
    public init(send: @escaping @Sendable (String) -> Bool, close: @escaping @Sendable () -> Void) {
        self.send = send
        self.close = close
    }
}

extension HTTPResponse {
    /// A device's event stream, opened: a `connected` comment first, then what the gateway sends to the sink
    /// `connect` registers (its stream id, or `nil` when the gateway refuses it: `refused` is thrown), and
    /// `disconnect` with that id when the device's connection ends.
    package static func deviceStream(
        batch: EventStreamBatch?, connect: (DeviceStreamSink) -> UInt64?, refused: () -> HTTPError,
        disconnect: @escaping @Sendable (UInt64) -> Void
    ) throws(HTTPError) -> HTTPResponse {
        let stream = EventStream(batch: batch)
        _ = stream.sendComment("connected")
        let sink = DeviceStreamSink(send: { data in stream.send(data: data) }, close: { stream.close() })
        guard let streamID = connect(sink) else { throw refused() }
        stream.onTermination { disconnect(streamID) }
        return .eventStream(stream)
    }
}

import Foundation
import HTTP2Server
import HTTPServer

/// Endpoints for the transport benchmarks: an HTTPServer and an HTTP2Server that serve a fixed tiny JSON
/// document (and answer APNs-style POSTs with 200).
enum TransportBenchmarks {
    /// The document every benchmark endpoint serves; the baselines (nginx, nghttpd) serve the same bytes.
    static let tinyJSON = Data(#"{"status":"ok","service":"signalfetch","version":1}"#.utf8)

    /// Writes one line to standard output at once (standard output may be a pipe, where `print` buffers).
    static func emit(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    /// Sleeps until the process is killed, keeping `server` alive.
    static func serveForever(_ server: some Sendable) async throws -> Never {
        while true {
            try await Task.sleep(for: .seconds(3600))
            withExtendedLifetime(server) {}
        }
    }

    /// Starts an HTTPServer answering every GET with ``tinyJSON`` and prints `{"port":N}`.
    static func serveHTTP(port: Int, certificate: String?, key: String?, threads: Int?) async throws -> Never {
        var configuration = HTTPServer.Configuration(host: "127.0.0.1", port: UInt16(port))
        if let certificate, let key {
            configuration.tls = HTTPServer.TLS(certificatePath: certificate, privateKeyPath: key)
        }
        if let threads { configuration.threadCount = threads }
        let body = tinyJSON
        let server = try HTTPServer(configuration: configuration) { _ in
            HTTPResponse(status: .ok, headers: ["Content-Type": "application/json"], body: body)
        }
        emit(#"{"port":\#(server.port)}"#)
        try await serveForever(server)
    }

    /// Starts an HTTP2Server (TLS unless `certificate` is `nil`) and prints `{"port":N}`.
    ///
    /// GET answers ``tinyJSON``; POST answers 200 with the request's `apns-id` (or a new one) and an empty
    /// body, the way APNs accepts a notification (or `postBody` when given).
    static func serveHTTP2(
        port: Int, certificate: String?, key: String?, asyncHandler: Bool, postBody: String?
    ) async throws -> Never {
        let tls = certificate.flatMap { certificate in
            key.map { HTTP2ServerConfiguration.TLS(certificateChainPath: certificate, privateKeyPath: $0) }
        }
        let configuration = HTTP2ServerConfiguration(host: "127.0.0.1", port: port, tls: tls)
        let body = tinyJSON
        let answer = Data((postBody ?? "").utf8)
        let respond: @Sendable (HTTP2Request) -> HTTP2Response = { request in
            if request.method == "POST" {
                let id = request.header("apns-id") ?? UUID().uuidString.lowercased()
                return HTTP2Response(status: 200, headers: [HTTPField("apns-id", id)], body: answer)
            }
            return HTTP2Response(status: 200, headers: [HTTPField("content-type", "application/json")], body: body)
        }
        let server =
            asyncHandler
            ? HTTP2Server(configuration: configuration) { request in respond(request) }
            : HTTP2Server(configuration: configuration, inlineHandler: respond)
        try server.start()
        emit(#"{"port":\#(server.port)}"#)
        // Counters on standard error every second while they change (protocol errors, resets, GOAWAYs).
        var last = HTTP2ServerMetrics()
        while true {
            try await Task.sleep(for: .seconds(1))
            let metrics = server.metrics
            if metrics != last {
                FileHandle.standardError.write(Data("metrics: \(metrics)\n".utf8))
                last = metrics
            }
        }
    }
}

import Foundation
import ServerSentEvents

extension MailAPIClient: ChangeStreamTransport {
    /// JMAP's event source on the server's listener (the Session's `eventSourceUrl`), for every type, held open.
    static let eventSourcePath = "/jmap/eventsource?types=*&closeafter=no"

    /// `GET /jmap/eventsource?types=*&closeafter=no&ping=N` with the bearer token: each `state` event (a
    /// StateChange whose `id:` is the account's state) becomes ``ChangeNotice/changed(state:)``, each `ping`
    /// ``ChangeNotice/ping``. Any other status than 200 throws the ``MailSyncError`` the other calls would.
    public func openChangeStream(
        lastEventID: String?, pingInterval: Duration
    ) async throws -> AsyncThrowingStream<ChangeNotice, any Error> {
        var headers = [(name: "Accept", value: "text/event-stream")]
        if let token = accessToken, !token.isEmpty { headers.append((name: "Authorization", value: "Bearer " + token)) }
        if let lastEventID, !lastEventID.isEmpty, !lastEventID.contains(where: \.isNewline) {
            headers.append((name: "Last-Event-ID", value: lastEventID))
        }
        let ping = max(1, pingInterval.components.seconds)
        let response = try await exchange.openStream(
            MailHTTPRequest(method: "GET", path: Self.eventSourcePath + "&ping=\(ping)", headers: headers))
        guard response.status == 200 else {
            var body = Data()
            do {
                for try await chunk in response.body { body.append(chunk) }
            } catch {}
            throw Self.error(for: MailHTTPResponse(status: response.status, headers: response.headers, body: body))
        }
        guard response.headers["content-type"]?.lowercased().hasPrefix("text/event-stream") == true else {
            response.cancel()
            throw MailSyncError.invalidResponse("the event stream is not text/event-stream")
        }
        let (notices, sink) = AsyncThrowingStream.makeStream(of: ChangeNotice.self)
        let reader = Task {
            do {
                var parser = ServerSentEventParser()
                for try await chunk in response.body {
                    for event in parser.feed(chunk) {
                        switch event.event {
                        case "state": sink.yield(.changed(state: event.id))
                        case "ping": sink.yield(.ping)
                        default: continue
                        }
                    }
                }
                sink.finish()
            } catch {
                sink.finish(throwing: error)
            }
        }
        sink.onTermination = { _ in
            reader.cancel()
            response.cancel()
        }
        return notices
    }
}

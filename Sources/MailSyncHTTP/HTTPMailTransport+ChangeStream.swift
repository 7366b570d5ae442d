import Foundation
import HTTPClient
import MailSync

extension HTTPMailTransport: ChangeStreamTransport {
    /// JMAP's event source on the server's listener (the Session's `eventSourceUrl`), for every type, held open.
    static let eventSourcePath = "/jmap/eventsource?types=*&closeafter=no"

    /// `GET /jmap/eventsource?types=*&closeafter=no&ping=N` with the bearer token: each `state` event (a
    /// StateChange whose `id:` is the account's state) becomes ``ChangeNotice/changed(state:)``, each `ping`
    /// ``ChangeNotice/ping``. Any other status than 200 throws the ``MailSyncError`` the other calls would.
    public func openChangeStream(
        lastEventID: String?, pingInterval: Duration
    ) async throws -> AsyncThrowingStream<ChangeNotice, any Error> {
        var headers: HTTPHeaders = ["Accept": "text/event-stream"]
        if let token = accessToken, !token.isEmpty { headers.add(name: "Authorization", value: "Bearer " + token) }
        if let lastEventID, !lastEventID.isEmpty, !lastEventID.contains(where: \.isNewline) {
            headers.add(name: "Last-Event-ID", value: lastEventID)
        }
        let ping = max(1, pingInterval.components.seconds)
        let response: HTTPStreamingResponse
        do {
            response = try await client.stream(
                HTTPRequest(url: baseURL + Self.eventSourcePath + "&ping=\(ping)", headers: headers))
        } catch let error as HTTPClientError {
            throw MailSyncError.network(error.description)
        }
        guard response.status == 200 else {
            let body = (try? await response.body.collect()) ?? Data()
            throw Self.error(
                for: HTTPResponse(
                    status: response.status, headers: response.headers, body: body, version: response.version))
        }
        guard response.headers["Content-Type"]?.lowercased().hasPrefix("text/event-stream") == true else {
            response.cancel()
            throw MailSyncError.invalidResponse("the event stream is not text/event-stream")
        }
        let (notices, sink) = AsyncThrowingStream.makeStream(of: ChangeNotice.self)
        let reader = Task {
            do {
                for try await event in response.body.serverSentEvents {
                    switch event.event {
                    case "state": sink.yield(.changed(state: event.id))
                    case "ping": sink.yield(.ping)
                    default: continue
                    }
                }
                sink.finish()
            } catch let error as HTTPClientError {
                sink.finish(throwing: MailSyncError.network(error.description))
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

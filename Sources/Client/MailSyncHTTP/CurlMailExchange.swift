import Foundation
import HTTPClient
import HTTPTypes
import MailSync

/// ``MailHTTPExchange`` over ``HTTPClient`` (libcurl's multi interface): the exchange the simulated devices use on
/// Linux, with the dev CA given to the client's TLS configuration.
///
/// ```swift
/// let http = HTTPClient(configuration: .init(tls: .init(caFile: "ca.pem")))
/// let api = MailAPIClient(exchange: try CurlMailExchange(baseURL: "https://127.0.0.1:8443", client: http))
/// ```
public struct CurlMailExchange: MailHTTPExchange {
    /// The server's base URL without a trailing slash.
    public let baseURL: String
    /// The client the requests go through.
    public let client: HTTPClient

    /// An exchange with the server at `baseURL` (`http://` or `https://`).
    public init(baseURL: String, client: HTTPClient) throws {
        self.baseURL = try Self.normalizedBaseURL(baseURL)
        self.client = client
    }

    /// Sends the request through libcurl and returns the whole response.
    public func send(_ request: MailHTTPRequest) async throws -> MailHTTPResponse {
        do {
            let response = try await client.execute(httpRequest(request))
            return MailHTTPResponse(
                status: response.status, headers: Self.fields(response.headers), body: response.body)
        } catch let error as HTTPClientError {
            throw MailSyncError.network(error.description)
        }
    }

    /// Sends the request through libcurl and returns once the head arrived; the body follows in chunks.
    public func openStream(_ request: MailHTTPRequest) async throws -> MailHTTPStream {
        let response: HTTPClient.StreamingResponse
        do {
            response = try await client.stream(httpRequest(request))
        } catch let error as HTTPClientError {
            throw MailSyncError.network(error.description)
        }
        let (chunks, sink) = AsyncThrowingStream.makeStream(of: Data.self)
        let reader = Task {
            do {
                for try await chunk in response.body { sink.yield(chunk) }
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
        return MailHTTPStream(
            status: response.status, headers: Self.fields(response.headers), body: chunks,
            cancel: {
                reader.cancel()
                response.cancel()
            })
    }

    private func httpRequest(_ request: MailHTTPRequest) -> HTTPClient.Request {
        var headers = HTTPHeaders()
        for field in request.headers { headers.add(name: field.name, value: field.value) }
        return HTTPClient.Request(
            method: HTTPMethod(rawValue: request.method), url: baseURL + request.path, headers: headers,
            body: request.body)
    }

    /// Header fields by lowercased name, repeated ones joined as HTTP allows.
    static func fields(_ headers: HTTPHeaders) -> [String: String] {
        var fields: [String: String] = [:]
        for field in headers {
            let name = field.name.lowercased()
            fields[name] = fields[name].map { $0 + ", " + field.value } ?? field.value
        }
        return fields
    }
}

extension MailAPIClient {
    /// A client of the server at `baseURL` over libcurl: ``CurlMailExchange``.
    public convenience init(baseURL: String, client: HTTPClient, accessToken: String? = nil) throws {
        self.init(exchange: try CurlMailExchange(baseURL: baseURL, client: client), accessToken: accessToken)
    }
}

import Foundation
import HTTPServer
import WebClient

extension MailboxAPI {
    /// The headers every web-client file is served with: scripts and styles only from this origin (the page has
    /// no inline script), no framing, no sniffing, no referrer, and revalidation so a new version is picked up.
    static let webHeaders: [(String, String)] = [
        ("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"),
        ("X-Content-Type-Options", "nosniff"),
        ("Referrer-Policy", "no-referrer"),
        ("Cache-Control", "no-cache"),
    ]

    /// `GET /web/` (the page) and `GET /web/{file}`; `/web` redirects to `/web/` so the page's relative links
    /// resolve under it (the service worker's scope).
    func webFile(_ request: HTTPRequest) async throws -> HTTPResponse {
        let name = request.parameter("file") ?? "index.html"
        if request.parameter("file") == nil, !request.path.hasSuffix("/") {
            var response = HTTPResponse(status: 308)
            response.headers.replaceOrAdd(name: "Location", value: "/web/")
            return response
        }
        guard let file = WebClientFiles.files[name] else { throw HTTPError.notFound("No such file.") }
        var response = HTTPResponse(status: .ok, body: Data(file.bytes))
        response.headers.replaceOrAdd(name: "Content-Type", value: file.contentType)
        for (header, value) in Self.webHeaders { response.headers.replaceOrAdd(name: header, value: value) }
        return response
    }
}

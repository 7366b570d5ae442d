/// The web client's files (`Sources/Service/WebClient/web/`), embedded in the binary at build time: plain HTML,
/// JavaScript and CSS that mailboxd serves at `/web/`, with the service worker at `/web/sw.js`.
package enum WebClientFiles {
    /// One file: its bytes and media type.
    package struct File: Sendable {
        /// The file's contents.
        package var bytes: [UInt8]
        /// The `Content-Type`.
        package var contentType: String
    }

    /// The files by name (`index.html`, `app.js`, …).
    package static let files: [String: File] = [
        "index.html": File(bytes: PackageResources.index_html, contentType: "text/html; charset=utf-8"),
        "app.js": File(bytes: PackageResources.app_js, contentType: "text/javascript; charset=utf-8"),
        "mail-sync.js": File(bytes: PackageResources.mail_sync_js, contentType: "text/javascript; charset=utf-8"),
        "sw.js": File(bytes: PackageResources.sw_js, contentType: "text/javascript; charset=utf-8"),
        "style.css": File(bytes: PackageResources.style_css, contentType: "text/css; charset=utf-8"),
    ]
}

/// The console's files (`Sources/Service/WebClient/console/`), embedded the same way and served by mailboxd under
/// `/console`: the page, the sign-in form, and their scripts and style.
package enum ConsoleFiles {
    /// The files by name.
    package static let files: [String: WebClientFiles.File] = [
        "console.html": .init(bytes: PackageResources.console_html, contentType: "text/html; charset=utf-8"),
        "console-signin.html": .init(
            bytes: PackageResources.console_signin_html, contentType: "text/html; charset=utf-8"),
        "console.js": .init(bytes: PackageResources.console_js, contentType: "text/javascript; charset=utf-8"),
        "console-signin.js": .init(
            bytes: PackageResources.console_signin_js, contentType: "text/javascript; charset=utf-8"),
        "console.css": .init(bytes: PackageResources.console_css, contentType: "text/css; charset=utf-8"),
    ]
}

/// Why text is not `HOST[:PORT]`.
public enum HostPortSyntaxError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A `[` without its `]`.
    case unclosedBracket
    /// Text after `[IPv6]` that is not `:PORT`.
    case textAfterBracket
    /// No host before the port.
    case emptyHost

    /// What is wrong, for an error message.
    public var description: String {
        switch self {
        case .unclosedBracket: "an unclosed [IPv6 address]"
        case .textAfterBracket: "text after an [IPv6 address] that is not :PORT"
        case .emptyHost: "an empty host"
        }
    }
}

/// The one reader of `HOST[:PORT]` text — command-line addresses, URL authorities, PostgreSQL host lists: the host
/// and the port's text, split at the last `:` or after a bracketed IPv6 literal (`[::1]:8443`), brackets removed.
/// Each caller checks the pieces for its own context (whether a port is required, which host characters it allows).
public enum HostPortSyntax {
    /// `text` as host and port text (`nil` when there is no `:PORT`; empty when the text ends in `:`).
    public static func split(_ text: Substring) throws(HostPortSyntaxError) -> (host: Substring, port: Substring?) {
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { throw .unclosedBracket }
            let host = text[text.index(after: text.startIndex)..<close]
            let after = text[text.index(after: close)...]
            guard after.isEmpty || after.hasPrefix(":") else { throw .textAfterBracket }
            guard !host.isEmpty else { throw .emptyHost }
            return (host, after.isEmpty ? nil : after.dropFirst())
        }
        guard let colon = text.lastIndex(of: ":") else { return (text, nil) }
        return (text[..<colon], text[text.index(after: colon)...])
    }

    /// A port's text as a number from 1 to 65535 (digits only), or `nil`.
    public static func port(_ text: Substring) -> UInt16? {
        guard (1...5).contains(text.count), text.allSatisfy({ $0.isASCII && $0.isNumber }), let number = UInt16(text),
            number > 0
        else { return nil }
        return number
    }
}

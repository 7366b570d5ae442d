/// HTML reduced to its text, for previews and for clients that show no HTML: elements that hold no text
/// (`head`, `script`, `style`, `template`) dropped, tags removed, block boundaries turned into line breaks (one at a time), character
/// references decoded, runs of spaces folded.
public enum HTMLText {
    static let dropped: Set<String> = ["head", "script", "style", "template", "title"]
    static let breaking: Set<String> = [
        "br", "p", "div", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre", "table", "ul", "ol",
        "hr",
    ]
    static let entities: [String: Character] = [
        "amp": "&", "lt": "<", "gt": ">", "quot": "\"", "apos": "'", "nbsp": " ", "copy": "©", "reg": "®",
        "hellip": "…", "mdash": "—", "ndash": "–", "rsquo": "’", "lsquo": "‘", "rdquo": "”", "ldquo": "“",
        "euro": "€",
    ]

    /// The text of `html`.
    public static func reduce(_ html: String) -> String {
        var output = ""
        var skipping: String?
        var scalars = Substring(html).unicodeScalars[...]
        var pendingSpace = false
        func emit(_ character: Character) {
            if character == "\n" {
                while output.last == " " { output.removeLast() }
                if output.last != "\n", !output.isEmpty { output.append("\n") }
                pendingSpace = false
            } else if character == " " || character == "\t" || character == "\r" {
                pendingSpace = !output.isEmpty && output.last != "\n"
            } else {
                if pendingSpace { output.append(" ") }
                pendingSpace = false
                output.append(character)
            }
        }
        while let scalar = scalars.first {
            scalars = scalars.dropFirst()
            if scalar == "<" {
                let end = scalars.firstIndex(of: ">") ?? scalars.endIndex
                let tag = String(String.UnicodeScalarView(scalars[..<end]))
                scalars = end < scalars.endIndex ? scalars[scalars.index(after: end)...] : scalars[end...]
                let closing = tag.hasPrefix("/")
                let name = tag.drop { $0 == "/" }.prefix { $0.isLetter || $0.isNumber }.lowercased()
                if let element = skipping {
                    if closing, name == element { skipping = nil }
                    continue
                }
                if !closing, dropped.contains(name), !tag.hasSuffix("/") {
                    skipping = name
                } else if breaking.contains(name) {
                    emit("\n")
                }
                continue
            }
            guard skipping == nil else { continue }
            if scalar == "&", let semicolon = scalars.prefix(10).firstIndex(of: ";") {
                let reference = String(String.UnicodeScalarView(scalars[..<semicolon]))
                if let decoded = decode(reference) {
                    scalars = scalars[scalars.index(after: semicolon)...]
                    emit(decoded)
                    continue
                }
            }
            emit(scalar == "\n" ? " " : Character(scalar))
        }
        while output.last == "\n" || output.last == " " { output.removeLast() }
        return output
    }

    static func decode(_ reference: String) -> Character? {
        if reference.hasPrefix("#") {
            let digits = reference.dropFirst()
            let value =
                digits.first == "x" || digits.first == "X" ? UInt32(digits.dropFirst(), radix: 16) : UInt32(digits)
            return value.flatMap(Unicode.Scalar.init).map(Character.init)
        }
        return entities[reference.lowercased()]
    }
}

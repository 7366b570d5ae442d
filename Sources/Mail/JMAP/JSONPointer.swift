import JSONText

extension JSONValue {
    /// A string, or `null` for `nil`.
    static func string(_ text: String?) -> JSONValue { text.map(JSONValue.string) ?? .null }
    /// An integer from an `Int`.
    static func int(_ value: Int) -> JSONValue { .int(Int64(value)) }
    /// A list of strings.
    static func strings(_ texts: [String]) -> JSONValue { .array(texts.map(JSONValue.string)) }
}

/// RFC 6901 JSON Pointers with JMAP's `*` (RFC 8620 §3.7): at an array, `*` applies the rest of the pointer to each
/// element and flattens arrays of results into one.
enum JSONPointer {
    /// The value `pointer` names in `value`, or `nil` when it names nothing.
    static func evaluate(_ pointer: String, in value: JSONValue) -> JSONValue? {
        if pointer.isEmpty { return value }
        guard pointer.hasPrefix("/") else { return nil }
        let tokens = pointer.dropFirst().split(separator: "/", omittingEmptySubsequences: false).map { token in
            // `~1` then `~0`, in that order (RFC 6901 §4); most tokens have neither.
            token.contains { $0 == "~" }
                ? token.replacingOccurrences(of: "~1", with: "/").replacingOccurrences(of: "~0", with: "~")
                : String(token)
        }
        return evaluate(tokens[...], in: value)
    }

    private static func evaluate(_ tokens: ArraySlice<String>, in value: JSONValue) -> JSONValue? {
        guard let token = tokens.first else { return value }
        let rest = tokens.dropFirst()
        switch value {
        case .object(let members):
            guard let member = members[token] else { return nil }
            return evaluate(rest, in: member)
        case .array(let elements):
            if token == "*" {
                var results: [JSONValue] = []
                for element in elements {
                    guard let result = evaluate(rest, in: element) else { return nil }
                    if case .array(let inner) = result { results += inner } else { results.append(result) }
                }
                return .array(results)
            }
            guard token == "0" || (token.first != "0" && token.allSatisfy(\.isASCII) && token.allSatisfy(\.isNumber)),
                let index = Int(token), index < elements.count
            else { return nil }
            return evaluate(rest, in: elements[index])
        default:
            return nil
        }
    }
}

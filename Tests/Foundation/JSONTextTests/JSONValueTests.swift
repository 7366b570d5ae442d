import Foundation
import JSONText
import Testing

@Suite struct JSONValueTests {
    private func read(_ text: String) -> JSONValue? { JSONValue.parse(Data(text.utf8)) }

    @Test func stringsWithAndWithoutEscapesRead() {
        #expect(read(#""plain text""#) == .string("plain text"))
        #expect(read(#""""#) == .string(""))
        #expect(read(#""a\"b\\c\/d""#) == .string("a\"b\\c/d"))
        #expect(read(#""tab\there\nnext""#) == .string("tab\there\nnext"))
        #expect(read(#""caf\u00e9 \ud83d\ude00""#) == .string("café 😀"))
        #expect(read("\"café\"") == .string("café"))
        #expect(read(#"{"key":"value","escaped\u0041":"x\"y"}"#) == ["key": "value", "escapedA": "x\"y"])
    }

    @Test func malformedStringsAreRefused() {
        #expect(read("\"unterminated") == nil)
        #expect(read("\"control \u{1} char\"") == nil)
        #expect(read(#""bad \q escape""#) == nil)
        #expect(read(#""lone \udc00 surrogate""#) == nil)
        #expect(JSONValue.parse(Data([0x22, 0xFF, 0xFE, 0x22])) == nil)
    }

    @Test func numbersKeepTheirKind() {
        #expect(read("[1,-2,1.5,1e3]") == .array([.int(1), .int(-2), .double(1.5), .double(1000)]))
        #expect(read("[01]") == nil)
    }

    @Test func whatIsWrittenReadsBackTheSame() {
        let value: JSONValue = [
            "text": "quote \" backslash \\ newline \n bell \u{7}", "list": [1, true, nil, "é"],
            "nested": ["empty": [:], "double": .double(0.25)],
        ]
        #expect(read(value.json) == value)
        #expect(JSONValue.object(["b": 1, "a": 2]).json == #"{"a":2,"b":1}"#)
    }

    @Test func nestingPastTheLimitIsRefused() {
        let deep =
            String(repeating: "[", count: JSONValue.maximumDepth + 1)
            + String(repeating: "]", count: JSONValue.maximumDepth + 1)
        #expect(read(deep) == nil)
        let allowed =
            String(repeating: "[", count: JSONValue.maximumDepth)
            + String(repeating: "]", count: JSONValue.maximumDepth)
        #expect(read(allowed) != nil)
    }
}

@Suite struct JSONValuePrettyTests {
    @Test func prettyTextIsIndentedInKeyOrderAndReadsBack() {
        let value: JSONValue = ["b": [1, ["c": "d"]], "a": "x", "empty": [:], "none": []]
        let expected = """
            {
              "a": "x",
              "b": [
                1,
                {
                  "c": "d"
                }
              ],
              "empty": {},
              "none": []
            }
            """
        #expect(value.prettyJSON == expected)
        #expect(JSONValue.parse(Data(value.prettyJSON.utf8)) == value)
    }
}

import Foundation
import JSONText
import Testing

/// The object writer behind the API's and the console's bodies: what it writes reads back as the members given.
@Suite struct JSONObjectTextTests {
    @Test func everyKindOfMemberReadsBackInOrder() throws {
        var object = JSONObjectText()
        object.add("id", 7)
        object.add("name", "quote \" backslash \\ newline \n tab \t nul \u{0} emoji 📬")
        object.add("absent", nil as String?)
        object.add("modseq", Int64.max)
        object.add("ratio", 0.25)
        object.add("whole", 3.0)
        object.add("none", nil as Double?)
        object.add("devices", ["a", "b \"c\""])
        object.add("samples", [1.5, 2])
        object.add("coalesced", false)
        object.add("nested", json: #"{"x":[1]}"#)
        object.add("ké\"y", "v")
        let text = object.json
        #expect(text.hasPrefix(#"{"id":7,"name":"quote \" backslash \\ newline \n tab \t nul \u0000 emoji 📬","#))
        #expect(text.contains(#""whole":3,"#))
        let read = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        #expect(read["name"] as? String == "quote \" backslash \\ newline \n tab \t nul \u{0} emoji 📬")
        #expect(read["absent"] == nil && read["none"] == nil)
        #expect((read["modseq"] as? NSNumber)?.int64Value == Int64.max)
        #expect(read["ratio"] as? Double == 0.25)
        #expect(read["devices"] as? [String] == ["a", "b \"c\""])
        #expect(read["samples"] as? [Double] == [1.5, 2])
        #expect(read["coalesced"] as? Bool == false)
        #expect((read["nested"] as? [String: Any])?["x"] as? [Int] == [1])
        #expect(read["ké\"y"] as? String == "v")
        #expect(read.count == 10)
    }

    @Test func anEmptyObjectIsBraces() {
        #expect(JSONObjectText().json == "{}")
    }
}

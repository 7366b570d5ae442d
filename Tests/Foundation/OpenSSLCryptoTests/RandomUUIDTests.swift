import Foundation
import OpenSSLCrypto
import Testing

@Suite struct RandomUUIDTests {
    @Test func randomUUIDsAreVersion4AndDistinct() {
        var seen = Set<UUID>()
        for _ in 0..<1000 {
            let uuid = SecureRandom.uuid()
            #expect(uuid.uuid.6 >> 4 == 4)
            #expect(uuid.uuid.8 & 0xC0 == 0x80)
            seen.insert(uuid)
        }
        #expect(seen.count == 1000)
    }

    @Test func randomBytesKeepAllButTheVersionAndVariantBits() {
        let ones = [UInt8](repeating: 0xFF, count: 16)
        let zeros = [UInt8](repeating: 0, count: 16)
        #expect(
            ones.withUnsafeBufferPointer { UUID(randomBytes: $0) }.lowercasedText
                == "ffffffff-ffff-4fff-bfff-ffffffffffff")
        #expect(
            zeros.withUnsafeBufferPointer { UUID(randomBytes: $0) }.lowercasedText
                == "00000000-0000-4000-8000-000000000000")
    }

    @Test func lowercasedTextMatchesFoundation() throws {
        let fixed = try #require(UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F"))
        #expect(fixed.lowercasedText == "e621e1f8-c36c-495a-93fc-0c247a3e6e5f")
        for _ in 0..<100 {
            let uuid = SecureRandom.uuid()
            #expect(uuid.lowercasedText == uuid.uuidString.lowercased())
        }
    }
}

import OpenSSLCrypto
import Testing

@Suite struct KnownAnswerTests {
    @Test func sha256Vectors() {
        #expect(Hex.encode(SHA256.hash("")) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(Hex.encode(SHA256.hash("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            Hex.encode(SHA256.hash("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
    }

    /// RFC 4231 test cases 1, 2, 3, 4, 6 and 7 (case 5 truncates the output).
    @Test(arguments: [
        (
            "0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b", "4869205468657265",
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        ),
        (
            "4a656665", "7768617420646f2079612077616e7420666f72206e6f7468696e673f",
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        ),
        (
            String(repeating: "aa", count: 20), String(repeating: "dd", count: 50),
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"
        ),
        (
            "0102030405060708090a0b0c0d0e0f10111213141516171819", String(repeating: "cd", count: 50),
            "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"
        ),
        (
            String(repeating: "aa", count: 131),
            "54657374205573696e67204c6172676572205468616e20426c6f636b2d53697a65204b6579202d2048617368204b6579204669727374",
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        ),
        (
            String(repeating: "aa", count: 131),
            "5468697320697320612074657374207573696e672061206c6172676572207468616e20626c6f636b2d73697a65206b657920616e642061206c6172676572207468616e20626c6f636b2d73697a6520646174612e20546865206b6579206e6565647320746f20626520686173686564206265666f7265206265696e6720757365642062792074686520484d414320616c676f726974686d2e",
            "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"
        ),
    ])
    func hmacSHA256RFC4231(key: String, data: String, expected: String) throws {
        let mac = HMACSHA256.authenticationCode(for: try #require(Hex.decode(data)), key: try #require(Hex.decode(key)))
        #expect(Hex.encode(mac) == expected)
    }

    /// RFC 7914 §12 test vectors 1–3 (vector 4, N = 2^20, is left out for time).
    @Test func scryptRFC7914() throws {
        let empty = try PasswordHash.scrypt(
            password: [], salt: [], parameters: ScryptParameters(logN: 4, r: 1, p: 1), length: 64)
        #expect(
            Hex.encode(empty)
                == "77d6576238657b203b19ca42c18a0497f16b4844e3074ae8dfdffa3fede21442fcd0069ded0948f8326a753a0fc81f17e8d3e0fb2e0d3628cf35e20c38d18906"
        )
        let password = try PasswordHash.scrypt(
            password: Array("password".utf8), salt: Array("NaCl".utf8),
            parameters: ScryptParameters(logN: 10, r: 8, p: 16), length: 64)
        #expect(
            Hex.encode(password)
                == "fdbabe1c9d3472007856e7190d01e9fe7c6ad7cbc8237830e77376634b3731622eaf30d92e22a3886ff109279d9830dac727afb94a83ee6d8360cbdfa2cc0640"
        )
        let pleaseLetMeIn = try PasswordHash.scrypt(
            password: Array("pleaseletmein".utf8), salt: Array("SodiumChloride".utf8),
            parameters: ScryptParameters(logN: 14, r: 8, p: 1), length: 64)
        #expect(
            Hex.encode(pleaseLetMeIn)
                == "7023bdcb3afd7348461c06cd81fd38ebfda8fbba904f8e3ea9b543f6545da1f2d5432955613f0fcf62d49705242a9af9e61e85dc0d651e40dfcf017b45575887"
        )
    }

    @Test func constantTimeEquality() {
        #expect(ConstantTime.equals([1, 2, 3], [1, 2, 3]))
        #expect(!ConstantTime.equals([1, 2, 3], [1, 2, 4]))
        #expect(!ConstantTime.equals([1, 2, 3], [1, 2]))
        #expect(ConstantTime.equals([UInt8](), [UInt8]()))
    }

    @Test func randomBytesDiffer() {
        #expect(SecureRandom.bytes(32).count == 32)
        #expect(SecureRandom.bytes(32) != SecureRandom.bytes(32))
        #expect(SecureRandom.hex(32).count == 64)
    }

    @Test func encodingsRoundTrip() throws {
        let bytes: [UInt8] = [0xfb, 0xff, 0x00, 0x3e, 0x3f]
        #expect(Base64URL.decode(Base64URL.encode(bytes)) == bytes)
        #expect(!Base64URL.encode(bytes).contains("="))
        #expect(Base64URL.decode("not base64!") == nil)
        #expect(Hex.decode(Hex.encode(bytes)) == bytes)
        #expect(Hex.decode("abc") == nil)
        #expect(Hex.decode("zz") == nil)
    }
}

@Suite struct PasswordHashTests {
    @Test func hashVerifiesAndEncodesItsParameters() throws {
        let encoded = try PasswordHash.hash("correct horse", parameters: .testing)
        #expect(encoded.hasPrefix("$scrypt$v=1$ln=10,r=8,p=1$"))
        #expect(PasswordHash.verify("correct horse", against: encoded))
        #expect(!PasswordHash.verify("correct horse!", against: encoded))
        #expect(!PasswordHash.verify("", against: encoded))
        // Same password, fresh salt: a different encoding.
        #expect(try PasswordHash.hash("correct horse", parameters: .testing) != encoded)
    }

    @Test(arguments: [
        "", "$scrypt$v=2$ln=10,r=8,p=1$AAAA$AAAA", "$scrypt$v=1$ln=99,r=8,p=1$AAAA$AAAAAAAAAAAAAAAAAAAAAA", "plain",
    ])
    func malformedEncodingsNeverMatch(encoded: String) {
        #expect(!PasswordHash.verify("anything", against: encoded))
    }
}

import Testing

@testable import CloudletCore

@Suite struct Base64Tests {
    /// base64url is the standard alphabet's text with `+/` spelled `-_` and the padding left off; it decodes back.
    @Test func urlFormRoundTripsAndMatchesTheStandardOne() {
        var rng = SplitMix64(state: 15)
        for count in 0...70 {
            let bytes = (0..<count).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            let url = Base64.encodeURL(bytes)
            let standard = Base64.encode(bytes)
            let translated = String(standard.filter { $0 != "=" }.map { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 })
            #expect(url == translated, "\(count) bytes")
            #expect(Base64.decodeURL(url) == bytes, "\(count) bytes: \(url)")
            #expect(Base64.decode(standard) == bytes, "\(count) bytes: \(standard)")
        }
        #expect(Base64.encodeURL([0xFB, 0xFF]) == "-_8")
    }

    /// Only the one canonical spelling decodes: otherwise two texts of a signature would name the same bytes.
    @Test func urlFormRefusesEveryOtherSpelling() {
        #expect(Base64.decodeURL("-_8") == [0xFB, 0xFF])
        for text in [
            "A",  // 4n + 1 characters carry no whole byte
            "AB",  // one byte whose unused low bits are not zero ("AA" is the byte 0)
            "AAB",  // two bytes, the same
            "AA==",  // padding
            "+_8", "-/8",  // the standard alphabet's two characters
            "AA AA", "AA.A", "AAé",
        ] {
            #expect(Base64.decodeURL(text) == nil, "\(text)")
        }
        #expect(Base64.decodeURL("AA") == [0] && Base64.decodeURL("AAA") == [0, 0] && Base64.decodeURL("") == [])
    }
}

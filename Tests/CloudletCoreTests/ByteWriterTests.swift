import CloudletCore
import Testing

func encodedVarint(_ v: UInt64) -> [UInt8] {
    var w = ByteWriter()
    w.varint(v)
    return w.bytes
}

func decodeVarint(_ bytes: [UInt8]) throws -> UInt64 {
    var r = ByteReader(bytes, what: "test")
    let v = try r.varint()
    #expect(r.isAtEnd, "varint left \(r.remaining) bytes")
    return v
}

@Suite("ByteWriter and ByteReader")
struct ByteWriterTests {
    @Test(
        "varint encodings at the 7-bit boundaries",
        arguments: [
            (0, [0x00]), (1, [0x01]), (127, [0x7F]), (128, [0x80, 0x01]), (300, [0xAC, 0x02]), (16_383, [0xFF, 0x7F]),
            (16_384, [0x80, 0x80, 0x01]), (UInt64(UInt32.max), [0xFF, 0xFF, 0xFF, 0xFF, 0x0F]),
            (1 << 63, [0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01]),
            (UInt64.max, [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]),
        ] as [(UInt64, [UInt8])])
    func varintBytes(_ value: UInt64, _ bytes: [UInt8]) throws {
        #expect(encodedVarint(value) == bytes)
        #expect(try decodeVarint(bytes) == value)
    }

    @Test("varint round-trips 2^k - 1, 2^k and 2^k + 1 for every k, in the minimum number of bytes")
    func varintPowers() throws {
        for k in 0..<64 {
            for v in [(UInt64(1) << k) - 1, UInt64(1) << k, (UInt64(1) << k) &+ 1] {
                let bytes = encodedVarint(v)
                let bits = max(1, 64 - v.leadingZeroBitCount)
                #expect(bytes.count == (bits + 6) / 7, "\(v)")
                #expect(try decodeVarint(bytes) == v)
            }
        }
    }

    @Test(
        "svarint zig-zag boundaries",
        arguments: [
            (0, 1), (-1, 1), (1, 1), (-64, 1), (63, 1), (-65, 2), (64, 2), (-8192, 2), (8191, 2), (8192, 3),
            (Int64(Int32.min), 5), (Int64(Int32.max), 5), (.min, 10), (.max, 10),
        ] as [(Int64, Int)])
    func svarint(_ value: Int64, _ length: Int) throws {
        var w = ByteWriter()
        w.svarint(value)
        #expect(w.count == length)
        var r = ByteReader(w.bytes, what: "test")
        #expect(try r.svarint() == value)
        #expect(r.isAtEnd)
    }

    @Test("zig-zag maps small magnitudes to small codes")
    func zigZag() throws {
        for (v, code) in [(0, 0), (-1, 1), (1, 2), (-2, 3), (2, 4)] as [(Int64, UInt64)] {
            var w = ByteWriter()
            w.svarint(v)
            #expect(try decodeVarint(w.bytes) == code)
        }
    }

    @Test(
        "varints longer than 64 bits are rejected",
        arguments: [
            [UInt8](repeating: 0x80, count: 10) + [0x01],  // 11 bytes
            [UInt8](repeating: 0xFF, count: 9) + [0x02],  // 10 bytes, value ≥ 2^64
            [UInt8](repeating: 0xFF, count: 9) + [0x7F],
            [UInt8](repeating: 0x80, count: 9) + [0x81, 0x00],  // a continuation bit on the 10th byte
            [UInt8](repeating: 0xFF, count: 20),
        ])
    func overlong(_ bytes: [UInt8]) {
        var r = ByteReader(bytes, what: "test")
        let error = #expect(throws: CloudletError.self) { try r.varint() }
        #expect(error?.code == .corruption)
        #expect(error?.message.contains("varint") == true)
    }

    @Test("a varint cut short is rejected", arguments: [[], [0x80], [0xFF, 0xFF], [0x80, 0x80, 0x80]] as [[UInt8]])
    func truncatedVarint(_ bytes: [UInt8]) {
        var r = ByteReader(bytes, what: "test")
        #expect(throws: CloudletError.self) { try r.varint() }
    }

    @Test("fixed-width integers and doubles are little endian")
    func fixedWidth() throws {
        var w = ByteWriter()
        w.u8(0xAB)
        w.u16(0x1234)
        w.u32(0xDEAD_BEEF)
        w.u64(0x0102_0304_0506_0708)
        w.f64(1.0)
        #expect(w.bytes == [
            0xAB, 0x34, 0x12, 0xEF, 0xBE, 0xAD, 0xDE, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0, 0, 0, 0, 0, 0xF0, 0x3F,
        ])
        var r = ByteReader(w.bytes, what: "test")
        #expect(try r.u8() == 0xAB)
        #expect(try r.u16() == 0x1234)
        #expect(try r.u32() == 0xDEAD_BEEF)
        #expect(try r.u64() == 0x0102_0304_0506_0708)
        #expect(try r.f64() == 1.0)
        #expect(r.isAtEnd)
        #expect(throws: CloudletError.self) { try r.u8() }
    }

    @Test("short reads of every width throw corruption and do not move the offset")
    func shortReads() throws {
        var r = ByteReader([1, 2, 3], what: "header")
        #expect(throws: CloudletError.self) { try r.u64() }
        #expect(throws: CloudletError.self) { try r.u32() }
        #expect(throws: CloudletError.self) { try r.raw(4) }
        #expect(r.offset == 0)
        #expect(try r.u16() == 0x0201)
        let error = #expect(throws: CloudletError.self) { try r.u16() }
        #expect(error?.code == .corruption)
        #expect(error?.message.hasPrefix("header:") == true, "the message names what was being read")
    }

    @Test("strings and byte strings are length-prefixed")
    func lengthPrefixed() throws {
        var w = ByteWriter()
        w.string("hé")
        w.bytes([9, 8])
        w.string("")
        #expect(w.bytes == [3, 0x68, 0xC3, 0xA9, 2, 9, 8, 0])
        var r = ByteReader(w.bytes, what: "test")
        #expect(try r.string() == "hé")
        #expect(try r.bytes() == [9, 8])
        #expect(try r.string() == "")
        #expect(r.isAtEnd)
    }

    @Test("a length larger than what is left is rejected")
    func lengthBound() throws {
        var r = ByteReader([4, 1, 2, 3], what: "test")
        #expect(throws: CloudletError.self) { try r.bytes() }
        var units = ByteReader([2, 0, 0, 0], what: "test")
        #expect(throws: CloudletError.self) { try units.length(unit: 2) }
        var fits = ByteReader([2, 0, 0, 0, 0], what: "test")
        #expect(try fits.length(unit: 2) == 2)
    }

    @Test("booleans are 0 or 1; anything else is corruption")
    func booleans() throws {
        var r = ByteReader([0, 1, 2], what: "test")
        #expect(try r.bool() == false)
        #expect(try r.bool() == true)
        let error = #expect(throws: CloudletError.self) { try r.bool() }
        #expect(error?.code == .corruption)
    }

    @Test("patchU32 overwrites four bytes in place")
    func patch() {
        var w = ByteWriter()
        w.u8(0xFF)
        w.u32(0)
        w.u8(0xEE)
        w.patchU32(0x0403_0201, at: 1)
        #expect(w.bytes == [0xFF, 1, 2, 3, 4, 0xEE])
    }

    @Test("a reader over a window stops at the window's end")
    func window() throws {
        var r = ByteReader([9, 1, 2, 9], from: 1, to: 3, what: "test")
        #expect(r.remaining == 2)
        #expect(try r.raw(2) == [1, 2])
        #expect(r.isAtEnd)
        #expect(throws: CloudletError.self) { try r.u8() }
    }
}

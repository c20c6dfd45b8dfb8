import CloudletCore
import CloudletTestSupport
import Testing

/// Decodes `bytes` and expects a `CloudletError` with code `.corruption`; returns its message.
@discardableResult
func expectCorruption(_ bytes: [UInt8], _ comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation)
    -> String?
{
    do {
        let record = try RecordCodec.decode(bytes)
        Issue.record("decoded \(record) instead of throwing. \(comment?.rawValue ?? "")", sourceLocation: sourceLocation)
    } catch let e as CloudletError {
        #expect(e.code == .corruption, "\(e). \(comment?.rawValue ?? "")", sourceLocation: sourceLocation)
        return e.message
    } catch {
        Issue.record("threw \(type(of: error)), not CloudletError: \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

/// The bytes of a record header (version, type "T", name "n", no system fields) followed by `fieldCount`.
func recordHeader(fieldCount: UInt64 = 1) -> ByteWriter {
    var w = ByteWriter()
    w.u8(RecordCodec.version)
    w.string("T")
    w.string("n")
    w.u8(0)
    w.varint(fieldCount)
    return w
}

@Suite("RecordCodec: corrupt input")
struct RecordCodecCorruptionTests {
    @Test("every truncation of an encoded record throws corruption", arguments: RecordCodecRecordTests.SystemFields.all)
    func truncations(_ s: RecordCodecRecordTests.SystemFields) {
        let bytes = RecordCodec.encode(Samples.richRecord(changeTag: s.changeTag, created: s.created, modified: s.modified))
        for n in 0..<bytes.count {
            expectCorruption(Array(bytes[..<n]), "prefix of \(n) of \(bytes.count) bytes")
        }
    }

    @Test("every truncation of an encoded value throws corruption", arguments: Sample.all.filter { !Samples.isHuge($0.value) })
    func valueTruncations(_ sample: Sample) {
        var w = ByteWriter()
        RecordCodec.encode(sample.value, into: &w)
        for n in 0..<w.count {
            var r = ByteReader(Array(w.bytes[..<n]), what: "value")
            let error = #expect(throws: CloudletError.self, "prefix of \(n) of \(w.count)") {
                try RecordCodec.decodeValue(&r)
            }
            #expect(error?.code == .corruption)
        }
    }

    @Test("bytes after the end of a record are rejected")
    func trailingBytes() {
        let bytes = RecordCodec.encode(Samples.richRecord())
        for extra: [UInt8] in [[0], [0xFF], [1, 2, 3]] {
            let message = expectCorruption(bytes + extra, "\(extra.count) trailing bytes")
            #expect(message?.contains("trailing") == true, "message: \(message ?? "-")")
        }
    }

    @Test("unknown presence bits are rejected", arguments: [8, 0x10, 0x80, 0xFF] as [UInt8])
    func presenceBits(_ bits: UInt8) {
        var w = ByteWriter()
        w.u8(RecordCodec.version)
        w.string("T")
        w.string("n")
        w.u8(bits)
        w.varint(0)
        expectCorruption(w.bytes)
    }

    @Test("unknown field type tags are rejected", arguments: [0, 9, 0x7F, 0x80, 0x89, 0xFF] as [UInt8])
    func unknownTag(_ tag: UInt8) {
        var w = recordHeader()
        w.string("f")
        w.u8(tag)
        w.varint(0)
        let message = expectCorruption(w.bytes)
        #expect(message?.contains("tag \(tag)") == true, "message: \(message ?? "-")")
    }

    @Test("an unknown reference action is rejected", arguments: [3, 0x7F, 0xFF] as [UInt8])
    func referenceAction(_ action: UInt8) {
        var w = recordHeader()
        w.string("ref")
        w.u8(FieldType(.reference).tag)
        w.string("target")
        w.u8(action)
        expectCorruption(w.bytes)
    }

    @Test("unknown location presence bits are rejected", arguments: [0x40, 0x80, 0xFF] as [UInt8])
    func locationBits(_ bits: UInt8) {
        var w = recordHeader()
        w.string("loc")
        w.u8(FieldType(.location).tag)
        w.f64(1)
        w.f64(2)
        w.u8(bits)
        w.raw([UInt8](repeating: 0, count: 64))
        expectCorruption(w.bytes)
    }

    @Test("an asset's receipt flag must be 0 or 1", arguments: [2, 0xFF] as [UInt8])
    func assetReceiptFlag(_ flag: UInt8) {
        var w = recordHeader()
        w.string("file")
        w.u8(FieldType(.asset).tag)
        w.string("abcd")
        w.svarint(10)
        w.u8(flag)
        w.string("receipt")
        expectCorruption(w.bytes)
    }

    @Test("invalid UTF-8 is rejected in the record type, the name, a field name and a string value")
    func invalidUTF8() {
        let bad: [UInt8] = [0x61, 0xC3, 0x28]  // a truncated two-byte sequence
        for position in 0..<4 {
            var w = ByteWriter()
            w.u8(RecordCodec.version)
            position == 0 ? w.bytes(bad) : w.string("T")
            position == 1 ? w.bytes(bad) : w.string("n")
            w.u8(0)
            w.varint(1)
            position == 2 ? w.bytes(bad) : w.string("f")
            w.u8(FieldType(.string).tag)
            position == 3 ? w.bytes(bad) : w.string("v")
            let message = expectCorruption(w.bytes, "bad UTF-8 at position \(position)")
            #expect(message?.contains("UTF-8") == true, "message: \(message ?? "-")")
        }
    }

    @Test("counts and lengths larger than the input are rejected before anything is allocated")
    func hugeCounts() {
        expectCorruption(recordHeader(fieldCount: UInt64.max).bytes, "field count")
        expectCorruption(recordHeader(fieldCount: 1 << 40).bytes, "field count")
        for tag in [FieldType(.bytes).tag, FieldType(.string).tag, FieldType(.int64, list: true).tag] {
            var w = recordHeader()
            w.string("f")
            w.u8(tag)
            w.varint(UInt64(Int.max))
            w.raw([0, 0, 0])
            expectCorruption(w.bytes, "length of tag \(tag)")
        }
    }

    /// Flips, overwrites, drops or inserts a few random bytes of an encoded record, many times. Decoding must
    /// throw `.corruption` or return a record that survives its own round trip; it must never trap. The seed is
    /// printed first so that a crash (which no expectation can report) can be replayed with CLOUDLET_TEST_SEED.
    @Test("seeded random mutations never crash the decoder")
    func randomMutations() throws {
        let seed = SeededRandom.testSeed()
        print("RecordCodec mutation test: CLOUDLET_TEST_SEED=\(seed)")
        var g = SeededRandom(seed: seed)
        var bases = RecordCodecRecordTests.SystemFields.all.map {
            RecordCodec.encode(Samples.richRecord(changeTag: $0.changeTag, created: $0.created, modified: $0.modified))
        }
        for _ in 0..<32 { bases.append(RecordCodec.encode(Samples.randomRecord(using: &g))) }
        var decodedCount = 0
        for i in 0..<20_000 {
            var bytes = bases.randomElement(using: &g)!
            for _ in 0..<Int.random(in: 1...4, using: &g) {
                let at = Int.random(in: 0..<bytes.count, using: &g)
                switch Int.random(in: 0..<8, using: &g) {
                case 0..<4: bytes[at] ^= UInt8(1) << UInt8.random(in: 0..<8, using: &g)  // flip one bit
                case 4, 5: bytes[at] = UInt8.random(in: 0...255, using: &g)  // overwrite a byte
                case 6: if bytes.count > 1 { bytes.remove(at: at) }  // drop a byte
                default: bytes.insert(UInt8.random(in: 0...255, using: &g), at: at)  // insert a byte
                }
            }
            do {
                let record = try RecordCodec.decode(bytes)
                decodedCount += 1
                let again = try RecordCodec.decode(RecordCodec.encode(record))
                #expect(again.isBitwiseEqual(to: record), "mutation \(i), CLOUDLET_TEST_SEED=\(seed)")
            } catch let e as CloudletError {
                #expect(e.code == .corruption, "mutation \(i), CLOUDLET_TEST_SEED=\(seed): \(e)")
            } catch {
                Issue.record("mutation \(i), CLOUDLET_TEST_SEED=\(seed): threw \(error)")
            }
        }
        // Most single-bit flips land in payload bytes and still decode; if none did, the mutations are not
        // reaching the decoder's interesting paths.
        #expect(decodedCount > 0, "CLOUDLET_TEST_SEED=\(seed)")
    }
}

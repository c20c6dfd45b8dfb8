import CloudletCore
import CloudletTestSupport
import Testing

/// Encodes one value and decodes it back, checking the type tag leads and the decoder consumes every byte.
func roundTrip(_ value: FieldValue) throws -> FieldValue {
    var w = ByteWriter()
    RecordCodec.encode(value, into: &w)
    #expect(w.bytes.first == value.type.tag, "an encoded value starts with its type tag")
    var r = ByteReader(w.bytes, what: "value")
    let decoded = try RecordCodec.decodeValue(&r)
    #expect(r.isAtEnd, "decoder left \(r.remaining) of \(w.count) bytes")
    return decoded
}

@Suite("RecordCodec: values")
struct RecordCodecValueTests {
    @Test("every scalar sample round-trips bit for bit", arguments: Sample.all)
    func scalarRoundTrip(_ sample: Sample) throws {
        let decoded = try roundTrip(sample.value)
        #expect(decoded.isBitwiseEqual(to: sample.value), "decoded \(decoded)")
    }

    @Test(
        "DOUBLE keeps its exact bit pattern (signed zero, infinities, NaNs with payload)",
        arguments: [
            0.0, -0.0, .infinity, -.infinity, .nan, -.nan, .signalingNaN, Double(bitPattern: 0x7FF8_0000_DEAD_BEEF),
            Double(bitPattern: 0xFFF0_0000_0000_0001), .leastNonzeroMagnitude, -.greatestFiniteMagnitude,
        ])
    func doubleBits(_ d: Double) throws {
        let decoded = try roundTrip(.double(d))
        guard case .double(let e) = decoded else {
            Issue.record("decoded a \(decoded.type), not a DOUBLE")
            return
        }
        #expect(
            e.bitPattern == d.bitPattern,
            "sent 0x\(String(d.bitPattern, radix: 16)), got 0x\(String(e.bitPattern, radix: 16))")
    }

    @Test("INT64 and TIMESTAMP extremes", arguments: [Int64.min, .min + 1, -65, -64, -1, 0, 1, 63, 64, .max - 1, .max])
    func integerExtremes(_ v: Int64) throws {
        #expect(try roundTrip(.int64(v)) == .int64(v))
        #expect(try roundTrip(.timestamp(v)) == .timestamp(v))
    }

    @Test("REFERENCE keeps its action", arguments: Reference.Action.allCases)
    func referenceAction(_ action: Reference.Action) throws {
        let ref = Reference(recordName: "parent-1", action: action)
        #expect(try roundTrip(.reference(ref)) == .reference(ref))
    }

    @Test("ASSET with and without a receipt", arguments: [nil, "", "receipt-Ω"] as [String?])
    func assetReceipt(_ receipt: String?) throws {
        let a = AssetReference(fileChecksum: String(repeating: "0f", count: 32), size: 123_456, receipt: receipt)
        let decoded = try roundTrip(.asset(a))
        #expect(decoded == .asset(a))
    }

    @Test(
        "LOCATION with only latitude and longitude, each optional alone, and all of them",
        arguments: Samples.locations.map(Sample.init))
    func location(_ sample: Sample) throws {
        #expect(try roundTrip(sample.value).isBitwiseEqual(to: sample.value))
    }

    @Test("LIST of each scalar type: empty, one item, every sample", arguments: ScalarType.allCases)
    func lists(_ type: ScalarType) throws {
        let samples = Samples.values(of: type)
        for items in [[], [samples[0]], samples] {
            let list = FieldValue.list(type, items)
            #expect(list.type.tag == type.rawValue | 0x80)
            let decoded = try roundTrip(list)
            #expect(decoded.isBitwiseEqual(to: list), "a \(type.cloudKitName)_LIST of \(items.count)")
            #expect(decoded.type == FieldType(type, list: true), "an empty list keeps its item type")
        }
    }

    @Test("a value embedded in a longer buffer stops at its own end")
    func valueInBuffer() throws {
        var w = ByteWriter()
        RecordCodec.encode(.string("first"), into: &w)
        RecordCodec.encode(.list(.int64, [1, 2, 3]), into: &w)
        w.u8(0xEE)
        var r = ByteReader(w.bytes, what: "values")
        #expect(try RecordCodec.decodeValue(&r) == .string("first"))
        #expect(try RecordCodec.decodeValue(&r) == .list(.int64, [1, 2, 3]))
        #expect(try r.u8() == 0xEE)
        #expect(r.isAtEnd)
    }
}

@Suite("RecordCodec: records")
struct RecordCodecRecordTests {
    /// Which of changeTag / created / modified are set, as a 3-bit mask (all eight combinations).
    struct SystemFields: Sendable, CustomTestStringConvertible {
        let mask: Int
        var changeTag: String? { mask & 1 != 0 ? "tag-\(mask)" : nil }
        var created: RecordStamp? { mask & 2 != 0 ? Samples.stamp : nil }
        var modified: RecordStamp? {
            mask & 4 != 0 ? RecordStamp(timestamp: -1, userRecordName: "_other", deviceID: "") : nil
        }
        var testDescription: String {
            "changeTag \(changeTag != nil ? "set" : "nil"), created \(created != nil ? "set" : "nil"), "
                + "modified \(modified != nil ? "set" : "nil")"
        }
        static let all = (0..<8).map(SystemFields.init)
    }

    @Test("a record with every field type round-trips, with system fields present or absent", arguments: SystemFields.all)
    func recordRoundTrip(_ s: SystemFields) throws {
        let record = Samples.richRecord(changeTag: s.changeTag, created: s.created, modified: s.modified)
        let bytes = RecordCodec.encode(record)
        #expect(bytes.first == RecordCodec.version)
        let decoded = try RecordCodec.decode(bytes)
        #expect(decoded.isBitwiseEqual(to: record))
        #expect(decoded.changeTag == s.changeTag)
        #expect(decoded.created == s.created)
        #expect(decoded.modified == s.modified)
    }

    @Test("a parent round-trips (its name; the zone is the record's), and a record without one encodes as before")
    func parentRoundTrip() throws {
        let zone = ZoneID(zoneName: "Trips", ownerName: "_alice")
        var record = Record(recordType: "Day", recordName: "d1", zoneID: zone, fields: ["a": 1])
        let without = RecordCodec.encode(record)
        record.parent = RecordID(recordName: "t1", zoneID: zone)
        let with = RecordCodec.encode(record)
        #expect(try RecordCodec.decode(with, zoneID: zone) == record)
        #expect(try RecordCodec.decode(without, zoneID: zone).parent == nil)
        #expect(with.count == without.count + 3, "presence bit 3 and the parent's name")
    }

    @Test("a record without fields, with empty type and name")
    func emptyRecord() throws {
        let record = Record(recordType: "", recordName: "")
        #expect(try RecordCodec.decode(RecordCodec.encode(record)) == record)
    }

    @Test("a record holding a 1 MiB BYTES field")
    func largeRecord() throws {
        var record = Record(recordType: "Blob", recordName: "big")
        record["data"] = .bytes(Samples.largeBytes)
        record["empty"] = .bytes([])
        #expect(try RecordCodec.decode(RecordCodec.encode(record)) == record)
    }

    @Test("the zone is not stored: decoding puts the record in the zone it is given")
    func zoneNotStored() throws {
        let zone = ZoneID(zoneName: "Notes", ownerName: "_user1")
        let inZone = Record(recordType: "Note", recordName: "n1", zoneID: zone, fields: ["a": 1])
        let inDefault = Record(recordType: "Note", recordName: "n1", fields: ["a": 1])
        #expect(RecordCodec.encode(inZone) == RecordCodec.encode(inDefault))
        #expect(try RecordCodec.decode(RecordCodec.encode(inZone), zoneID: zone).id == inZone.id)
        #expect(try RecordCodec.decode(RecordCodec.encode(inZone)).id.zoneID == .default)
    }

    @Test("the encoding does not depend on the order fields were set in")
    func deterministic() {
        var a = Record(recordType: "T", recordName: "r")
        var b = a
        let fields: [(String, FieldValue)] = (0..<50).map { ("field\($0)", .int64(Int64($0))) }
        for (k, v) in fields { a[k] = v }
        for (k, v) in fields.reversed() { b[k] = v }
        #expect(RecordCodec.encode(a) == RecordCodec.encode(b))
    }

    /// Pins the on-disk format: a change here is a format change and needs a new version byte.
    @Test("golden bytes of a small record")
    func golden() {
        var record = Record(recordType: "T", recordName: "n", fields: ["a": .int64(-1), "b": .list(.string, ["x"])])
        #expect(RecordCodec.encode(record) == [
            1,  // format version
            1, 0x54,  // recordType "T"
            1, 0x6E,  // recordName "n"
            0,  // presence: no changeTag, created, modified
            2,  // field count
            1, 0x61, 0x02, 0x01,  // "a": INT64 tag 2, zig-zag(-1) = 1
            1, 0x62, 0x81, 1, 1, 0x78,  // "b": STRING_LIST tag 0x81, 1 item, "x"
        ])
        record.fields = ["d": .double(-0.0)]
        record.changeTag = "z"
        record.created = RecordStamp(timestamp: 1, userRecordName: "u", deviceID: "")
        #expect(RecordCodec.encode(record) == [
            1, 1, 0x54, 1, 0x6E,
            3,  // presence: changeTag + created
            1, 0x7A,  // changeTag "z"
            2, 1, 0x75, 0,  // created: zig-zag(1) = 2, "u", ""
            1,
            1, 0x64, 0x03, 0, 0, 0, 0, 0, 0, 0, 0x80,  // "d": DOUBLE tag 3, -0.0 little endian
        ])
    }

    @Test("the first byte is the format version, and every other version is rejected")
    func versionByte() throws {
        var bytes = RecordCodec.encode(Samples.richRecord())
        #expect(bytes[0] == RecordCodec.version)
        for v in UInt8.min...UInt8.max where v != RecordCodec.version {
            bytes[0] = v
            let error = #expect(throws: CloudletError.self) { try RecordCodec.decode(bytes) }
            #expect(error?.code == .corruption)
            #expect(error?.message.contains("version \(v)") == true, "message: \(error?.message ?? "-")")
        }
    }

    @Test("seeded random records round-trip")
    func randomRecords() throws {
        let seed = SeededRandom.testSeed()
        var g = SeededRandom(seed: seed)
        for i in 0..<2_000 {
            let record = Samples.randomRecord(using: &g)
            let decoded = try RecordCodec.decode(RecordCodec.encode(record))
            #expect(decoded.isBitwiseEqual(to: record), "record \(i) with CLOUDLET_TEST_SEED=\(seed)")
        }
    }
}

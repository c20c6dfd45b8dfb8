import CloudletCore
import CloudletStorage

/// The value an index reads from a record for a field: a record field or a system field.
enum IndexedField {
    static func value(_ field: String, in r: Record) -> FieldValue? {
        if let s = SystemField(rawValue: field) { return s.value(in: r) }
        return r.fields[field]
    }
}

/// The tokens a SEARCHABLE index files a STRING or LIST<STRING> value under (``TextTokenizer``); none for other types.
func textTokens(_ v: FieldValue) -> Set<String> { Set(TextDocument(v).frequencies.keys) }

/// The cells a spatial index files a LOCATION under; none for other values.
func spatialCells(_ v: FieldValue) -> [UInt64] {
    guard case .location(let l) = v else { return [] }
    return GeoCells.cells(l)
}

/// A record's values of its type's indexed fields, as the key directory stores them (``IndexKeyspace``, tag 05):
/// `count varint · count × (field string · present u8 · value if present)`, fields sorted, values as
/// ``RecordCodec`` encodes them. A field absent means "not indexed yet" (the record predates the index and its build
/// has not reached it); present without a value, that the record lacks the field.
enum StoredValues {
    /// field → value, or `.some(nil)` when the record lacks the field.
    typealias Values = [String: FieldValue?]

    static func encode(_ values: Values) -> [UInt8] {
        var w = ByteWriter(capacity: 32)
        w.varint(values.count)
        for field in values.keys.sorted() {
            w.string(field)
            if let v = values[field]! {
                w.u8(1)
                RecordCodec.encode(v, into: &w)
            } else {
                w.u8(0)
            }
        }
        return w.bytes
    }

    static func decode(_ bytes: [UInt8]) throws -> Values {
        var r = ByteReader(bytes, what: "index values")
        var out: Values = [:]
        for _ in 0..<(try r.length(unit: 2)) {
            let field = try r.string()
            out[field] = .some(try decodeValue(&r))
        }
        guard r.isAtEnd else { throw CloudletError.corruption("index values: \(r.remaining) trailing bytes") }
        return out
    }

    /// The encoding of flushed states before version 7 and of format-3 checkpoints, by slot (the index of the field
    /// in its type's slot list): `count varint · count × (slot varint · present u8 · value if present)`.
    static func decodeSlots(_ bytes: [UInt8]) throws -> [Int: FieldValue?] {
        var r = ByteReader(bytes, what: "index values")
        var out: [Int: FieldValue?] = [:]
        for _ in 0..<(try r.length(unit: 2)) {
            let raw = try r.varint()
            guard raw < 1 << 20 else { throw CloudletError.corruption("index values: slot \(raw) out of range") }
            out[Int(raw)] = .some(try decodeValue(&r))
        }
        guard r.isAtEnd else { throw CloudletError.corruption("index values: \(r.remaining) trailing bytes") }
        return out
    }

    private static func decodeValue(_ r: inout ByteReader) throws -> FieldValue? {
        let present = try r.u8()
        switch present {
        case 0: return nil
        case 1: return try RecordCodec.decodeValue(&r)
        default: throw CloudletError.corruption("index values: bad presence byte \(present)")
        }
    }
}

extension DirectoryKey {
    /// The record type and name of a type-index key `zone · 03 · u32 length · type · name` whose zone prefix is
    /// `zoneCount` bytes.
    static func typeAndName(_ key: [UInt8], zoneCount: Int) throws -> (type: String, name: String) {
        let start = zoneCount + 5
        guard key.count >= start, key[zoneCount] == typeTag else {
            throw CloudletError.corruption("type index key \(LSMKey.printable(key)) is malformed")
        }
        let n = Int(loadBE(key, at: zoneCount + 1, bytes: 4))
        guard key.count >= start + n else { throw CloudletError.corruption("type index key \(LSMKey.printable(key)) is malformed") }
        return (String(decoding: key[start..<(start + n)], as: UTF8.self), String(decoding: key[(start + n)...], as: UTF8.self))
    }
}

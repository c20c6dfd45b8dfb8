/// The compact binary encoding of records and field values (format documented in `docs/record-format.md`).
///
/// A record is `version (1 byte) · recordType · recordName · presence · changeTag? · created? · modified? · parent? · fieldCount ·
/// fields sorted by name`. The zone is not stored in the record: it is implied by where the record lives.
/// Decoding never traps: malformed input throws ``CloudletError/Code/corruption``.
public enum RecordCodec {
    /// The current record format version.
    public static let version: UInt8 = 1

    public static func encode(_ record: Record) -> [UInt8] {
        var w = ByteWriter(capacity: 512)
        encode(record, into: &w)
        return w.bytes
    }

    public static func encode(_ record: Record, into w: inout ByteWriter) {
        w.u8(version)
        w.string(record.recordType)
        w.string(record.id.recordName)
        var presence: UInt8 = 0
        if record.changeTag != nil { presence |= 1 }
        if record.created != nil { presence |= 2 }
        if record.modified != nil { presence |= 4 }
        if record.parent != nil { presence |= 8 }
        w.u8(presence)
        if let tag = record.changeTag { w.string(tag) }
        if let c = record.created { encode(c, into: &w) }
        if let m = record.modified { encode(m, into: &w) }
        if let p = record.parent { w.string(p.recordName) }
        let fields = record.fields
        w.varint(fields.count)
        // Sorted through the fields' indices: sorting the (name, value) pairs copied a value at every move.
        var order = Array(fields.indices)
        order.sort { fields.keys[$0] < fields.keys[$1] }
        for i in order {
            w.string(fields.keys[i])
            encode(fields.values[i], into: &w)
        }
    }

    /// Decodes a buffer that holds exactly one record; bytes left over after it are corruption.
    public static func decode(_ bytes: [UInt8], zoneID: ZoneID = .default) throws -> Record {
        var r = ByteReader(bytes, what: "record")
        let record = try decode(&r, zoneID: zoneID)
        guard r.isAtEnd else {
            throw CloudletError.corruption(
                "record '\(record.recordName)': \(r.remaining) trailing bytes after byte \(r.offset)")
        }
        return record
    }

    public static func decode(_ r: inout ByteReader, zoneID: ZoneID) throws -> Record {
        let v = try r.u8()
        guard v == version else { throw CloudletError.corruption("record: unknown format version \(v)") }
        let type = try r.string()
        let name = try r.string()
        var record = Record(recordType: type, id: RecordID(recordName: name, zoneID: zoneID))
        let presence = try r.u8()
        guard presence & ~15 == 0 else { throw CloudletError.corruption("record '\(name)': bad presence bits \(presence)") }
        if presence & 1 != 0 { record.changeTag = try r.string() }
        if presence & 2 != 0 { record.created = try decodeStamp(&r) }
        if presence & 4 != 0 { record.modified = try decodeStamp(&r) }
        if presence & 8 != 0 { record.parent = RecordID(recordName: try r.string(), zoneID: zoneID) }
        let n = try r.length(unit: 2)
        record.fields.reserveCapacity(n)
        for _ in 0..<n {
            let field = try r.string()
            record.fields[field] = try decodeValue(&r)
        }
        return record
    }

    /// A stamp's bytes (also a key-directory entry's creation stamp): time (zigzag varint), user, device.
    package static func encode(_ s: RecordStamp, into w: inout ByteWriter) {
        w.svarint(s.timestamp)
        w.string(s.userRecordName)
        w.string(s.deviceID)
    }

    package static func decodeStamp(_ r: inout ByteReader) throws -> RecordStamp {
        RecordStamp(timestamp: try r.svarint(), userRecordName: try r.string(), deviceID: try r.string())
    }

    /// Encodes a value as its type tag followed by its body.
    public static func encode(_ value: FieldValue, into w: inout ByteWriter) {
        w.u8(value.type.tag)
        encodeBody(value, into: &w)
    }

    private static func encodeBody(_ value: FieldValue, into w: inout ByteWriter) {
        switch value {
        case .string(let s): w.string(s)
        case .int64(let v): w.svarint(v)
        case .double(let d): w.f64(d)
        case .bytes(let b): w.bytes(b)
        case .timestamp(let ms): w.svarint(ms)
        case .location(let l):
            w.f64(l.latitude)
            w.f64(l.longitude)
            let optionals = [l.horizontalAccuracy, l.verticalAccuracy, l.altitude, l.speed, l.course]
            var bits: UInt8 = 0
            for (i, o) in optionals.enumerated() where o != nil { bits |= 1 << UInt8(i) }
            if l.timestamp != nil { bits |= 1 << 5 }
            w.u8(bits)
            for o in optionals { if let o { w.f64(o) } }
            if let t = l.timestamp { w.svarint(t) }
        case .reference(let ref):
            w.string(ref.recordName)
            w.u8(ref.action.rawValue)
        case .asset(let a):
            w.string(a.fileChecksum)
            w.svarint(a.size)
            w.bool(a.receipt != nil)
            if let receipt = a.receipt { w.string(receipt) }
        case .list(_, let items):
            w.varint(items.count)
            for item in items { encodeBody(item, into: &w) }
        }
    }

    public static func decodeValue(_ r: inout ByteReader) throws -> FieldValue {
        let tag = try r.u8()
        guard let type = FieldType(tag: tag) else {
            throw CloudletError.corruption("\(r.what): unknown field type tag \(tag) at byte \(r.offset - 1)")
        }
        if type.isList {
            let n = try r.length()
            var items: [FieldValue] = []
            items.reserveCapacity(n)
            for _ in 0..<n { items.append(try decodeBody(type.scalar, &r)) }
            return .list(type.scalar, items)
        }
        return try decodeBody(type.scalar, &r)
    }

    private static func decodeBody(_ s: ScalarType, _ r: inout ByteReader) throws -> FieldValue {
        switch s {
        case .string: return .string(try r.string())
        case .int64: return .int64(try r.svarint())
        case .double: return .double(try r.f64())
        case .bytes: return .bytes(try r.bytes())
        case .timestamp: return .timestamp(try r.svarint())
        case .location:
            var l = Location(latitude: try r.f64(), longitude: try r.f64())
            let bits = try r.u8()
            guard bits & 0xC0 == 0 else { throw CloudletError.corruption("\(r.what): bad location bits \(bits)") }
            if bits & 1 != 0 { l.horizontalAccuracy = try r.f64() }
            if bits & 2 != 0 { l.verticalAccuracy = try r.f64() }
            if bits & 4 != 0 { l.altitude = try r.f64() }
            if bits & 8 != 0 { l.speed = try r.f64() }
            if bits & 16 != 0 { l.course = try r.f64() }
            if bits & 32 != 0 { l.timestamp = try r.svarint() }
            return .location(l)
        case .reference:
            let name = try r.string()
            let raw = try r.u8()
            guard let action = Reference.Action(rawValue: raw) else {
                throw CloudletError.corruption("\(r.what): unknown reference action \(raw)")
            }
            return .reference(Reference(recordName: name, action: action))
        case .asset:
            let checksum = try r.string()
            let size = try r.svarint()
            let receipt = try r.bool() ? try r.string() : nil
            return .asset(AssetReference(fileChecksum: checksum, size: size, receipt: receipt))
        }
    }
}

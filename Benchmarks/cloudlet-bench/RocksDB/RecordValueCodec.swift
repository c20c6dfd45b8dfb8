/// The RocksDB anchor's value format: a ``GeneratedRecord``'s fields (not its name, which is the key) in a compact
/// binary form, what an app storing records in a key-value store would write.
///
///     type      u8 length, UTF-8
///     title     varint length, UTF-8
///     count     8 bytes little-endian
///     score     8 bytes, IEEE 754 bits little-endian
///     created   8 bytes little-endian (ms)
///     tags      u8 count, then per tag u8 length + UTF-8
///     payload   varint length, bytes
enum RecordValueCodec {
    static func encode(_ r: GeneratedRecord) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(r.approximateSize + 16)
        appendShort(&out, r.recordType)
        appendVarint(&out, UInt64(r.title.utf8.count))
        out.append(contentsOf: r.title.utf8)
        appendFixed(&out, UInt64(bitPattern: r.count))
        appendFixed(&out, r.score.bitPattern)
        appendFixed(&out, UInt64(bitPattern: r.created))
        precondition(r.tags.count <= 255, "too many tags")
        out.append(UInt8(r.tags.count))
        for tag in r.tags { appendShort(&out, tag) }
        appendVarint(&out, UInt64(r.payload.count))
        out.append(contentsOf: r.payload)
        return out
    }

    /// Decodes a value written by ``encode(_:)``; nil if it is malformed.
    static func decode(name: String, _ bytes: UnsafeRawBufferPointer) -> GeneratedRecord? {
        var reader = Reader(bytes: bytes)
        guard let type = reader.string(count: reader.byte().map(Int.init)),
            let title = reader.string(count: reader.varint().map(Int.init)),
            let count = reader.fixed(), let score = reader.fixed(), let created = reader.fixed(),
            let tagCount = reader.byte()
        else { return nil }
        var tags: [String] = []
        tags.reserveCapacity(Int(tagCount))
        for _ in 0..<tagCount {
            guard let tag = reader.string(count: reader.byte().map(Int.init)) else { return nil }
            tags.append(tag)
        }
        guard let payload = reader.bytes(count: reader.varint().map(Int.init)), reader.atEnd else { return nil }
        return GeneratedRecord(
            recordName: name, recordType: type, title: title, count: Int64(bitPattern: count),
            score: Double(bitPattern: score), created: Int64(bitPattern: created), tags: tags, payload: payload)
    }

    private static func appendShort(_ out: inout [UInt8], _ s: String) {
        precondition(s.utf8.count <= 255, "string too long for a u8 length")
        out.append(UInt8(s.utf8.count))
        out.append(contentsOf: s.utf8)
    }

    private static func appendVarint(_ out: inout [UInt8], _ v: UInt64) {
        var v = v
        while v >= 0x80 {
            out.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        out.append(UInt8(v))
    }

    private static func appendFixed(_ out: inout [UInt8], _ v: UInt64) {
        withUnsafeBytes(of: v.littleEndian) { out.append(contentsOf: $0) }
    }

    private struct Reader {
        let bytes: UnsafeRawBufferPointer
        var at = 0

        var atEnd: Bool { at == bytes.count }

        mutating func byte() -> UInt8? {
            guard at < bytes.count else { return nil }
            defer { at += 1 }
            return bytes[at]
        }

        mutating func varint() -> UInt64? {
            var v: UInt64 = 0
            var shift: UInt64 = 0
            while shift < 64, let b = byte() {
                v |= UInt64(b & 0x7F) << shift
                if b < 0x80 { return v }
                shift += 7
            }
            return nil
        }

        mutating func fixed() -> UInt64? {
            guard bytes.count - at >= 8 else { return nil }
            defer { at += 8 }
            return UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: at, as: UInt64.self))
        }

        mutating func string(count: Int?) -> String? {
            guard let count, count <= bytes.count - at else { return nil }
            defer { at += count }
            return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[at..<at + count]), as: UTF8.self)
        }

        mutating func bytes(count: Int?) -> [UInt8]? {
            guard let count, count <= bytes.count - at else { return nil }
            defer { at += count }
            return Array(bytes[at..<at + count])
        }
    }
}

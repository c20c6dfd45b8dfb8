/// Appends little-endian integers, LEB128 varints and length-prefixed strings to a byte array.
/// The building block of every on-disk encoding (records, commit payloads, checkpoints).
public struct ByteWriter: Sendable {
    public private(set) var bytes: [UInt8]

    public init(capacity: Int = 64) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    public var count: Int { bytes.count }

    public mutating func u8(_ v: UInt8) { bytes.append(v) }

    public mutating func u16(_ v: UInt16) {
        bytes.append(UInt8(truncatingIfNeeded: v))
        bytes.append(UInt8(truncatingIfNeeded: v >> 8))
    }

    public mutating func u32(_ v: UInt32) {
        for shift in stride(from: 0, to: 32, by: 8) { bytes.append(UInt8(truncatingIfNeeded: v >> UInt32(shift))) }
    }

    public mutating func u64(_ v: UInt64) {
        for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: v >> UInt64(shift))) }
    }

    public mutating func f64(_ v: Double) { u64(v.bitPattern) }

    /// Unsigned LEB128.
    public mutating func varint(_ v: UInt64) {
        var v = v
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    public mutating func varint(_ v: Int) {
        precondition(v >= 0, "negative length")
        varint(UInt64(v))
    }

    /// Zig-zag encoded signed varint.
    public mutating func svarint(_ v: Int64) { varint(UInt64(bitPattern: (v << 1) ^ (v >> 63))) }

    public mutating func bytes<C: Collection>(_ b: C) where C.Element == UInt8 {
        varint(b.count)
        bytes.append(contentsOf: b)
    }

    public mutating func raw<C: Collection>(_ b: C) where C.Element == UInt8 { bytes.append(contentsOf: b) }

    public mutating func string(_ s: String) {
        var s = s
        s.withUTF8 { bytes($0) }
    }

    public mutating func bool(_ b: Bool) { bytes.append(b ? 1 : 0) }

    /// Overwrites 4 bytes at `offset` (little endian); used to patch lengths and checksums.
    public mutating func patchU32(_ v: UInt32, at offset: Int) {
        for k in 0..<4 { bytes[offset + k] = UInt8(truncatingIfNeeded: v >> UInt32(8 * k)) }
    }
}

/// Reads what `ByteWriter` wrote; every read is bounds-checked and throws `CloudletError.corruption`
/// (never traps) on short or malformed input, because its input comes from disk.
public struct ByteReader {
    public let buffer: [UInt8]
    public private(set) var offset: Int
    public let end: Int
    /// What is being decoded, for error messages ("record", "commit payload", …).
    public let what: String

    public init(_ bytes: [UInt8], from offset: Int = 0, to end: Int? = nil, what: String) {
        self.buffer = bytes
        self.offset = offset
        self.end = end ?? bytes.count
        self.what = what
    }

    public var remaining: Int { end - offset }
    public var isAtEnd: Bool { offset >= end }

    private func short(_ n: Int) -> CloudletError {
        .corruption("\(what): truncated at byte \(offset), needed \(n) more of \(remaining) left")
    }

    public mutating func u8() throws -> UInt8 {
        guard offset < end else { throw short(1) }
        defer { offset += 1 }
        return buffer[offset]
    }

    public mutating func u16() throws -> UInt16 {
        guard remaining >= 2 else { throw short(2) }
        defer { offset += 2 }
        return UInt16(buffer[offset]) | UInt16(buffer[offset + 1]) << 8
    }

    public mutating func u32() throws -> UInt32 {
        guard remaining >= 4 else { throw short(4) }
        var v: UInt32 = 0
        for k in 0..<4 { v |= UInt32(buffer[offset + k]) << UInt32(8 * k) }
        offset += 4
        return v
    }

    public mutating func u64() throws -> UInt64 {
        guard remaining >= 8 else { throw short(8) }
        var v: UInt64 = 0
        for k in 0..<8 { v |= UInt64(buffer[offset + k]) << UInt64(8 * k) }
        offset += 8
        return v
    }

    public mutating func f64() throws -> Double { Double(bitPattern: try u64()) }

    public mutating func varint() throws -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let b = try u8()
            if shift == 63 && b > 1 { throw CloudletError.corruption("\(what): varint overflows 64 bits at byte \(offset)") }
            result |= UInt64(b & 0x7F) << shift
            if b & 0x80 == 0 { return result }
            shift += 7
            if shift > 63 { throw CloudletError.corruption("\(what): varint too long at byte \(offset)") }
        }
    }

    /// A LEB128 varint of at most ten bytes at index `at` of `bytes` (moved past it), for bytes read where they lie
    /// (a run's block) without a reader; nil if cut off or too long.
    public static func varint(_ bytes: ArraySlice<UInt8>, at: inout Int) -> UInt64? {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while at < bytes.endIndex, shift < 64 {
            let b = bytes[at]
            at += 1
            result |= UInt64(b & 0x7F) << shift
            if b & 0x80 == 0 { return result }
            shift += 7
        }
        return nil
    }

    /// A varint used as a non-negative `Int` (a count or size that does not describe the input's own bytes): one
    /// beyond `Int.max` is corruption, not a trap.
    public mutating func int() throws -> Int {
        let v = try varint()
        guard v <= UInt64(Int.max) else { throw CloudletError.corruption("\(what): \(v) at byte \(offset) exceeds Int.max") }
        return Int(v)
    }

    /// A varint used as a count or length: must fit what is left of the input (at `unit` bytes per item).
    public mutating func length(unit: Int = 1) throws -> Int {
        let v = try varint()
        guard v <= UInt64(remaining / max(unit, 1)) else {
            throw CloudletError.corruption("\(what): length \(v) at byte \(offset) exceeds the \(remaining) bytes left")
        }
        return Int(v)
    }

    public mutating func svarint() throws -> Int64 {
        let u = try varint()
        return Int64(bitPattern: (u >> 1) ^ (0 &- (u & 1)))
    }

    public mutating func bytes() throws -> [UInt8] {
        let n = try length()
        defer { offset += n }
        return Array(buffer[offset..<offset + n])
    }

    public mutating func raw(_ n: Int) throws -> ArraySlice<UInt8> {
        guard remaining >= n else { throw short(n) }
        defer { offset += n }
        return buffer[offset..<offset + n]
    }

    public mutating func string() throws -> String {
        let n = try length()
        let start = offset
        offset += n
        // Through a buffer pointer: `String(validating:as:)` on an ArraySlice goes through generic metadata lookups
        // that cost more than the decoding (a fifth of `cloudlet-tool verify`'s time); ASCII needs no validation.
        let s = buffer.withUnsafeBufferPointer { all -> String? in
            let bytes = UnsafeBufferPointer(rebasing: all[start..<start + n])
            var ascii = true
            for b in bytes where b >= 0x80 {
                ascii = false
                break
            }
            return ascii ? String(decoding: bytes, as: UTF8.self) : String(validating: bytes, as: UTF8.self)
        }
        guard let s else { throw CloudletError.corruption("\(what): invalid UTF-8 string at byte \(start)") }
        return s
    }

    public mutating func bool() throws -> Bool {
        switch try u8() {
        case 0: return false
        case 1: return true
        case let b: throw CloudletError.corruption("\(what): invalid boolean \(b) at byte \(offset - 1)")
        }
    }
}

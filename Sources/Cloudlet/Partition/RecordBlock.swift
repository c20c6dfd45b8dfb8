import CloudletCore
import CloudletStorage

/// A record as a version-2 commit payload stores it (docs/record-format.md, "Record block"): checksummed on its own
/// and LZ4-compressed when that pays, so that a point read fetches, checks and decodes the record's bytes and
/// nothing else of its commit (the frame holding it is stored uncompressed: ``Log/readStored(at:range:)``).
///
/// `flags u8 · uncompressed length varint (if flags bit 0) · stored bytes · CRC32C u32 of everything before it`.
enum RecordBlock {
    /// Flags bit 0: the stored bytes are an LZ4 block.
    static let lz4Flag: UInt8 = 1
    /// Records shorter than this are stored as they are (LZ4 rarely saves 1/8 of less).
    static let compressionThreshold = 96
    /// The smallest block: flags, CRC.
    static let minimumLength = 5

    /// Appends `encoded` (a ``RecordCodec`` encoding) as `block length varint · block`; returns the block's range
    /// in `w` (what a ``Commit/Slot`` of the payload names).
    static func append(_ encoded: [UInt8], to w: inout ByteWriter) -> Range<Int> {
        let compressed = LZ4Block.compressIfWorthwhile(encoded, threshold: compressionThreshold)
        var header = ByteWriter(capacity: 8)
        if compressed != nil {
            header.u8(lz4Flag)
            header.varint(encoded.count)
        } else {
            header.u8(0)
        }
        let stored = compressed ?? encoded
        w.varint(header.count + stored.count + 4)
        let start = w.count
        w.raw(header.bytes)
        w.raw(stored)
        w.u32(CRC32C.checksum(stored, continuing: CRC32C.checksum(header.bytes)))
        return start..<w.count
    }

    /// The record bytes of the block `bytes[range]`, its checksum checked and decompressed. Throws `.corruption`
    /// saying what is wrong (the caller adds where).
    static func unwrap(_ bytes: [UInt8], _ range: Range<Int>) throws -> [UInt8] {
        let r = try reader(bytes, range, what: "record block")
        return r.offset == 0 && r.end == r.buffer.count ? r.buffer : Array(r.buffer[r.offset..<r.end])
    }

    /// A reader of the record bytes of the block `bytes[range]`, its checksum checked: over `bytes` itself when the
    /// block is stored as it is (no copy), over the decompressed bytes otherwise. Throws `.corruption` saying what is
    /// wrong (the caller adds where).
    static func reader(_ bytes: [UInt8], _ range: Range<Int>, what: String) throws -> ByteReader {
        guard range.count >= minimumLength, range.lowerBound >= 0, range.upperBound <= bytes.count else {
            throw CloudletError.corruption("record block of \(range.count) bytes")
        }
        let body = range.lowerBound..<(range.upperBound - 4)
        let stored = bytes.loadLE(UInt32.self, at: body.upperBound)
        let computed = CRC32C.checksum(bytes[body])
        guard stored == computed else {
            throw CloudletError.corruption(
                "record block checksum mismatch (stored \(hex(stored)), computed \(hex(computed)))")
        }
        var r = ByteReader(bytes, from: body.lowerBound, to: body.upperBound, what: "record block")
        let flags = try r.u8()
        guard flags & ~lz4Flag == 0 else {
            throw CloudletError.corruption("record block has unknown flags 0x\(String(flags, radix: 16))")
        }
        guard flags & lz4Flag != 0 else { return ByteReader(bytes, from: r.offset, to: body.upperBound, what: what) }
        let length = try r.varint()
        guard length > 0, length <= UInt64(BatchPlanner.maxRecordSize) * 2 else {
            throw CloudletError.corruption("record block claims \(length) uncompressed bytes")
        }
        switch LZ4Block.decompress(bytes[r.offset..<body.upperBound], expected: Int(length)) {
        case .success(let out): return ByteReader(out, what: what)
        case .failure(let failure):
            throw CloudletError.corruption(
                "record block does not decompress to its \(length) bytes (LZ4_decompress_safe returned \(failure.returned))")
        }
    }
}

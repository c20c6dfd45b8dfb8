import CloudletCore

/// The fixed parts of a sorted run file (SortedRunFormat.md): the header, the block trailer, block handles and the
/// footer, with their checks. Shared by ``SortedRunWriter`` and ``SortedRunReader``.
enum SortedRunLayout {
    /// `CLTRUN\0\x01`, the first 8 bytes of a run file.
    static let headerMagic: [UInt8] = [0x43, 0x4C, 0x54, 0x52, 0x55, 0x4E, 0x00, 0x01]
    /// `CLTRUNF\x01`, the first 8 bytes of the footer.
    static let footerMagic: [UInt8] = [0x43, 0x4C, 0x54, 0x52, 0x55, 0x4E, 0x46, 0x01]
    /// The format version this code writes, and the newest it reads: 2, whose filter block is a cache-local
    /// ``BlockedBloomFilter``.
    static let formatVersion: UInt16 = 2
    /// The versions this code reads: 1 (a spread ``BloomFilter``, runs written before version 2) and 2.
    static let readableVersions: ClosedRange<UInt16> = 1...formatVersion
    static let headerSize = VersionedHeader.size
    static let footerSize = 64
    /// Compression type byte + CRC32C after every block's stored bytes.
    static let trailerSize = 5
    /// Compression types (the trailer's first byte).
    static let uncompressed: UInt8 = 0
    static let lz4: UInt8 = 1
    /// A block may be at most this long as stored (its size is a u32 in the footer, and LZ4's input limit).
    static let maxBlockSize = LZ4Block.maxInputLength

    static func header(version: UInt16 = formatVersion) -> [UInt8] {
        VersionedHeader.encode(magic: headerMagic, version: version)
    }

    /// What is wrong with a header, nil if nothing; `bytes` are the file's first 16 bytes (or fewer).
    static func headerDefect(_ bytes: [UInt8]) -> String? {
        VersionedHeader.check(bytes, magic: headerMagic, versions: readableVersions)?.reason
    }

    /// A block's stored bytes plus trailer: LZ4-compressed when `compress` is set and that saves at least 1/8.
    static func seal(_ contents: [UInt8], compress: Bool) -> [UInt8] {
        var stored = contents
        var type = uncompressed
        if compress, let packed = LZ4Block.compressIfWorthwhile(contents, threshold: 64, overhead: 4) {
            var w = ByteWriter(capacity: packed.count + 4 + trailerSize)
            w.u32(UInt32(contents.count))
            w.raw(packed)
            stored = w.bytes
            type = lz4
        }
        stored.append(type)
        let crc = CRC32C.checksum(stored)
        for shift in stride(from: 0, to: 32, by: 8) { stored.append(UInt8(truncatingIfNeeded: crc >> UInt32(shift))) }
        return stored
    }

    /// The contents of a block read with its trailer (`bytes` = stored bytes + 5, read or where they lie in a mapped
    /// run file): checksum checked, decompressed into a new array. The error says what is wrong; the caller names the
    /// file and offset.
    static func unseal(_ bytes: UnsafeRawBufferPointer) -> Result<[UInt8], BlockDefect> {
        guard bytes.count >= trailerSize else { return .failure(BlockDefect("block shorter than its trailer")) }
        let n = bytes.count - trailerSize
        let expected = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: n + 1, as: UInt32.self))
        guard CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[0...n])) == expected else {
            return .failure(BlockDefect("block CRC mismatch"))
        }
        switch bytes[n] {
        case uncompressed:
            return .success(Array(bytes[0..<n]))
        case lz4:
            guard n >= 4 else { return .failure(BlockDefect("compressed block too short")) }
            let length = Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 0, as: UInt32.self)))
            guard length <= maxBlockSize, UInt64(length) <= UInt64(n - 4) * 255 + 255 else {
                return .failure(BlockDefect("compressed block of \(n) bytes claims \(length) bytes"))
            }
            switch LZ4Block.decompress(UnsafeRawBufferPointer(rebasing: bytes[4..<n]), expected: length) {
            case .success(let out): return .success(out)
            case .failure(let f):
                return .failure(BlockDefect("LZ4 block does not decompress to \(length) bytes (returned \(f.returned))"))
            }
        case let type:
            return .failure(BlockDefect("unknown block compression type \(type)"))
        }
    }

    struct BlockDefect: Error {
        var reason: String
        init(_ reason: String) { self.reason = reason }
    }
}

/// Where a block is: the offset of its first byte and the length of its stored bytes (without the 5-byte trailer).
public struct BlockHandle: Sendable, Hashable, CustomStringConvertible {
    public var offset: UInt64
    public var size: UInt64

    public init(offset: UInt64, size: UInt64) {
        self.offset = offset
        self.size = size
    }

    /// Offset just past the block's trailer.
    public var end: UInt64 { offset + size + UInt64(SortedRunLayout.trailerSize) }

    public var description: String { "block at \(offset) (\(size) bytes)" }
}

/// The last 64 bytes of a run file (SortedRunFormat.md, "Footer").
struct SortedRunFooter: Equatable {
    /// The file's format version (the header's too).
    var version = SortedRunLayout.formatVersion
    var dataBlockCount: UInt32
    var index: BlockHandle
    var filter: BlockHandle
    var properties: BlockHandle

    func encoded() -> [UInt8] {
        var w = ByteWriter(capacity: SortedRunLayout.footerSize)
        w.raw(SortedRunLayout.footerMagic)
        w.u16(version)
        w.u16(0)
        w.u32(dataBlockCount)
        w.u64(index.offset)
        w.u64(filter.offset)
        w.u64(properties.offset)
        w.u32(UInt32(index.size))
        w.u32(UInt32(filter.size))
        w.u32(UInt32(properties.size))
        w.u32(0)
        w.u32(0)
        w.u32(CRC32C.checksum(w.bytes))
        return w.bytes
    }

    /// Parses and checks a footer: magic, CRC, version, flags, and that the three blocks lie in order between the
    /// header and the footer (`fileSize` is the whole file's).
    static func decode(_ bytes: [UInt8], fileSize: UInt64) -> Result<SortedRunFooter, SortedRunLayout.BlockDefect> {
        typealias Defect = SortedRunLayout.BlockDefect
        guard bytes.count == SortedRunLayout.footerSize else { return .failure(Defect("file too short for a footer")) }
        guard Array(bytes[0..<8]) == SortedRunLayout.footerMagic else {
            return .failure(Defect("bad footer magic (not a complete sorted run)"))
        }
        guard bytes.loadLE(UInt32.self, at: 60) == CRC32C.checksum(bytes[0..<60]) else {
            return .failure(Defect("footer CRC mismatch"))
        }
        let version = bytes.loadLE(UInt16.self, at: 8)
        guard SortedRunLayout.readableVersions.contains(version) else {
            return .failure(Defect("unsupported format version \(version)"))
        }
        guard bytes.loadLE(UInt16.self, at: 10) == 0, bytes.loadLE(UInt32.self, at: 52) == 0,
            bytes.loadLE(UInt32.self, at: 56) == 0
        else { return .failure(Defect("unknown footer flags or reserved bytes")) }
        let footer = SortedRunFooter(
            version: version,
            dataBlockCount: bytes.loadLE(UInt32.self, at: 12),
            index: BlockHandle(offset: bytes.loadLE(UInt64.self, at: 16), size: UInt64(bytes.loadLE(UInt32.self, at: 40))),
            filter: BlockHandle(
                offset: bytes.loadLE(UInt64.self, at: 24), size: UInt64(bytes.loadLE(UInt32.self, at: 44))),
            properties: BlockHandle(
                offset: bytes.loadLE(UInt64.self, at: 32), size: UInt64(bytes.loadLE(UInt32.self, at: 48))))
        let footerStart = fileSize - UInt64(SortedRunLayout.footerSize)
        let inOrder =
            footer.index.offset >= UInt64(SortedRunLayout.headerSize) && footer.filter.offset == footer.index.end
            && footer.properties.offset == footer.filter.end && footer.properties.end == footerStart
        guard inOrder else { return .failure(Defect("footer block handles do not tile the file")) }
        return .success(footer)
    }
}

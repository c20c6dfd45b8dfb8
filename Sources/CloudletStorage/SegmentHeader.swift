import CloudletCore

/// The 48-byte header at the start of every segment file (LogFormat.md, "Segment header"), and the file naming.
struct SegmentHeader: Equatable {
    static let size = 48
    /// `CLTSEG\0\x01`.
    static let magic: [UInt8] = [0x43, 0x4C, 0x54, 0x53, 0x45, 0x47, 0x00, 0x01]
    static let formatVersion: UInt16 = 1
    static let fileExtension = ".seg"
    /// Flags bit 0: a compacted segment (written by compaction; its LSNs may have gaps).
    static let compactedFlag: UInt16 = 1
    static let knownFlags: UInt16 = compactedFlag

    var flags: UInt16 = 0
    var partition: UInt32
    var firstLSN: UInt64
    /// The leader epoch that created the segment.
    var epoch: UInt64
    /// Compacted segments: the last LSN the segment covers (its frames hold some of `firstLSN...coveredThrough`;
    /// the next segment starts at `coveredThrough + 1`). 0 for a regular segment.
    var coveredThrough: UInt64 = 0
    /// Compacted segments: the compaction generation that wrote it. 0 for a regular segment.
    var generation: UInt32 = 0

    var isCompacted: Bool { flags & Self.compactedFlag != 0 }

    init(partition: UInt32, firstLSN: UInt64, epoch: UInt64) {
        self.partition = partition
        self.firstLSN = firstLSN
        self.epoch = epoch
    }

    /// The header of a compacted segment covering `firstLSN...coveredThrough`.
    init(partition: UInt32, firstLSN: UInt64, epoch: UInt64, coveredThrough: UInt64, generation: UInt32) {
        self.init(partition: partition, firstLSN: firstLSN, epoch: epoch)
        flags = Self.compactedFlag
        self.coveredThrough = coveredThrough
        self.generation = generation
    }

    func encoded() -> [UInt8] {
        var w = ByteWriter(capacity: Self.size)
        w.raw(Self.magic)
        w.u16(Self.formatVersion)
        w.u16(flags)
        w.u32(partition)
        w.u64(firstLSN)
        w.u64(epoch)
        w.u64(coveredThrough)
        w.u32(generation)
        w.u32(CRC32C.checksum(w.bytes))
        return w.bytes
    }

    /// Parses and checks a header; the error says what is wrong (the caller adds file and offset).
    static func parse(_ bytes: [UInt8]) -> Result<SegmentHeader, HeaderDefect> {
        guard bytes.count >= size else {
            return .failure(HeaderDefect(reason: "segment header is \(bytes.count) of \(size) bytes"))
        }
        guard Array(bytes[0..<8]) == magic else { return .failure(HeaderDefect(reason: "bad segment magic")) }
        let version = bytes.loadLE(UInt16.self, at: 8)
        let flags = bytes.loadLE(UInt16.self, at: 10)
        let partition = bytes.loadLE(UInt32.self, at: 12)
        let firstLSN = bytes.loadLE(UInt64.self, at: 16)
        let epoch = bytes.loadLE(UInt64.self, at: 24)
        let coveredThrough = bytes.loadLE(UInt64.self, at: 32)
        let generation = bytes.loadLE(UInt32.self, at: 40)
        let stored = bytes.loadLE(UInt32.self, at: 44)
        let computed = CRC32C.checksum(bytes[0..<44])
        guard stored == computed else {
            return .failure(HeaderDefect(reason: "segment header checksum mismatch (stored \(hex(stored)), computed \(hex(computed)))"))
        }
        guard version == formatVersion else {
            return .failure(HeaderDefect(reason: "unsupported segment format version \(version)", supported: false))
        }
        guard flags & ~knownFlags == 0 else {
            return .failure(HeaderDefect(reason: "unsupported segment flags 0x\(String(flags, radix: 16))", supported: false))
        }
        var header = SegmentHeader(partition: partition, firstLSN: firstLSN, epoch: epoch)
        header.flags = flags
        if header.isCompacted {
            guard coveredThrough >= firstLSN, generation > 0 else {
                return .failure(
                    HeaderDefect(
                        reason: "compacted segment header covers LSNs \(firstLSN)…\(coveredThrough) in generation \(generation)",
                        supported: false))
            }
            header.coveredThrough = coveredThrough
            header.generation = generation
        } else if coveredThrough != 0 || generation != 0 {
            return .failure(HeaderDefect(reason: "reserved segment header bytes are not zero", supported: false))
        }
        return .success(header)
    }

    /// Why a header did not parse. `supported == false`: a valid header of a format we cannot read.
    struct HeaderDefect: Error {
        var reason: String
        var supported = true
    }

    /// `00000000000000000042.seg` for first LSN 42.
    static func fileName(firstLSN: UInt64) -> String { zeroPadded(firstLSN) + fileExtension }

    /// `00000000000000000042-g0000000003.seg`: the compacted segment of generation 3 that starts at LSN 42.
    static func fileName(firstLSN: UInt64, generation: UInt32) -> String {
        let g = String(generation)
        return zeroPadded(firstLSN) + "-g" + String(repeating: "0", count: 10 - g.count) + g + fileExtension
    }

    /// The first LSN in a regular segment file name, or nil if `name` is not one.
    static func firstLSN(fileName name: String) -> UInt64? {
        guard name.hasSuffix(fileExtension) else { return nil }
        return parseZeroPadded(name.dropLast(fileExtension.count))
    }

    /// The first LSN and, for a compacted segment, the generation in a segment file name; nil if `name` is not one.
    static func parse(fileName name: String) -> (firstLSN: UInt64, generation: UInt32?)? {
        guard name.hasSuffix(fileExtension) else { return nil }
        let stem = name.dropLast(fileExtension.count)
        if let lsn = parseZeroPadded(stem) { return (lsn, nil) }
        guard stem.utf8.count == 32, let dash = stem.firstIndex(of: "-"),
            stem[stem.index(after: dash)] == "g", let lsn = parseZeroPadded(stem[..<dash])
        else { return nil }
        let digits = stem[stem.index(dash, offsetBy: 2)...]
        guard digits.utf8.count == 10, digits.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
            let generation = UInt32(digits)
        else { return nil }
        return (lsn, generation)
    }
}

/// `n` as 20 decimal digits, zero-padded (every UInt64 fits).
func zeroPadded(_ n: UInt64) -> String {
    let digits = String(n)
    return String(repeating: "0", count: 20 - digits.count) + digits
}

/// Parses exactly 20 decimal digits.
func parseZeroPadded(_ s: Substring) -> UInt64? {
    guard s.utf8.count == 20, s.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
    return UInt64(s)
}

/// `0x1a2b3c4d`.
package func hex(_ v: UInt32) -> String {
    let digits = String(v, radix: 16)
    return "0x" + String(repeating: "0", count: 8 - digits.count) + digits
}

extension SegmentHeader {
    /// Creates this segment's file in `directory` holding just the header, durably: write, fdatasync, then fsync
    /// the directory so that the new name survives a crash.
    func createFile(in directory: String, fileSystem: any FileSystem) throws(FileSystemError) -> any File {
        let file = try fileSystem.open(
            Path.join(directory, Self.fileName(firstLSN: firstLSN)), options: [.create, .truncate])
        do {
            try file.write(encoded(), at: 0)
            try file.fdatasync()
            try fileSystem.fsyncDirectory(directory)
        } catch {
            try? file.close()
            throw error
        }
        return file
    }
}

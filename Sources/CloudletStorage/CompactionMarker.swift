import CloudletCore

/// Where an epoch's frames start in a log: the leader epoch and the LSN of its first frame.
public struct EpochStart: Sendable, Hashable {
    public var epoch: UInt64
    public var firstLSN: UInt64

    public init(epoch: UInt64, firstLSN: UInt64) {
        self.epoch = epoch
        self.firstLSN = firstLSN
    }
}

/// The `COMPACTED` file of a partition's log directory (LogFormat.md, "Compaction marker"): which compaction
/// generation is live, which LSNs its compacted segments cover and — from format version 2 on — the epoch history
/// of that prefix. Replaced atomically (temp file, fdatasync, rename, directory fsync); writing it is the instant a
/// compaction takes effect.
public struct CompactionMarker: Sendable, Hashable {
    /// The live generation: compacted segments `<first>-g<generation>.seg` belong to the log, other generations do not.
    public var generation: UInt32
    /// Compacted segments cover LSNs `1...coveredThrough`; regular segments after them start at `coveredThrough + 1`,
    /// and regular segments starting at or below it are superseded.
    public var coveredThrough: UInt64
    /// The epoch of every frame the prefix covered, kept or dropped, as (epoch, first LSN) with both increasing: the
    /// replication protocol's epoch history of `1...coveredThrough`. Nil when it is unknown: a marker of format
    /// version 1 (written before markers carried it), or a repair that dropped frames it could not read.
    public var epochs: [EpochStart]?

    public init(generation: UInt32, coveredThrough: UInt64, epochs: [EpochStart]? = nil) {
        self.generation = generation
        self.coveredThrough = coveredThrough
        self.epochs = epochs
    }

    /// The epoch of frame `lsn` of the covered prefix (0 when unknown or `lsn` is 0).
    public func epoch(at lsn: UInt64) -> UInt64 {
        epochs?.last(where: { $0.firstLSN <= lsn })?.epoch ?? 0
    }

    public static let fileName = "COMPACTED"
    static let tempName = fileName + FileReplacement.temporarySuffix
    /// The fixed part (version 1: the whole file).
    static let size = 32
    /// The most epoch entries a marker may hold (a bound for reading a damaged count).
    static let maxEpochs = 1 << 20
    /// `CLTCMPT\x01`.
    static let magic: [UInt8] = [0x43, 0x4C, 0x54, 0x43, 0x4D, 0x50, 0x54, 0x01]
    /// Written: 2 (with the epoch history). Read: 1 and 2.
    static let formatVersion: UInt16 = 2

    /// Format version 2; version 1 when the epoch history is unknown (so that it reads back the same).
    func encoded() -> [UInt8] {
        var w = ByteWriter(capacity: Self.size + 16 * (epochs?.count ?? 0) + 4)
        w.raw(Self.magic)
        w.u16(epochs == nil ? 1 : Self.formatVersion)
        w.u16(0)
        w.u32(generation)
        w.u64(coveredThrough)
        w.u32(UInt32(epochs?.count ?? 0))
        w.u32(CRC32C.checksum(w.bytes))
        guard let epochs else { return w.bytes }
        for e in epochs {
            w.u64(e.epoch)
            w.u64(e.firstLSN)
        }
        w.u32(CRC32C.checksum(w.bytes[Self.size...]))
        return w.bytes
    }

    /// Parses a marker; the error says what is wrong.
    static func parse(_ bytes: [UInt8], path: String) throws -> CompactionMarker {
        guard bytes.count >= size else {
            throw CloudletError.corruption("compaction marker \(path) is \(bytes.count) bytes, shorter than its \(size)-byte header")
        }
        guard Array(bytes[0..<8]) == magic else { throw CloudletError.corruption("compaction marker \(path): bad magic") }
        try checkCRC(bytes, covering: 0..<28, "compaction marker \(path)")
        let version = bytes.loadLE(UInt16.self, at: 8)
        let count = Int(bytes.loadLE(UInt32.self, at: 24))
        guard version == 1 || version == 2, bytes.loadLE(UInt16.self, at: 10) == 0, version == 2 || count == 0 else {
            throw CloudletError(.notSupported, "compaction marker \(path): unsupported format version \(version) or flags")
        }
        var marker = CompactionMarker(
            generation: bytes.loadLE(UInt32.self, at: 12), coveredThrough: bytes.loadLE(UInt64.self, at: 16))
        guard marker.generation > 0, marker.coveredThrough > 0 else {
            throw CloudletError.corruption(
                "compaction marker \(path): generation \(marker.generation) covering LSN \(marker.coveredThrough)")
        }
        let expected = version == 1 ? size : size + 16 * count + 4
        guard count <= maxEpochs, bytes.count == expected else {
            throw CloudletError.corruption("compaction marker \(path) is \(bytes.count) bytes, not \(expected) (\(count) epochs)")
        }
        guard version == 2 else { return marker }
        try checkCRC(bytes, covering: size..<(expected - 4), "compaction marker \(path): epoch history")
        var epochs: [EpochStart] = []
        for k in 0..<count {
            let e = EpochStart(
                epoch: bytes.loadLE(UInt64.self, at: size + 16 * k), firstLSN: bytes.loadLE(UInt64.self, at: size + 16 * k + 8))
            guard e.firstLSN >= 1, e.firstLSN <= marker.coveredThrough,
                epochs.last.map({ $0.epoch < e.epoch && $0.firstLSN < e.firstLSN }) ?? true
            else {
                throw CloudletError.corruption(
                    "compaction marker \(path): epoch \(e.epoch) from LSN \(e.firstLSN) is out of order or past LSN \(marker.coveredThrough)")
            }
            epochs.append(e)
        }
        marker.epochs = epochs
        return marker
    }

    /// Throws `.corruption` unless the u32 after `range` is the CRC32C of the bytes in it.
    static func checkCRC(_ bytes: [UInt8], covering range: Range<Int>, _ what: String) throws {
        let stored = bytes.loadLE(UInt32.self, at: range.upperBound)
        let computed = CRC32C.checksum(bytes[range])
        guard stored == computed else {
            throw CloudletError.corruption("\(what): checksum mismatch (stored \(hex(stored)), computed \(hex(computed)))")
        }
    }

    /// The marker of the log in `directory`, nil if it has none (no compaction ever took effect). Throws
    /// `.corruption` for a damaged marker: the log's shape is then unknown.
    public static func load(directory: String, fileSystem: any FileSystem = PosixFileSystem()) throws -> CompactionMarker? {
        let path = Path.join(directory, fileName)
        guard fileSystem.fileExists(path) else { return nil }
        var bytes: [UInt8]
        do throws(FileSystemError) {
            let file = try fileSystem.open(path, options: .readOnly)
            defer { try? file.close() }
            bytes = try file.read(at: 0, count: Self.size)
            if bytes.count == Self.size, bytes.loadLE(UInt16.self, at: 8) == 2 {
                let count = min(Int(bytes.loadLE(UInt32.self, at: 24)), maxEpochs)
                bytes += try file.read(at: UInt64(Self.size), count: 16 * count + 4 + 1)
            } else {
                bytes += try file.read(at: UInt64(bytes.count), count: 1)
            }
        } catch {
            throw CloudletError.io(error, "reading compaction marker \(path)")
        }
        return try parse(bytes, path: path)
    }

    /// Replaces the marker atomically. Throws `.io`; `durabilityUnknown` is set when the rename happened but the
    /// directory fsync failed, so that a crash may leave either marker (the caller must stop writing).
    func write(directory: String, fileSystem: any FileSystem) throws(MarkerWriteError) {
        do throws(FileReplacementError) {
            try fileSystem.replaceFile(Path.join(directory, Self.fileName), with: encoded())
        } catch {
            throw MarkerWriteError(error: error.error, durabilityUnknown: error.replaced)
        }
    }

    struct MarkerWriteError: Error {
        var error: FileSystemError
        var durabilityUnknown: Bool
    }
}

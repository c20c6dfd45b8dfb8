import CloudletCore

/// The `COMPACTED` file of a partition's log directory (LogFormat.md, "Compaction marker"): which compaction
/// generation is live and which LSNs its compacted segments cover. Replaced atomically (temp file, fdatasync,
/// rename, directory fsync); writing it is the instant a compaction takes effect.
public struct CompactionMarker: Sendable, Hashable {
    /// The live generation: compacted segments `<first>-g<generation>.seg` belong to the log, other generations do not.
    public var generation: UInt32
    /// Compacted segments cover LSNs `1...coveredThrough`; regular segments after them start at `coveredThrough + 1`,
    /// and regular segments starting at or below it are superseded.
    public var coveredThrough: UInt64

    public init(generation: UInt32, coveredThrough: UInt64) {
        self.generation = generation
        self.coveredThrough = coveredThrough
    }

    public static let fileName = "COMPACTED"
    static let tempName = fileName + FileReplacement.temporarySuffix
    static let size = 32
    /// `CLTCMPT\x01`.
    static let magic: [UInt8] = [0x43, 0x4C, 0x54, 0x43, 0x4D, 0x50, 0x54, 0x01]
    static let formatVersion: UInt16 = 1

    func encoded() -> [UInt8] {
        var w = ByteWriter(capacity: Self.size)
        w.raw(Self.magic)
        w.u16(Self.formatVersion)
        w.u16(0)
        w.u32(generation)
        w.u64(coveredThrough)
        w.u32(0)
        w.u32(CRC32C.checksum(w.bytes))
        return w.bytes
    }

    /// Parses a marker; the error says what is wrong.
    static func parse(_ bytes: [UInt8], path: String) throws -> CompactionMarker {
        guard bytes.count == size else {
            throw CloudletError.corruption("compaction marker \(path) is \(bytes.count) bytes, not \(size)")
        }
        guard Array(bytes[0..<8]) == magic else { throw CloudletError.corruption("compaction marker \(path): bad magic") }
        let stored = bytes.loadLE(UInt32.self, at: 28)
        let computed = CRC32C.checksum(bytes[0..<28])
        guard stored == computed else {
            throw CloudletError.corruption(
                "compaction marker \(path): checksum mismatch (stored \(hex(stored)), computed \(hex(computed)))")
        }
        let version = bytes.loadLE(UInt16.self, at: 8)
        guard version == formatVersion, bytes.loadLE(UInt16.self, at: 10) == 0, bytes.loadLE(UInt32.self, at: 24) == 0
        else {
            throw CloudletError(.notSupported, "compaction marker \(path): unsupported format version \(version) or flags")
        }
        let marker = CompactionMarker(
            generation: bytes.loadLE(UInt32.self, at: 12), coveredThrough: bytes.loadLE(UInt64.self, at: 16))
        guard marker.generation > 0, marker.coveredThrough > 0 else {
            throw CloudletError.corruption(
                "compaction marker \(path): generation \(marker.generation) covering LSN \(marker.coveredThrough)")
        }
        return marker
    }

    /// The marker of the log in `directory`, nil if it has none (no compaction ever took effect). Throws
    /// `.corruption` for a damaged marker: the log's shape is then unknown.
    public static func load(directory: String, fileSystem: any FileSystem = PosixFileSystem()) throws -> CompactionMarker? {
        let path = Path.join(directory, fileName)
        guard fileSystem.fileExists(path) else { return nil }
        let bytes: [UInt8]
        do throws(FileSystemError) {
            let file = try fileSystem.open(path, options: .readOnly)
            defer { try? file.close() }
            bytes = try file.read(at: 0, count: Self.size + 1)
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

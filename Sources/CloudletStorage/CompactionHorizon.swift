import CloudletCore

/// The `HORIZON` file of a replicated log's directory (LogFormat.md, "Compaction horizon"): the highest LSN known
/// to be fsynced, and equal, on every replica of the partition. Compaction of a replica's log stops there
/// (``LogConfiguration/boundedCompaction``), so that every replica can still tail every frame it lacks from any
/// other. Kept so that a restarted node, and `cloudlet-tool compact` on a stopped one, know the bound without asking
/// the cluster; it only ever grows. Replaced atomically.
public enum CompactionHorizon {
    public static let fileName = "HORIZON"
    static let size = 32
    /// `CLTHRZN\x01`.
    static let magic: [UInt8] = [0x43, 0x4C, 0x54, 0x48, 0x52, 0x5A, 0x4E, 0x01]
    static let formatVersion: UInt16 = 1

    static func encoded(_ lsn: UInt64) -> [UInt8] {
        var w = ByteWriter(capacity: size)
        w.raw(magic)
        w.u16(formatVersion)
        w.u16(0)
        w.u32(0)
        w.u64(lsn)
        w.u32(0)
        w.u32(CRC32C.checksum(w.bytes))
        return w.bytes
    }

    static func parse(_ bytes: [UInt8], path: String) throws -> UInt64 {
        guard bytes.count == size, Array(bytes[0..<8]) == magic else {
            throw CloudletError.corruption("compaction horizon \(path): \(bytes.count) bytes or bad magic")
        }
        try CompactionMarker.checkCRC(bytes, covering: 0..<28, "compaction horizon \(path)")
        let version = bytes.loadLE(UInt16.self, at: 8)
        guard version == formatVersion, bytes.loadLE(UInt16.self, at: 10) == 0 else {
            throw CloudletError(.notSupported, "compaction horizon \(path): unsupported format version \(version) or flags")
        }
        return bytes.loadLE(UInt64.self, at: 16)
    }

    /// The horizon stored in `directory`: 0 when there is none yet. Throws `.corruption` for a damaged file.
    public static func load(directory: String, fileSystem: any FileSystem = PosixFileSystem()) throws -> UInt64 {
        let path = Path.join(directory, fileName)
        guard fileSystem.fileExists(path) else { return 0 }
        let bytes: [UInt8]
        do throws(FileSystemError) {
            let file = try fileSystem.open(path, options: .readOnly)
            defer { try? file.close() }
            bytes = try file.read(at: 0, count: size + 1)
        } catch {
            throw CloudletError.io(error, "reading compaction horizon \(path)")
        }
        return try parse(bytes, path: path)
    }

    /// Stores `lsn` atomically (temp file, fdatasync, rename, directory fsync). Throws `.io`.
    public static func write(_ lsn: UInt64, directory: String, fileSystem: any FileSystem = PosixFileSystem()) throws {
        do throws(FileReplacementError) {
            try fileSystem.replaceFile(Path.join(directory, fileName), with: encoded(lsn))
        } catch {
            throw CloudletError.io(error.error, "writing the compaction horizon of \(directory)")
        }
    }
}

#if canImport(Glibc)
import Glibc
#endif
import CloudletCore
import Synchronization

/// The checkpoints of a partition: the derived state (opaque bytes to this layer) as of an LSN, plus the log
/// position right after that LSN so that recovery can start there. Files `checkpoint-<lsn, 20 digits>.ckpt`
/// (LogFormat.md, "Checkpoint file").
///
/// A checkpoint is written as a temp file, fdatasync'd, renamed into place and the directory fsync'd: a crash
/// leaves the old checkpoint or the new one, never a mix. The newest two are kept, so a damaged newest one falls
/// back to the one before. Checkpoint LSNs must increase.
public final class CheckpointStore: Sendable {
    /// The directory holding the checkpoint files.
    public let directory: String
    let fileSystem: any FileSystem
    /// Serializes writers of this store (the temp file name is per LSN).
    private let writeLock = Mutex(())

    static let magic: [UInt8] = [0x43, 0x4C, 0x54, 0x43, 0x4B, 0x50, 0x54, 0x01]  // CLTCKPT\x01
    static let formatVersion: UInt16 = 1
    static let headerSize = 64
    static let prefix = "checkpoint-"
    static let suffix = ".ckpt"
    static let tempSuffix = FileReplacement.temporarySuffix
    /// How many checkpoints survive a write.
    static let kept = 2

    public init(directory: String, fileSystem: any FileSystem = PosixFileSystem()) {
        self.directory = Path.normalize(directory)
        self.fileSystem = fileSystem
    }

    /// Atomically writes a checkpoint: temp file + fdatasync + rename + fsync(dir); keeps the newest 2 (by LSN)
    /// and deletes older ones and leftover temp files.
    public func write(lsn: UInt64, next: FramePosition?, payload: [UInt8]) throws {
        let path = Path.join(directory, Self.fileName(lsn: lsn))
        let bytes = Self.encode(lsn: lsn, next: next, payload: payload)
        try writeLock.withLock { _ throws(CloudletError) in
            do throws(FileSystemError) {
                try fileSystem.createDirectory(directory)
                do throws(FileReplacementError) { try fileSystem.replaceFile(path, with: bytes) } catch {
                    throw error.error
                }

                let names = try fileSystem.listDirectory(directory)
                let checkpoints = names.compactMap { Self.lsn(fileName: $0) }.sorted(by: >)
                var removed = false
                for old in checkpoints.dropFirst(Self.kept) {
                    try fileSystem.remove(Path.join(directory, Self.fileName(lsn: old)))
                    removed = true
                }
                for name in names where name.hasPrefix(Self.prefix) && name.hasSuffix(Self.suffix + Self.tempSuffix) {
                    try fileSystem.remove(Path.join(directory, name))
                    removed = true
                }
                if removed { try fileSystem.fsyncDirectory(directory) }
            } catch {
                throw CloudletError.io(error, "writing checkpoint \(path)")
            }
        }
    }

    /// Deletes every checkpoint but the one at `lsn` (after a compaction, older checkpoints point at frames that
    /// moved and would be ignored anyway).
    public func removeAll(except lsn: UInt64) throws {
        try writeLock.withLock { _ throws(CloudletError) in
            do throws(FileSystemError) {
                var removed = false
                for name in try fileSystem.listDirectory(directory) {
                    guard let other = Self.lsn(fileName: name), other != lsn else { continue }
                    try fileSystem.remove(Path.join(directory, name))
                    removed = true
                }
                if removed { try fileSystem.fsyncDirectory(directory) }
            } catch {
                throw CloudletError.io(error, "removing old checkpoints in \(directory)")
            }
        }
    }

    /// The newest checkpoint whose header, checksums and size check out; falls back to an older one if the newest
    /// is damaged; nil if there is none. Temp files of interrupted writes are ignored.
    public func loadLatest() throws -> (lsn: UInt64, next: FramePosition?, payload: [UInt8])? {
        let names: [String]
        do throws(FileSystemError) { names = try fileSystem.listDirectory(directory) } catch {
            if error.errno == ENOENT { return nil }
            throw CloudletError.io(error, "listing checkpoint directory \(directory)")
        }
        for lsn in names.compactMap({ Self.lsn(fileName: $0) }).sorted(by: >) {
            let path = Path.join(directory, Self.fileName(lsn: lsn))
            let bytes = try readFile(path)
            if let checkpoint = Self.decode(bytes), checkpoint.lsn == lsn { return checkpoint }
        }
        return nil
    }

    static func fileName(lsn: UInt64) -> String { prefix + zeroPadded(lsn) + suffix }

    /// The LSN in a checkpoint file name, or nil if `name` is not one (temp files are not).
    static func lsn(fileName name: String) -> UInt64? {
        guard name.hasPrefix(prefix), name.hasSuffix(suffix) else { return nil }
        return parseZeroPadded(name.dropFirst(prefix.count).dropLast(suffix.count))
    }

    static func encode(lsn: UInt64, next: FramePosition?, payload: [UInt8]) -> [UInt8] {
        var w = ByteWriter(capacity: headerSize + payload.count)
        w.raw(magic)
        w.u16(formatVersion)
        w.u16(next == nil ? 0 : 1)
        w.u32(0)
        w.u64(lsn)
        w.u64(next?.segment ?? 0)
        w.u64(next?.offset ?? 0)
        w.u32(next?.length ?? 0)
        w.u32(CRC32C.checksum(payload))
        w.u64(UInt64(payload.count))
        w.u32(0)
        w.u32(CRC32C.checksum(w.bytes))
        w.raw(payload)
        return w.bytes
    }

    /// A checkpoint file as ``list()`` finds it.
    public struct CheckpointFile: Sendable {
        public var path: String
        /// The LSN in its name.
        public var lsn: UInt64
        public var size: UInt64
        /// What is wrong with it; nil when its header, checksums, size and LSN check out.
        public var problem: String?
        /// The position recovery may start at, and the payload (empty when `problem` is set).
        public var next: FramePosition?
        public var payload: [UInt8]
    }

    /// Every checkpoint file, newest first, checked; and leftover temp files of interrupted writes.
    public func list() throws -> (checkpoints: [CheckpointFile], temporary: [String]) {
        let names: [String]
        do throws(FileSystemError) { names = try fileSystem.listDirectory(directory) } catch {
            if error.errno == ENOENT { return ([], []) }
            throw CloudletError.io(error, "listing checkpoint directory \(directory)")
        }
        var files: [CheckpointFile] = []
        for lsn in names.compactMap({ Self.lsn(fileName: $0) }).sorted(by: >) {
            let path = Path.join(directory, Self.fileName(lsn: lsn))
            let bytes = try readFile(path)
            var entry = CheckpointFile(path: path, lsn: lsn, size: UInt64(bytes.count), problem: nil, next: nil, payload: [])
            switch Self.decodeExplained(bytes) {
            case .failure(let why): entry.problem = why.reason
            case .success(let c) where c.lsn != lsn: entry.problem = "holds LSN \(c.lsn), not the \(lsn) of its name"
            case .success(let c):
                entry.next = c.next
                entry.payload = c.payload
            }
            files.append(entry)
        }
        let temporary = names.filter { $0.hasPrefix(Self.prefix) && $0.hasSuffix(Self.suffix + Self.tempSuffix) }
            .map { Path.join(directory, $0) }
        return (files, temporary)
    }

    struct Problem: Error {
        var reason: String
    }

    /// The checkpoint in `bytes`, or nil if anything does not check out.
    static func decode(_ bytes: [UInt8]) -> (lsn: UInt64, next: FramePosition?, payload: [UInt8])? {
        try? decodeExplained(bytes).get()
    }

    /// The checkpoint in `bytes`, or what does not check out.
    static func decodeExplained(_ bytes: [UInt8]) -> Result<(lsn: UInt64, next: FramePosition?, payload: [UInt8]), Problem> {
        guard bytes.count >= headerSize else { return .failure(Problem(reason: "\(bytes.count) bytes, shorter than the header")) }
        guard Array(bytes[0..<8]) == magic else { return .failure(Problem(reason: "bad magic")) }
        guard bytes.loadLE(UInt32.self, at: 60) == CRC32C.checksum(bytes[0..<60]) else {
            return .failure(Problem(reason: "header checksum mismatch"))
        }
        guard bytes.loadLE(UInt16.self, at: 8) == formatVersion else {
            return .failure(Problem(reason: "unsupported format version \(bytes.loadLE(UInt16.self, at: 8))"))
        }
        let flags = bytes.loadLE(UInt16.self, at: 10)
        let payloadLength = bytes.loadLE(UInt64.self, at: 48)
        guard flags & ~1 == 0, UInt64(bytes.count - headerSize) == payloadLength else {
            return .failure(Problem(reason: "the header says \(payloadLength) payload bytes, the file has \(bytes.count - headerSize)"))
        }
        let payload = Array(bytes[headerSize...])
        guard CRC32C.checksum(payload) == bytes.loadLE(UInt32.self, at: 44) else {
            return .failure(Problem(reason: "payload checksum mismatch"))
        }
        let next =
            flags & 1 == 0
            ? nil
            : FramePosition(
                segment: bytes.loadLE(UInt64.self, at: 24), offset: bytes.loadLE(UInt64.self, at: 32),
                length: bytes.loadLE(UInt32.self, at: 40))
        return .success((bytes.loadLE(UInt64.self, at: 16), next, payload))
    }

    /// The whole content of a checkpoint file.
    private func readFile(_ path: String) throws -> [UInt8] {
        do throws(FileSystemError) { return try fileSystem.readWholeFile(path) } catch {
            throw CloudletError.io(error, "reading checkpoint \(path)")
        }
    }
}

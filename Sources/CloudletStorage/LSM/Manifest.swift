#if canImport(Glibc)
import Glibc
#endif
import CloudletCore
import Synchronization

/// The version set of an LSM tree: which runs are live, the caller's log position and the counters, kept as an
/// append-only log of ``ManifestEdit``s in `MANIFEST-<n>` and named by `CURRENT` (SortedRunFormat.md, "Manifest").
///
/// Each ``apply(_:)`` appends one record (length, CRC32C, edit) and fdatasyncs it before the new version is
/// returned. Opening replays the records; a damaged *last* record with nothing intact after it is a torn append
/// (ignored and reported in ``openReport``), any other damage is corruption and the open fails. A read-write
/// open of an intact manifest no longer than ``Configuration/rewriteSize`` appends to it and writes nothing; any
/// other writes a fresh manifest holding one snapshot record, points `CURRENT` at it (``FileReplacement``). Either
/// way it deletes the leftovers: run files the version does not list, temp files, older manifests. A manifest that grows
/// past ``Configuration/rewriteSize`` is rewritten the same way, and so is one that ``close()`` finds longer than
/// ``Configuration/closeRewriteSize`` and more than twice its snapshot (so that an open after a clean close replays
/// one record).
///
/// The first failed write or fdatasync is final: the manifest refuses every later edit (`readOnly`), since what
/// reached the disk is unknown; reopen to go on.
public final class Manifest: Sendable {
    /// How the manifest is kept.
    public struct Configuration: Sendable, Hashable {
        /// A manifest longer than this is rewritten as one snapshot record after the next edit, or when the tree
        /// opens; a shorter one is kept and appended to, so that an open replays at most this many bytes of
        /// edits. Default 256 KiB (about a thousand flushes and merges).
        public var rewriteSize: UInt64 = 256 << 10
        /// ``close()`` rewrites a manifest longer than this and more than twice the length of its snapshot record as
        /// that one record, so that the next open replays one record rather than the edits. Default 16 KiB (a
        /// replay of ~0.3 ms; below it a rewrite's three fsyncs would cost more at close than they save at open).
        public var closeRewriteSize: UInt64 = 16 << 10
        /// Open without writing anything: no fresh manifest, no deletions, ``apply(_:)`` refused. Default false.
        public var readOnly = false

        public init() {}
    }

    /// What opening found and did.
    public struct OpenReport: Sendable, Hashable {
        /// The manifest that was read (nil for a new tree).
        public var manifest: String?
        /// A torn last edit that was ignored: where it starts and what is wrong with it.
        public var tornTail: String?
        /// How many edits were applied.
        public var editCount = 0
        /// Leftover files deleted (names).
        public var removedFiles: [String] = []
        /// Whether the manifest that was read takes the next edits (intact and short: nothing written at open),
        /// rather than a fresh one holding a snapshot.
        public var reused = false
    }

    static let currentName = "CURRENT"
    static let manifestPrefix = "MANIFEST-"
    /// `CLTMANI\x01`.
    static let magic: [UInt8] = [0x43, 0x4C, 0x54, 0x4D, 0x41, 0x4E, 0x49, 0x01]
    static let formatVersion: UInt16 = 1
    static let headerSize = VersionedHeader.size
    static let recordHeaderSize = 8

    /// The tree's directory, which holds `CURRENT`, the manifest and the runs.
    public let directory: String
    public let configuration: Configuration
    /// What opening found (a torn last edit) and did (leftovers deleted).
    public let openReport: OpenReport
    let fileSystem: any FileSystem

    private struct State {
        var version: LSMVersion
        var file: (any File)?
        var path: String
        var size: UInt64
        var failure: String?
    }

    private let state: Mutex<State>

    /// Opens (or, when `directory` holds no `CURRENT` and no runs, creates) the manifest of the tree in
    /// `directory`.
    public init(
        directory: String, fileSystem: any FileSystem = PosixFileSystem(), configuration: Configuration = Configuration()
    ) throws {
        self.directory = Path.normalize(directory)
        self.fileSystem = fileSystem
        self.configuration = configuration
        var report = OpenReport()
        let names: [String]
        do throws(FileSystemError) {
            if !configuration.readOnly { try fileSystem.createDirectory(directory) }
            names = try fileSystem.listDirectory(directory)
        } catch {
            throw CloudletError.io(error, "listing LSM directory \(directory)")
        }
        var version = LSMVersion()
        var length: UInt64 = 0
        if names.contains(Self.currentName) {
            let name = try Self.readCurrent(directory, fileSystem)
            let path = Path.join(directory, name)
            report.manifest = path
            (version, report.tornTail, report.editCount, length) = try Self.replay(path, fileSystem)
            for run in version.runs where !names.contains(SortedRunFile.name(run.fileNumber)) {
                throw CloudletError.corruption("manifest \(path) lists run \(run.fileNumber), whose file is missing")
            }
        } else if let run = names.first(where: { SortedRunFile.number(fileName: $0) != nil }) {
            throw CloudletError.corruption("LSM directory \(directory) holds run \(run) but no \(Self.currentName)")
        }
        if configuration.readOnly {
            state = Mutex(State(version: version, file: nil, path: report.manifest ?? "", size: 0, failure: nil))
            openReport = report
            return
        }
        // An intact manifest under the rewrite size takes the next edits as it is: opening then writes nothing (a
        // fresh manifest costs an fdatasync, a replacement of CURRENT and two directory fsyncs). A new tree, a torn
        // last edit or a long manifest gets a fresh one.
        let file: any File, path: String, size: UInt64
        if let existing = report.manifest, report.tornTail == nil, length <= configuration.rewriteSize {
            do throws(FileSystemError) { file = try fileSystem.open(existing, options: []) } catch {
                throw CloudletError.io(error, "opening manifest \(existing) for appending")
            }
            (path, size) = (existing, length)
            report.reused = true
        } else {
            (file, path, size) = try Self.writeFresh(&version, directory, fileSystem)
        }
        state = Mutex(State(version: version, file: file, path: path, size: size, failure: nil))
        do {
            report.removedFiles = try Self.removeLeftovers(version, keeping: Path.name(path), directory, fileSystem)
        } catch {
            try? file.close()
            throw error
        }
        openReport = report
    }

    /// The current version.
    public var current: LSMVersion { state.withLock { $0.version } }

    /// A file number no run or manifest uses yet. It is made durable by the next edit (every edit records the
    /// counter), so a number handed out but never recorded may be handed out again after a reopen; its file, if
    /// any, is deleted as a leftover by that open first.
    public func newFileNumber() -> UInt64 {
        state.withLock { s in
            defer { s.version.nextFileNumber += 1 }
            return s.version.nextFileNumber
        }
    }

    /// Appends `edit` durably and returns the new version. Throws `corruption`-free errors only: `invalidArguments`
    /// if the edit does not apply (a bug of the caller's), `io` if the write or fdatasync fails (after which every
    /// edit is refused with `readOnly`).
    @discardableResult
    public func apply(_ edit: ManifestEdit) throws -> LSMVersion {
        try state.withLock { s throws(CloudletError) -> LSMVersion in
            guard !configuration.readOnly else { throw CloudletError(.readOnly, "manifest \(directory) is open read-only") }
            if let failure = s.failure {
                throw CloudletError(.readOnly, "manifest \(s.path) failed earlier and takes no more edits: \(failure)")
            }
            var edit = edit
            edit.nextFileNumber = s.version.nextFileNumber
            let next: LSMVersion
            switch s.version.applying(edit) {
            case .success(let v): next = v
            case .failure(let e): throw CloudletError.invalid("manifest edit does not apply: \(e.reason)")
            }
            let record = Self.record(edit)
            do throws(FileSystemError) {
                try s.file!.write(record, at: s.size)
                try s.file!.fdatasync()
            } catch {
                s.failure = error.description
                throw CloudletError.io(error, "appending to manifest \(s.path)")
            }
            CrashPoint.reached("lsm.manifest.appended")
            s.size += UInt64(record.count)
            s.version = next
            // The edit is durable whatever happens now: a failed rewrite only stops later edits (see `rewrite`).
            if s.size > configuration.rewriteSize { rewrite(&s) }
            return next
        }
    }

    /// Runs `body` with the current version under the manifest's lock (no edit applies meanwhile); returns the
    /// version and what `body` made. Throws `.io` for what `body` throws.
    func withVersionLocked<T>(_ body: (LSMVersion) throws(FileSystemError) -> T) throws -> (LSMVersion, T) {
        try state.withLock { s throws(CloudletError) -> (LSMVersion, T) in
            do throws(FileSystemError) { return (s.version, try body(s.version)) } catch {
                throw CloudletError.io(error, "holding the runs of \(directory)")
            }
        }
    }

    /// Closes the manifest file. A manifest longer than ``Configuration/closeRewriteSize`` and more than twice its
    /// snapshot's length (edits the next open would replay one by one: ~240 KB of them at 10 M records) is first
    /// rewritten as one snapshot record, so that the next open reads a few kilobytes; a failure to do so is harmless
    /// (the old manifest stays in place, whole).
    public func close() {
        state.withLock { s in
            if !configuration.readOnly, s.failure == nil, s.file != nil, s.size > configuration.closeRewriteSize,
                s.size > UInt64(Self.headerSize + 2 * Self.record(s.version.snapshot).count)
            {
                rewrite(&s)
            }
            try? s.file?.close()
            s.file = nil
            if s.failure == nil { s.failure = "closed" }
        }
    }

    /// Replaces the manifest with a fresh one holding one snapshot. A failure is kept in the state: the next
    /// ``apply(_:)`` throws it (which of the two manifests a crash would leave is unknown once `CURRENT` was being
    /// replaced, but both hold every edit so far).
    private func rewrite(_ s: inout State) {
        var version = s.version
        let old = s.path
        let (file, path, size): (any File, String, UInt64)
        do { (file, path, size) = try Self.writeFresh(&version, directory, fileSystem) } catch {
            s.failure = "rewriting the manifest: \(error)"
            return
        }
        try? s.file?.close()
        s = State(version: version, file: file, path: path, size: size, failure: nil)
        do throws(FileSystemError) {
            try fileSystem.remove(old)
            try fileSystem.fsyncDirectory(directory)
        } catch {
            // The new manifest is in place; the old one is a leftover the next open deletes.
        }
    }

    // MARK: - Files

    static func manifestName(_ number: UInt64) -> String { manifestPrefix + zeroPadded(number) }

    static func manifestNumber(_ name: String) -> UInt64? {
        guard name.hasPrefix(manifestPrefix) else { return nil }
        return parseZeroPadded(name.dropFirst(manifestPrefix.count))
    }

    /// One record: length (u32), CRC32C of the length's 4 bytes and the edit, the edit.
    static func record(_ edit: ManifestEdit) -> [UInt8] {
        let payload = edit.encoded()
        var length = ByteWriter(capacity: 4)
        length.u32(UInt32(payload.count))
        var w = ByteWriter(capacity: 8 + payload.count)
        w.raw(length.bytes)
        w.u32(CRC32C.checksum(payload, continuing: CRC32C.checksum(length.bytes)))
        w.raw(payload)
        return w.bytes
    }

    static func header() -> [UInt8] { VersionedHeader.encode(magic: magic, version: formatVersion) }

    /// The manifest name `CURRENT` holds: `MANIFEST-<20 digits>` and a newline, nothing else.
    static func readCurrent(_ directory: String, _ fileSystem: any FileSystem) throws -> String {
        let path = Path.join(directory, currentName)
        let bytes = try readAll(path, fileSystem)
        guard bytes.last == 0x0A, let name = String(validating: bytes.dropLast(), as: UTF8.self),
            manifestNumber(name) != nil
        else { throw CloudletError.corruption("\(path) does not name a manifest") }
        guard fileSystem.fileExists(Path.join(directory, name)) else {
            throw CloudletError.corruption("\(path) names \(name), which does not exist")
        }
        return name
    }

    static func readAll(_ path: String, _ fileSystem: any FileSystem) throws -> [UInt8] {
        do throws(FileSystemError) { return try fileSystem.readFile(path) } catch {
            throw CloudletError.io(error, "reading \(path)")
        }
    }

    /// Applies every record of the manifest at `path`: the version, a torn tail if there was one, the edit count,
    /// and the length of the intact part (header and whole records).
    static func replay(_ path: String, _ fileSystem: any FileSystem) throws -> (LSMVersion, String?, Int, UInt64) {
        let bytes = try readAll(path, fileSystem)
        func corrupt(_ offset: Int, _ what: String) -> CloudletError {
            .corruption("manifest \(path) offset \(offset): \(what)")
        }
        switch VersionedHeader.check(bytes, magic: magic, versions: formatVersion...formatVersion) {
        case nil: break
        case .damaged(let reason)?: throw corrupt(0, reason)
        case .unsupported(let reason)?: throw CloudletError(.notSupported, "manifest \(path): \(reason)")
        }
        var version = LSMVersion()
        var offset = headerSize
        var count = 0
        while offset < bytes.count {
            guard let edit = intactRecord(bytes, at: offset) else {
                // Damaged: a torn append if nothing intact follows, corruption otherwise.
                if let later = (offset + 1..<bytes.count).first(where: { intactRecord(bytes, at: $0) != nil }) {
                    throw corrupt(offset, "damaged edit, but an intact edit follows at offset \(later)")
                }
                return (version, "offset \(offset): \(bytes.count - offset) bytes of a torn edit ignored", count, UInt64(offset))
            }
            let decoded: ManifestEdit
            do { decoded = try ManifestEdit(decoding: edit) } catch let error as CloudletError {
                throw CloudletError(error.code, "manifest \(path) offset \(offset): \(error.message)")
            }
            switch version.applying(decoded) {
            case .success(let v): version = v
            case .failure(let e): throw corrupt(offset, "edit \(e.reason)")
            }
            offset += recordHeaderSize + edit.count
            count += 1
        }
        return (version, nil, count, UInt64(offset))
    }

    /// The payload of the record at `offset` if its length fits the file and its CRC matches.
    static func intactRecord(_ bytes: [UInt8], at offset: Int) -> [UInt8]? {
        guard bytes.count - offset >= recordHeaderSize else { return nil }
        let length = Int(bytes.loadLE(UInt32.self, at: offset))
        guard length <= bytes.count - offset - recordHeaderSize else { return nil }
        let start = offset + recordHeaderSize
        let crc = CRC32C.checksum(bytes[start..<start + length], continuing: CRC32C.checksum(bytes[offset..<offset + 4]))
        guard crc == bytes.loadLE(UInt32.self, at: offset + 4) else { return nil }
        return Array(bytes[start..<start + length])
    }

    /// Writes `MANIFEST-<n>` (header + one snapshot record of `version`), fdatasyncs it, points `CURRENT` at it.
    /// Uses a new file number (recorded in the snapshot). Returns the open file, its path and size.
    static func writeFresh(_ version: inout LSMVersion, _ directory: String, _ fileSystem: any FileSystem) throws -> (
        any File, String, UInt64
    ) {
        let number = version.nextFileNumber
        version.nextFileNumber += 1
        let name = manifestName(number)
        let path = Path.join(directory, name)
        let bytes = header() + record(version.snapshot)
        let file: any File
        do throws(FileSystemError) {
            file = try fileSystem.open(path, options: [.create, .truncate])
            do throws(FileSystemError) {
                try file.write(bytes, at: 0)
                try file.fdatasync()
            } catch {
                try? file.close()
                throw error
            }
        } catch {
            throw CloudletError.io(error, "writing manifest \(path)")
        }
        do throws(FileReplacementError) {
            try fileSystem.replaceFile(Path.join(directory, currentName), with: Array((name + "\n").utf8))
        } catch {
            try? file.close()
            throw CloudletError.io(error.error, "pointing \(currentName) at \(name)")
        }
        return (file, path, UInt64(bytes.count))
    }

    /// Deletes run files `version` does not list, run temp files, manifests other than `keeping` and a `CURRENT`
    /// temp file a crash left (the replacement of `CURRENT` reuses it, but an open that keeps its manifest makes
    /// none); fsyncs the directory if it deleted anything. Returns the names deleted.
    static func removeLeftovers(
        _ version: LSMVersion, keeping: String, _ directory: String, _ fileSystem: any FileSystem
    ) throws -> [String] {
        let live = Set(version.runs.map(\.fileNumber))
        let tmp = FileReplacement.temporarySuffix
        do throws(FileSystemError) {
            let leftovers = try fileSystem.listDirectory(directory).filter { name in
                if let number = SortedRunFile.number(fileName: name) { return !live.contains(number) }
                if name.hasSuffix(SortedRunFile.suffix + tmp) || name == currentName + tmp { return true }
                return manifestNumber(name) != nil && name != keeping
            }
            guard !leftovers.isEmpty else { return [] }
            for name in leftovers { try fileSystem.remove(Path.join(directory, name)) }
            try fileSystem.fsyncDirectory(directory)
            return leftovers.sorted()
        } catch {
            throw CloudletError.io(error, "removing leftover files in \(directory)")
        }
    }
}

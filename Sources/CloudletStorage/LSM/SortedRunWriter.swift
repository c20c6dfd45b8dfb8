#if canImport(Glibc)
import Glibc
#endif
import CloudletCore

/// Writes one sorted run file (SortedRunFormat.md): entries in strictly increasing key order, one entry a key.
///
/// The file is written as `path` + `.tmp` and becomes `path` only in ``finish()`` — fdatasync, rename, directory
/// fsync (``FileReplacement``) — so a crash or a failure never leaves a partial run under a run's name. Not
/// thread-safe: one owner adds entries and finishes.
///
/// ```swift
/// let writer = try SortedRunWriter(path: dir + "/" + SortedRunFile.name(7), fileNumber: 7, fileSystem: fs)
/// for entry in sorted { try writer.add(entry) }
/// let properties = try writer.finish()
/// ```
public final class SortedRunWriter {
    public let path: String
    public let fileNumber: UInt64
    public let configuration: SortedRunConfiguration
    private let replacement: FileReplacement
    private let fileSystem: any FileSystem
    private var offset = UInt64(SortedRunLayout.headerSize)
    private var block: BlockBuilder
    private var index = BlockBuilder(restartInterval: 1)
    /// The last data block written, waiting for the next key to choose its index separator.
    private var pendingHandle: BlockHandle?
    /// The last key of the last data block written.
    private var blockLastKey: [UInt8] = []
    private var hashes: [UInt64] = []
    private var properties = SortedRunProperties()
    private var lastKey: [UInt8]?
    private var state = State.open
    /// The format version written: the current one, or 1 (its spread filter) for tests of reading old runs.
    private let formatVersion: UInt16

    private enum State { case open, finished, failed }

    /// Starts a run at `path` (its temp file is created now; the directory must exist). `creator` goes into the
    /// properties (e.g. `flush`).
    public convenience init(
        path: String, fileNumber: UInt64, configuration: SortedRunConfiguration = SortedRunConfiguration(),
        fileSystem: any FileSystem = PosixFileSystem(), creator: String = ""
    ) throws {
        try self.init(
            path: path, fileNumber: fileNumber, configuration: configuration, fileSystem: fileSystem, creator: creator,
            formatVersion: SortedRunLayout.formatVersion)
    }

    /// A writer of format version `formatVersion` (one of ``SortedRunLayout/readableVersions``).
    init(
        path: String, fileNumber: UInt64, configuration: SortedRunConfiguration, fileSystem: any FileSystem,
        creator: String, formatVersion: UInt16
    ) throws {
        precondition(configuration.blockSize >= 1 && configuration.bloomBitsPerKey >= 1)
        precondition(SortedRunLayout.readableVersions.contains(formatVersion))
        self.formatVersion = formatVersion
        self.path = path
        self.fileNumber = fileNumber
        self.configuration = configuration
        block = BlockBuilder(restartInterval: configuration.restartInterval)
        self.fileSystem = fileSystem
        properties.fileNumber = fileNumber
        properties.formatVersion = formatVersion
        properties.creator = creator
        do throws(FileSystemError) {
            replacement = try FileReplacement(replacing: path, fileSystem: fileSystem)
            try replacement.file.write(SortedRunLayout.header(version: formatVersion), at: 0)
        } catch {
            throw CloudletError.io(error, "creating sorted run \(path)")
        }
    }

    /// Bytes written so far plus the open block: what the file will roughly take.
    public var estimatedSize: UInt64 { offset + UInt64(block.estimatedSize) }

    /// How many entries were added.
    public var entryCount: UInt64 { properties.entryCount }

    /// Appends an entry. Its key must sort after the previous entry's (a bug otherwise).
    public func add(_ entry: LSMEntry) throws {
        precondition(state == .open, "sorted run writer is finished or failed")
        if let lastKey { precondition(LSMKey.compare(entry.key, lastKey) > 0, "sorted run keys must increase") }
        if let handle = pendingHandle {
            try addIndexEntry(separator: Self.separator(blockLastKey, entry.key), handle)
            pendingHandle = nil
        }
        var value = ByteWriter(capacity: 10 + entry.value.count)
        value.u8(entry.kind.rawValue)
        value.varint(entry.sequence)
        value.raw(entry.value)
        block.add(key: entry.key, value: value.bytes)
        hashes.append(KeyHash.hash(entry.key))

        if properties.entryCount == 0 {
            properties.smallestKey = entry.key
            properties.minSequence = entry.sequence
        }
        properties.entryCount += 1
        if entry.isTombstone { properties.tombstoneCount += 1 }
        properties.minSequence = min(properties.minSequence, entry.sequence)
        properties.maxSequence = max(properties.maxSequence, entry.sequence)
        properties.rawKeyBytes += UInt64(entry.key.count)
        properties.rawValueBytes += UInt64(entry.value.count)
        lastKey = entry.key
        if block.estimatedSize >= configuration.blockSize { try flushBlock() }
    }

    /// Writes the rest (last data block, filter, index, properties, footer) and puts the file in place, durably.
    /// Returns the run's properties. On failure the temp file is removed and nothing appears at `path`.
    @discardableResult
    public func finish() throws -> SortedRunProperties {
        precondition(state == .open, "sorted run writer is finished or failed")
        do {
            if !block.isEmpty { try flushBlock() }
            if let handle = pendingHandle { try addIndexEntry(separator: blockLastKey, handle) }
            properties.largestKey = lastKey ?? []
            properties.creationTime = UInt64(max(0, time(nil)))
            let indexHandle = try writeBlock(index.finish(), compress: false)
            let filter =
                formatVersion >= 2
                ? BlockedBloomFilter(hashes: hashes, bitsPerKey: configuration.bloomBitsPerKey).encoded
                : BloomFilter(hashes: hashes, bitsPerKey: configuration.bloomBitsPerKey).encoded
            let filterHandle = try writeBlock(filter, compress: false)
            let propertiesHandle = try writeBlock(properties.encoded(), compress: false)
            let footer = SortedRunFooter(
                version: formatVersion, dataBlockCount: UInt32(properties.dataBlockCount), index: indexHandle, filter: filterHandle,
                properties: propertiesHandle)
            try write(footer.encoded())
            do throws(FileReplacementError) { try replacement.commit() } catch {
                throw CloudletError.io(error.error, "making sorted run \(path) durable")
            }
        } catch {
            abandon()
            throw error
        }
        state = .finished
        return properties
    }

    /// Gives up: closes and removes the temp file. Idempotent; nothing happens after ``finish()`` succeeded.
    public func abandon() {
        guard state == .open || state == .failed else { return }
        state = .failed
        try? replacement.file.close()
        try? fileSystem.remove(replacement.temporaryPath)
    }

    private func flushBlock() throws {
        // `finish` empties the builder; keep the key the separator is computed from.
        blockLastKey = block.lastKey
        pendingHandle = try writeBlock(block.finish(), compress: configuration.compression)
        properties.dataBlockCount += 1
    }

    private func addIndexEntry(separator: [UInt8], _ handle: BlockHandle) throws {
        var w = ByteWriter(capacity: 20)
        w.varint(handle.offset)
        w.varint(handle.size)
        index.add(key: separator, value: w.bytes)
    }

    private func writeBlock(_ contents: [UInt8], compress: Bool) throws -> BlockHandle {
        precondition(contents.count <= SortedRunLayout.maxBlockSize, "block too large")
        let sealed = SortedRunLayout.seal(contents, compress: compress)
        let handle = BlockHandle(offset: offset, size: UInt64(sealed.count - SortedRunLayout.trailerSize))
        try write(sealed)
        return handle
    }

    private func write(_ bytes: [UInt8]) throws {
        do throws(FileSystemError) { try replacement.file.write(bytes, at: offset) } catch {
            state = .failed
            throw CloudletError.io(error, "writing sorted run \(path)")
        }
        offset += UInt64(bytes.count)
    }

    /// A short key `s` with `a <= s < b` (for `a < b`): `a` cut after its first byte that differs from `b`, that
    /// byte raised by one, when that still sorts below `b`; else `a`.
    static func separator(_ a: [UInt8], _ b: [UInt8]) -> [UInt8] {
        var i = 0
        let n = min(a.count, b.count)
        while i < n && a[i] == b[i] { i += 1 }
        guard i < n, a[i] < 0xFF, a[i] + 1 < b[i] else { return a }
        var s = Array(a[0...i])
        s[i] += 1
        return s
    }
}

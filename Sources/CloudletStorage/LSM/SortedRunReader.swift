import CloudletCore
import Synchronization

/// Reads a sorted run file (SortedRunFormat.md). Opening checks the header and footer and reads the properties;
/// the index is loaded the first time a read needs it (``runIndex()``), the bloom filter the first time a point read
/// does (``filter()``), and both then stay in memory, so that opening a tree of many runs costs a few small reads a
/// run, not its indexes and filters; data
/// blocks are read on demand through the shared ``BlockCache``. Every block's checksum and structure is checked before anything in it is used: a
/// defect throws a `corruption` error naming the file and the block's offset, never a wrong answer.
///
/// Safe to use from several threads: everything is immutable after opening, the file is read with `pread`, and
/// the cache has its own locks.
public final class SortedRunReader: Sendable {
    public let path: String
    public let fileNumber: UInt64
    public let fileSize: UInt64
    public let properties: SortedRunProperties
    let file: any File
    /// The whole file mapped read-only, where the file system can (``File/mapReadOnly(count:)``): a block is then
    /// checked and decompressed where it lies in the page cache, with no `pread` and no copy (a run never changes
    /// after it is written and is only ever deleted, which leaves a mapping valid). Nil: blocks are read with `pread`.
    private let mapping: MappedRegion?
    /// The index, loaded on first use. A class, read without a lock once loaded: every point read and every iterator
    /// step asks for it.
    final class RunIndex: Sendable {
        /// Data block `i` holds the keys in (separator `i - 1`, separator `i`].
        let separators: SeparatorIndex
        let handles: [BlockHandle]

        init(separators: SeparatorIndex, handles: [BlockHandle]) {
            self.separators = separators
            self.handles = handles
        }
    }
    /// The bloom filter, loaded by the first point read (scans never need it).
    final class LoadedFilter: Sendable {
        let filter: RunFilter

        init(_ filter: RunFilter) { self.filter = filter }
    }
    private let loaded = OnceReference<RunIndex>()
    private let loadedFilter = OnceReference<LoadedFilter>()
    let footer: SortedRunFooter
    let cache: BlockCache?

    /// What keys this run's blocks in its cache: its file number, with the owning tree's namespace in the high bits
    /// (``BlockCache/newNamespace()``), since trees sharing a cache number their files alike.
    public let cacheID: UInt64

    /// Told of damage found by a read after the run opened (a data block or entry that fails its checks).
    let onCorruption: (@Sendable (CloudletError) -> Void)?

    /// Opens the run at `path`. `fileNumber` (in `cacheNamespace`) keys its blocks in `cache`; `onCorruption` hears
    /// of damage a later read finds (before the read throws it).
    public init(
        path: String, fileNumber: UInt64, fileSystem: any FileSystem = PosixFileSystem(), cache: BlockCache? = nil,
        cacheNamespace: UInt64 = 0, onCorruption: (@Sendable (CloudletError) -> Void)? = nil
    ) throws {
        self.onCorruption = onCorruption
        self.path = path
        self.fileNumber = fileNumber
        cacheID = Self.cacheID(cacheNamespace, fileNumber)
        self.cache = cache
        let file: any File
        do throws(FileSystemError) {
            file = try fileSystem.open(path, options: .readOnly)
        } catch {
            throw CloudletError.io(error, "opening sorted run \(path)")
        }
        self.file = file
        do {
            let fileSize = try io { () throws(FileSystemError) in try file.size() }
            let minimum = UInt64(SortedRunLayout.headerSize + SortedRunLayout.footerSize)
            guard fileSize >= minimum else {
                throw CloudletError.corruption(run: path, offset: 0, "file of \(fileSize) bytes is too short")
            }
            let header = try io { () throws(FileSystemError) in try file.read(at: 0, count: SortedRunLayout.headerSize) }
            if let defect = SortedRunLayout.headerDefect(header) {
                throw CloudletError.corruption(run: path, offset: 0, defect)
            }
            self.fileSize = fileSize
            let footerOffset = fileSize - UInt64(SortedRunLayout.footerSize)
            let footerBytes = try io { () throws(FileSystemError) in
                try file.read(at: footerOffset, count: SortedRunLayout.footerSize)
            }
            let footer: SortedRunFooter
            switch SortedRunFooter.decode(footerBytes, fileSize: fileSize) {
            case .success(let f): footer = f
            case .failure(let defect): throw CloudletError.corruption(run: path, offset: footerOffset, defect.reason)
            }
            self.footer = footer
            let headerVersion = header.loadLE(UInt16.self, at: 8)
            guard headerVersion == footer.version else {
                throw CloudletError.corruption(
                    run: path, offset: footerOffset,
                    "the footer's format version \(footer.version) is not the header's \(headerVersion)")
            }
            var properties: SortedRunProperties
            let propertiesBytes = try Self.readBlockContents(file, path, footer.properties)
            do {
                properties = try SortedRunProperties(decoding: propertiesBytes)
            } catch let error as CloudletError where error.code == .corruption {
                throw CloudletError.corruption(run: path, offset: footer.properties.offset, error.message)
            }
            properties.formatVersion = footer.version
            self.properties = properties
            mapping = file.mapReadOnly(count: Int(fileSize))
            guard properties.dataBlockCount == UInt64(footer.dataBlockCount),
                properties.entryCount >= properties.dataBlockCount,
                properties.entryCount > 0 || properties.smallestKey.isEmpty && properties.largestKey.isEmpty
            else {
                throw CloudletError.corruption(
                    run: path, offset: footer.properties.offset, "properties disagree with the footer")
            }
        } catch {
            try? file.close()
            throw error
        }
    }

    /// The index, read and checked the first time (damage throws, and is reported).
    func runIndex() throws -> RunIndex {
        if let index = loaded.load() { return index }
        return try reportingCorruption {
            let (separators, handles) = try Self.loadIndex(try blockContents(footer.index), path, footer)
            return loaded.storeIfNil(RunIndex(separators: separators, handles: handles))
        }
    }

    /// The bloom filter, read and checked the first time (damage throws, and is reported). Only point reads load it:
    /// a scan (a query, the open-time share check, a merge) reads a run's index and blocks, never its filter.
    func filter() throws -> RunFilter { try filterObject().filter }

    /// The loaded filter's box (probing through it copies no array).
    private func filterObject() throws -> LoadedFilter {
        if let loaded = loadedFilter.load() { return loaded }
        return try reportingCorruption {
            guard let filter = RunFilter(encoded: try blockContents(footer.filter), formatVersion: footer.version) else {
                throw CloudletError.corruption(run: path, offset: footer.filter.offset, "malformed bloom filter")
            }
            return loadedFilter.storeIfNil(LoadedFilter(filter))
        }
    }

    /// Runs `body`, telling ``onCorruption`` of a corruption error it throws.
    private func reportingCorruption<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let error as CloudletError where error.code == .corruption {
            onCorruption?(error)
            throw error
        }
    }

    /// The cache key of run `fileNumber` of the tree with cache namespace `namespace`.
    static func cacheID(_ namespace: UInt64, _ fileNumber: UInt64) -> UInt64 { namespace << 40 | fileNumber }

    /// Closes the file; any read afterwards fails.
    public func close() { try? file.close() }

    /// The newest entry of `key` in this run — a value or a tombstone — or nil if the run has none. Consults the
    /// bloom filter first, then reads at most one block.
    public func get(_ key: [UInt8]) throws -> LSMEntry? { try get(key, hash: KeyHash.hash(key)) }

    /// ``get(_:)`` of a key whose ``KeyHash`` the caller has (a read through several runs hashes once).
    public func get(_ key: [UInt8], hash: UInt64) throws -> LSMEntry? {
        guard properties.entryCount > 0, LSMKey.compare(key, properties.smallestKey) >= 0,
            LSMKey.compare(key, properties.largestKey) <= 0
        else { return nil }
        guard try filterObject().filter.mayContain(hash: hash) else { return nil }
        let index = try runIndex()
        let i = index.separators.firstAtLeast(key)
        guard i < index.handles.count else { return nil }
        var cursor = BlockCursor(try block(i))
        do throws(Block.Defect) { try cursor.seek(key) } catch { throw defect(error, block: i) }
        guard cursor.current != nil, cursor.key == key else { return nil }
        return try entry(key: cursor.key, value: cursor.value, block: i)
    }

    /// Whether the bloom filter lets `key` through (false: certainly not in the run).
    public func mayContain(_ key: [UInt8]) throws -> Bool { try filter().mayContain(key) }

    /// A new iterator over the run's entries (not positioned yet). With `fillCache` false, blocks it reads that are
    /// not cached are not added to the cache (for merges and verification, which read everything once).
    public func makeIterator(fillCache: Bool = true) -> SortedRunIterator { SortedRunIterator(self, fillCache: fillCache) }

    /// The data blocks, in order (for tools).
    public var dataBlocks: [BlockHandle] { get throws { try runIndex().handles } }

    /// Where the bloom filter block lies (for tools).
    public var filterBlock: BlockHandle { footer.filter }

    /// Data block `i`, from the cache or the file (checked, decompressed, then cached if `fillCache`). A read that
    /// does not fill the cache (a merge's, which reads the run once from end to end) reads with `pread`, not through
    /// the mapping: the kernel's read-ahead serves it (the mapping is `MADV_RANDOM`), and the pages it reads do not
    /// join the process's resident set.
    func block(_ i: Int, fillCache: Bool = true) throws -> Block {
        let handle = try runIndex().handles[i]
        let key = BlockCache.Key(fileNumber: cacheID, offset: handle.offset)
        // The cache holds checked blocks only: one found there is not walked again.
        if let cached = cache?.lookup(key) { return Block(checked: cached) }
        let contents: [UInt8]
        let block: Block
        do {
            contents = fillCache ? try blockContents(handle) : try Self.readBlockContents(file, path, handle)
            do throws(Block.Defect) { block = try Block(contents) } catch { throw defect(error, block: i) }
        } catch let error as CloudletError where error.code == .corruption {
            onCorruption?(error)
            throw error
        }
        if fillCache { cache?.insert(key, contents) }
        return block
    }

    /// Decodes a data entry's value bytes: kind, sequence, value.
    func entry(key: [UInt8], value bytes: ArraySlice<UInt8>, block i: Int) throws -> LSMEntry {
        // The kind, then the sequence (a varint), then the value (a tombstone has none).
        var at = bytes.startIndex + 1
        if let kindByte = bytes.first, let kind = LSMEntry.Kind(rawValue: kindByte),
            let sequence = ByteReader.varint(bytes, at: &at), kind == .value || at == bytes.endIndex
        {
            return LSMEntry(key: key, kind: kind, sequence: sequence, value: Array(bytes[at...]))
        }
        let error = CloudletError.corruption(run: path, offset: blockOffset(i), "entry \(LSMKey.printable(key)) is malformed")
        onCorruption?(error)
        throw error
    }

    func defect(_ defect: Block.Defect, block i: Int) -> CloudletError {
        .corruption(run: path, offset: blockOffset(i), defect.reason)
    }

    /// Where data block `i` starts (0 if the index is not loaded: only blocks of a loaded index are ever read).
    private func blockOffset(_ i: Int) -> UInt64 { loaded.load()?.handles[i].offset ?? 0 }

    /// A block's contents, checked and decompressed: from the mapping where there is one, else read.
    func blockContents(_ handle: BlockHandle) throws -> [UInt8] {
        guard let mapping else { return try Self.readBlockContents(file, path, handle) }
        let length = Int(handle.size) + SortedRunLayout.trailerSize
        guard handle.offset <= fileSize, UInt64(length) <= fileSize - handle.offset else {
            throw CloudletError.corruption(run: path, offset: handle.offset, "block runs past the end of the file")
        }
        return try Self.unsealed(UnsafeRawBufferPointer(start: mapping.base + Int(handle.offset), count: length), path, handle)
    }

    /// Reads a block and its trailer, checks and decompresses it.
    static func readBlockContents(_ file: any File, _ path: String, _ handle: BlockHandle) throws -> [UInt8] {
        let length = Int(handle.size) + SortedRunLayout.trailerSize
        let bytes = try io { () throws(FileSystemError) in try file.read(at: handle.offset, count: length) }
        guard bytes.count == length else {
            throw CloudletError.corruption(run: path, offset: handle.offset, "block runs past the end of the file")
        }
        return try bytes.withUnsafeBytes { try unsealed($0, path, handle) }
    }

    /// Block `handle`'s stored bytes and trailer, checked and decompressed; a defect is corruption at its offset.
    private static func unsealed(_ bytes: UnsafeRawBufferPointer, _ path: String, _ handle: BlockHandle) throws -> [UInt8] {
        switch SortedRunLayout.unseal(bytes) {
        case .success(let contents): return contents
        case .failure(let defect): throw CloudletError.corruption(run: path, offset: handle.offset, defect.reason)
        }
    }

    /// Decodes the index block: separators must increase, data blocks must tile the space between the header and
    /// the index block, and there must be as many as the footer says.
    /// Entries are decoded where they lie: each separator's bytes go straight into the ``SeparatorIndex`` buffer.
    static func loadIndex(_ contents: [UInt8], _ path: String, _ footer: SortedRunFooter) throws -> (
        SeparatorIndex, [BlockHandle]
    ) {
        let offset = footer.index.offset
        let blockCount = Int(footer.dataBlockCount)
        var separators = SeparatorIndex(reservingCapacity: blockCount, bytes: contents.count)
        var handles: [BlockHandle] = []
        handles.reserveCapacity(blockCount)
        do throws(Block.Defect) {
            let block = try Block(contents)
            var expected = UInt64(SortedRunLayout.headerSize)
            var at = 0
            while at < block.restartsStart {
                let l = try block.layout(at: at, previousKeyCount: separators.lastCount)
                let rest = contents[l.unshared]
                guard separators.follows(sharing: l.shared, rest) else {
                    throw Block.Defect("index entry \(separators.count) does not follow the one before")
                }
                var v = l.value.lowerBound
                let value = contents[l.value]
                guard let blockOffset = ByteReader.varint(value, at: &v), let size = ByteReader.varint(value, at: &v), v == value.endIndex
                else {
                    throw Block.Defect("malformed index entry \(separators.count)")
                }
                let handle = BlockHandle(offset: blockOffset, size: size)
                guard handle.offset == expected, size <= UInt64(SortedRunLayout.maxBlockSize) else {
                    throw Block.Defect("index entry \(separators.count) points at \(blockOffset), expected \(expected)")
                }
                expected = handle.end
                separators.append(sharing: l.shared, rest)
                handles.append(handle)
                at = l.next
            }
            guard expected == footer.index.offset, handles.count == Int(footer.dataBlockCount) else {
                throw Block.Defect("index does not cover the data blocks the footer counts")
            }
        } catch {
            throw CloudletError.corruption(run: path, offset: offset, "index block: \(error.reason)")
        }
        return (separators, handles)
    }
}

/// Sorted run files in a directory: `<file number, 20 digits>.run`.
public enum SortedRunFile {
    public static let suffix = ".run"

    /// The file name of run `number`.
    public static func name(_ number: UInt64) -> String { zeroPadded(number) + suffix }

    /// The file number in a run's file name; nil for other names (temp files included).
    public static func number(fileName name: String) -> UInt64? {
        guard name.hasSuffix(suffix) else { return nil }
        return parseZeroPadded(name.dropLast(suffix.count))
    }
}

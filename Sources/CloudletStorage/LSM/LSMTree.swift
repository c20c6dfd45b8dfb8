import CloudletCore
import Synchronization

/// An LSM tree of byte-string keys and values in one directory: a memtable for the newest writes, sorted runs on
/// disk in levels, a manifest naming the live runs, a shared block cache, and a background thread that merges runs
/// (leveled, rate-limited). SortedRunFormat.md describes the files and the crash-safety protocol.
///
/// The write-ahead log is the caller's: the tree never logs writes itself. The caller applies each write with the
/// sequence number it has in its log (a partition's LSN), and from time to time ``flush(logPosition:)``es the
/// memtable to a level-0 run together with the log position replay must start from; after reopening, the caller
/// reads ``logPosition`` and re-applies its log from there. Sequence numbers must not decrease over time for a key
/// (equal is fine: the later write wins); the newest entry by sequence wins everywhere.
///
/// Thread safety: writes (``put(_:_:sequence:)``, ``delete(_:sequence:)``, ``flush(logPosition:)``) may come
/// from several threads; reads from any thread, at any time, through a ``readView()`` or ``get(_:)``. The first
/// failed write, fdatasync or merge is final: the tree stops taking writes (`readOnly`) and reports it in
/// ``backgroundError``; reads go on.
///
/// ```swift
/// let tree = try LSMTree(directory: dir, fileSystem: fs)
/// replay(from: tree.logPosition) { try tree.put($0.key, $0.value, sequence: $0.lsn) }
/// try tree.put(key, value, sequence: lsn)
/// if tree.needsFlush { try tree.flush(logPosition: positionAfter(lsn)) }
/// let view = tree.readView()          // consistent while writes go on
/// for entry in try view.scan(LSMKeyRange(lower: a, upper: b)) { … }
/// tree.close()
/// ```
public final class LSMTree: Sendable {
    public let directory: String
    public let configuration: LSMTreeConfiguration
    /// The block cache the tree's runs read through (the configuration's, or one the tree made).
    public let cache: BlockCache
    /// This tree's namespace in ``cache`` (``BlockCache/newNamespace()``).
    let cacheNamespace: UInt64
    let fileSystem: any FileSystem
    let manifest: Manifest
    let errors = LSMErrorSink()
    /// One flush at a time; one merge at a time; a manifest edit and the state update it implies together.
    let flushLock = Mutex(())
    let mergeLock = Mutex(())
    let editLock = Mutex(())
    let state: Monitor<State>
    private let mergeThread = Mutex<NativeThread?>(nil)
    private let installs = Atomic<UInt64>(0)
    /// Called after each merge is installed (``onMergeInstalled(_:)``).
    private let mergeObserver = Mutex<(@Sendable () -> Void)?>(nil)
    /// Set by ``close()``: a merge under way stops at its next entry and leaves nothing behind (its inputs stay
    /// live), so that closing never waits for a long, rate-limited merge to finish.
    let closing = Atomic<Bool>(false)

    struct State {
        var memtable = Memtable()
        /// Memtables being flushed, newest first.
        var immutables: [Memtable] = []
        var version: LSMVersion
        /// The live runs in the version's order.
        var runs: [LSMRunHandle]
        var closed = false
        var mergeWanted = true
        var flushes = 0
        var merges = 0
        var mergeBytesWritten: UInt64 = 0
    }

    /// Opens the tree in `directory` (creating it if it has none), deleting leftovers of interrupted flushes and
    /// merges. Reads the manifest only: a missing run file fails the open, naming it; each run's file is opened and
    /// checked the first time a read needs it (``LSMRunHandle``).
    public init(
        directory: String, fileSystem: any FileSystem = PosixFileSystem(),
        configuration: LSMTreeConfiguration = LSMTreeConfiguration()
    ) throws {
        self.directory = Path.normalize(directory)
        self.fileSystem = fileSystem
        self.configuration = configuration
        precondition(configuration.level0StopTrigger > configuration.level0MergeTrigger, "level0StopTrigger too low")
        cache = configuration.blockCache ?? BlockCache(capacity: configuration.blockCacheCapacity)
        cacheNamespace = cache.newNamespace()
        let marker = Path.join(directory, Self.damagedFileName)
        if fileSystem.fileExists(marker) {
            let what = (try? fileSystem.readFile(marker)).map { String(decoding: $0, as: UTF8.self) } ?? "unreadable"
            throw CloudletError.corruption("LSM tree \(directory) was found damaged while it was open: \(what)")
        }
        manifest = try Manifest(directory: directory, fileSystem: fileSystem, configuration: configuration.manifest)
        let version = manifest.current
        let (dir, cache, namespace, errors) = (self.directory, cache, cacheNamespace, errors)
        let runs = version.runs.map { metadata in
            Self.openRun(metadata, dir, fileSystem, cache, namespace, errors, configuration)
        }
        state = Monitor(State(version: version, runs: runs))
        if configuration.backgroundMerges && !configuration.manifest.readOnly {
            let thread = try NativeThread(name: "lsm-merge \(directory)") { [self] in backgroundLoop() }
            mergeThread.withLock { $0 = thread }
        }
    }

    /// Gets the tree ready for its owner's last flush: a merge under way is abandoned (its inputs stay live), no new
    /// one starts, and a flush waiting for merges to bring level 0 under its stop trigger returns — so that closing
    /// never waits for merges, also not behind a flush (or a commit stalled on one) that began before. Reads and
    /// flushes go on until ``close()``. Idempotent.
    public func prepareToClose() {
        closing.store(true, ordering: .releasing)
        state.broadcast(.work)
        state.broadcast(.progress)
    }

    /// Stops background merging (waiting for a merge under way) and closes the manifest. Read views taken before
    /// keep working; their runs' files close when the last view goes.
    public func close() {
        let first = state.withLock { s in
            defer { s.closed = true }
            return !s.closed
        }
        guard first else { return }
        closing.store(true, ordering: .releasing)
        state.broadcast(.work)
        state.broadcast(.progress)
        mergeThread.withLock { $0 }?.join()
        manifest.close()
        state.withLock { $0.runs = [] }
    }

    // MARK: - Writes

    /// Sets `key` to `value` as of `sequence`.
    public func put(_ key: [UInt8], _ value: [UInt8], sequence: UInt64) throws {
        try apply(.put(key, value, sequence: sequence))
    }

    /// Deletes `key` as of `sequence` (a tombstone).
    public func delete(_ key: [UInt8], sequence: UInt64) throws { try apply(.delete(key, sequence: sequence)) }

    /// Applies writes in order.
    public func apply(_ entries: LSMEntry...) throws { try apply(entries) }

    /// Applies writes in order; each carries its key, kind and sequence.
    public func apply(_ entries: [LSMEntry]) throws {
        try checkWritable()
        state.withLock { s in
            for entry in entries { s.memtable.apply(entry) }
        }
    }

    /// Whether the memtable has reached ``LSMTreeConfiguration/memtableSize``: time to ``flush(logPosition:)``.
    public var needsFlush: Bool { state.withLock { $0.memtable.approximateBytes >= configuration.memtableSize } }

    /// Writes the memtable as a level-0 run and records it in the manifest with `logPosition` (the caller's
    /// position in its log from which replay must start to rebuild what is not in the runs). Durable when it
    /// returns: after a crash, ``logPosition`` is this one (or a later one). With an empty memtable only the
    /// position is recorded.
    ///
    /// `logPosition` must be right after the last write applied before this call: the memtable is frozen when the
    /// call starts, and writes applied by other threads from then on land in a fresh memtable, so they must come
    /// at or after `logPosition` in the caller's log (a partition's single writer calling this between commits
    /// satisfies it). With background merges it may wait for them (``LSMTreeConfiguration/level0StopTrigger``).
    public func flush(logPosition: [UInt8]) throws {
        try flushLock.withLock { _ in
            try checkWritable()
            let frozen: Memtable? = state.withLock { s in
                guard !s.memtable.isEmpty else { return nil }
                s.immutables.insert(s.memtable, at: 0)
                defer { s.memtable = Memtable() }
                return s.memtable
            }
            try writeFlush(frozen, logPosition: logPosition) { s in if frozen != nil { s.immutables.removeLast() } }
        }
    }

    /// Writes `memtable` — one the caller kept itself rather than the tree's (``put(_:_:sequence:)`` is not used
    /// then) — as a level-0 run and records it in the manifest with `logPosition`, as ``flush(logPosition:)`` does.
    /// The caller keeps reading `memtable` until this returns, then reads the runs (``runsView()``), which hold it.
    /// An empty memtable records only the position. `waitForMerges` false (the last flush before ``close()``) skips
    /// the wait at ``LSMTreeConfiguration/level0StopTrigger``: nothing will write after it, and the next open's
    /// merges catch up.
    public func flush(_ memtable: Memtable, logPosition: [UInt8], waitForMerges: Bool = true) throws {
        try flushLock.withLock { _ in
            try checkWritable()
            try writeFlush(memtable.isEmpty ? nil : memtable, logPosition: logPosition, waitForMerges: waitForMerges) { _ in }
        }
    }

    /// The body of both flushes, under the flush lock: writes `frozen` (if any), installs it with `logPosition`,
    /// then (background merges on) waits while level 0 is at its stop trigger.
    private func writeFlush(
        _ frozen: Memtable?, logPosition: [UInt8], waitForMerges: Bool = true, _ update: (inout State) -> Void
    ) throws {
        var outputs: [LSMRunHandle] = []
        var edited = false
        do {
            if let frozen {
                let iterator = frozen.makeIterator()
                iterator.seekToFirst()
                var unlimited = RateLimiter(bytesPerSecond: nil)
                outputs = try writeRuns(iterator, level: 0, creator: "flush", split: nil, limiter: &unlimited)
                CrashPoint.reached("lsm.flush.written")
            }
            let edit = ManifestEdit(
                logPosition: logPosition, lastSequence: frozen?.maxSequence, addedRuns: outputs.map(\.metadata))
            edited = true
            try install(edit, adding: outputs, removing: []) { s in
                update(&s)
                s.flushes += 1
                s.mergeWanted = true
            }
        } catch {
            discard(outputs, edited: edited)
            throw fail(error)
        }
        state.signal(.work)
        if configuration.backgroundMerges && waitForMerges {
            let stop = configuration.level0StopTrigger
            state.withLock(
                waitingOn: .progress,
                until: { s in
                    s.closed || closing.load(ordering: .acquiring) || s.version.runs(atLevel: 0).count < stop
                        || errors.fatal != nil
                }
            ) { _ in }
        }
    }

    // MARK: - Reads

    /// A consistent view of the tree as it is now (see ``LSMReadView``).
    public func readView() -> LSMReadView {
        state.withLock { s in LSMReadView(memtables: [s.memtable] + s.immutables, runs: s.runs) }
    }

    /// A view of the runs alone, as they are now (the memtables left out): the base a caller that keeps its own
    /// memtable (``flush(_:logPosition:)``) reads under it, with ``LSMReadView/init(memtables:over:)``.
    public func runsView() -> LSMReadView { state.withLock { s in LSMReadView(memtables: [], runs: s.runs) } }

    /// Counts changes to the set of live runs (flushes and merges installed): a caller holding a ``runsView()`` takes
    /// a fresh one when this moved, to let go of the files merged away.
    public var runsChanges: UInt64 { installs.load(ordering: .acquiring) }

    /// Has `body` called after each merge is installed — on the merging thread, outside the tree's locks — so that an
    /// owner holding a ``runsView()`` takes a fresh one then, not only when it next writes: until it does, its reads
    /// go on through the runs merged away (every level-0 run a point read or scan must look at) and their files stay
    /// on disk. Replaces the previous observer.
    public func onMergeInstalled(_ body: @escaping @Sendable () -> Void) { mergeObserver.withLock { $0 = body } }

    /// Tells the observer (``onMergeInstalled(_:)``) that a merge was installed; called with no tree lock held.
    func mergeInstalled() { mergeObserver.withLock { $0 }?() }

    /// The value of `key`, or nil if it has none or was deleted.
    public func get(_ key: [UInt8]) throws -> [UInt8]? { try readView().get(key) }

    /// The live entries in `range`, in key order, at most `limit`.
    public func scan(_ range: LSMKeyRange = .all, limit: Int = .max) throws -> [LSMEntry] {
        try readView().scan(range, limit: limit)
    }

    /// Where the caller's log must be replayed from: the position of the last flush (empty before the first).
    public var logPosition: [UInt8] { state.withLock { $0.version.logPosition } }

    /// The highest sequence in the runs or the memtables.
    public var lastSequence: UInt64 {
        state.withLock { s in ([s.memtable] + s.immutables).map(\.maxSequence).reduce(s.version.lastSequence, max) }
    }

    /// The live runs' metadata, in the version's order.
    public var runs: [LSMRunMetadata] { state.withLock { $0.version.runs } }

    /// The error that stopped writes and merges, if any.
    public var backgroundError: CloudletError? { errors.fatal }

    /// Sizes, counters, the block cache's counters and the background error, for metrics and tools.
    public var statistics: LSMTreeStatistics {
        var stats = state.withLock { s in
            var stats = LSMTreeStatistics()
            stats.memtableBytes = s.memtable.approximateBytes
            stats.memtableEntries = s.memtable.count
            stats.immutableMemtables = s.immutables.count
            let levels = (s.version.runs.map(\.level).max() ?? -1) + 1
            stats.runsPerLevel = (0..<levels).map { l in s.version.runs.filter { $0.level == l }.count }
            stats.bytesPerLevel = (0..<levels).map { l in
                s.version.runs.filter { $0.level == l }.reduce(0) { $0 + $1.fileSize }
            }
            stats.flushes = s.flushes
            stats.merges = s.merges
            stats.mergeBytesWritten = s.mergeBytesWritten
            return stats
        }
        stats.blockCache = cache.statistics
        stats.backgroundError = errors.fatal?.description ?? errors.other.first?.description
        return stats
    }

    /// Opens every live run now, with the checks a run otherwise gets on its first read (header, footer, properties
    /// against the manifest): what a tool that must name every damaged file calls after opening the tree.
    public func openRuns() throws { for run in state.withLock({ $0.runs }) { _ = try run.reader() } }

    /// Verifies every live run (every block, see ``SortedRunReader/verify()``).
    public func verify() -> [SortedRunFinding] {
        readView().runs.flatMap { run in
            do { return try run.reader().verify() } catch {
                return [SortedRunFinding(path: run.path, offset: 0, problem: "\(error)")]
            }
        }
    }

    // MARK: - Shared by flush and merge

    func checkWritable() throws {
        if let error = errors.fatal {
            throw CloudletError(.readOnly, "LSM tree \(directory) stopped after an error: \(error)", cause: error)
        }
        if configuration.manifest.readOnly { throw CloudletError(.readOnly, "LSM tree \(directory) is read-only") }
        guard !state.withLock({ $0.closed }) else { throw CloudletError(.readOnly, "LSM tree \(directory) is closed") }
    }

    /// Records `error` as the tree's final one and returns it to be thrown.
    func fail(_ error: any Error) -> any Error {
        errors.record(error as? CloudletError ?? CloudletError(.internalError, "\(error)"), fatal: true)
        return error
    }

    /// Cleans up after a failed flush or merge: runs it wrote are deleted, unless a manifest edit naming them was
    /// attempted: it may have reached the disk even though it failed, and then the files must stay (the next open
    /// keeps them if the edit is there, deletes them as leftovers if not).
    func discard(_ outputs: [LSMRunHandle], edited: Bool) {
        guard !edited else { return }
        for output in outputs { output.markObsolete() }
    }

    /// Applies `edit` durably, then swaps the runs in the state and runs `update` on it, all under the edit lock so
    /// that states follow edits in order. Removed runs are deleted once nobody holds them.
    func install(
        _ edit: ManifestEdit, adding: [LSMRunHandle], removing: [LSMRunHandle], _ update: (inout State) -> Void
    ) throws {
        try editLock.withLock { _ in
            let version = try manifest.apply(edit)
            state.withLock { s in
                let removed = Set(removing.map(\.metadata.fileNumber))
                var byNumber: [UInt64: LSMRunHandle] = [:]
                for run in s.runs + adding where !removed.contains(run.metadata.fileNumber) {
                    byNumber[run.metadata.fileNumber] = run
                }
                s.version = version
                s.runs = version.runs.map { byNumber[$0.fileNumber]! }
                update(&s)
            }
            for run in removing { run.markObsolete() }
            installs.add(1, ordering: .releasing)
        }
    }

    /// Writes the entries of `iterator` (positioned) as runs of `level`, a new run every `split` bytes; returns
    /// them open. On failure the runs written so far are deleted. `abandonOnClose` (merges): throws
    /// ``MergeAbandoned`` once ``close()`` has begun.
    func writeRuns(
        _ iterator: any LSMIterator, level: Int, creator: String, split: UInt64?, limiter: inout RateLimiter,
        abandonOnClose: Bool = false
    ) throws -> [LSMRunHandle] {
        var outputs: [LSMRunHandle] = []
        var writer: SortedRunWriter?
        do {
            while let entry = iterator.current {
                if abandonOnClose && closing.load(ordering: .relaxed) { throw MergeAbandoned() }
                if writer == nil {
                    let number = manifest.newFileNumber()
                    writer = try SortedRunWriter(
                        path: Path.join(directory, SortedRunFile.name(number)), fileNumber: number,
                        configuration: configuration.run, fileSystem: fileSystem, creator: creator)
                }
                try writer!.add(entry)
                limiter.consumed(entry.key.count + entry.value.count)
                try iterator.advance()
                if let split, writer!.estimatedSize >= split || iterator.current == nil {
                    outputs.append(try finishRun(writer!, level: level))
                    writer = nil
                }
            }
            if let w = writer { outputs.append(try finishRun(w, level: level)) }
        } catch {
            writer?.abandon()
            for output in outputs { output.markObsolete() }
            throw error
        }
        return outputs
    }

    private func finishRun(_ writer: SortedRunWriter, level: Int) throws -> LSMRunHandle {
        let properties = try writer.finish()
        let reader = try SortedRunReader(
            path: writer.path, fileNumber: writer.fileNumber, fileSystem: fileSystem, cache: cache,
            cacheNamespace: cacheNamespace, onCorruption: Self.damageMarker(directory, fileSystem, configuration))
        let metadata = LSMRunMetadata(properties: properties, level: level, fileSize: reader.fileSize)
        return LSMRunHandle(metadata: metadata, reader: reader, fileSystem: fileSystem, errors: errors)
    }

    /// The file a tree writes when a read finds one of its runs damaged (``SortedRunReader/onCorruption``): its
    /// text is the error. The tree's owner reads it no further: an open refuses the tree, so that the owner
    /// rebuilds it (a partition, from its log) instead of serving around the damage until a read meets it again.
    public static let damagedFileName = "DAMAGED"

    /// What a run's reader calls on damage: writes ``damagedFileName`` once (nothing in a read-only tree).
    static func damageMarker(
        _ directory: String, _ fileSystem: any FileSystem, _ configuration: LSMTreeConfiguration
    ) -> (@Sendable (CloudletError) -> Void)? {
        guard !configuration.manifest.readOnly else { return nil }
        return { error in
            let path = Path.join(directory, damagedFileName)
            guard !fileSystem.fileExists(path) else { return }
            do throws(FileSystemError) {
                let file = try fileSystem.open(path, options: [.create, .truncate])
                try file.write(Array(error.description.utf8), at: 0)
                try file.fdatasync()
                try file.close()
                try fileSystem.fsyncDirectory(directory)
            } catch {
                // The read that found the damage fails anyway; the marker only spares the next open a later surprise.
            }
        }
    }

    /// The handle of a live run of the manifest, opened on first use (``LSMRunHandle/reader()``). Nothing is read
    /// now: the manifest's open has checked that the file exists (one directory listing for every run, not a
    /// call per run); the header, footer and properties are checked against `metadata` when the run is first
    /// read, and damage then is reported through the tree's damage marker.
    static func openRun(
        _ metadata: LSMRunMetadata, _ directory: String, _ fileSystem: any FileSystem, _ cache: BlockCache,
        _ namespace: UInt64, _ errors: LSMErrorSink, _ configuration: LSMTreeConfiguration
    ) -> LSMRunHandle {
        let path = Path.join(directory, SortedRunFile.name(metadata.fileNumber))
        let onCorruption = damageMarker(directory, fileSystem, configuration)
        return LSMRunHandle(
            metadata: metadata, path: path, cacheID: SortedRunReader.cacheID(namespace, metadata.fileNumber),
            cache: cache, fileSystem: fileSystem, errors: errors
        ) {
            do {
                let reader = try SortedRunReader(
                    path: path, fileNumber: metadata.fileNumber, fileSystem: fileSystem, cache: cache,
                    cacheNamespace: namespace, onCorruption: onCorruption)
                let p = reader.properties
                guard p.fileNumber == metadata.fileNumber, p.entryCount == metadata.entryCount,
                    reader.fileSize == metadata.fileSize, p.smallestKey == metadata.smallestKey,
                    p.largestKey == metadata.largestKey
                else {
                    reader.close()
                    throw CloudletError.corruption(run: path, offset: 0, "run does not match what the manifest says of it")
                }
                return reader
            } catch let error as CloudletError where error.code == .corruption {
                onCorruption?(error)
                throw error
            }
        }
    }
}

/// A merge stopped because its tree is closing: not an error of the tree's (its inputs stay live, its outputs are
/// deleted).
struct MergeAbandoned: Error {}

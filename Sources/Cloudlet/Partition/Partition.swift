import CloudletConcurrency
import CloudletCore
import CloudletStorage
import Dispatch
import Foundation
import Synchronization

/// One partition: an append-only log and the state derived from it.
///
/// Every write runs as a job on the partition's ``writer``, a serial executor (``PartitionWriter``), which plans,
/// stages and applies one commit after the other, so every commit is validated against the state all earlier
/// commits produced, and LSN order equals apply order. Readers take `state`'s lock briefly; a job holds it from
/// planning through applying. Commits become visible at staging; a reader that meets an entry whose LSN is not yet
/// durable waits for it, so nothing that could still be lost in a crash is ever returned. docs/concurrency.md
/// describes the threads and what runs where.
package final class Partition: Sendable {
    package let id: UInt32
    let directory: String
    package let log: Log
    package let state: Mutex<PartitionState>
    /// Runs the partition's write jobs one at a time (``commit(_:)``, ``commit(admitOverLimit:_:)``), and stalls them
    /// while the key directory's memtable is full and a flush still runs.
    let writer: PartitionWriter
    let cache: RecordCache
    /// Current key-directory entries of records read lately (EntryCache.swift).
    let entryCache: EntryCache
    let publisher: ChangePublisher
    private let checkpoints: CheckpointStore
    let tombstoneRetention: Double
    let fileSystem: any FileSystem
    private let checkpointTrigger: CheckpointTrigger
    /// Serializes checkpoint writers (the background one and close's).
    private let checkpointWriter = Mutex(())
    /// Frames replayed from the log when the partition was opened (0 after a clean close).
    package let framesReplayed: Int
    /// The LSN of the flush (or, for a store of format 3, the checkpoint) the partition was opened from (nil:
    /// replayed from the start).
    package let checkpointLSN: UInt64?
    /// The key directory's runs (`DIR/index`); nil for a read-only open of a store that has none yet (format 3),
    /// whose directory is then kept in memory.
    package let index: LSMTree?
    /// Whether opening read the flushed state from ``index`` (else it was built from a checkpoint or the log).
    private let flushedFromIndex: Bool
    /// The key directory's memtable is flushed once it holds this many bytes (``StoreConfiguration/memtableSize``).
    private let memtableLimit: Int
    /// The index's ``LSMTree/runsChanges`` the directory last read its runs at.
    private let runsSeen: Atomic<UInt64>
    /// Online compaction: settings, progress, counters.
    let compaction: CompactionControl
    /// The commit payload version written (``StoreConfiguration/commitPayloadVersion``).
    private let payloadVersion: UInt8
    /// Where failed background work is reported (the store's).
    let backgroundErrors: BackgroundErrors
    /// What opening found wrong and worked around (a damaged checkpoint set aside, a torn log tail cut off).
    package let recoveryFindings: [String]

    /// Opens the partition in `directory`, recovering its state. `legacyCatalog` (partition 0 of a format-1 store):
    /// replay the whole log, checkpoints ignored, gathering the catalog mutations it holds into
    /// ``PartitionState/legacyCatalog`` for the migration.
    init(
        id: UInt32, directory: String, configuration: StoreConfiguration, fileSystem: any FileSystem,
        backgroundErrors: BackgroundErrors, indexCache: BlockCache, legacyCatalog: Bool = false
    ) throws {
        self.id = id
        self.backgroundErrors = backgroundErrors
        self.directory = directory
        checkpointTrigger = CheckpointTrigger(interval: configuration.checkpointInterval)
        self.tombstoneRetention = configuration.tombstoneRetention
        self.fileSystem = fileSystem
        checkpoints = CheckpointStore(directory: directory, fileSystem: fileSystem)
        memtableLimit = configuration.memtableSize
        writer = PartitionWriter(name: "\(id)", stallLimit: configuration.writeStallMemtableSize)
        var initial = PartitionState()
        var afterLSN: UInt64 = 0
        var hint: FramePosition?
        var usedCheckpoint: UInt64?
        var findings: [String] = []
        var fromIndex = false
        if legacyCatalog { initial.legacyCatalog = CatalogState() }
        // A flush or checkpoint taken under another compaction generation points at frames that have moved: replay.
        let generation = try CompactionMarker.load(directory: directory, fileSystem: fileSystem)?.generation ?? 0
        var rejected: [CheckpointStore.CheckpointFile] = []
        var tree: LSMTree?
        if !legacyCatalog {
            let opened = try Self.openIndex(
                directory: directory, configuration: configuration, indexCache: indexCache, fileSystem: fileSystem,
                generation: generation)
            tree = opened.tree
            findings += opened.findings
            if let (state, position) = opened.state {
                fromIndex = true
                initial = state
                afterLSN = position.lastLSN
                hint = position.next
                usedCheckpoint = position.lastLSN
            } else {
                // A store of format 3 (or an index rebuilt): its newest checkpoint, if any, then the log's tail.
                let found: (lsn: UInt64, next: FramePosition?, payload: [UInt8])?
                (found, rejected) = try checkpoints.loadNewest()
                if let ckpt = found, let decoded = try PartitionState.decodeCheckpoint(ckpt.payload, next: ckpt.next),
                    decoded.compactionGeneration == generation
                {
                    initial = decoded
                    afterLSN = ckpt.lsn
                    hint = ckpt.next
                    usedCheckpoint = ckpt.lsn
                }
            }
        }
        index = tree
        flushedFromIndex = fromIndex
        var logConfig = LogConfiguration()
        logConfig.durability = configuration.durability
        logConfig.segmentSize = configuration.segmentSize
        logConfig.readOnly = configuration.readOnly
        logConfig.boundedCompaction = configuration.replicated
        var replayed = initial
        var replayedBytes = 0
        var replayedFrames = 0
        log = try Log.open(
            directory: directory, partition: id, configuration: logConfig, fileSystem: fileSystem, afterLSN: afterLSN,
            startHint: hint
        ) { frame in
            guard frame.type == Commit.frameType else {
                throw CloudletError.corruption(
                    "partition \(id): frame LSN \(frame.lsn) at segment \(frame.position.segment) offset "
                        + "\(frame.position.offset) has unknown type \(frame.type)")
            }
            let (commit, slots, sizes) = try Commit.decode(frame.payload)
            try replayed.apply(
                commit, lsn: frame.lsn, position: frame.position, slots: slots,
                costs: Commit.costs(sizes: sizes, frameLength: frame.position.length))
            replayedBytes += Int(frame.position.length)
            replayedFrames += 1
        }
        // A compacted log may end in LSNs whose frames compaction dropped: the state is still at the log's end.
        guard replayed.lastLSN <= log.lastLSN, replayed.lastLSN == log.lastLSN || log.compactionMarker != nil else {
            throw CloudletError.corruption(
                "partition \(id): checkpoint is at LSN \(afterLSN) but the log ends at LSN \(log.lastLSN)")
        }
        replayed.lastLSN = log.lastLSN
        replayed.nextPosition = log.endPosition
        replayed.compactionGeneration = log.compactionMarker?.generation ?? 0
        framesReplayed = replayedFrames
        checkpointLSN = usedCheckpoint
        recoveryFindings = findings + Self.recoveryFindings(
            rejected: rejected, recovery: log.recovery, of: "partition \(id)", readOnly: configuration.readOnly)
        state = Mutex(replayed)
        cache = RecordCache(capacity: configuration.recordCacheSize)
        entryCache = EntryCache(capacity: configuration.entryCacheSize)
        publisher = ChangePublisher(partition: Int(id))
        compaction = CompactionControl(configuration: configuration.compaction)
        payloadVersion = configuration.commitPayloadVersion
        checkpointTrigger.reset(bytes: replayedBytes, lastLSN: afterLSN)
        log.onFailure { [id, backgroundErrors] failure in backgroundErrors.record(.flush, in: "partition \(id)", failure) }
        // Durable commits reach change listeners (the notification hub) from the committer's thread, not only when
        // the committing task runs again (on the cooperative pool, which may be busy or blocked).
        log.onDurable { [publisher] durable in if publisher.isActive { publisher.publish(durable: durable) } }
        runsSeen = Atomic(tree?.runsChanges ?? 0)
        // Reads go through the merged runs as soon as a merge is installed, not at the next commit: a store that
        // stops writing (after a bulk load) would otherwise read every level-0 run merged away, and keep their files.
        tree?.onMergeInstalled { [weak self] in self?.takeMergedRuns() }
        takeMergedRuns()  // a merge the tree installed since the directory took its runs, before the observer was set
        // Checkpoints of a format-3 store whose migration flushed the index but stopped before deleting them.
        if fromIndex && !configuration.readOnly, !((try? checkpoints.list().0.isEmpty) ?? true) {
            do { try checkpoints.removeAll(except: .max) } catch {
                StoreLog.warning("partition \(id): could not delete the checkpoints the index replaced: \(error)")
            }
        }
        // An index built from a checkpoint or the whole log goes to disk now, so that the next open reads it. An
        // empty store built nothing: its first flush comes with its first writes (or its close).
        // So does one whose secondary indexes were migrated from an older flushed state.
        if let tree, !flushedFromIndex || replayed.indexesMigrated, !configuration.readOnly,
            replayedFrames > 0 || usedCheckpoint != nil
        {
            do {
                try flushIndex(force: true)
                try checkpoints.removeAll(except: .max)
            } catch {
                tree.close()
                try? log.close()
                throw error
            }
        }
    }

    /// Where replay starts after a flush: recorded with it in the index's manifest (``LSMTree/logPosition``).
    package struct FlushPosition {
        package var generation: UInt32
        package var lastLSN: UInt64
        package var next: FramePosition?

        var encoded: [UInt8] {
            var w = ByteWriter(capacity: 40)
            w.u8(1)
            w.u32(generation)
            w.u64(lastLSN)
            w.bool(next != nil)
            if let next {
                w.u64(next.segment)
                w.u64(next.offset)
                w.u32(next.length)
            }
            return w.bytes
        }

        init(generation: UInt32, lastLSN: UInt64, next: FramePosition?) {
            self.generation = generation
            self.lastLSN = lastLSN
            self.next = next
        }

        package init(decoding bytes: [UInt8]) throws {
            var r = ByteReader(bytes, what: "index log position")
            guard try r.u8() == 1 else { throw CloudletError.corruption("index log position: unknown version") }
            generation = try r.u32()
            lastLSN = try r.u64()
            next = try r.bool() ? FramePosition(segment: try r.u64(), offset: try r.u64(), length: try r.u32()) : nil
            guard r.isAtEnd else { throw CloudletError.corruption("index log position: trailing bytes") }
        }
    }

    /// The partition's index directory (`DIR/index`): an LSM tree of the key directory (KeyDirectory.swift).
    package static func indexDirectory(_ directory: String) -> String { Path.join(directory, indexDirectoryName) }
    package static let indexDirectoryName = "index"

    /// Opens the partition's index and the state flushed with it. No state: a store of format 3 (no index yet), an
    /// index of another compaction generation, or a damaged one — each of the last two is set aside (deleted)
    /// unless read-only, and the caller rebuilds it from the log. Read-only without an index: no tree.
    private static func openIndex(
        directory: String, configuration: StoreConfiguration, indexCache: BlockCache, fileSystem: any FileSystem,
        generation: UInt32
    ) throws -> (tree: LSMTree?, state: (PartitionState, FlushPosition)?, findings: [String]) {
        let path = indexDirectory(directory)
        var config = LSMTreeConfiguration()
        config.blockCache = indexCache
        config.manifest.readOnly = configuration.readOnly
        config.backgroundMerges = !configuration.readOnly
        config.memtableSize = configuration.memtableSize
        let exists = fileSystem.fileExists(Path.join(path, "CURRENT"))
        if configuration.readOnly && !exists { return (nil, nil, []) }
        var problem: String
        do {
            // Files without the CURRENT pointer that names the live manifest: an index that lost it.
            let files = (try? fileSystem.listDirectory(path)) ?? []
            if !exists && !files.isEmpty {
                throw CloudletError.corruption("index \(path): CURRENT is missing but \(files.count) files are there")
            }
            let tree = try LSMTree(directory: path, fileSystem: fileSystem, configuration: config)
            let bytes = tree.logPosition
            guard !bytes.isEmpty else { return (tree, nil, []) }
            do {
                let position = try FlushPosition(decoding: bytes)
                if position.generation != generation {
                    problem = "it was flushed before the log was compacted (generation \(position.generation), now \(generation))"
                } else {
                    let base = tree.runsView()
                    guard let stateBytes = try base.get(DirectoryKey.state) else {
                        throw CloudletError.corruption("index \(path): no flushed state")
                    }
                    var state = try PartitionState.decodeState(stateBytes, base: base)
                    guard state.lastLSN == position.lastLSN else {
                        throw CloudletError.corruption(
                            "index \(path): flushed state is at LSN \(state.lastLSN), its manifest says \(position.lastLSN)")
                    }
                    state.nextPosition = position.next
                    return (tree, (state, position), [])
                }
            } catch {
                problem = "\(error)"
            }
            tree.close()
        } catch {
            problem = "\(error)"
        }
        let finding = "set aside the index \(path) (\(problem)) and rebuilt it from the log"
        if configuration.readOnly { return (nil, nil, ["ignored the index \(path) (\(problem)) and replayed the log"]) }
        StoreLog.warning(finding)
        do throws(FileSystemError) {
            for name in try fileSystem.listDirectory(path) { try fileSystem.remove(Path.join(path, name)) }
        } catch {
            throw CloudletError.io(error, "clearing the damaged index \(path)")
        }
        return (try LSMTree(directory: path, fileSystem: fileSystem, configuration: config), nil, [finding])
    }

    /// What opening a log and its checkpoints (a partition's, the catalog's: `owner`) found wrong and worked
    /// around — damaged checkpoints passed over, a torn tail cut off — each also written to standard error unless
    /// `readOnly` (the offline tools report what they find their own way, and a read-only open cuts nothing).
    static func recoveryFindings(
        rejected: [CheckpointStore.CheckpointFile], recovery: LogRecoveryReport, of owner: String, readOnly: Bool
    ) -> [String] {
        var findings = rejected.map {
            "set aside damaged checkpoint \($0.path) (\($0.problem ?? "damaged")) and replayed the log instead"
        }
        if let torn = recovery.tornTail {
            let what = "\(torn.droppedBytes) bytes at offset \(torn.offset): \(torn.reason)"
            findings.append(
                readOnly
                    ? "ignored a torn write at the end of \(torn.path) (\(what)); a read-write open cuts it off"
                    : "cut a torn write off the end of \(torn.path) (\(what))")
        }
        if !readOnly { for finding in findings { StoreLog.warning("\(owner): \(finding)") } }
        return findings
    }

    /// Commits as a job of the partition's ``writer``, for async callers: waits for room in the log first,
    /// suspending (the log's backpressure never blocks a thread of the cooperative pool), then runs `plan` and the
    /// commit on the writer — on the calling thread if it may block and the writer is idle, else on the writer's
    /// thread while the task suspends. Returns the plan's result and the LSN to wait for (nil if nothing was
    /// written), without waiting for durability.
    ///
    /// Cancellation: a task cancelled while waiting for room or queued for the writer stops with
    /// `CancellationError` and nothing is written; once the job started, the commit goes through (a staged commit is
    /// never undone: it is, or will be, durable).
    ///
    /// `lookups`: where `plan` leaves the key-directory entries it looked up, which applying the commit then uses.
    package func commit<R: Sendable>(
        lookups: PlannedLookups? = nil,
        waitingForRoom plan: @escaping @Sendable (PartitionState, UInt64) throws -> (mutations: [Mutation], result: R)
    ) async throws -> (result: R, lsn: UInt64?) {
        try await log.waitForRoom()
        return try await writer.run { try self.commitNow(admitOverLimit: true, lookups: lookups, plan) }
    }

    /// ``commit(lookups:waitingForRoom:)`` that runs `staged` with the plan's result and the commit's LSN once the
    /// commit is staged and applied, still under the state's lock (so in this partition's commit order): where a commit
    /// that has a copy in the catalog (share records) stages that copy. Not run when nothing was written.
    ///
    /// `untilDurable`: return once the commit is also durable (what the caller would wait for next anyway), the
    /// task woken once — by the committer, after the fdatasync — instead of by the writer and then the committer: a
    /// wake-up of the cooperative pool less a commit, which concurrent single-record saves pay per record. An inline
    /// job returns at once. The caller still calls ``waitDurable(_:)``: at once past a durable commit, and for a
    /// replicated log it goes on to wait for the followers.
    package func commit<R: Sendable>(
        lookups: PlannedLookups? = nil,
        waitingForRoom plan: @escaping @Sendable (PartitionState, UInt64) throws -> (mutations: [Mutation], result: R),
        staged: @escaping @Sendable (R, UInt64) -> Void, untilDurable: Bool = false
    ) async throws -> (result: R, lsn: UInt64?) {
        try await log.waitForRoom()
        let job: @Sendable () throws -> (result: R, lsn: UInt64?) = {
            try self.commitNow(admitOverLimit: true, lookups: lookups, plan, staged: staged)
        }
        guard untilDurable else { return try await writer.run(job) }
        let log = self.log
        return try await writer.run(job) { outcome, resume in
            guard case .success(let committed) = outcome, let lsn = committed.lsn else { return resume(outcome) }
            log.whenDurable(lsn) { durable in resume(durable.map { committed }) }
        }
    }

    /// Commits as a job of the partition's ``writer``, for threads that may block: runs `plan` with the state and
    /// the LSN its commit will get; stages the mutations it returns (if any) as one frame and applies them. Returns
    /// the plan's result and the LSN to wait for (nil if nothing was written). Blocks while the writer runs other
    /// jobs or is stalled, and on the log's backpressure.
    package func commit<R>(
        _ plan: (PartitionState, UInt64) throws -> (mutations: [Mutation], result: R)
    ) throws -> (result: R, lsn: UInt64?) {
        try writer.runBlocking { try commitNow(admitOverLimit: false, plan) }
    }

    /// The body of every commit job, on the writer: `plan`, staging and applying under the state's lock, then the
    /// background work the commit may start (a flush, a compaction). Blocks on the log's backpressure unless
    /// `admitOverLimit` (``Log/stage(type:payload:compressible:admitOverLimit:)``).
    private func commitNow<R>(
        admitOverLimit: Bool, lookups: PlannedLookups? = nil,
        _ plan: (PartitionState, UInt64) throws -> (mutations: [Mutation], result: R), staged: ((R, UInt64) -> Void)? = nil
    ) throws -> (result: R, lsn: UInt64?) {
        let (result, lsn, bytes, memtableFull) = try state.withLock { st -> (R, UInt64?, Int, Bool) in
            let lsn = st.lastLSN + 1
            let (mutations, result) = try plan(st, lsn)
            guard !mutations.isEmpty else { return (result, nil, 0, false) }
            let commit = Commit(mutations: mutations)
            let (payload, slots, sizes) = commit.encode(version: payloadVersion)
            let (length, memtableFull) = try apply(
                commit, slots: slots, sizes: sizes, lookups: lookups, to: &st, lsn: lsn
            ) {
                // From version 2 stored as it is: the records are compressed blocks of their own, read in place.
                let (staged, position) = try log.stage(
                    type: Commit.frameType, payload: payload, compressible: payloadVersion < 2, admitOverLimit: admitOverLimit)
                precondition(staged == lsn, "partition \(id): staged LSN \(staged), expected \(lsn)")
                return position
            }
            staged?(result, lsn)
            return (result, lsn, length, memtableFull)
        }
        if lsn != nil { noteCommitted(bytes: bytes, memtableFull: memtableFull) }
        return (result, lsn)
    }

    /// Stages commit `lsn` through `stage` (which returns its position in the log) and applies it to `st`, under the
    /// state's lock: the one path of a leader's own commits and of a follower's frames
    /// (Partition+Replication.swift). Returns the frame's length and whether the memtable is full.
    func apply(
        _ commit: Commit, slots: [Int: Commit.Slot], sizes: [UInt32], lookups: PlannedLookups?,
        to st: inout PartitionState, lsn: UInt64, stage: () throws -> FramePosition
    ) throws -> (length: Int, memtableFull: Bool) {
        let mutations = commit.mutations
        // What listeners are told was replaced: read before staging, so that nothing fails between staging and applying.
        var previous: [Int: RecordEntry] = [:]
        let publishing = publisher.isActive
        if publishing {
            for (i, m) in mutations.enumerated() {
                switch m {
                case .putRecord(let z, let r, _):
                    if let e = try st.entry(z, r.recordName), !e.deleted { previous[i] = e }
                case .deleteRecord(let z, let name, _, _, _):
                    if let e = try st.entry(z, name), !e.deleted { previous[i] = e }
                default: break
                }
            }
        }
        let position = try stage()
        do {
            try st.apply(
                commit, lsn: lsn, position: position, slots: slots,
                costs: Commit.costs(sizes: sizes, frameLength: position.length), known: lookups)
            entryCache.invalidate(mutations)
        } catch {
            // The frame is in the log but the state could not take it (the index could not be read): nothing
            // more may be written on top of a state that misses a commit. Reopening replays it.
            log.fail(CloudletError(.readOnly, "partition \(id): applying commit \(lsn) failed: \(error)", cause: error))
            throw error
        }
        rebaseIfRunsChanged(&st)
        if publishing {
            publisher.staged(lsn: lsn, mutations: mutations, previous: previous)
            // The committer may have made it durable before it was queued here: then nobody else publishes it but
            // the committing task, once it runs again.
            if log.durableLSN >= lsn && !log.hasCommitGate { publisher.publish(durable: lsn) }
        }
        // Cache what was written: a writer that reads it back (an update of a record saved a moment ago) must
        // not wait for the commit's fdatasync while holding the writer lock. Not a bulk write's records: they
        // would evict the working set of everyone else's reads for versions mostly never read back (an import),
        // and caching them was a twentieth of a bulk load's time.
        if mutations.lazy.filter({ $0.kind == .putRecord }).count <= Self.cachedCommitLimit {
            for (i, m) in mutations.enumerated() {
                if case .putRecord(_, let r, _) = m { cache.put(.init(lsn: lsn, index: UInt32(i)), record: r) }
            }
        }
        let memtableBytes = st.keys.memtableBytes
        writer.noteMemtable(bytes: memtableBytes)
        return (Int(position.length), memtableBytes >= memtableLimit)
    }

    /// Notes a commit's bytes for checkpoints and compaction (after the state's lock is released).
    func noteCommitted(bytes: Int, memtableFull: Bool) {
        noteWritten(bytes, memtableFull: memtableFull)
        maybeCompact(after: bytes)
    }

    /// Rebases the key directory on the index's runs if a merge changed them since it last looked (the merging
    /// thread calls it after each merge; commits check too, in `apply`).
    private func takeMergedRuns() { state.withLock { rebaseIfRunsChanged(&$0) } }

    /// ``takeMergedRuns()`` with the state's lock held.
    private func rebaseIfRunsChanged(_ st: inout PartitionState) {
        guard let index else { return }
        let changes = index.runsChanges
        guard changes != runsSeen.load(ordering: .relaxed) else { return }
        runsSeen.store(changes, ordering: .relaxed)
        st.rebaseDirectory(index.runsView())
    }

    /// A read view for a query (O(1), under the lock): the planner reads the indexes through it.
    func queryView() -> PartitionReadView {
        state.withLock { st in
            var view = st.readView
            view.entryCache = (entryCache, entryCache.epoch)
            return view
        }
    }

    /// Waits until `lsn` is durable, then hands durable commits to change listeners (the committer's thread does it
    /// too, ``Log/onDurable(_:)``, except for a replicated log: there only committed frames are published, here).
    package func waitDurable(_ lsn: UInt64) async throws {
        guard lsn > 0 else { return }
        try await log.waitCommitted(lsn)
        if publisher.isActive { publisher.publish(durable: log.durableLSN) }
    }

    /// Reads the version of a record that `entry` points at, waiting for it to be durable first.
    func read(_ zone: ZoneKey, _ name: String, _ entry: RecordEntry) async throws -> Record {
        if entry.lsn > log.durableLSN { try await log.waitDurable(entry.lsn) }
        if let r = cache.get(RecordCache.Key(entry)) { return r }
        // A miss reads the disk: do it off the cooperative pool.
        return try await ThreadBridge.offload { try self.readFromLog(zone, name, entry) }
    }

    /// Reads several record versions (a lookup), waiting for them to be durable first: cached ones from the cache,
    /// the others with ``readUncached(_:fillingCache:)`` on a thread of their own, then cached.
    func read(_ items: [(zone: ZoneKey, name: String, entry: RecordEntry)]) async throws -> [Result<Record, CloudletError>] {
        if let newest = items.map(\.entry.lsn).max(), newest > log.durableLSN { try await log.waitDurable(newest) }
        var (results, misses) = cached(items)
        guard !misses.isEmpty else { return results.map { $0! } }
        let wanted = misses.map { items[$0] }
        let read = await ThreadBridge.offload { self.readUncached(wanted, fillingCache: true) }
        for (i, r) in zip(misses, read) { results[i] = r }
        return results.map { $0! }
    }

    /// ``read(_:)-([(zone:name:entry:)])`` for a thread that may block: cached versions from the cache, the others
    /// read right here (and cached). nil when a version is not durable yet (``read(_:)-([(zone:name:entry:)])``
    /// waits for it).
    func readBlocking(_ items: [(zone: ZoneKey, name: String, entry: RecordEntry)]) -> [Result<Record, CloudletError>]? {
        if let newest = items.map(\.entry.lsn).max(), newest > log.durableLSN { return nil }
        var (results, misses) = cached(items)
        guard !misses.isEmpty else { return results.map { $0! } }
        let wanted = misses.map { items[$0] }
        // A read from the disk may sleep: an admitted caller (``ThreadBridge/admitted(_:)``) lets another run meanwhile.
        for (i, r) in zip(misses, ThreadBridge.blocking { readUncached(wanted, fillingCache: true) }) { results[i] = r }
        return results.map { $0! }
    }

    /// The current versions of the records `names` of `zone` that are not cached, read before a batch is planned so
    /// that planning under the writer lock finds them in memory (``Prefetched/records``, keyed by version), and their
    /// entries. A name whose `fields` are not needed is read only if its entry lacks the creation stamp. A version
    /// replaced meanwhile is simply not used; a read that fails is left to the planner, which reports it.
    func prefetch(_ zone: ZoneKey, _ names: [(String, fields: Bool)]) async throws -> Prefetched {
        guard let (found, epoch) = try await currentEntriesAndEpoch(zone, names.map(\.0)) else { return Prefetched() }
        let entries = zip(names, found).compactMap { n, e in e.map { (zone, n.0, $0, n.fields) } }
            .filter { !$0.2.deleted && ($0.3 || $0.2.created == nil) && !cache.contains(RecordCache.Key($0.2)) }
            .map { ($0.0, $0.1, $0.2) }
        var out = Prefetched(entries: Dictionary(zip(names.map(\.0), found)) { a, _ in a }, epoch: epoch)
        guard !entries.isEmpty else { return out }
        let results = await ThreadBridge.offload { self.readUncached(entries) }
        for (item, result) in zip(entries, results) {
            if case .success(let r) = result { out.records[RecordCache.Key(item.2)] = r }
        }
        return out
    }

    /// What ``prefetch(_:_:)`` found.
    struct Prefetched: Sendable {
        /// The records' current entries (nil: none), as of ``epoch``.
        var entries: [String: RecordEntry?] = [:]
        var epoch: UInt64?
        /// Versions read, by version.
        var records: [RecordCache.Key: Record] = [:]

        /// Hands the entries to `lookups` (a planner's, under the state lock) if they are still current — nothing
        /// changed an entry since they were looked up (``EntryCache/epoch`` unmoved) — so that planning and applying
        /// do not look them up again. Tombstones are left out: a purge drops them without moving the epoch.
        func seed(_ lookups: PlannedLookups, currentEpoch: UInt64) {
            guard let epoch, epoch == currentEpoch else { return }
            for (name, entry) in entries where entry.map({ !$0.deleted }) ?? true { lookups.entries[name] = .some(entry) }
        }
    }

    /// The current entries of the records `names` of zone `z` (nil for one it has none of), or nil when the zone
    /// does not exist, read without blocking the cooperative pool: the entries the key directory's memtables hold,
    /// under the lock; the others from its runs, which may read the disk, outside the lock on a copy of the
    /// directory (O(1)) with ``ThreadBridge/offload(_:)`` — right there when the caller may block.
    func currentEntries(_ z: ZoneKey, _ names: [String]) async throws -> [RecordEntry?]? {
        try await currentEntriesAndEpoch(z, names)?.entries
    }

    /// ``currentEntries(_:_:)`` and the ``EntryCache/epoch`` they are current at: while the cache is still at that
    /// epoch, no commit or compaction has changed any entry since.
    func currentEntriesAndEpoch(_ z: ZoneKey, _ names: [String]) async throws -> (entries: [RecordEntry?], epoch: UInt64)? {
        // A caller that may block looks up under the lock right away: no copy, no second lookup (the read path of
        // the server and of `ThreadBridge.wait` callers).
        if ThreadBridge.mayBlock { return try currentEntriesBlockingAndEpoch(z, names) }
        let (exists, found, directory, epoch) = try state.withLock { st -> (Bool, [RecordEntry??], KeyDirectory?, UInt64) in
            guard st.zoneExists(z) else { return (false, [], nil, 0) }
            let found = try names.map { name in try entryCache.get(z, name).map { .some($0) } ?? st.keys.entryInMemory(z, name) }
            return (true, found, found.contains { $0 == nil } ? st.keys : nil, entryCache.epoch)
        }
        guard exists else { return nil }
        guard let directory else { return (found.map { $0! }, epoch) }
        let missing = found.indices.filter { found[$0] == nil }
        let wanted = missing.map { names[$0] }
        let read = try await ThreadBridge.offload { try wanted.map { try directory.entry(z, $0) } }
        var out = found.map { $0 ?? nil }
        for (i, e) in zip(missing, read) {
            out[i] = e
            entryCache.put(z, names[i], e, ifEpoch: epoch)
        }
        return (out, epoch)
    }

    /// ``currentEntries(_:_:)`` for threads that may block (a front-end worker's lookup): under the lock, the
    /// entries from ``entryCache`` or else the key directory, which may read the disk.
    func currentEntriesBlocking(_ z: ZoneKey, _ names: [String]) throws -> [RecordEntry?]? {
        try currentEntriesBlockingAndEpoch(z, names)?.entries
    }

    private func currentEntriesBlockingAndEpoch(_ z: ZoneKey, _ names: [String]) throws -> (entries: [RecordEntry?], epoch: UInt64)? {
        try state.withLock { st in
            st.zoneExists(z) ? (try names.map { try liveEntry(st, z, $0) }, entryCache.epoch) : nil
        }
    }

    /// The current entry of record `name` in zone `z`, from ``entryCache`` or else the key directory (then cached).
    /// `st` is the live state, under its lock.
    private func liveEntry(_ st: PartitionState, _ z: ZoneKey, _ name: String) throws -> RecordEntry? {
        try entryCache.entry(z, name) { try st.entry(z, name) }
    }

    /// ``currentEntries(_:_:)`` of one record: `.some` of its entry (nil: none), nil when the zone does not exist.
    func currentEntry(_ z: ZoneKey, _ name: String) async throws -> RecordEntry?? {
        if ThreadBridge.mayBlock { return try currentEntryBlocking(z, name) }
        return try await currentEntries(z, [name]).map { $0[0] }
    }

    /// ``currentEntry(_:_:)`` for threads that may block (the notification hub's).
    func currentEntryBlocking(_ z: ZoneKey, _ name: String) throws -> RecordEntry?? {
        try state.withLock { st in st.zoneExists(z) ? .some(try liveEntry(st, z, name)) : nil }
    }

    /// Reads a record version known to be durable (or cached): a cache hit, else one positioned read of its frame.
    ///
    /// A compaction may move the version after `entry` was taken, or drop it once a newer version superseded it: the
    /// read then fails (no such segment, a frame that does not check out, another LSN or record there) and is
    /// retried once with the record's entry as it is now — the same version at its new place, or the newer version
    /// (`unknownItem` if the record was deleted meanwhile). Callers holding the state lock (the batch planner) pass
    /// `retry: false`: no compaction can swap under them, and the lock is not reentrant.
    func readDurable(_ zone: ZoneKey, _ name: String, _ entry: RecordEntry, retry: Bool = true) throws -> Record {
        if let r = cache.get(RecordCache.Key(entry)) { return r }
        return try readFromLog(zone, name, entry, retry: retry)
    }

    /// ``readDurable(_:_:_:retry:)`` after its cache lookup missed: the positioned read and its retry.
    private func readFromLog(_ zone: ZoneKey, _ name: String, _ entry: RecordEntry, retry: Bool = true) throws -> Record {
        if entry.lsn > log.durableLSN { try log.waitDurableBlocking(entry.lsn) }
        do {
            return try readAt(zone, name, entry)
        } catch let e as CloudletError where retry && (e.code == .corruption || e.code == .invalidArguments) {
            guard let now = try state.withLock({ try $0.entry(zone, name) }), now.position != entry.position || now.change != entry.change
            else { throw e }
            if now.deleted { throw CloudletError(.unknownItem, "record '\(name)' was deleted while it was being read") }
            return try readDurable(zone, name, now, retry: false)
        }
    }

    /// Reads several record versions (a change-feed page, an index build): the cached ones from the cache (which
    /// these readers do not fill: a catch-up or an index build would only evict what others use), the others with
    /// ``readUncached(_:fillingCache:)``.
    func readMany(_ items: [(zone: ZoneKey, name: String, entry: RecordEntry)]) -> [Result<Record, CloudletError>] {
        var (results, misses) = cached(items)
        for (i, r) in zip(misses, readUncached(misses.map { items[$0] })) { results[i] = r }
        return results.map { $0! }
    }

    /// The cached versions of `items` (nil where not cached), and the indices of the others. Each item is looked up
    /// once, so the cache's hit and miss counters count each read once.
    private func cached(_ items: [(zone: ZoneKey, name: String, entry: RecordEntry)]) -> (
        results: [Result<Record, CloudletError>?], misses: [Int]
    ) {
        let results = items.map { item in cache.get(RecordCache.Key(item.entry)).map { Result<Record, CloudletError>.success($0) } }
        return (results, results.indices.filter { results[$0] == nil })
    }

    /// Reads record versions from the log, without looking in the cache: record blocks close to each other in a
    /// segment with one read (``readSpans(_:)``), a version-1 frame read and decompressed once however many of its
    /// records are wanted. A record whose read fails goes through ``readFromLog(_:_:_:retry:)`` and its retry. With
    /// `fillingCache` (a lookup), what was read is offered to the cache (``RecordCache/putRead(_:record:)``).
    private func readUncached(
        _ items: [(zone: ZoneKey, name: String, entry: RecordEntry)], fillingCache: Bool = false
    ) -> [Result<Record, CloudletError>] {
        var results = [Result<Record, CloudletError>?](repeating: nil, count: items.count)
        var blocks: [Int] = []
        var frames: [FramePosition: Frame] = [:]
        for (i, (zone, name, entry)) in items.enumerated() {
            guard !entry.slot.block else {
                blocks.append(i)
                continue
            }
            results[i] = Self.result {
                if entry.lsn > log.durableLSN { try log.waitDurableBlocking(entry.lsn) }
                let frame = try frames[entry.position] ?? log.readFrame(at: entry.position)
                frames[entry.position] = frame
                return try decode(frame.payload, entry.slot, lsn: frame.lsn, zone, name, entry)
            }
        }
        for (i, bytes) in readSpans(blocks.map { items[$0].entry }).enumerated() {
            let (zone, name, entry) = items[blocks[i]]
            results[blocks[i]] = Self.result {
                let (buffer, range) = try bytes.get()
                return try decode(buffer, Commit.Slot(block: range, recordLength: 0), lsn: entry.lsn, zone, name, entry)
            }
        }
        return zip(items, results).map { item, result in
            switch result! {
            case .success(let r):
                if fillingCache { cache.putRead(RecordCache.Key(item.entry), record: r) }
                return .success(r)
            case .failure:
                return Self.result { try readFromLog(item.zone, item.name, item.entry) }
            }
        }
    }

    /// `body`'s record, or its error as a ``CloudletError``.
    private static func result(_ body: () throws -> Record) -> Result<Record, CloudletError> {
        do { return .success(try body()) } catch let e as CloudletError { return .failure(e) } catch {
            return .failure(CloudletError(.internalError, "reading a record: \(error)"))
        }
    }

    /// Fetches the record blocks `entries` point at, merging those of a segment that lie within ``spanGap`` bytes of
    /// each other into one positioned read of at most ``maxSpan`` bytes. Each result is the buffer read and the
    /// block's range in it.
    private func readSpans(_ entries: [RecordEntry]) -> [Result<([UInt8], Range<Int>), CloudletError>] {
        func start(_ e: RecordEntry) -> UInt64 { e.position.payloadOffset + UInt64(e.slot.offset) }
        var results = [Result<([UInt8], Range<Int>), CloudletError>?](repeating: nil, count: entries.count)
        let order = entries.indices.sorted { (entries[$0].position.segment, start(entries[$0])) < (entries[$1].position.segment, start(entries[$1])) }
        var k = 0
        while k < order.count {
            let first = entries[order[k]]
            let from = start(first)
            var to = from + UInt64(first.slot.length)
            var n = 1
            while k + n < order.count {
                let e = entries[order[k + n]]
                guard e.position.segment == first.position.segment, start(e) <= to + Self.spanGap,
                    start(e) + UInt64(e.slot.length) - from <= Self.maxSpan
                else { break }
                to = max(to, start(e) + UInt64(e.slot.length))
                n += 1
            }
            let group = order[k..<(k + n)]
            k += n
            do {
                let newest = group.map { entries[$0].lsn }.max()!
                if newest > log.durableLSN { try log.waitDurableBlocking(newest) }
                let bytes = try log.readSegment(first.position.segment, offset: from, count: Int(to - from))
                for i in group {
                    let s = Int(start(entries[i]) - from)
                    results[i] = .success((bytes, s..<(s + Int(entries[i].slot.length))))
                }
            } catch {
                for i in group { results[i] = .failure(error as? CloudletError ?? CloudletError(.internalError, "\(error)")) }
            }
        }
        return results.map { $0! }
    }

    /// The most records a commit may save for them to be cached as they are written.
    static let cachedCommitLimit = 32

    /// Record blocks at most this many bytes apart are fetched by one read.
    static let spanGap: UInt64 = 16 << 10
    /// The most bytes one grouped read fetches.
    static let maxSpan: UInt64 = 1 << 20

    private func readAt(_ zone: ZoneKey, _ name: String, _ entry: RecordEntry) throws -> Record {
        let record: Record
        if entry.slot.block {
            let bytes = try log.readStored(at: entry.position, range: entry.slot.range)
            record = try decode(bytes, Commit.Slot(block: bytes.indices, recordLength: 0), lsn: entry.lsn, zone, name, entry)
        } else {
            let frame = try log.readFrame(at: entry.position)
            record = try decode(frame.payload, entry.slot, lsn: frame.lsn, zone, name, entry)
        }
        cache.putRead(RecordCache.Key(entry), record: record)
        return record
    }

    /// The version `entry` names, decoded from `slot` of `bytes` (a frame's payload of LSN `lsn`, or a record block
    /// read in place); `.corruption` naming the record and where it was read if the bytes hold anything else.
    private func decode(
        _ bytes: [UInt8], _ slot: Commit.Slot, lsn: UInt64, _ zone: ZoneKey, _ name: String, _ entry: RecordEntry
    ) throws -> Record {
        func mismatch(_ what: String) -> CloudletError {
            CloudletError.corruption(
                "partition \(id): record '\(name)' points at LSN \(entry.lsn) bytes \(entry.slot.offset)..<"
                    + "\(entry.slot.offset + entry.slot.length) of segment \(entry.position.segment) offset "
                    + "\(entry.position.offset), which holds \(what)")
        }
        guard lsn == entry.lsn else { throw mismatch("LSN \(lsn)") }
        var record: Record
        do {
            var r = try Commit.recordReader(in: bytes, at: slot, what: "record '\(name)'")
            record = try RecordCodec.decode(&r, zoneID: zone.zoneID)
        } catch let e as CloudletError where e.code == .corruption {
            throw mismatch(e.message)
        }
        // The change tag names the version: a slot that decodes to another record or version is not this one.
        guard record.recordName == name, entry.hasChangeTag(record.changeTag ?? "") else {
            throw mismatch("record '\(record.recordName)' version '\(record.changeTag ?? "")'")
        }
        record.id.zoneID = zone.zoneID
        return record
    }

    private func noteWritten(_ bytes: Int, memtableFull: Bool) {
        guard checkpointTrigger.noteWritten(bytes, force: memtableFull) else { return }
        DispatchQueue.global(qos: .utility).async { [self] in
            purgeAndCheckpoint()
            checkpointTrigger.finished()
        }
    }

    /// The background work of the checkpoint trigger: purges tombstones past retention, then flushes the index;
    /// each failure is reported (``BackgroundErrors``), the flush is tried even when the purge failed.
    func purgeAndCheckpoint() {
        inBackground(.purge) {
            _ = try purgeTombstones(olderThan: Int64((Date().timeIntervalSince1970 - tombstoneRetention) * 1000))
        }
        inBackground(.checkpoint) { _ = try flushIndex() }
    }

    /// Runs background work whose caller has gone: a failure goes to the store's ``BackgroundErrors`` (statistics,
    /// metrics, standard error) — except that of work a closing partition stopped, which is no failure.
    func inBackground(_ job: BackgroundJob, _ work: () throws -> Void) {
        do { try work() } catch {
            if compaction.isCancelled && log.failure == nil, (error as? CloudletError)?.code == .readOnly { return }
            backgroundErrors.record(job, in: "partition \(id)", error)
        }
    }

    /// Commits a purge of the tombstones and deleted zones older than `cutoff` (ms since 1970), if any; change
    /// tokens from before the purged range expire. Blocking. Returns the new horizon LSN.
    @discardableResult
    func purgeTombstones(olderThan cutoff: Int64) throws -> UInt64? {
        let (horizon, lsn) = try commit { st, _ -> ([Mutation], UInt64?) in
            guard let h = try st.purgeHorizon(before: cutoff) else { return ([], nil) }
            return ([.purge(through: h)], h)
        }
        if let lsn { try log.waitDurableBlocking(lsn) }
        return horizon
    }

    /// Flushes the key directory's memtable, with the rest of the state, to a run of the index, once everything it
    /// covers is durable: the next open reads it and replays only the log after it. Returns false when nothing
    /// changed since the last flush (or there is no index: a read-only open of a format-3 store). `force` (after a
    /// compaction moved frames, or after opening without a flushed state) flushes anyway. `closing` (the flush of
    /// ``close(checkpoint:)``) does not wait for merges to bring level 0 below its stop trigger: no write follows.
    @discardableResult
    func flushIndex(force: Bool = false, closing: Bool = false) throws -> Bool {
        guard let index else { return false }
        return try checkpointWriter.withLock { _ in
            let frozen: (Memtable, PartitionState)? = state.withLock { st in
                guard force || st.lastLSN > checkpointTrigger.lastLSN else { return nil }
                let memtable = st.freezeDirectory()
                writer.flushStarted(memtableBytes: st.keys.memtableBytes)
                return (memtable, st)
            }
            guard let (frozenMemtable, snapshot) = frozen else { return false }
            var memtable = frozenMemtable
            do {
                if snapshot.lastLSN > log.durableLSN { try log.waitDurableBlocking(snapshot.lastLSN) }
                memtable.put(DirectoryKey.state, snapshot.encodeState(), sequence: snapshot.lastLSN)
                let position = FlushPosition(
                    generation: snapshot.compactionGeneration, lastLSN: snapshot.lastLSN, next: snapshot.nextPosition)
                try index.flush(memtable, logPosition: position.encoded, waitForMerges: !closing)
            } catch {
                state.withLock { $0.directoryFlushFailed() }
                // The index cannot take writes any more (a failed write or fdatasync is final for it, as for the
                // log): the partition stops taking them too rather than grow its memtable without end. Everything
                // acknowledged is in the log; reopening replays it from the last good flush.
                let full = (error as? CloudletError)?.code == .quotaExceeded
                let failure = CloudletError(
                    full ? .quotaExceeded : .readOnly, "partition \(id) is read-only: flushing its index failed: \(error)",
                    cause: error)
                log.fail(failure)
                writer.flushFinished(failure: failure)
                throw error
            }
            state.withLock { $0.directoryFlushed(base: index.runsView()) }
            writer.flushFinished(failure: nil)
            runsSeen.store(index.runsChanges, ordering: .relaxed)
            checkpointTrigger.wrote(snapshot.lastLSN)
            return true
        }
    }

    /// Closes the log after a failed open of the store (no checkpoint); a failure to close is reported on standard
    /// error, the open's own error being the one thrown.
    func abandon() {
        compaction.cancelAndWait()
        writer.close()
        index?.close()
        do { try log.close() } catch { StoreLog.warning("closing partition \(id)'s log after a failed open: \(error)") }
    }

    func close(checkpoint: Bool) throws {
        // First: a flush under way (a checkpoint, or one a stalled commit waits for) may be waiting for merges to
        // bring level 0 down; it returns now, so the queued commits and the closing flush do not wait for merges.
        index?.prepareToClose()
        compaction.cancelAndWait()
        // Queued commits run first; later ones are refused.
        writer.close()
        try log.flush()
        defer { index?.close() }
        if checkpoint && log.failure == nil { try flushIndex(closing: true) }
        // Let go of runs merged away since the directory last looked, so that their files go now, not at the next open.
        if let index { state.withLock { $0.rebaseDirectory(index.runsView()) } }
        try log.close()
    }
}

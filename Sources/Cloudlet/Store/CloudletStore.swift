import CloudletConcurrency
import CloudletCore
import CloudletStorage
import Foundation
import Synchronization

/// An embedded Cloudlet store: a directory holding containers, their databases, zones and records.
///
/// ```swift
/// let store = try await CloudletStore.open(at: "/var/lib/myapp/cloudlet")
/// let db = try store.container("iCloud.com.example.notes").privateDatabase(user: "alice")
/// var note = Record(recordType: "Note", recordName: "n1")
/// note["title"] = "Groceries"
/// note = try await db.save(note)
/// try await store.close()
/// ```
///
/// One process at a time may open a store for writing (an exclusive lock on `LOCK`); a second gets
/// ``CloudletError/Code/locked``. All methods are safe to call from any task.
public final class CloudletStore: Sendable {
    /// The store directory.
    public let path: String
    public let configuration: StoreConfiguration
    /// The store's identity and layout, fixed at creation.
    public let metadata: StoreMetadata
    package let partitions: [Partition]
    /// Schemas and subscriptions, in a log of their own (Catalog/).
    package let catalog: Catalog
    /// What opening migrated (a format-1 store's catalog moved out of partition 0), if anything.
    package let migration: CatalogMigration?
    /// A 64-bit fingerprint of ``StoreMetadata/storeID``, carried by change tokens.
    let fingerprint: UInt64
    private let lock: StoreLock?
    private let closed = Atomic<Bool>(false)
    let listenerIDs = Atomic<Int>(1)
    /// Subscriptions → notifications.
    let notificationHub: NotificationHub
    /// What the hub delivered (`notifications/`); nil when read-only.
    let notificationLog: NotificationLog?
    /// Background index builds (CloudletStore+Indexes.swift).
    let indexBuilder = IndexBuilder()
    /// Failed background work of the partitions and the catalog (``StoreStatistics/backgroundErrors``).
    let backgroundErrors: BackgroundErrors
    /// The asset files (`assets/`; Assets/).
    package let assets: BlobStore
    /// Where tests pause the engine to stage races (``TestHooks``).
    package let testHooks = TestHooks()

    /// Opens (creating if needed) the store at `path`. Blocking: recovers every partition. The public spelling is
    /// ``open(at:configuration:)``; this one is for the package's own synchronous tools.
    package convenience init(path: String, configuration: StoreConfiguration = StoreConfiguration()) throws {
        try self.init(path: path, configuration: configuration, lock: nil)
    }

    /// Opens the store with its files behind `fileSystem` (tests: a fault-injecting one). Blocking.
    package convenience init(path: String, configuration: StoreConfiguration, fileSystem: any FileSystem) throws {
        try self.init(path: path, configuration: configuration, lock: nil, fileSystem: fileSystem)
    }

    /// Opens the store with the exclusive lock the caller already holds (`cloudlet-tool`'s mutating commands take it
    /// before touching any file), on the lock's file system; closing the store releases it.
    package convenience init(path: String, configuration: StoreConfiguration, holding lock: StoreLock) throws {
        try self.init(path: path, configuration: configuration, lock: lock, fileSystem: lock.fileSystem)
    }

    private init(
        path: String, configuration: StoreConfiguration, lock held: StoreLock?, fileSystem fs: any FileSystem = PosixFileSystem()
    ) throws {
        self.path = path
        self.configuration = configuration
        let backgroundErrors = BackgroundErrors()
        self.backgroundErrors = backgroundErrors
        if !configuration.readOnly { try io { () throws(FileSystemError) in try fs.createDirectory(path) } }
        lock = configuration.readOnly ? nil : try held ?? StoreLock(directory: path, fileSystem: fs)
        var parts: [Partition] = []
        var openedCatalog: Catalog?
        var openedNotifications: NotificationLog?
        do {
            let found = try StoreMetadata.loadOrCreate(directory: path, configuration: configuration, fileSystem: fs)
            assets = try BlobStore(directory: path + "/assets", fileSystem: fs, readOnly: configuration.readOnly)
            let legacy = found.format == StoreMetadata.partitionZeroCatalogFormat
            let indexCache = BlockCache(capacity: configuration.indexCacheSize)
            for p in 0..<found.partitions {
                let dir = path + "/" + StoreMetadata.partitionDirectoryName(p)
                parts.append(
                    try Partition(
                        id: UInt32(p), directory: dir, configuration: configuration, fileSystem: fs,
                        backgroundErrors: backgroundErrors, indexCache: indexCache, legacyCatalog: legacy && p == 0))
            }
            let (catalog, metadata, migration) = try Self.openCatalog(
                path: path, metadata: found, partitions: parts, configuration: configuration, fileSystem: fs,
                backgroundErrors: backgroundErrors)
            openedCatalog = catalog
            self.catalog = catalog
            self.metadata = metadata
            self.migration = migration
            partitions = parts
            fingerprint = Fingerprint.of([metadata.storeID])
            // The durable notification log (not for a read-only store: nothing is matched there).
            var durable: (log: NotificationLog, recovered: NotificationLog.Recovered)?
            if !configuration.readOnly {
                durable = try NotificationLog.open(
                    directory: path + "/" + NotificationLog.directoryName, configuration: configuration, fileSystem: fs,
                    partitions: parts.count, keep: max(configuration.notificationsInMemory, 1))
                openedNotifications = durable?.log
            }
            notificationLog = durable?.log
            notificationHub = NotificationHub(
                partitions: parts, catalog: catalog, listenerID: 0, capacity: max(configuration.notificationsInMemory, 1),
                durable: durable, backgroundErrors: backgroundErrors)
            // Commits after the log's cursor are matched again; a log with no frame yet (a store from before it
            // existed) has no cursor: it starts from where the partitions are.
            if !configuration.readOnly && !catalog.snapshot().subscriptions.isEmpty {
                notificationHub.start(recover: durable?.recovered.incarnation != nil)
            }
            try reconcileShareRecords()
            try openIndexes()
            // Errors answered to clients name its files relative to it (HostPaths).
            HostPaths.register(store: path)
        } catch {
            // Close what opened (without checkpoints: nothing new to keep), so that the files are not left open.
            for p in parts { p.abandon() }
            openedCatalog?.abandon()
            try? openedNotifications?.close()
            lock?.release()
            throw error
        }
    }

    /// Opens (creating if needed) the store at `path`, recovering on a thread of its own.
    public static func open(at path: String, configuration: StoreConfiguration = StoreConfiguration()) async throws
        -> CloudletStore
    {
        try await ThreadBridge.offload { try CloudletStore(path: path, configuration: configuration) }
    }

    /// A container of this store. Containers exist as soon as something is saved in them.
    /// - Throws: ``CloudletError/Code/badContainer`` for an identifier that is not `iCloud.` + a reverse-DNS name.
    public func container(_ identifier: String) throws -> Container {
        try Names.validateContainer(identifier)
        return Container(identifier: identifier, store: self)
    }

    /// Flushes every partition, writes checkpoints so the next open replays nothing, and releases the lock.
    /// Idempotent.
    public func close() async throws {
        try await ThreadBridge.offload { try self.closeNow() }
    }

    /// Blocking form of ``close()``, for the package's synchronous tools.
    package func closeNow() throws {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        defer { HostPaths.unregister(store: path) }
        indexBuilder.stop()
        // Before the partitions close: the hub's thread finishes the commits already queued.
        notificationHub.stop()
        var firstError: (any Error)?
        for p in partitions {
            do { try p.close(checkpoint: !configuration.readOnly) } catch { if firstError == nil { firstError = error } }
        }
        do { try catalog.close(checkpoint: !configuration.readOnly) } catch { if firstError == nil { firstError = error } }
        do { try notificationLog?.close() } catch { if firstError == nil { firstError = error } }
        for p in partitions { p.publisher.finishAll() }
        lock?.release()
        if let firstError { throw firstError }
    }

    /// Writes a checkpoint of every partition and of the catalog now (normally done every `checkpointInterval` bytes
    /// and on close).
    public func checkpoint() async throws {
        try await ThreadBridge.offload {
            for p in self.partitions { try p.flushIndex() }
            try self.catalog.writeCheckpoint()
        }
    }

    /// Runs the index merges that are due now, in the calling task's thread, so that no merge is under way when this
    /// returns (until the next flush): for taking a file-level copy of an open store (benchmarks' crash images).
    public func finishIndexMerges() async throws {
        try await ThreadBridge.offload { for p in self.partitions { try p.index?.mergeUntilIdle() } }
    }

    /// Forgets tombstones (deleted records and zones) older than the retention window — by default
    /// ``StoreConfiguration/tombstoneRetention``; done automatically with each checkpoint. Change tokens from before
    /// the forgotten range get `changeTokenExpired`. Returns how many partitions purged something.
    @discardableResult
    public func purgeTombstones(olderThan retention: Double? = nil) async throws -> Int {
        try checkOpen()
        let cutoff = Int64((Date().timeIntervalSince1970 - (retention ?? configuration.tombstoneRetention)) * 1000)
        return try await ThreadBridge.offload {
            try self.partitions.reduce(0) { n, p in n + (try p.purgeTombstones(olderThan: cutoff) == nil ? 0 : 1) }
        }
    }

    /// The partition that holds a zone: a stable hash of the zone's path, fixed for the life of the store.
    package func partition(for zone: ZoneKey) -> Partition {
        partitions[Int(zone.stableHash % UInt64(partitions.count))]
    }

    /// Counters of the store's logs, caches and compactions.
    public var statistics: StoreStatistics {
        var s = StoreStatistics()
        s.notificationWaiters = notificationHub.waitingReaders.load(ordering: .relaxed)
        for p in partitions {
            let l = p.log.stats
            s.commits += l.commits
            s.fsyncs += l.fsyncs
            s.bytesWritten += l.bytesWritten
            let (live, zones) = p.state.withLock { st in (st.keys.liveCount, st.keys.zoneCount) }
            s.framesReplayed += p.framesReplayed
            s.records += live
            s.zones += zones
            let c = p.cache.counts
            s.cacheHits += c.hits
            s.cacheMisses += c.misses
            let e = p.entryCache.counts
            s.entryCacheHits += e.hits
            s.entryCacheMisses += e.misses
            let w = p.writer.statistics
            s.writeStalls += w.stalls
            s.writeStallMicroseconds += Int(w.stalledNanoseconds / 1000)
            if w.stalled { s.partitionsStalled += 1 }
            s.memtableBytes += w.memtableBytes
            s.writesCancelled += w.cancelledJobs
            let segments = p.log.segments()
            s.logBytes += Int(segments.reduce(UInt64(0)) { $0 + $1.size })
            s.logBytesRead += Int(p.log.bytesRead)
            let (dead, sealed) = p.deadBytes()
            s.sealedBytes += Int(sealed)
            s.deadBytes += Int(dead)
            p.compaction.state.withLock { cs in
                s.compactions += cs.compactions
                s.compactionBytesReclaimed += Int(cs.bytesReclaimed)
                s.compactionMaxPauseMicroseconds = max(s.compactionMaxPauseMicroseconds, cs.maxPauseMicroseconds)
                if cs.running {
                    s.compactionsRunning += 1
                    s.compactionBytesDone += Int(cs.bytesDone)
                    s.compactionBytesTotal += Int(cs.bytesTotal)
                }
                if let e = cs.lastError { s.compactionLastError = "partition \(p.id): \(e)" }
            }
        }
        if let log = catalog.log {
            let l = log.stats
            s.commits += l.commits
            s.fsyncs += l.fsyncs
            s.bytesWritten += l.bytesWritten
        }
        s.catalogVersion = catalog.snapshot().version
        s.readOnlyReasons = partitions.compactMap { $0.log.failure?.description } + [catalog.log?.failure?.description].compactMap { $0 }
        s.recoveryFindings = partitions.flatMap { p in p.recoveryFindings.map { "partition \(p.id): \($0)" } }
            + catalog.recoveryFindings.map { "catalog: \($0)" }
        s.backgroundErrors = backgroundErrors.all
        return s
    }

    /// Compacts every partition now, one after the other, and returns what each did (partitions with nothing sealed
    /// to compact are left out). Copies the live frames of the sealed segments — with `includeActiveSegment`, of the
    /// segment being written too, which is rolled first (what `cloudlet-tool compact` does on a stopped store) — at
    /// most `bytesPerSecond` (nil: ``CompactionConfiguration/bytesPerSecond``; 0: unlimited), then swaps them in.
    /// Readers and writers go on meanwhile; they pause briefly at the swap. A background compaction under way is
    /// waited for first.
    @discardableResult
    public func compact(
        includeActiveSegment: Bool = false, bytesPerSecond: Int? = nil,
        progress: (@Sendable (CompactionProgress) -> Void)? = nil
    ) async throws -> [CompactionReport] {
        try checkOpen()
        if configuration.readOnly { throw CloudletError(.readOnly, "store at \(path) is open read-only") }
        return try await ThreadBridge.offload {
            try self.partitions.compactMap {
                try $0.compact(
                    includeActiveSegment: includeActiveSegment, bytesPerSecond: bytesPerSecond, waitForRunning: true,
                    progress: progress)
            }
        }
    }

    /// Every container's schema, as of the catalog's newest durable commit.
    package func schemaSnapshot() -> SchemaCatalog { catalog.snapshot().schema }

    package func checkOpen() throws {
        if closed.load(ordering: .acquiring) { throw CloudletError(.readOnly, "store at \(path) is closed") }
    }
}

/// Counters of a store, summed over its partitions (and, for commits, fsyncs and bytes written, its catalog).
public struct StoreStatistics: Sendable {
    /// All zero and empty: what ``CloudletStore/statistics`` starts from (and tests of what renders it).
    public init() {}

    /// The catalog's version: the LSN of its newest durable commit.
    public var catalogVersion: UInt64 = 0
    public var commits = 0
    public var fsyncs = 0
    public var bytesWritten = 0
    public var records = 0
    /// Log frames replayed when the store was opened (what the checkpoints did not cover).
    public var framesReplayed = 0
    public var zones = 0
    public var cacheHits = 0
    public var cacheMisses = 0
    /// Point reads whose key-directory entry was in the entry cache (``StoreConfiguration/entryCacheSize``), and those
    /// that searched the key directory.
    public var entryCacheHits = 0
    public var entryCacheMisses = 0
    /// Bytes of segment files (all partitions).
    public var logBytes = 0
    /// Bytes read from segment files by record reads, change feeds and compaction since the store was opened
    /// (recovery's reads not included).
    public var logBytesRead = 0
    /// Bytes of sealed segments (the ones compaction may rewrite), and how many of them hold nothing current:
    /// superseded versions, purged tombstones, records of deleted zones.
    public var sealedBytes = 0
    public var deadBytes = 0
    /// Compactions that took effect since the store was opened, and the bytes they gave back.
    public var compactions = 0
    public var compactionBytesReclaimed = 0
    /// Partitions compacting right now, and how far along they are (input bytes).
    public var compactionsRunning = 0
    public var compactionBytesDone = 0
    public var compactionBytesTotal = 0
    /// The longest pause of writers while a compaction swapped its segments in, in microseconds.
    public var compactionMaxPauseMicroseconds = 0
    /// Why the last compaction of some partition failed, if it did.
    public var compactionLastError: String?
    /// Write stalls since the store was opened: times a partition held its writes because its key directory's
    /// memtable had reached ``StoreConfiguration/writeStallSize`` while the previous one was still being flushed;
    /// the time writes spent held (over all partitions), and the partitions stalled now.
    public var writeStalls = 0
    public var writeStallMicroseconds = 0
    public var partitionsStalled = 0
    /// Bytes in the partitions' key-directory memtables (the active ones, not those being flushed).
    public var memtableBytes = 0
    /// Writes whose task was cancelled while they waited for their partition's writer (never applied).
    public var writesCancelled = 0
    /// Readers waiting for notifications now (long polls and websocket pushers that have nothing to send).
    public var notificationWaiters = 0
    /// Why partitions (or the catalog) turned read-only — a failed write or fdatasync of their log, named with its
    /// errno — since the store was opened; empty while everything is writable. Writes to them fail with that error
    /// (`readOnly`, or `quotaExceeded` for a full disk) until the store is reopened.
    public var readOnlyReasons: [String] = []
    /// What opening the store found damaged and worked around: checkpoints that did not check out (the state was
    /// rebuilt from the log instead), torn writes cut off the end of a log.
    public var recoveryFindings: [String] = []
    /// Background work that failed since the store was opened — group commits (`flush`), checkpoints, tombstone
    /// purges, compactions, notification reads — per job and partition, with a count and the last error. Each
    /// failure is also written to standard error.
    public var backgroundErrors: [BackgroundError] = []
}

extension CloudletStore {
    /// The reserved container that holds the store's own records (server users, API tokens, settings). Its name
    /// is not a valid `iCloud.` identifier, so no client request can address it.
    public static let systemContainerIdentifier = "_cloudlet.system"

    /// The private database of the store's system container: for the server's users and token hashes. Records
    /// here follow the same rules and durability as any other.
    public func systemDatabase() -> Database {
        Database(
            id: DatabaseID(
                container: Self.systemContainerIdentifier, environment: .development, scope: .private, owner: "_system"),
            access: .user("_system"), store: self)
    }
}

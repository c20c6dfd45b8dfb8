import CloudletConcurrency
import CloudletCore
import CloudletStorage
import Dispatch
import Foundation
import Synchronization

/// The store's catalog: schemas (types, fields, index flags) and subscriptions, in a log and state of their own
/// (`DIR/catalog/`), apart from every data partition.
///
/// **Log.** The same segment files, frames, group commit, recovery and checkpoints as a partition's
/// (``CloudletStorage/Log``, ``CheckpointStore``), stamped with partition ``logPartition``; each frame (type
/// ``frameType``) is one catalog commit, encoded as a commit payload with no zones and only catalog mutations.
///
/// **Versions.** The catalog version is the LSN of the last catalog commit. A data commit is validated against a
/// snapshot of the catalog and records the version it used when that is newer than what its partition recorded
/// before (``Mutation/catalogVersion(_:)``), as the FoundationDB Record Layer keeps the meta-data version in its
/// store header: a partition whose commits name a version the catalog does not have is refused at open.
///
/// **Writers and readers.** Writers are serialized by a lock over the newest staged state: ``commit(_:)`` plans
/// against it, stages one frame and applies it, then returns without waiting; ``waitDurable(_:)`` waits. Readers
/// take ``snapshot()``: an immutable value holding only *durable* commits, so nothing validated against it can
/// outlive a crash that loses the catalog commit it depends on, and a reader never waits for a writer (the lock
/// that guards it is held only to copy a reference).
package final class Catalog: Sendable {
    /// The catalog's directory in a store.
    package static let directoryName = "catalog"
    /// The partition number in the catalog's segment headers (no data partition has it: at most 1024 exist).
    package static let logPartition: UInt32 = 0xFFFF_FFFF
    /// The frame type of a catalog commit (data commits are type 1).
    package static let frameType: UInt8 = 2

    /// The catalog's directory; nil for the in-memory view of a format-1 store opened read-only.
    package let directory: String?
    /// The log; nil for that view (every write then throws `readOnly`).
    package let log: Log?
    private let checkpoints: CheckpointStore?
    /// The newest staged state: what writers plan against.
    private let writer: Mutex<CatalogState>
    /// What readers see, and the staged states waiting for durability (in LSN order).
    private let visible: ReadWriteLock<Visible>
    /// Subscription changes by catalog version, oldest first, until the notification hub takes them
    /// (``subscriptionChanges(after:through:)``): its index follows the catalog without copying it.
    private let subscriptionJournal = Mutex<[(version: UInt64, mutation: Mutation)]>([])
    /// Serializes checkpoint writers (a background one and close's); true once closed, after which none is written.
    private let checkpointWriter = Mutex(false)
    private let checkpointTrigger: CheckpointTrigger
    /// Frames replayed when the catalog was opened; the checkpoint it was opened from (nil: none).
    package let framesReplayed: Int
    package let checkpointLSN: UInt64?
    /// What opening found wrong and worked around (a damaged checkpoint set aside, a torn log tail cut off).
    package let recoveryFindings: [String]
    /// Where failed background work is reported (the store's); nil for the read-only view of a format-1 store.
    private let backgroundErrors: BackgroundErrors?

    private struct Visible {
        /// Boxed, so that a snapshot takes one reference under the lock and copies the state's many members outside
        /// it.
        var current: Published
        var pending: [CatalogState] = []

        init(current: CatalogState) { self.current = Published(current) }

        /// Whether no pending state is durable at `durable` (so `current` is what a snapshot gives).
        func isCurrent(at durable: UInt64) -> Bool { pending.first.map { $0.version > durable } ?? true }

        /// Makes the newest pending state at or below `durable` current.
        mutating func advance(to durable: UInt64) {
            guard let first = pending.first, first.version <= durable else { return }
            var n = 1
            while n < pending.count && pending[n].version <= durable { n += 1 }
            current = Published(pending[n - 1])
            pending.removeFirst(n)
        }
    }

    private final class Published: Sendable {
        let state: CatalogState
        init(_ state: CatalogState) { self.state = state }
    }

    /// Opens (creating if needed, unless read-only) the catalog in `directory`: loads the newest valid checkpoint,
    /// replays the frames after it. Throws `.corruption` naming the segment and offset for a damaged log, a frame
    /// that is not a catalog commit, or a checkpoint past the log's end.
    package init(
        directory: String, configuration: StoreConfiguration, fileSystem: any FileSystem,
        backgroundErrors: BackgroundErrors
    ) throws {
        self.directory = directory
        self.backgroundErrors = backgroundErrors
        checkpointTrigger = CheckpointTrigger(interval: max(64 << 10, min(configuration.checkpointInterval, 4 << 20)))
        let checkpoints = CheckpointStore(directory: directory, fileSystem: fileSystem)
        self.checkpoints = checkpoints
        var state = CatalogState()
        var usedCheckpoint: UInt64?
        let (found, rejected) = try checkpoints.loadNewest()
        if let ckpt = found {
            state = try CatalogState.decodeCheckpoint(ckpt.payload, next: ckpt.next)
            guard state.version == ckpt.lsn else {
                throw CloudletError.corruption(
                    "catalog checkpoint \(directory): its file says LSN \(ckpt.lsn), its payload version \(state.version)")
            }
            usedCheckpoint = ckpt.lsn
        }
        var logConfig = LogConfiguration()
        logConfig.durability = configuration.durability
        logConfig.segmentSize = configuration.segmentSize
        logConfig.readOnly = configuration.readOnly
        var replayed = 0
        var replayedBytes = 0
        let opened = try Log.open(
            directory: directory, partition: Self.logPartition, configuration: logConfig, fileSystem: fileSystem,
            afterLSN: state.version, startHint: usedCheckpoint == nil ? nil : state.nextPosition
        ) { frame in
            let place = "segment \(frame.position.segment) offset \(frame.position.offset)"
            state.apply(try Self.decode(frame.type, frame.payload, lsn: frame.lsn, at: place), lsn: frame.lsn, position: frame.position)
            replayed += 1
            replayedBytes += Int(frame.position.length)
        }
        // The catalog's log is never compacted: its LSNs are dense, and replay reaches its end.
        guard state.version == opened.lastLSN else {
            do { try opened.close() } catch { StoreLog.warning("closing the catalog's log after a failed open: \(error)") }
            throw CloudletError.corruption(
                "catalog \(directory): the state is at version \(state.version) but the log ends at LSN \(opened.lastLSN)")
        }
        state.nextPosition = opened.endPosition
        log = opened
        framesReplayed = replayed
        checkpointLSN = usedCheckpoint
        recoveryFindings = Partition.recoveryFindings(
            rejected: rejected, recovery: opened.recovery, of: "catalog", readOnly: configuration.readOnly)
        writer = Mutex(state)
        visible = ReadWriteLock(Visible(current: state))
        checkpointTrigger.reset(bytes: replayedBytes, lastLSN: usedCheckpoint ?? 0)
        opened.onFailure { failure in backgroundErrors.record(.flush, in: "catalog", failure) }
    }

    /// The catalog of a format-1 store opened read-only, gathered from its partition 0: readable, never written.
    package init(legacy state: CatalogState) {
        directory = nil
        log = nil
        checkpoints = nil
        checkpointTrigger = CheckpointTrigger(interval: 0)
        framesReplayed = 0
        checkpointLSN = nil
        recoveryFindings = []
        backgroundErrors = nil
        writer = Mutex(state)
        visible = ReadWriteLock(Visible(current: state))
    }

    /// Decodes a catalog frame; `.corruption` naming `lsn` and `place` for anything else.
    package static func decode(_ type: UInt8, _ payload: [UInt8], lsn: UInt64, at place: String) throws -> Commit {
        guard type == frameType else {
            throw CloudletError.corruption("catalog: frame LSN \(lsn) at \(place) has type \(type), not a catalog commit (\(frameType))")
        }
        do {
            let (commit, _, _) = try Commit.decode(payload)
            try CatalogState.check(commit)
            return commit
        } catch let e as CloudletError {
            throw CloudletError.corruption("catalog: frame LSN \(lsn) at \(place): \(e.message)")
        }
    }

    // MARK: - Reading

    /// The catalog as of its newest durable commit. Never blocks on a writer.
    package func snapshot() -> CatalogState {
        let durable = log?.durableLSN ?? 0
        // Every request reads the catalog: readers share the lock, and only one that finds a newly durable state
        // waiting takes it alone to make it current.
        let current = visible.read { v in v.isCurrent(at: durable) ? v.current : nil }
        if let current { return current.state }
        return visible.write { v in
            v.advance(to: durable)
            return v.current
        }.state
    }

    // MARK: - Writing

    /// Runs `plan` under the catalog's writer lock with the newest staged state; stages the mutations it returns
    /// (catalog mutations only) as one frame and applies them. Returns the plan's result and the catalog version to
    /// wait for before relying on it: the new commit's LSN, or when nothing was written the version planned
    /// against (which may not be durable yet). Never waits for I/O. Throws `.readOnly` when the catalog cannot be
    /// written.
    ///
    /// Blocks on the log's backpressure: async callers use ``commit(waitingForRoom:)``.
    package func commit<R>(_ plan: (CatalogState) throws -> (mutations: [Mutation], result: R)) throws -> (result: R, version: UInt64) {
        ThreadBridge.checkMayBlock("a blocking commit to the catalog")
        return try commit(admitOverLimit: false, plan)
    }

    /// ``commit(_:)`` for async callers: waits for room in the catalog's log first, suspending, then commits without
    /// waiting again (the plan runs on the calling task: it works on memory only, under a lock no I/O is done under).
    /// A task cancelled while waiting for room stops with `CancellationError`, nothing written.
    package func commit<R>(
        waitingForRoom plan: (CatalogState) throws -> (mutations: [Mutation], result: R)
    ) async throws -> (result: R, version: UInt64) {
        try await log?.waitForRoom()
        return try commit(admitOverLimit: true, plan)
    }

    /// ``commit(_:)`` that never waits, not even for room in the log (it admits the frame over the limit): for the
    /// catalog's copy of a partition commit, staged under that partition's writer lock in the partition's commit order
    /// (share records, ``Database/commitShares(_:_:)``). The lock order is partition, then catalog; no catalog plan
    /// takes a partition's lock.
    package func commitStaged<R>(_ plan: (CatalogState) throws -> (mutations: [Mutation], result: R)) throws -> (result: R, version: UInt64) {
        try commit(admitOverLimit: true, plan)
    }

    /// The shares of `zone` in the newest *staged* catalog (not only the durable one ``snapshot()`` shows): under the
    /// zone's partition writer lock, the shares as that partition's share records stand, including commits not yet
    /// durable. Takes the catalog's writer lock (after the partition's).
    package func stagedShares(in zone: ZoneKey) -> [String: Share] {
        writer.withLock { $0.shares.shares(in: zone) }
    }

    private func commit<R>(
        admitOverLimit: Bool, _ plan: (CatalogState) throws -> (mutations: [Mutation], result: R)
    ) throws -> (result: R, version: UInt64) {
        let (result, version, bytes) = try writer.withLock { st -> (R, UInt64, Int) in
            let (mutations, result) = try plan(st)
            guard !mutations.isEmpty else { return (result, st.version, 0) }
            guard let log else {
                throw CloudletError(.readOnly, "the catalog of a format-1 store opened read-only cannot change")
            }
            precondition(mutations.allSatisfy(\.isCatalogMutation), "a data mutation in a catalog commit")
            let commit = Commit(mutations: mutations)
            let (payload, _, _) = commit.encode()
            let (lsn, position) = try log.stage(type: Self.frameType, payload: payload, admitOverLimit: admitOverLimit)
            precondition(lsn == st.version + 1, "catalog: staged LSN \(lsn), expected \(st.version + 1)")
            st.apply(commit, lsn: lsn, position: position)
            journal(commit.mutations, version: lsn)
            let staged = st
            visible.write { $0.pending.append(staged) }
            return (result, lsn, Int(position.length))
        }
        if bytes > 0 { noteWritten(bytes) }
        return (result, version)
    }

    /// A follower's append: `bytes` (whole frames as the catalog leader stored them) appended verbatim
    /// (``Log/appendVerbatimFrames(_:leaderEpoch:)``) and applied like the leader's own commits; visible to
    /// ``snapshot()`` once durable (``waitDurableBlocking(_:)``). Returns the last version appended. Blocking.
    package func appendFollowed(_ bytes: [UInt8], leaderEpoch: UInt64) throws -> UInt64 {
        guard let log else { throw CloudletError(.readOnly, "the catalog of a format-1 store opened read-only cannot change") }
        let (last, written) = try writer.withLock { st -> (UInt64, Int) in
            var written = 0
            for frame in try log.appendVerbatimFrames(bytes, leaderEpoch: leaderEpoch) {
                let commit: Commit
                do {
                    commit = try Self.decode(frame.type, frame.payload, lsn: frame.lsn, at: "followed frame")
                } catch {
                    // Appended but not applicable: nothing more may go on top of it.
                    log.fail(CloudletError(.readOnly, "catalog: followed frame \(frame.lsn): \(error)", cause: error))
                    throw error
                }
                st.apply(commit, lsn: frame.lsn, position: frame.position)
                journal(commit.mutations, version: frame.lsn)
                let staged = st
                visible.write { $0.pending.append(staged) }
                written += Int(frame.position.length)
            }
            return (st.version, written)
        }
        if written > 0 { noteWritten(written) }
        return last
    }

    /// Notes the subscription changes of a commit at `version` for ``subscriptionChanges(after:through:)``.
    private func journal(_ mutations: [Mutation], version: UInt64) {
        let changes = mutations.filter {
            switch $0 {
            case .saveSubscription, .deleteSubscription: true
            default: false
            }
        }
        guard !changes.isEmpty else { return }
        subscriptionJournal.withLock { j in for m in changes { j.append((version, m)) } }
    }

    /// The subscription changes of catalog versions in `after+1 ... through`, in order; forgets every change up to
    /// `through` (one reader: the notification hub, which indexes subscriptions from a snapshot and then follows
    /// these).
    package func subscriptionChanges(after: UInt64, through: UInt64) -> [Mutation] {
        subscriptionJournal.withLock { j in
            let end = j.firstIndex { $0.version > through } ?? j.count
            let out = j[..<end].filter { $0.version > after }.map(\.mutation)
            j.removeFirst(end)
            return out
        }
    }

    /// Waits until catalog version `version` is durable; from then on ``snapshot()`` includes it.
    package func waitDurable(_ version: UInt64) async throws {
        guard version > 0, let log else { return }
        try await log.waitCommitted(version)
        publish()
    }

    /// ``waitDurable(_:)`` for threads that may block (never on the cooperative pool, never under a partition's
    /// lock).
    package func waitDurableBlocking(_ version: UInt64) throws {
        guard version > 0, let log else { return }
        try log.waitCommittedBlocking(version)
        publish()
    }

    private func publish() {
        guard let log else { return }
        let durable = log.durableLSN
        visible.write { $0.advance(to: durable) }
    }

    // MARK: - Checkpoints

    private func noteWritten(_ bytes: Int) {
        guard checkpointTrigger.noteWritten(bytes) else { return }
        DispatchQueue.global(qos: .utility).async { [self] in
            do { try writeCheckpoint() } catch {
                // The log still holds everything: the next open replays more, nothing is lost — but it is reported.
                backgroundErrors?.record(.checkpoint, in: "catalog", error)
            }
            checkpointTrigger.finished()
        }
    }

    /// Writes a checkpoint of the durable catalog if it is newer than the newest one (and the catalog is not
    /// closed). Returns whether it wrote one.
    @discardableResult
    package func writeCheckpoint() throws -> Bool {
        try checkpointWriter.withLock { closed in closed ? false : try writeCheckpointLocked() }
    }

    private func writeCheckpointLocked() throws -> Bool {
        guard let checkpoints, let log else { return false }
        publish()
        let state = snapshot()
        guard state.version > checkpointTrigger.lastLSN, state.version <= log.durableLSN else { return false }
        try checkpoints.write(lsn: state.version, next: state.nextPosition, payload: state.encodeCheckpoint())
        checkpointTrigger.wrote(state.version)
        return true
    }

    /// Closes the log after a failed open of the store (no checkpoint); a failure to close is reported on standard
    /// error, the open's own error being the one thrown.
    package func abandon() {
        guard let log else { return }
        checkpointWriter.withLock { $0 = true }
        do { try log.close() } catch { StoreLog.warning("closing the catalog's log after a failed open: \(error)") }
    }

    /// Flushes the log, writes a checkpoint (`checkpoint`, and the log did not fail) and closes it; a background
    /// checkpoint that has not started by then never will.
    package func close(checkpoint: Bool) throws {
        guard let log else { return }
        try log.flush()
        publish()
        try checkpointWriter.withLock { closed in
            defer { closed = true }
            if checkpoint && !closed && log.failure == nil { _ = try writeCheckpointLocked() }
        }
        try log.close()
    }
}

/// Messages of the engine to standard error: what an operator must know and no caller can be told (a migration
/// done at open, a background task that failed).
package enum StoreLog {
    package static func warning(_ message: String) { write("cloudlet: warning: \(message)\n") }
    package static func note(_ message: String) { write("cloudlet: \(message)\n") }

    private static func write(_ text: String) { FileHandle.standardError.write(Data(text.utf8)) }
}

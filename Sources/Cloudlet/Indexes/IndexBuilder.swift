import CloudletCore
import CloudletStorage
import Dispatch
import Synchronization

/// Builds indexes in the background: when an index is defined on a record type that already has records (a schema
/// change, or at open for an index a crash interrupted), those records are added here while commits keep
/// maintaining the index for every change.
///
/// A build takes every index of one record type that is still building, and walks the type's record names (the key
/// directory's type index) in chunks: through a read view taken under the partition's lock, it reads the next names
/// with their key-directory entries and the values already stored for the indexed fields, and the records it still
/// needs (each commit's frame once for all its records); under the lock again it adds each record still at the
/// version it read (a record changed meanwhile was indexed by its commit), writing its index keys. When every chunk is done the indexes are marked ready. Builds run one at
/// a time on a utility queue; ``stop()`` ends them between chunks (an unfinished index stays building and is built
/// again after the next open).
///
/// A running build counts its progress (``progress(_:)``): before the first chunk it counts the type's record names
/// in the partition (the type index only, no record is read), then adds each chunk's names as it merges them.
final class IndexBuilder: Sendable {
    /// One build: the building indexes of a record type in a partition.
    struct Job: Hashable, Sendable {
        var partition: UInt32
        var type: TypeKey
    }

    private struct State {
        var queue: [(Job, Partition)] = []
        var queued: Set<Job> = []
        var running = false
        var stopped = false
        /// While set, queued builds wait (``pause()``).
        var paused = false
        var waiters: [CheckedContinuation<Void, Never>] = []
        /// Indexes completed since the store opened (for tests and statistics).
        var completed = 0
        /// The running build's progress.
        var progress: [Job: Progress] = [:]
    }

    /// How far a running build is: record names of the type walked so far, of how many there were when it started
    /// (records saved meanwhile are indexed by their commits; `done` never passes `total`).
    struct Progress: Hashable, Sendable {
        var done: Int
        var total: Int
    }

    /// For tests: called on the builder's queue after each chunk is merged (and ``progress(_:)`` updated), with
    /// the job; a test may block in it to look at a build halfway.
    let chunkMerged = Mutex<(@Sendable (Job) -> Void)?>(nil)

    private let state = Mutex(State())
    private let dispatch = DispatchQueue(label: "cloudlet.index-build", qos: .utility)
    /// Records read and merged per lock acquisition.
    static let chunkSize = 256

    /// Queues a build of every record type of `partition` with an index still building (skipping those already
    /// queued and not started).
    func enqueueBuilding(_ partition: Partition) {
        let types = partition.state.withLock { Set($0.indexes.building.map(\.0.typeKey)) }
        var added = 0
        state.withLock { s in
            guard !s.stopped else { return }
            for t in types.sorted(by: { "\($0)" < "\($1)" }) {
                let job = Job(partition: partition.id, type: t)
                guard s.queued.insert(job).inserted else { continue }
                s.queue.append((job, partition))
                added += 1
            }
        }
        for _ in 0..<added { dispatch.async { self.runNext() } }
    }

    /// Waits until no build is queued or running.
    func waitUntilIdle() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let idle = state.withLock { s -> Bool in
                if s.queue.isEmpty && !s.running { return true }
                s.waiters.append(c)
                return false
            }
            if idle { c.resume() }
        }
    }

    var completedBuilds: Int { state.withLock { $0.completed } }

    /// The progress of `job` while it runs; nil while it is queued or once it is done.
    func progress(_ job: Job) -> Progress? { state.withLock { $0.progress[job] } }

    private func report(_ job: Job, done: Int, total: Int) {
        state.withLock { $0.progress[job] = Progress(done: min(done, total), total: total) }
    }

    /// Stops building: queued builds are dropped, a running one ends after its current chunk. Returns once nothing
    /// runs.
    func stop() {
        state.withLock { s in
            s.stopped = true
            s.queue.removeAll()
            s.queued.removeAll()
        }
        dispatch.sync {}
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            defer { s.waiters = [] }
            return s.waiters
        }
        for w in waiters { w.resume() }
    }

    /// Holds queued builds (and those queued from now on) until ``resume()``; a running build finishes first. For
    /// tests that need an index to stay building, so that queries plan without it. ``waitUntilIdle()`` waits for
    /// the resume.
    func pause() {
        state.withLock { $0.paused = true }
    }

    /// Starts the builds ``pause()`` held.
    func resume() {
        let held = state.withLock { s -> Int in
            s.paused = false
            return s.queue.count
        }
        for _ in 0..<held { dispatch.async { self.runNext() } }
    }

    private var isStopped: Bool { state.withLock { $0.stopped } }

    private func runNext() {
        guard
            let (job, partition) = state.withLock({ s -> (Job, Partition)? in
                guard !s.stopped, !s.paused, !s.queue.isEmpty else { return nil }
                s.running = true
                let next = s.queue.removeFirst()
                // Indexes defined from now on get a job of their own.
                s.queued.remove(next.0)
                return next
            })
        else { return }
        var finished = 0
        do { finished = try build(job, partition) } catch {
            // The indexes stay building: they are built again when the store is next opened. Queries meanwhile
            // scan (development) or say the index is not ready (production).
        }
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.running = false
            s.progress[job] = nil
            s.completed += finished
            guard s.queue.isEmpty else { return [] }
            defer { s.waiters = [] }
            return s.waiters
        }
        for w in waiters { w.resume() }
    }

    /// Builds every index of `type` that is building now; returns how many it completed (an index dropped or
    /// redefined meanwhile is not).
    private func build(_ job: Job, _ p: Partition) throws -> Int {
        let type = job.type
        let (defs, zones) = p.state.withLock { st in
            (
                st.indexes.building.filter { $0.0.typeKey == type },
                st.keys.zoneKeys.filter { SchemaKey(zone: $0) == type.schema }
            )
        }
        guard !defs.isEmpty else { return 0 }
        let fields = Array(Set(defs.flatMap(\.0.sourceFields))).sorted()
        func current(_ st: PartitionState) -> [(IndexDefinition, UInt64)] {
            defs.filter { d, at in st.indexes.definitions[d]?.definedAt == at && st.indexes.status(d) == .building }
        }
        // The names to walk, counted in one read view (for the progress only).
        guard let start = p.state.withLock({ st in current(st).isEmpty ? nil : st.readView }) else { return 0 }
        var total = 0
        for z in zones {
            let prefix = DirectoryKey.typePrefix(DirectoryKey.zone(z), type.recordType)
            var cursor = start.keys.indexCursor(LSMKeyRange(lower: prefix, upper: DirectoryKey.successor(prefix)))
            while try cursor.next() != nil { total += 1 }
        }
        var done = 0
        report(job, done: 0, total: total)
        for z in zones {
            let zone = DirectoryKey.zone(z)
            let prefix = DirectoryKey.typePrefix(zone, type.recordType)
            var after: String?
            while true {
                if isStopped { return 0 }
                // A read view (O(1) under the lock), then off the lock the next names of the type index with their
                // entries and the values already stored for the indexed fields.
                guard let view = p.state.withLock({ st in current(st).isEmpty ? nil : st.readView }) else { return 0 }
                var range = LSMKeyRange(lower: prefix, upper: DirectoryKey.successor(prefix))
                if let after { range.lower = prefix + after.utf8 + [0] }
                var cursor = view.keys.indexCursor(range)
                var chunk: [(name: String, entry: RecordEntry, kept: [FieldValue??])] = []
                var walked = 0
                var lastName: String?
                while chunk.count < Self.chunkSize, let e = try cursor.next() {
                    let name = String(decoding: e.key[prefix.count...], as: UTF8.self)
                    walked += 1
                    lastName = name
                    guard let entry = try view.entry(z, name), !entry.deleted else { continue }
                    let stored = try IndexState.storedValues(view.keys, zone, type.recordType, name)
                    chunk.append((name, entry, fields.map { f -> FieldValue?? in stored.flatMap { $0[f] } }))
                }
                guard let lastName else { break }
                after = lastName
                let missing = chunk.filter { c in c.kept.contains { $0 == nil } }.map { ($0.name, $0.entry) }
                let records = try Self.read(missing, zone: z, from: p)
                var values: [(name: String, point: ChangePoint, values: [String: FieldValue?])] = []
                values.reserveCapacity(chunk.count)
                for c in chunk {
                    let r = records[c.name]
                    var byField: [String: FieldValue?] = [:]
                    for (i, f) in fields.enumerated() { byField[f] = .some(c.kept[i] ?? r.flatMap { IndexedField.value(f, in: $0) }) }
                    values.append((c.name, c.entry.change, byField))
                }
                try p.state.withLock { st in
                    let live = current(st)
                    for v in values {
                        guard let e = try st.entry(z, v.name), !e.deleted, e.change == v.point else { continue }
                        for (d, _) in live {
                            try st.buildIndex(d, zone: z, name: v.name, values: v.values)
                        }
                    }
                }
                done += walked
                report(job, done: done, total: total)
                chunkMerged.withLock { $0 }?(job)
            }
        }
        return p.state.withLock { st in
            var done = 0
            for (d, at) in current(st) {
                st.indexes.markReady(d, definedAt: at)
                done += 1
            }
            return done
        }
    }

    /// Reads records for a build with ``Partition/readMany(_:)``: neighbouring records with one read, and the cache
    /// not filled (a build must not evict the records queries use).
    static func read(_ wanted: [(String, RecordEntry)], zone: ZoneKey, from p: Partition) throws -> [String: Record] {
        var out: [String: Record] = [:]
        for ((name, _), result) in zip(wanted, p.readMany(wanted.map { (zone, $0.0, $0.1) })) { out[name] = try result.get() }
        return out
    }
}

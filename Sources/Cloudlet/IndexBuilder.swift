import CloudletCore
import Dispatch
import Synchronization

/// Builds indexes in the background: when an index is defined on a record type that already has records (a schema
/// change, or at open for an index a crash interrupted), those records are added here while commits keep
/// maintaining the index for every change.
///
/// A build walks the type's record names in chunks: under the partition's lock it takes the next names with their
/// key-directory entries; off the lock it reads the records whose values are not already kept; under the lock again
/// it adds each record still at the version it read (a record changed meanwhile was indexed by its commit). When
/// every chunk is done the index is marked ready. Builds run one at a time on a utility queue; ``stop()`` ends them
/// between chunks (an unfinished index stays building and is built again after the next open).
final class IndexBuilder: Sendable {
    struct Job: Hashable, Sendable {
        var partition: UInt32
        var definition: IndexDefinition
        var definedAt: UInt64
    }

    private struct State {
        var queue: [(Job, Partition)] = []
        var queued: Set<Job> = []
        var running = false
        var stopped = false
        var waiters: [CheckedContinuation<Void, Never>] = []
        /// Builds completed since the store opened (for tests and statistics).
        var completed = 0
    }

    private let state = Mutex(State())
    private let dispatch = DispatchQueue(label: "cloudlet.index-build", qos: .utility)
    /// Records read and merged per lock acquisition.
    static let chunkSize = 256

    /// Queues a build of every index of `partition` that is still building (skipping those already queued).
    func enqueueBuilding(_ partition: Partition) {
        let building = partition.state.withLock { $0.indexes.building }
        var added = 0
        state.withLock { s in
            guard !s.stopped else { return }
            for (d, at) in building {
                let job = Job(partition: partition.id, definition: d, definedAt: at)
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

    private var isStopped: Bool { state.withLock { $0.stopped } }

    private func runNext() {
        guard
            let (job, partition) = state.withLock({ s -> (Job, Partition)? in
                guard !s.stopped, !s.queue.isEmpty else { return nil }
                s.running = true
                return s.queue.removeFirst()
            })
        else { return }
        var finished = false
        do { finished = try build(job, partition) } catch {
            // The index stays building: it is built again when the store is next opened. Queries meanwhile scan
            // (development) or say the index is not ready (production).
        }
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.running = false
            s.queued.remove(job)
            if finished { s.completed += 1 }
            guard s.queue.isEmpty else { return [] }
            defer { s.waiters = [] }
            return s.waiters
        }
        for w in waiters { w.resume() }
    }

    /// Builds one index; false if it was stopped, dropped or redefined meanwhile.
    private func build(_ job: Job, _ p: Partition) throws -> Bool {
        let d = job.definition
        let zones = p.state.withLock { st in
            st.indexes.zones.keys.filter { SchemaKey(zone: $0) == d.schema && st.indexes.type($0, d.recordType) != nil }
        }
        for z in zones {
            var after: String?
            while true {
                if isStopped { return false }
                let chunk = p.state.withLock { st -> [(String, RecordEntry, FieldValue??)]? in
                    guard st.indexes.definitions[d]?.definedAt == job.definedAt, st.indexes.status(d) == .building else {
                        return nil
                    }
                    guard let t = st.indexes.type(z, d.recordType) else { return [] }
                    var i = after.map { t.names.upperBound($0) } ?? t.names.startIndex
                    var out: [(String, RecordEntry, FieldValue??)] = []
                    while i < t.names.endIndex && out.count < Self.chunkSize {
                        let name = t.names[i]
                        if let e = st.zones[z]?.records[name], !e.deleted { out.append((name, e, t.storedValue(name, d.field))) }
                        i = t.names.index(after: i)
                    }
                    return out
                }
                guard let chunk else { return false }
                guard let last = chunk.last else { break }
                after = last.0
                var values: [(String, ChangePoint, FieldValue?)] = []
                values.reserveCapacity(chunk.count)
                for (name, e, kept) in chunk {
                    if let kept {
                        values.append((name, e.change, kept))
                    } else {
                        let r = try p.readDurable(z, name, e)
                        values.append((name, e.change, TypeIndexes.value(d.field, in: r)))
                    }
                }
                p.state.withLock { st in
                    for (name, point, v) in values {
                        guard let e = st.zones[z]?.records[name], !e.deleted, e.change == point else { continue }
                        st.indexes.buildInsert(d, zone: z, name: name, value: v)
                    }
                }
            }
        }
        return p.state.withLock { st in
            guard st.indexes.definitions[d]?.definedAt == job.definedAt else { return false }
            st.indexes.markReady(d, definedAt: job.definedAt)
            return true
        }
    }
}

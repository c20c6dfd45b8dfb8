import CloudletCore
import Synchronization

/// What one durable commit changed, as delivered to in-process listeners by
/// ``CloudletStore/committedChanges(bufferSize:)``.
public struct CommittedChange: Sendable {
    /// The partition that committed it; LSNs increase per partition.
    public var partition: Int
    public var lsn: UInt64
    public var events: [ChangeEvent]
    /// For record events: the version the commit replaced or deleted, if the record existed (by event index).
    var previous: [Int: RecordEntry] = [:]
    /// Saves known to update a record whose previous version is not known (commits read back from the log after a
    /// restart, whose record stamps say so).
    var updates: Set<Int> = []

    /// Whether event `i` (a save) created the record rather than changing an existing one.
    public func isCreation(_ i: Int) -> Bool { previous[i] == nil && !updates.contains(i) }
}

/// One effect of a commit.
public enum ChangeEvent: Sendable, Hashable {
    case recordSaved(DatabaseID, Record)
    case recordDeleted(DatabaseID, RecordID, recordType: String)
    case zoneCreated(DatabaseID, ZoneID)
    case zoneDeleted(DatabaseID, ZoneID)

    static func from(_ m: Mutation) -> ChangeEvent? {
        switch m {
        case .putRecord(let z, let r, _): .recordSaved(z.ownerDatabase, r)
        case .deleteRecord(let z, let name, let type, _, _):
            .recordDeleted(z.ownerDatabase, RecordID(recordName: name, zoneID: z.zoneID), recordType: type)
        case .createZone(let z): .zoneCreated(z.ownerDatabase, z.zoneID)
        case .deleteZone(let z, _): .zoneDeleted(z.ownerDatabase, z.zoneID)
        case .schemaField, .schemaReset, .purge, .index, .saveSubscription, .deleteSubscription, .catalogVersion, .security: nil
        }
    }
}

/// Delivers a partition's commits to listeners once durable, in LSN order.
///
/// Commits are queued when staged (under the partition's writer lock, so in LSN order) and handed out by
/// whichever writer next sees durability advance. A listener that falls more than its buffer behind is finished
/// with an error (it should resynchronize with change tokens), never silently skipped.
final class ChangePublisher: Sendable {
    typealias Stream = AsyncThrowingStream<CommittedChange, any Error>

    /// A listener: an async stream, or a sink that takes each commit synchronously (it must not block: it runs
    /// under the publisher's lock, on whichever writer published) and returns false when it cannot keep up.
    enum Listener {
        case stream(Stream.Continuation)
        case sink(@Sendable (CommittedChange) -> Bool)
    }

    private struct State {
        var listeners: [Int: Listener] = [:]
        var pending: [CommittedChange] = []
        var head = 0
    }

    private let state = Mutex(State())
    private let active = Atomic<Int>(0)
    let partition: Int

    init(partition: Int) { self.partition = partition }

    /// Whether anyone listens (staging skips building events otherwise).
    var isActive: Bool { active.load(ordering: .relaxed) > 0 }

    func add(_ id: Int, _ c: Stream.Continuation) { add(id, .stream(c)) }

    func add(_ id: Int, _ listener: Listener) {
        state.withLock { $0.listeners[id] = listener }
        active.add(1, ordering: .relaxed)
    }

    func remove(_ id: Int) {
        let removed = state.withLock { $0.listeners.removeValue(forKey: id) != nil }
        if removed { active.subtract(1, ordering: .relaxed) }
    }

    /// Queues a staged commit (call under the partition's writer lock).
    func staged(lsn: UInt64, mutations: [Mutation], previous: [Int: RecordEntry]) {
        var change = CommittedChange(partition: partition, lsn: lsn, events: [])
        for (i, m) in mutations.enumerated() {
            guard let e = ChangeEvent.from(m) else { continue }
            if let p = previous[i] { change.previous[change.events.count] = p }
            change.events.append(e)
        }
        guard !change.events.isEmpty else { return }
        state.withLock { $0.pending.append(change) }
    }

    /// Hands out every queued commit with LSN ≤ `durable`, in order.
    func publish(durable: UInt64) {
        state.withLock { s in
            while s.head < s.pending.count, s.pending[s.head].lsn <= durable {
                let change = s.pending[s.head]
                s.head += 1
                for (id, listener) in s.listeners {
                    switch listener {
                    case .stream(let c):
                        if case .dropped = c.yield(change) {
                            c.finish(throwing: CloudletError(.limitExceeded, "listener fell too far behind the commit stream; resynchronize with change tokens"))
                            s.listeners[id] = nil
                            active.subtract(1, ordering: .relaxed)
                        }
                    case .sink(let take):
                        if !take(change) {
                            s.listeners[id] = nil
                            active.subtract(1, ordering: .relaxed)
                        }
                    }
                }
            }
            if s.head > 1024 && s.head * 2 > s.pending.count {
                s.pending.removeFirst(s.head)
                s.head = 0
            }
        }
    }

    func finishAll() {
        let ls = state.withLock { s in
            defer { s.listeners = [:] }
            return Array(s.listeners.values)
        }
        for case .stream(let c) in ls { c.finish() }
    }
}

extension CloudletStore {
    /// Every durable commit, as it happens, for in-process listeners (caches, notification fan-out, replication).
    ///
    /// Commits of one partition arrive in LSN order; partitions are independent. The stream starts at the next
    /// commit. If a listener falls more than `bufferSize` commits behind, its stream ends with `limitExceeded`:
    /// catch up with ``Database/zoneChanges(_:since:resultsLimit:desiredKeys:desiredRecordTypes:)`` and subscribe again.
    public func committedChanges(bufferSize: Int = 10_000) -> AsyncThrowingStream<CommittedChange, any Error> {
        let id = listenerIDs.add(1, ordering: .relaxed).newValue
        let (stream, continuation) = AsyncThrowingStream<CommittedChange, any Error>.makeStream(
            bufferingPolicy: .bufferingOldest(bufferSize))
        let publishers = partitions.map(\.publisher)
        continuation.onTermination = { _ in for p in publishers { p.remove(id) } }
        for p in publishers { p.add(id, continuation) }
        return stream
    }
}

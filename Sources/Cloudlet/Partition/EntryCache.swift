import CloudletCore
import Synchronization

/// A partition's memo of current key-directory entries by zone and record name, for point reads: a lookup that
/// misses the key directory's memtables costs bloom filters, an index block and a data block in each level it
/// visits, a memo hit one hash probe. Like RocksDB's row cache, and bounded the same way (``StoreConfiguration/entryCacheSize``
/// entries, least recently used out first).
///
/// It only ever holds entries the partition's live state has: the writer invalidates the records a commit touches
/// (``invalidate(_:)``) in the same critical section, under the state lock, that applies the commit, and a zone
/// deletion or a compaction's swap clears it. A reader that looked an entry up in a copy of the directory outside
/// the lock adds it only if nothing was invalidated since it took the copy (``epoch``), so it cannot bring back what a
/// later write replaced. Only live versions are kept (a tombstone is as cheap to find again as to keep).
final class EntryCache: Sendable {
    struct Key: Hashable, Sendable {
        let zone: ZoneKey
        let name: String
    }

    private struct State {
        var lru: LRUList<Key, RecordEntry>
        var epoch: UInt64 = 0
        var hits = 0
        var misses = 0
    }

    private let state: Mutex<State>
    let capacity: Int

    init(capacity: Int) {
        self.capacity = max(capacity, 0)
        state = Mutex(State(lru: LRUList(capacity: capacity)))
    }

    /// The cached entry of record `name` in zone `z`, if any; counts a hit or a miss.
    func get(_ z: ZoneKey, _ name: String) -> RecordEntry? {
        guard capacity > 0 else { return nil }
        return state.withLock { s in
            let e = s.lru.get(Key(zone: z, name: name))
            if e == nil { s.misses += 1 } else { s.hits += 1 }
            return e
        }
    }

    /// Invalidations so far: what a reader notes before looking up outside the state lock (``put(_:_:_:ifEpoch:)``).
    var epoch: UInt64 { state.withLock { $0.epoch } }

    /// Keeps `entry` (if live) as record `name`'s in zone `z`: the caller found it in the live state under the lock,
    /// or (`ifEpoch`) in a copy taken when the cache was at that epoch — kept only if nothing was invalidated since.
    func put(_ z: ZoneKey, _ name: String, _ entry: RecordEntry?, ifEpoch: UInt64? = nil) {
        guard capacity > 0, let entry, !entry.deleted else { return }
        state.withLock { s in
            if let ifEpoch, ifEpoch != s.epoch { return }
            s.lru.put(Key(zone: z, name: name), entry)
        }
    }

    /// Forgets the records `mutations` change (a zone deletion: everything). Called under the state lock, with the
    /// commit's apply.
    func invalidate(_ mutations: [Mutation]) {
        guard capacity > 0 else { return }
        state.withLock { s in
            s.epoch &+= 1
            for m in mutations {
                switch m {
                case .putRecord(let z, let r, _): s.lru.remove(Key(zone: z, name: r.recordName))
                case .deleteRecord(let z, let name, _, _): s.lru.remove(Key(zone: z, name: name))
                case .deleteZone: s.lru.removeAll()
                default: break
                }
            }
        }
    }

    /// Forgets everything (a compaction moved the versions). Called under the state lock.
    func removeAll() {
        state.withLock { s in
            s.epoch &+= 1
            s.lru.removeAll()
        }
    }

    /// Hits and misses so far, and the entries held now.
    var counts: (hits: Int, misses: Int, entries: Int) { state.withLock { ($0.hits, $0.misses, $0.lru.count) } }
}

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
/// later write replaced. Only live versions are kept (a tombstone is as cheap to find again as to keep). An entry a
/// read looked up is kept on its second lookup within a window (a ``Doorkeeper``) and, once the cache is full, only if
/// looked up more often lately than the entry it would evict (``CacheAdmission``): uniform reads of a store much
/// larger than the cache would otherwise pay an insertion and an eviction each for entries never read again.
final class EntryCache: Sendable {
    /// What the cache keeps under a record's hashed key (``key(_:_:)``): the zone and name too, so that a lookup
    /// tells a hit from another record whose key hashes alike.
    private struct Held {
        let zone: ZoneKey
        let name: String
        let entry: RecordEntry

        func holds(_ z: ZoneKey, _ n: String) -> Bool { name.utf8.elementsEqual(n.utf8) && zone == z }
    }

    private struct State {
        var lru: LRUList<UInt64, Held>
        var admission: CacheAdmission
        var epoch: UInt64 = 0
        var hits = 0
        var misses = 0
    }

    private let state: Mutex<State>
    let capacity: Int

    init(capacity: Int) {
        self.capacity = max(capacity, 0)
        state = Mutex(State(lru: LRUList(capacity: capacity), admission: CacheAdmission(capacity: capacity)))
    }

    /// A record's key in the cache: its zone's fingerprint and a hash of its name's bytes (FNV-1a), mixed. Hashing
    /// the zone's strings and the name with `Hasher`, and copying them into the table's keys, cost a point read more
    /// than the lookup it saved.
    static func key(_ z: ZoneKey, _ name: String) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in name.utf8 { h = (h ^ UInt64(b)) &* 0x0000_0100_0000_01b3 }
        return SplitMix64.mix(h ^ (z.stableHash &* 0x9E37_79B9_7F4A_7C15))
    }

    /// The cached entry of record `name` in zone `z`, if any; counts a hit or a miss. With `atEpoch`, only if
    /// nothing was invalidated since the cache was at that epoch (a reader of a read view taken then: the cached
    /// entries are then exactly the view's).
    func get(_ z: ZoneKey, _ name: String, atEpoch: UInt64? = nil) -> RecordEntry? {
        guard capacity > 0 else { return nil }
        let k = Self.key(z, name)
        return state.withLock { s in
            if let atEpoch, atEpoch != s.epoch { return nil }
            s.admission.noteLookup(k)
            guard let held = s.lru.get(k), held.holds(z, name) else {
                s.misses += 1
                return nil
            }
            s.hits += 1
            return held.entry
        }
    }

    /// The entry of record `name` in zone `z`: the cached one, else `lookup`'s (then kept). `atEpoch` as for
    /// ``get(_:_:atEpoch:)`` and ``put(_:_:_:ifEpoch:)``: a reader of a read view taken then.
    func entry(
        _ z: ZoneKey, _ name: String, atEpoch: UInt64? = nil, lookup: () throws -> RecordEntry?
    ) rethrows -> RecordEntry? {
        if let e = get(z, name, atEpoch: atEpoch) { return e }
        let e = try lookup()
        put(z, name, e, ifEpoch: atEpoch)
        return e
    }

    /// Invalidations so far: what a reader notes before looking up outside the state lock (``put(_:_:_:ifEpoch:)``).
    var epoch: UInt64 { state.withLock { $0.epoch } }

    /// Keeps `entry` (if live) as record `name`'s in zone `z`: the caller found it in the live state under the lock,
    /// or (`ifEpoch`) in a copy taken when the cache was at that epoch — kept only if nothing was invalidated since,
    /// and only if ``CacheAdmission`` lets it in (its second lookup in a window and, in a full cache, looked up more
    /// often lately than the entry it would evict). An entry held under the same key is replaced.
    func put(_ z: ZoneKey, _ name: String, _ entry: RecordEntry?, ifEpoch: UInt64? = nil) {
        guard capacity > 0, let entry, !entry.deleted else { return }
        let k = Self.key(z, name)
        state.withLock { s in
            if let ifEpoch, ifEpoch != s.epoch { return }
            guard s.lru.contains(k) || s.admission.admits(k, evicting: s.lru.victim) else { return }
            s.lru.put(k, Held(zone: z, name: name, entry: entry))
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
                case .putRecord(let z, let r, _): s.lru.remove(Self.key(z, r.recordName))
                case .deleteRecord(let z, let name, _, _, _): s.lru.remove(Self.key(z, name))
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

import CloudletCore
import Synchronization

/// An LRU cache of decoded record versions. A version is named by the commit that wrote it — its LSN and the
/// mutation's index in it, which compaction preserves (a byte offset would not survive a rewritten frame) — so a
/// key-directory entry always finds exactly its version or nothing, and keys hash without touching strings.
///
/// Versions read from disk are admitted on their second read within a window (``putRead(_:record:)``, through a
/// ``Doorkeeper``): a one-off read then costs neither an insertion nor the eviction (and the deallocation of a
/// decoded record) it would force, which was a fifth of a random read's time — and, once the cache is full, only if
/// read more often lately than the version they would evict (``CacheAdmission``). Versions just written are cached
/// at once (``put(_:record:)``).
final class RecordCache: Sendable {
    struct Key: Hashable, Sendable {
        var lsn: UInt64
        var index: UInt32

        init(_ entry: RecordEntry) {
            lsn = entry.lsn
            index = entry.index
        }

        init(lsn: UInt64, index: UInt32) {
            self.lsn = lsn
            self.index = index
        }
    }

    private struct State {
        var lru: LRUList<Key, Record>
        var hits = 0
        var misses = 0
        var admission: CacheAdmission
    }

    private let capacity: Int
    private let state: Mutex<State>

    init(capacity: Int) {
        self.capacity = max(capacity, 0)
        state = Mutex(State(lru: LRUList(capacity: capacity), admission: CacheAdmission(capacity: capacity)))
    }

    /// Caches a version just read from disk if ``CacheAdmission`` lets it in (read before within the doorkeeper's
    /// window and, in a full cache, more often lately than the version it would evict); otherwise only notes that
    /// it was read.
    func putRead(_ key: Key, record: Record) {
        guard capacity > 0 else { return }
        let hash = Self.mix(key)
        state.withLock { s in
            guard !s.lru.contains(key) else { return }
            if s.admission.admits(hash, evicting: s.lru.victim.map(Self.mix)) { s.lru.put(key, record) }
        }
    }

    /// A 64-bit mix of a key (SplitMix64's finalizer over LSN and index).
    private static func mix(_ key: Key) -> UInt64 { SplitMix64.mix(key.lsn &+ UInt64(key.index) &* 0x9E37_79B9_7F4A_7C15) }

    /// The cached record version, if present.
    func get(_ key: Key) -> Record? {
        let hash = Self.mix(key)
        return state.withLock { s in
            s.admission.noteLookup(hash)
            guard let r = s.lru.get(key) else {
                s.misses += 1
                return nil
            }
            s.hits += 1
            return r
        }
    }

    /// Whether the version is cached (without counting a hit or miss, or refreshing it).
    func contains(_ key: Key) -> Bool { state.withLock { $0.lru.contains(key) } }

    func put(_ key: Key, record: Record) {
        guard capacity > 0 else { return }
        state.withLock { $0.lru.put(key, record) }
    }

    var counts: (hits: Int, misses: Int) { state.withLock { ($0.hits, $0.misses) } }
}

import CloudletCore
import Synchronization

/// An LRU cache of decoded record versions. A version is named by the commit that wrote it — its LSN and the
/// mutation's index in it, which compaction preserves (a byte offset would not survive a rewritten frame) — so a
/// key-directory entry always finds exactly its version or nothing, and keys hash without touching strings.
///
/// Versions read from disk are admitted on their second read within a window (``putRead(_:record:)``: TinyLFU's
/// "doorkeeper", a bit per hashed key, cleared once it has seen about four times the capacity): a one-off read — a
/// uniform scan of a store larger than the cache — then costs neither an insertion nor the eviction (and the
/// deallocation of a decoded record) it would force, which was a fifth of a random read's time; records read again
/// soon, the hot ones, get in. Versions just written are cached at once (``put(_:record:)``).
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

    private struct Node {
        var key: Key
        var record: Record
        var prev: Int
        var next: Int
    }

    private struct State {
        var index: [Key: Int] = [:]
        var nodes: [Node] = []
        var free: [Int] = []
        var head = -1  // most recent
        var tail = -1  // least recent
        var hits = 0
        var misses = 0
        /// The doorkeeper: one bit per hashed key read from disk since it was last cleared.
        var seen: [UInt64] = []
        var seenCount = 0

        mutating func unlink(_ i: Int) {
            let p = nodes[i].prev, n = nodes[i].next
            if p >= 0 { nodes[p].next = n } else { head = n }
            if n >= 0 { nodes[n].prev = p } else { tail = p }
        }

        mutating func pushFront(_ i: Int) {
            nodes[i].prev = -1
            nodes[i].next = head
            if head >= 0 { nodes[head].prev = i }
            head = i
            if tail < 0 { tail = i }
        }
    }

    private let capacity: Int
    private let state = Mutex(State())

    /// Bits of the doorkeeper (a power of two, about eight per cached version).
    private let seenBits: Int

    init(capacity: Int) {
        self.capacity = max(capacity, 0)
        seenBits = 1 << max(10, Int.bitWidth - (max(capacity, 1) * 8 - 1).leadingZeroBitCount)
    }

    /// Caches a version just read from disk if it was read before within the doorkeeper's window; otherwise only
    /// notes that it was read.
    func putRead(_ key: Key, record: Record) {
        guard capacity > 0 else { return }
        let bit = Int(truncatingIfNeeded: Self.mix(key)) & (seenBits - 1)
        let admit = state.withLock { s in
            if s.seen.isEmpty { s.seen = [UInt64](repeating: 0, count: seenBits / 64) }
            let word = bit / 64, mask = UInt64(1) << UInt64(bit % 64)
            if s.seen[word] & mask != 0 { return true }
            if s.seenCount >= capacity * 4 {
                for i in s.seen.indices { s.seen[i] = 0 }
                s.seenCount = 0
            }
            s.seen[word] |= mask
            s.seenCount += 1
            return false
        }
        if admit { put(key, record: record) }
    }

    /// A 64-bit mix of a key (SplitMix64's finalizer over LSN and index).
    private static func mix(_ key: Key) -> UInt64 {
        var z = key.lsn &+ UInt64(key.index) &* 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// The cached record version, if present.
    func get(_ key: Key) -> Record? {
        state.withLock { s in
            guard let i = s.index[key] else {
                s.misses += 1
                return nil
            }
            s.hits += 1
            s.unlink(i)
            s.pushFront(i)
            return s.nodes[i].record
        }
    }

    /// Whether the version is cached (without counting a hit or miss, or refreshing it).
    func contains(_ key: Key) -> Bool { state.withLock { $0.index[key] != nil } }

    func put(_ key: Key, record: Record) {
        guard capacity > 0 else { return }
        state.withLock { s in
            if let i = s.index[key] {
                s.nodes[i].record = record
                s.unlink(i)
                s.pushFront(i)
                return
            }
            let i: Int
            if s.index.count >= capacity {
                i = s.tail
                s.unlink(i)
                s.index[s.nodes[i].key] = nil
                s.nodes[i] = Node(key: key, record: record, prev: -1, next: -1)
            } else if let f = s.free.popLast() {
                i = f
                s.nodes[i] = Node(key: key, record: record, prev: -1, next: -1)
            } else {
                i = s.nodes.count
                s.nodes.append(Node(key: key, record: record, prev: -1, next: -1))
            }
            s.index[key] = i
            s.pushFront(i)
        }
    }

    var counts: (hits: Int, misses: Int) { state.withLock { ($0.hits, $0.misses) } }
}

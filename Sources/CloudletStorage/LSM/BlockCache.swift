import CloudletCore
import Synchronization

/// The blocks of sorted runs recently read, shared by every reader of a tree: their contents after the checksum
/// check and decompression, keyed by (file number, block offset), bounded by bytes. Sharded (16 shards by default),
/// each shard an LRU list behind its own `Mutex`, so that concurrent readers rarely wait for each other; each
/// shard holds at most `capacity / shardCount` bytes, counting a block as its length plus ``entryOverhead``.
/// A block larger than a shard is not cached.
public final class BlockCache: Sendable {
    /// Where a block comes from.
    public struct Key: Hashable, Sendable {
        public var fileNumber: UInt64
        public var offset: UInt64

        public init(fileNumber: UInt64, offset: UInt64) {
            self.fileNumber = fileNumber
            self.offset = offset
        }
    }

    /// Counters since the cache was made, and what it holds now.
    public struct Statistics: Sendable, Hashable {
        public var hits = 0
        public var misses = 0
        public var insertions = 0
        public var evictions = 0
        /// Bytes held now (blocks plus ``BlockCache/entryOverhead`` each).
        public var usedBytes = 0
        public var entryCount = 0
        public var capacity = 0
    }

    /// What a cached block costs beyond its bytes (dictionary slot, list links, array header), roughly.
    public static let entryOverhead = 96

    /// The bound, in bytes.
    public let capacity: Int
    private let shards: [Shard]
    private let namespaces = Atomic<UInt64>(0)

    /// A namespace for one more tree sharing this cache: its runs key their blocks with it
    /// (``SortedRunReader/cacheID``), so that equal file numbers of different trees do not collide.
    public func newNamespace() -> UInt64 { namespaces.add(1, ordering: .relaxed).newValue }

    /// A cache of at most `capacity` bytes in `shardCount` shards.
    public init(capacity: Int, shardCount: Int = 16) {
        precondition(capacity >= 0 && shardCount >= 1)
        self.capacity = capacity
        let perShard = capacity / shardCount
        shards = (0..<shardCount).map { _ in Shard(capacity: perShard) }
    }

    private func shard(_ key: Key) -> Shard {
        shards[Int(SplitMix64.mix(key.fileNumber &* 0x9E37_79B9_7F4A_7C15 ^ key.offset) % UInt64(shards.count))]
    }

    /// The block, if cached (it becomes the most recently used); counts a hit or a miss.
    public func lookup(_ key: Key) -> [UInt8]? {
        shard(key).state.withLock { $0.lookup(key) }
    }

    /// Caches a block, evicting the least recently used ones of its shard to make room.
    public func insert(_ key: Key, _ block: [UInt8]) {
        shard(key).state.withLock { $0.insert(key, block, charge: block.count + Self.entryOverhead) }
    }

    /// Drops every block of a file (it was deleted).
    public func removeAll(fileNumber: UInt64) {
        for shard in shards { shard.state.withLock { $0.removeAll { $0.fileNumber == fileNumber } } }
    }

    /// The counters summed over the shards (each shard read under its lock, so not one instant's snapshot).
    public var statistics: Statistics {
        var total = Statistics()
        total.capacity = capacity
        for shard in shards {
            shard.state.withLock { s in
                total.hits += s.hits
                total.misses += s.misses
                total.insertions += s.insertions
                total.evictions += s.evictions
                total.usedBytes += s.used
                total.entryCount += s.map.count
            }
        }
        return total
    }

    /// One shard: its state behind its own lock (a class, since an array cannot hold `Mutex`es themselves).
    private final class Shard: Sendable {
        let state: Mutex<LRU>
        init(capacity: Int) { state = Mutex(LRU(capacity: capacity)) }
    }

    /// A doubly linked LRU list over an array of nodes (indices, not references), most recent at `head`.
    struct LRU: Sendable {
        struct Node {
            var key: Key
            var block: [UInt8]
            var charge: Int
            var prev = -1
            var next = -1
        }

        let capacity: Int
        var map: [Key: Int] = [:]
        var nodes: [Node] = []
        var free: [Int] = []
        var head = -1
        var tail = -1
        var used = 0
        var hits = 0
        var misses = 0
        var insertions = 0
        var evictions = 0

        init(capacity: Int) { self.capacity = capacity }

        mutating func lookup(_ key: Key) -> [UInt8]? {
            guard let i = map[key] else {
                misses += 1
                return nil
            }
            hits += 1
            unlink(i)
            pushFront(i)
            return nodes[i].block
        }

        mutating func insert(_ key: Key, _ block: [UInt8], charge: Int) {
            if let i = map[key] { remove(i) }
            guard charge <= capacity else { return }
            while used + charge > capacity, tail >= 0 {
                remove(tail)
                evictions += 1
            }
            let node = Node(key: key, block: block, charge: charge)
            let i: Int
            if let slot = free.popLast() {
                nodes[slot] = node
                i = slot
            } else {
                nodes.append(node)
                i = nodes.count - 1
            }
            map[key] = i
            used += charge
            insertions += 1
            pushFront(i)
        }

        mutating func removeAll(where matches: (Key) -> Bool) {
            for (key, i) in map where matches(key) { remove(i) }
        }

        private mutating func remove(_ i: Int) {
            unlink(i)
            map[nodes[i].key] = nil
            used -= nodes[i].charge
            nodes[i].block = []
            free.append(i)
        }

        private mutating func unlink(_ i: Int) {
            let (p, n) = (nodes[i].prev, nodes[i].next)
            if p >= 0 { nodes[p].next = n } else { head = n }
            if n >= 0 { nodes[n].prev = p } else { tail = p }
            nodes[i].prev = -1
            nodes[i].next = -1
        }

        private mutating func pushFront(_ i: Int) {
            nodes[i].next = head
            nodes[i].prev = -1
            if head >= 0 { nodes[head].prev = i }
            head = i
            if tail < 0 { tail = i }
        }
    }
}

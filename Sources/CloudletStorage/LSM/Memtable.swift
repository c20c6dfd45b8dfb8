import Synchronization

/// The newest writes of a tree, in memory, sorted by key: one entry a key (a value or a tombstone), the one with
/// the highest sequence.
///
/// A value with free copies that never change — a read view keeps the memtable as it was, the writer goes on
/// writing into its own, and readers need no lock since nothing they hold is ever mutated — built as a small
/// log-structured merge in memory: the newest writes go to a hash table (``recentLimit`` entries at most); when it
/// fills, its entries are sorted into an immutable layer, and four layers of about the same size merge into one
/// (tiered), so there are O(log n) layers and each entry is copied about log₄ n times over its life. A lookup checks
/// the table, then binary-searches the layers newest first. Copying a memtable copies the table (copy-on-write,
/// at most ``recentLimit`` entries, on the first write after the copy) and shares the layers.
///
/// Chosen over a persistent treap (what this type was first): a treap insert copies the ~2 ln n nodes on its path,
/// an allocation each, and a lookup walks as many reference-counted nodes; with three index keys a record write
/// that made memtable work most of a commit's cost. Here an insert is a hash-table store plus its share of merges
/// (contiguous copies), and a lookup a hash probe plus binary searches in contiguous arrays.
public struct Memtable: Sendable {
    /// Sorted, immutable, one entry a key, with the keys' hashes (``KeyHash``) and a bloom filter over them, so
    /// that a lookup of a key the layer lacks — most lookups, in most layers — costs a few bit probes.
    final class Layer: Sendable {
        let entries: [LSMEntry]
        let hashes: [UInt64]
        let filter: BloomFilter

        init(_ entries: [LSMEntry], hashes: [UInt64]) {
            self.entries = entries
            self.hashes = hashes
            filter = BloomFilter(hashes: hashes, bitsPerKey: 10)
        }

        /// The entry of `key` (whose hash is `hash`), if the layer has one.
        func get(_ key: [UInt8], hash: UInt64) -> LSMEntry? {
            guard filter.mayContain(hash: hash) else { return nil }
            let i = lowerBound(key)
            return i < entries.count && LSMKey.compare(entries[i].key, key) == 0 ? entries[i] : nil
        }

        /// Index of the first entry whose key is ≥ `key`.
        func lowerBound(_ key: [UInt8]) -> Int { Memtable.lowerBound(entries, key) }
    }

    /// What one entry is counted as beyond its key and value bytes (table slot or array element, array headers).
    public static let entryOverhead = 80
    /// The hash table's size at which it is sorted into a layer. Larger means fewer merges (each entry is copied
    /// about log₄(n / this) times) but a larger table to copy on the first write after a copy of the memtable (a
    /// read view): 2,048 entries is ~150 KB.
    static let recentLimit = 2048

    /// A key with its ``KeyHash``, computed once a lookup: the table hashes it without reading the bytes again
    /// (`Hasher` over a byte array goes a byte at a time) and the layers' filters probe with it.
    struct HashedKey: Hashable, Sendable {
        let key: [UInt8]
        let hash: UInt64

        init(_ key: [UInt8]) {
            self.key = key
            hash = KeyHash.hash(key)
        }

        func hash(into hasher: inout Hasher) { hasher.combine(hash) }
        static func == (a: HashedKey, b: HashedKey) -> Bool { a.hash == b.hash && a.key == b.key }
    }

    /// The newest writes, by key.
    private var recent: [HashedKey: LSMEntry] = [:]
    /// ``recent`` sorted, once an iterator needed it: shared by the copies that have the same table (a read view and
    /// the memtable it copied, until the next write), so the queries and walks of one view sort it once, not once
    /// an iterator. A write to a shared memo's table gets a new memo.
    private var sortedRecent = SortedRecent()
    /// Older writes, newest layer first; older layers are larger.
    private var layers: [Layer] = []
    /// How many keys it holds.
    public private(set) var count = 0
    /// Key and value bytes plus ``entryOverhead`` an entry: what it roughly takes in memory.
    public private(set) var approximateBytes = 0
    /// The highest sequence applied (0 when empty).
    public private(set) var maxSequence: UInt64 = 0

    public init() {}

    public var isEmpty: Bool { count == 0 }

    /// The sorted layers' sizes, newest first (for tests and statistics).
    public var layerSizes: [Int] { layers.map(\.entries.count) }

    /// Records a write. An entry older (by sequence) than the one the memtable holds for its key is ignored, so
    /// replaying writes twice is harmless.
    public mutating func apply(_ entry: LSMEntry) {
        let key = HashedKey(entry.key)
        let replaced = get(key)
        if let replaced, entry.sequence < replaced.sequence { return }
        maxSequence = max(maxSequence, entry.sequence)
        approximateBytes += Self.size(entry)
        if let replaced { approximateBytes -= Self.size(replaced) } else { count += 1 }
        if !isKnownUniquelyReferenced(&sortedRecent) || sortedRecent.isComputed { sortedRecent = SortedRecent() }
        recent[key] = entry
        if recent.count >= Self.recentLimit { seal() }
    }

    /// Records a value for `key` (see ``apply(_:)``).
    public mutating func put(_ key: [UInt8], _ value: [UInt8], sequence: UInt64) {
        apply(.put(key, value, sequence: sequence))
    }

    /// Records a tombstone for `key` (see ``apply(_:)``).
    public mutating func delete(_ key: [UInt8], sequence: UInt64) { apply(.delete(key, sequence: sequence)) }

    /// The entry of `key` (a tombstone included), or nil if the memtable has none.
    public func get(_ key: [UInt8]) -> LSMEntry? { get(HashedKey(key)) }

    private func get(_ key: HashedKey) -> LSMEntry? {
        if let e = recent[key] { return e }
        for layer in layers {
            if let e = layer.get(key.key, hash: key.hash) { return e }
        }
        return nil
    }

    /// An iterator over the memtable as it is now (later writes to this value do not show).
    public func makeIterator() -> MemtableIterator { MemtableIterator(sortedParts()) }

    /// The memtable as sorted parts, newest first: the table sorted now, then the layers (what iterators merge).
    func sortedParts() -> [[LSMEntry]] {
        let table = recent
        let sorted = recent.isEmpty ? [] : sortedRecent.get { table.values.sorted { LSMKey.less($0.key, $1.key) } }  // at most recentLimit
        return (sorted.isEmpty ? [] : [sorted]) + layers.map(\.entries)
    }

    /// The memo of ``sortedRecent``: computed at most once, by whichever copy's iterator needs it first.
    final class SortedRecent: Sendable {
        private let sorted = Mutex<[LSMEntry]?>(nil)

        var isComputed: Bool { sorted.withLock { $0 != nil } }

        func get(_ compute: () -> [LSMEntry]) -> [LSMEntry] {
            sorted.withLock { memo in
                if let memo { return memo }
                let s = compute()
                memo = s
                return s
            }
        }
    }

    /// Index of the first of `entries` (sorted) whose key is ≥ `key`.
    static func lowerBound(_ entries: [LSMEntry], _ key: [UInt8]) -> Int {
        var lo = 0
        var hi = entries.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if LSMKey.compare(entries[mid].key, key) < 0 { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    private static func size(_ e: LSMEntry) -> Int { e.key.count + e.value.count + entryOverhead }

    /// Sorts the table into a new layer, then, while the newest ``fanIn`` layers or more are of one size class
    /// (``sizeClass(_:)``), merges those into one: each entry is copied about log₄(n / ``recentLimit``) times over
    /// its life, and at most ``fanIn`` - 1 layers of each class stand.
    private mutating func seal() {
        let sorted = recent.sorted { LSMKey.less($0.key.key, $1.key.key) }
        let layer = Layer(sorted.map(\.value), hashes: sorted.map(\.key.hash))
        recent.removeAll(keepingCapacity: true)
        layers.insert(layer, at: 0)
        while true {
            let size = Self.sizeClass(layers[0].entries.count)
            var n = 1
            while n < layers.count && Self.sizeClass(layers[n].entries.count) == size { n += 1 }
            guard n >= Self.fanIn else { return }
            let merged = Self.merge(Array(layers[0..<n]))
            layers.replaceSubrange(0..<n, with: [merged])
        }
    }

    /// Layers of one size class that merge into one.
    static let fanIn = 4

    /// A layer's size class: ⌊log₄(entries / ``recentLimit``)⌋ (0 for a table sealed as it is).
    static func sizeClass(_ entries: Int) -> Int {
        var size = 0
        var bound = recentLimit * fanIn
        while entries >= bound {
            size += 1
            bound *= fanIn
        }
        return size
    }

    /// The union of sorted layers, newest first; for a key several hold, the newest one's entry.
    private static func merge(_ parts: [Layer]) -> Layer {
        var out: [LSMEntry] = []
        var hashes: [UInt64] = []
        let total = parts.reduce(0) { $0 + $1.entries.count }
        out.reserveCapacity(total)
        hashes.reserveCapacity(total)
        var positions = [Int](repeating: 0, count: parts.count)
        while true {
            // The smallest key among the parts' positions, and every part standing on it (a bit each); the first
            // (newest) part holding it wins.
            var winner = -1
            var holders = 0
            for p in parts.indices where positions[p] < parts[p].entries.count {
                if winner >= 0 {
                    let c = LSMKey.compare(parts[p].entries[positions[p]].key, parts[winner].entries[positions[winner]].key)
                    if c > 0 { continue }
                    if c == 0 {
                        holders |= 1 << p
                        continue
                    }
                }
                winner = p
                holders = 1 << p
            }
            guard winner >= 0 else { break }
            out.append(parts[winner].entries[positions[winner]])
            hashes.append(parts[winner].hashes[positions[winner]])
            for p in parts.indices where holders & (1 << p) != 0 { positions[p] += 1 }
        }
        return Layer(out, hashes: hashes)
    }
}

/// An in-order walk of a memtable: its sorted parts (the table sorted when the iterator was made, then the
/// layers, newest first) merged, the newest part's entry winning for a key several parts hold. Tombstones are
/// returned like values.
public final class MemtableIterator: LSMIterator {
    private let parts: [[LSMEntry]]
    private var positions: [Int]
    public private(set) var current: LSMEntry?

    init(_ parts: [[LSMEntry]]) {
        self.parts = parts
        positions = Array(repeating: Int.max, count: parts.count)  // before the first seek: past the end
    }

    public func seekToFirst() {
        for p in parts.indices { positions[p] = 0 }
        settle()
    }

    public func seek(_ key: [UInt8]) {
        for (p, entries) in parts.enumerated() { positions[p] = Memtable.lowerBound(entries, key) }
        settle()
    }

    public func advance() {
        guard let key = current?.key else { return }
        for p in parts.indices where positions[p] < parts[p].count && parts[p][positions[p]].key == key {
            positions[p] += 1
        }
        settle()
    }

    /// Makes ``current`` the smallest key's entry from the newest part that has it.
    private func settle() {
        var winner: LSMEntry?
        for p in parts.indices where positions[p] < parts[p].count {
            let entry = parts[p][positions[p]]
            if let w = winner, LSMKey.compare(entry.key, w.key) >= 0 { continue }
            winner = entry
        }
        current = winner
    }
}

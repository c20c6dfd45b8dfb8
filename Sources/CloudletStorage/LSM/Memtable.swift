import CloudletCore
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
    ///
    /// Each entry also keeps its key's 16 bytes after the prefix all the layer's keys share (``window(_:after:)``,
    /// as one integer): merging layers orders their heads by these, so a merge touches the keys themselves — each
    /// its own heap array, most of them cold — only where two windows tie. Reading each key's bytes was most of a
    /// merge's time.
    ///
    /// A merge moves the entries out of the layers only this memtable holds (no copy of it, no read view), rather
    /// than copying them: a copy retains each entry's key and value, a cache miss apiece, and releasing the old
    /// layers was as many again. Nothing else can see such a layer, so `entries` is mutable for that alone.
    final class Layer: @unchecked Sendable {
        fileprivate(set) var entries: [LSMEntry]
        let hashes: [UInt64]
        /// How many leading bytes every key of the layer has in common.
        let shared: Int
        /// ``entries``' keys' windows after ``shared`` bytes.
        let windows: [UInt128]
        let filter: BlockedBloomFilter

        init(_ entries: [LSMEntry], hashes: [UInt64], shared: Int, windows: [UInt128]) {
            self.entries = entries
            self.hashes = hashes
            self.shared = shared
            self.windows = windows
            filter = BlockedBloomFilter(hashes: hashes, bitsPerKey: 10)
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

    /// The newest writes: a hash table over the keys' ``KeyHash``es.
    private var recent = RecentTable(capacity: recentLimit)
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
        let hash = KeyHash.hash(entry.key)
        let slot = recent.find(entry.key, hash: hash)
        let replaced = slot.map { recent.entries[$0] } ?? layersGet(entry.key, hash: hash)
        if let replaced, entry.sequence < replaced.sequence { return }
        maxSequence = max(maxSequence, entry.sequence)
        approximateBytes += Self.size(entry)
        if let replaced { approximateBytes -= Self.size(replaced) } else { count += 1 }
        if !isKnownUniquelyReferenced(&sortedRecent) || sortedRecent.isComputed { sortedRecent = SortedRecent() }
        recent.set(entry, hash: hash, at: slot)
        if recent.count >= Self.recentLimit { seal() }
    }

    /// Records a value for `key` (see ``apply(_:)``).
    public mutating func put(_ key: [UInt8], _ value: [UInt8], sequence: UInt64) {
        apply(.put(key, value, sequence: sequence))
    }

    /// Records a tombstone for `key` (see ``apply(_:)``).
    public mutating func delete(_ key: [UInt8], sequence: UInt64) { apply(.delete(key, sequence: sequence)) }

    /// The entry of `key` (a tombstone included), or nil if the memtable has none.
    public func get(_ key: [UInt8]) -> LSMEntry? { get(key, hash: KeyHash.hash(key)) }

    /// ``get(_:)`` of a key whose ``KeyHash`` the caller has (a read through several memtables and runs hashes once).
    public func get(_ key: [UInt8], hash: UInt64) -> LSMEntry? {
        if let i = recent.find(key, hash: hash) { return recent.entries[i] }
        return layersGet(key, hash: hash)
    }

    /// The entry of `key` (whose ``KeyHash`` is `hash`) in the newest layer that has one.
    private func layersGet(_ key: [UInt8], hash: UInt64) -> LSMEntry? {
        for layer in layers {
            if let e = layer.get(key, hash: hash) { return e }
        }
        return nil
    }

    /// An iterator over the memtable as it is now (later writes to this value do not show).
    public func makeIterator() -> MemtableIterator { MemtableIterator(sortedParts()) }

    /// The memtable as sorted parts, newest first: the table sorted now, then the layers (what iterators merge).
    func sortedParts() -> [[LSMEntry]] {
        let table = recent
        let sorted = recent.count == 0 ? [] : sortedRecent.get { Self.keyOrder(table.entries).map { table.entries[Int($0)] } }
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
        let (items, shared) = Self.sortedWindows(recent.entries)
        let layer = Layer(
            items.map { recent.entries[Int($0.index)] }, hashes: items.map { recent.hashes[Int($0.index)] }, shared: shared,
            windows: items.map(\.window))
        recent.removeAll()
        layers.insert(layer, at: 0)
        while true {
            let size = Self.sizeClass(layers[0].entries.count)
            var n = 1
            while n < layers.count && Self.sizeClass(layers[n].entries.count) == size { n += 1 }
            guard n >= Self.fanIn else { return }
            // Known unique: no copy of this memtable (a read view) holds the layer, so the merge may take its
            // entries. (Asking through `layers` first gives `layers` a buffer of its own if a copy shares it.)
            let movable = (0..<n).map { isKnownUniquelyReferenced(&layers[$0]) }
            let merged = Self.merge(Array(layers[0..<n]), taking: movable)
            layers.replaceSubrange(0..<n, with: [merged])
        }
    }

    /// The indices of `entries` (distinct keys) in key order.
    ///
    /// The keys of one table share a long prefix (the directory's keys start with their zone's path), so comparing
    /// whole keys spends most of its time in bytes that never differ. This sorts the 16 bytes after the prefix all
    /// keys share, as two integers (shorter keys padded with zeros), and compares whole keys only where those tie.
    static func keyOrder(_ entries: [LSMEntry]) -> [Int32] { sortedWindows(entries).items.map(\.index) }

    /// ``keyOrder(_:)`` as (window, index) pairs in key order, with the prefix length all the keys share.
    private static func sortedWindows(_ entries: [LSMEntry]) -> (items: [(window: UInt128, index: Int32)], shared: Int) {
        guard let first = entries.first?.key else { return ([], 0) }
        var shared = first.count
        for e in entries.dropFirst() where shared > 0 { shared = min(shared, LSMKey.commonPrefix(first, e.key, upTo: shared)) }
        var items = entries.indices.map { (window: window(entries[$0].key, after: shared), index: Int32($0)) }
        items.sort { a, b in
            if a.window != b.window { return a.window < b.window }
            return LSMKey.compare(entries[Int(a.index)].key, entries[Int(b.index)].key) < 0
        }
        return (items, shared)
    }

    /// The 16 bytes of `key` after its first `shared` as one big-endian integer, missing bytes as zeros: integers
    /// that order as the keys do, except that keys equal in them (or differing only in trailing zeros) need a whole
    /// comparison.
    private static func window(_ key: [UInt8], after shared: Int) -> UInt128 {
        key.withUnsafeBytes {
            UInt128(LSMKey.bigEndianWindow($0, from: shared)) << 64 | UInt128(LSMKey.bigEndianWindow($0, from: shared + 8))
        }
    }

    /// The windows of `layer`'s keys after `shared` bytes (at most ``Layer/shared``) instead of after the layer's own
    /// prefix, without reading the keys: the bytes in between are the layer's common prefix, the same for every key,
    /// so each window is those bytes followed by the start of the window it has.
    private static func windows(of layer: Layer, after shared: Int) -> [UInt128] {
        let gap = layer.shared - shared
        guard gap > 0, let first = layer.entries.first?.key else { return layer.windows }
        let prefix = window(first, after: shared)  // begins with the gap's bytes
        if gap >= 16 { return [UInt128](repeating: prefix, count: layer.windows.count) }
        let mask = ~UInt128(0) << (128 - 8 * gap)
        return layer.windows.map { prefix & mask | $0 >> (8 * gap) }
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
    /// `taking[i]`: the merge may move the entries of `parts[i]` out (nothing else holds that layer); it leaves
    /// the layer with ``placeholder``s where it took them.
    private static func merge(_ parts: [Layer], taking: [Bool]) -> Layer {
        var out: [LSMEntry] = []
        var hashes: [UInt64] = []
        let total = parts.reduce(0) { $0 + $1.entries.count }
        out.reserveCapacity(total)
        hashes.reserveCapacity(total)
        var windows: [UInt128] = []
        windows.reserveCapacity(total)
        // The prefix every key of every part has: each part's own, cut where the parts' first keys differ.
        let first = parts.first { !$0.entries.isEmpty }?.entries[0].key ?? []
        var shared = Int.max
        for part in parts where !part.entries.isEmpty {
            shared = min(shared, part.shared, LSMKey.commonPrefix(first, part.entries[0].key, upTo: shared))
        }
        if shared == .max { shared = 0 }
        let partWindows = parts.map { Self.windows(of: $0, after: shared) }
        // Each part's head key is compared by its window after that prefix, whole keys only where those tie —
        // through buffer pointers held for the whole merge, so a step reads keys in place (subscripting the
        // layers' arrays retained each entry it touched).
        withBuffers(parts, taking) { lists, owned in
            var positions = [Int](repeating: 0, count: lists.count)
            var heads = partWindows.map { $0.first ?? 0 }
            while true {
                // The smallest key among the parts' positions, and every part standing on it (a bit each); the
                // first (newest) part holding it wins.
                var winner = -1
                var holders = 0
                for p in lists.indices where positions[p] < lists[p].count {
                    if winner >= 0 {
                        var c = heads[p] < heads[winner] ? -1 : heads[p] == heads[winner] ? 0 : 1
                        if c == 0 { c = LSMKey.compare(lists[p][positions[p]].key, lists[winner][positions[winner]].key) }
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
                if let owned = owned[winner] {
                    let slot = owned.baseAddress! + positions[winner]
                    out.append(slot.move())
                    slot.initialize(to: placeholder)
                } else {
                    out.append(lists[winner][positions[winner]])
                }
                hashes.append(parts[winner].hashes[positions[winner]])
                windows.append(heads[winner])
                for p in lists.indices where holders & (1 << p) != 0 {
                    positions[p] += 1
                    if positions[p] < lists[p].count { heads[p] = partWindows[p][positions[p]] }
                }
            }
        }
        return Layer(out, hashes: hashes, shared: shared, windows: windows)
    }

    /// Calls `body` with buffer pointers to each part's entries, valid during the call, and mutable ones to those
    /// of the parts it may take from (`taking`; nil for the others). A taken part's array gets a buffer of its own
    /// first if an iterator shares it.
    private static func withBuffers<R>(
        _ parts: [Layer], _ taking: [Bool], from i: Int = 0, _ held: [UnsafeBufferPointer<LSMEntry>] = [],
        _ owned: [UnsafeMutableBufferPointer<LSMEntry>?] = [],
        _ body: ([UnsafeBufferPointer<LSMEntry>], [UnsafeMutableBufferPointer<LSMEntry>?]) -> R
    ) -> R {
        guard i < parts.count else { return body(held, owned) }
        if taking[i] {
            return parts[i].entries.withUnsafeMutableBufferPointer { m in
                withBuffers(parts, taking, from: i + 1, held + [UnsafeBufferPointer(m)], owned + [m], body)
            }
        }
        return parts[i].entries.withUnsafeBufferPointer { withBuffers(parts, taking, from: i + 1, held + [$0], owned + [nil], body) }
    }

    /// What a merge leaves where it took an entry: empty arrays are shared and never counted, so it costs nothing.
    private static let placeholder = LSMEntry.delete([], sequence: 0)
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

/// The hash table of a ``Memtable``'s newest writes: open addressing with linear probing over the keys' ``KeyHash``
/// (computed once a write or lookup; Swift's `Dictionary` would run SipHash over it on every probe), the entries
/// in the order they were first written. It only grows until the memtable empties it whole; its slot count is a
/// power of two at least twice its capacity, so probes stay short.
struct RecentTable: Sendable {
    private(set) var entries: [LSMEntry] = []
    /// ``entries``' key hashes.
    private(set) var hashes: [UInt64] = []
    /// Index + 1 into ``entries``; 0: empty.
    private var slots: [Int32]
    private let mask: Int

    init(capacity: Int) {
        let n = Int.powerOfTwo(atLeast: 2 * capacity)
        slots = [Int32](repeating: 0, count: n)
        mask = n - 1
        entries.reserveCapacity(capacity)
        hashes.reserveCapacity(capacity)
    }

    var count: Int { entries.count }

    /// The index in ``entries`` of `key`'s entry (`hash`: its ``KeyHash``), if it has one.
    func find(_ key: [UInt8], hash: UInt64) -> Int? {
        var i = Int(truncatingIfNeeded: hash) & mask
        while true {
            let s = Int(slots[i])
            if s == 0 { return nil }
            if hashes[s - 1] == hash && entries[s - 1].key == key { return s - 1 }
            i = (i + 1) & mask
        }
    }

    /// Stores `entry` at index `slot` of ``entries`` (what ``find(_:hash:)`` returned for its key), or adds it.
    mutating func set(_ entry: LSMEntry, hash: UInt64, at slot: Int?) {
        if let slot {
            entries[slot] = entry
            return
        }
        precondition(2 * (entries.count + 1) <= slots.count, "the table is full")
        var i = Int(truncatingIfNeeded: hash) & mask
        while slots[i] != 0 { i = (i + 1) & mask }
        entries.append(entry)
        hashes.append(hash)
        slots[i] = Int32(entries.count)
    }

    /// Empties the table, keeping its storage when nothing else shares it.
    mutating func removeAll() {
        entries.removeAll(keepingCapacity: true)
        hashes.removeAll(keepingCapacity: true)
        for i in slots.indices { slots[i] = 0 }
    }
}
